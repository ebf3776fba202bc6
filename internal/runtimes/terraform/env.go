package terraform

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/hashicorp/terraform-exec/tfexec"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/runtimes"
)

// VersionVariable is the Terraform input variable that receives the service
// version: the runtime exports TF_VAR_pvn_service_version, so a module
// declaring `variable "pvn_service_version" {}` gets it (modules that do not
// declare it are unaffected: Terraform ignores TF_VAR_ variables it does not
// know).
const VersionVariable = "pvn_service_version"

// overlayEnv is the environment drover adds to its own for an instance's
// commands, lowest precedence first: the target's env (release channel
// defaults and service env), the runner's env, the identity variables and
// TF_VAR_pvn_service_version.
func overlayEnv(t runtimes.Target, runner *config.TerraformRunner) (map[string]string, error) {
	env := make(map[string]string, len(t.Env)+16)
	maps.Copy(env, t.Env)
	if runner != nil {
		for _, k := range slices.Sorted(maps.Keys(runner.Env)) {
			v := runner.Env[k]
			switch {
			case v.RawSecret != "":
				env[k] = v.RawSecret
			case v.Secret != nil:
				// The server resolves references when a service is
				// pushed: one that arrives here was stored unresolved.
				return nil, fmt.Errorf("terraformRunner.env.%s: secret %s (version %q) arrived unresolved: the server resolves secret{key, version} at push; push the service again", k, v.Secret.Key, v.Secret.Version)
			case v.KubernetesSecret != nil:
				return nil, fmt.Errorf("terraformRunner.env.%s: kubernetesSecret is not supported by the terraform runner (it does not run in Kubernetes); use rawSecret or secret", k)
			default:
				env[k] = v.Value
			}
		}
	}
	app, svc, rc := t.Application, t.Service, t.ReleaseChannel
	for k, v := range map[string]string{
		"PVN_SERVICE":               svc,
		"PVN_SERVICE_ID":            app + "/" + svc,
		"PVN_APPLICATION":           app,
		"PVN_APPLICATION_ID":        app,
		"PVN_RELEASE_CHANNEL":       rc,
		"PVN_RELEASE_CHANNEL_ID":    app + "/" + rc,
		"PVN_SERVICE_VERSION":       t.Version,
		"DROVER_APPLICATION":        app,
		"DROVER_APPLICATION_ID":     app,
		"DROVER_SERVICE_ID":         app + "/" + svc,
		"DROVER_RELEASE_CHANNEL_ID": app + "/" + rc,
		"DROVER_SERVICE":            svc,
		"DROVER_RELEASE_CHANNEL":    rc,
		"DROVER_SERVICE_VERSION":    t.Version,
		"DROVER_DESIRED_STATE_ID":   t.DesiredStateID,
		"TF_VAR_" + VersionVariable: t.Version,
	} {
		env[k] = v
	}
	return env, nil
}

// hostEnv are the variables of drover's own environment that terraform (and
// the preRun commands, and provisioners such as local-exec) inherit; nothing
// else of it is passed, so the server's credentials (AWS_*, GOOGLE_*,
// ARM_*, tokens) never reach a module chosen by whoever pushes a service.
// Beyond what custom runtimes get (PATH, HOME, TMPDIR, LANG) these are
// settings terraform itself needs to reach registries and caches. Anything
// else (a cloud profile, a credential) is given explicitly in the runner's,
// the service's or the release channel's env.
var hostEnv = []string{
	"PATH", "HOME", "TMPDIR", "LANG",
	"TF_PLUGIN_CACHE_DIR", "TF_PLUGIN_CACHE_MAY_BREAK_DEPENDENCY_LOCK_FILE", "TF_CLI_CONFIG_FILE",
	"SSL_CERT_FILE", "SSL_CERT_DIR",
	"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy",
}

// fullEnv is the allow-listed part of the process environment (hostEnv)
// with overlay on top, and CHECKPOINT_DISABLE=1 unless set (drover runs
// terraform unattended; it should not phone home).
func fullEnv(overlay map[string]string) map[string]string {
	env := map[string]string{}
	for _, k := range hostEnv {
		if v, ok := os.LookupEnv(k); ok {
			env[k] = v
		}
	}
	maps.Copy(env, overlay)
	if _, ok := env["CHECKPOINT_DISABLE"]; !ok {
		env["CHECKPOINT_DISABLE"] = "1"
	}
	return env
}

func envList(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for _, k := range slices.Sorted(maps.Keys(env)) {
		out = append(out, k+"="+env[k])
	}
	return out
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
