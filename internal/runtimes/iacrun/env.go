package iacrun

import (
	"fmt"
	"maps"
	"os"
	"slices"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/runtimes"
)

// HostEnv are the variables of drover's own environment that every tool (and
// the preRun commands, and what the tool starts) inherits; nothing else of it
// is passed, so the server's credentials (AWS_*, GOOGLE_*, ARM_*, tokens)
// never reach a module or program chosen by whoever pushes a service. Beyond
// what custom runtimes get (PATH, HOME, TMPDIR, LANG) these are what a tool
// needs to reach registries through a proxy. Each tool adds its own
// settings (caches, CLI configuration); anything else (a cloud profile, a
// credential) is given explicitly in the runner's, the service's or the
// release channel's env.
var HostEnv = []string{
	"PATH", "HOME", "TMPDIR", "LANG",
	"SSL_CERT_FILE", "SSL_CERT_DIR",
	"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy",
}

// PassEnv is the part of the process environment named by HostEnv and
// extra.
func PassEnv(extra ...string) map[string]string {
	env := map[string]string{}
	for _, k := range append(slices.Clip(HostEnv), extra...) {
		if v, ok := os.LookupEnv(k); ok {
			env[k] = v
		}
	}
	return env
}

// Overlay is the environment drover adds to its own for an instance's
// commands, lowest precedence first: the target's env (release channel
// defaults and service env), the runner's env (field names the runner in
// errors: "terraformRunner"), and the identity variables PVN_* and DROVER_*.
func Overlay(t runtimes.Target, runner *config.TerraformRunner, field string) (map[string]string, error) {
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
				return nil, fmt.Errorf("%s.env.%s: secret %s (version %q) arrived unresolved: the server resolves secret{key, version} at push; push the service again", field, k, v.Secret.Key, v.Secret.Version)
			case v.KubernetesSecret != nil:
				return nil, fmt.Errorf("%s.env.%s: kubernetesSecret is not supported by the %s (it does not run in Kubernetes); use rawSecret or secret", field, k, field)
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
	} {
		env[k] = v
	}
	return env, nil
}

// RawSecrets are the raw secret values an instance's commands receive: the
// target's env (service and release channel), the runner's env, and more.
func RawSecrets(t runtimes.Target, runner *config.TerraformRunner, more ...string) []string {
	out := append(slices.Clip(t.Secrets), more...)
	if runner != nil {
		for _, v := range runner.Env {
			if v.RawSecret != "" {
				out = append(out, v.RawSecret)
			}
		}
	}
	return out
}

// EnvList is env as KEY=VALUE, sorted.
func EnvList(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for _, k := range slices.Sorted(maps.Keys(env)) {
		out = append(out, k+"="+env[k])
	}
	return out
}

// EnvHash hashes env.
func EnvHash(env map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(env)) {
		parts = append(parts, k, env[k])
	}
	return HashStrings(parts...)
}
