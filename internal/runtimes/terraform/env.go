package terraform

import (
	"maps"
	"strings"

	"github.com/hashicorp/terraform-exec/tfexec"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/runtimes"
	"github.com/drover-dev/drover/internal/runtimes/iacrun"
)

// VersionVariable is the Terraform input variable that receives the service
// version: the runtime exports TF_VAR_pvn_service_version, so a module
// declaring `variable "pvn_service_version" {}` gets it (modules that do not
// declare it are unaffected: Terraform ignores TF_VAR_ variables it does not
// know).
const VersionVariable = "pvn_service_version"

// overlayEnv is the environment drover adds to its own for an instance's
// commands, lowest precedence first: the target's env (release channel
// defaults and service env), the runner's env, the identity variables
// (iacrun.Overlay) and TF_VAR_pvn_service_version.
func overlayEnv(t runtimes.Target, runner *config.TerraformRunner) (map[string]string, error) {
	env, err := iacrun.Overlay(t, runner, "terraformRunner")
	if err != nil {
		return nil, err
	}
	env["TF_VAR_"+VersionVariable] = t.Version
	return env, nil
}

// hostEnv are the variables of drover's own environment that terraform
// inherits beyond iacrun.HostEnv: settings terraform itself needs to reach
// registries and caches.
var hostEnv = []string{"TF_PLUGIN_CACHE_DIR", "TF_PLUGIN_CACHE_MAY_BREAK_DEPENDENCY_LOCK_FILE", "TF_CLI_CONFIG_FILE"}

// fullEnv is the allow-listed part of the process environment
// (iacrun.HostEnv and hostEnv) with overlay on top, and
// CHECKPOINT_DISABLE=1 unless set (drover runs terraform unattended; it
// should not phone home).
func fullEnv(overlay map[string]string) map[string]string {
	env := iacrun.PassEnv(hostEnv...)
	maps.Copy(env, overlay)
	if _, ok := env["CHECKPOINT_DISABLE"]; !ok {
		env["CHECKPOINT_DISABLE"] = "1"
	}
	return env
}

// passedThrough reports whether k is a variable tfexec refuses in SetEnv
// that drover passes anyway: input variables (TF_VAR_*) and extra
// command-line flags (TF_CLI_ARGS, TF_CLI_ARGS_<command>).
func passedThrough(k string) bool {
	return strings.HasPrefix(k, "TF_VAR_") || k == "TF_CLI_ARGS" || strings.HasPrefix(k, "TF_CLI_ARGS_")
}

// setEnv gives tf the environment env for its next commands.
//
// tfexec refuses TF_VAR_* and TF_CLI_ARGS* in SetEnv, preferring -var flags,
// but a -var for a variable the module does not declare is an error, so
// identity variables such as TF_VAR_pvn_service_version must be environment
// variables (Terraform's own advice for "global" settings). SetEnv keeps the
// map it is given and copies it into each command's environment when the
// command starts, so drover adds those variables to the map after SetEnv
// accepted it. The remaining variables tfexec manages itself (TF_LOG*,
// TF_INPUT, TF_IN_AUTOMATION, TF_WORKSPACE, ...) are dropped. The behaviour
// is pinned by the go.mod version and covered by the tests, which depend on
// TF_VAR_pvn_service_version reaching the module.
func setEnv(tf *tfexec.Terraform, env map[string]string) error {
	clean := make(map[string]string, len(env))
	var extra map[string]string
	for k, v := range env {
		switch {
		case passedThrough(k):
			if extra == nil {
				extra = map[string]string{}
			}
			extra[k] = v
		case len(tfexec.ProhibitedEnv(map[string]string{k: v})) > 0:
			// managed by tfexec
		default:
			clean[k] = v
		}
	}
	if err := tf.SetEnv(clean); err != nil {
		return err
	}
	maps.Copy(clean, extra)
	return nil
}
