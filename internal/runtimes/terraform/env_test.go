package terraform

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/config"
)

// TestS6ServerEnvNotPassed: terraform gets an allow-listed part of the
// server's environment, not its credentials. (No t.Parallel: it sets the
// process environment.)
func TestS6ServerEnvNotPassed(t *testing.T) {
	t.Setenv("AWS_SECRET_ACCESS_KEY", "SERVERENVSECRET-aa11")
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", "/secret/key.json")
	t.Setenv("TF_PLUGIN_CACHE_DIR", "/cache/plugins")
	env := fullEnv(map[string]string{"FROM_TARGET": "yes", "AWS_PROFILE": "given-explicitly"})
	for _, k := range []string{"AWS_SECRET_ACCESS_KEY", "GOOGLE_APPLICATION_CREDENTIALS"} {
		if v, ok := env[k]; ok {
			t.Errorf("%s=%s passed to terraform", k, v)
		}
	}
	if env["PATH"] != os.Getenv("PATH") || env["TF_PLUGIN_CACHE_DIR"] != "/cache/plugins" {
		t.Errorf("allow-listed variables missing: PATH=%q TF_PLUGIN_CACHE_DIR=%q", env["PATH"], env["TF_PLUGIN_CACHE_DIR"])
	}
	if env["FROM_TARGET"] != "yes" || env["AWS_PROFILE"] != "given-explicitly" || env["CHECKPOINT_DISABLE"] != "1" {
		t.Errorf("overlay not applied: %v", env)
	}
}

// TestS4TerraformSecretsRedacted: raw secrets of the target's env and the
// runner's env reach terraform's commands and are redacted from the
// recorded runs and errors.
func TestS4TerraformSecretsRedacted(t *testing.T) {
	requireBinary(t)
	t.Parallel()
	const svcSecret, runnerSecret = "SVCSECRET-44d0e5", "RUNNERSECRET-51c0"
	module := writeModule(t, map[string]string{"main.tf": versionModule})
	runner := runnerConfig(t, time.Minute, time.Minute)
	runner.Env["RUNNER_SECRET"] = config.EnvValue{RawSecret: runnerSecret}
	runner.PreRun = []config.RunnerCommand{{Cmd: `echo "got $SVC_SECRET $RUNNER_SECRET"; echo "err $SVC_SECRET" >&2`}}
	rec := &recorder{}
	rt := newRuntime(t, t.TempDir(), runner, rec)
	k := key("web", "staging")
	tg := target(t, k, "v1", module, runner, nil)
	tg.Env = map[string]string{"SVC_SECRET": svcSecret}
	tg.Secrets = []string{svcSecret}
	mustApply(t, rt, tg)
	runs := rec.of(k)
	if len(runs) == 0 || runs[0].Kind != kindPreRun || runs[0].Stdout != "got (redacted) (redacted)\n" {
		t.Fatalf("preRun run: %+v", runs)
	}
	for _, run := range runs {
		if s := fmt.Sprintf("%#v", run); strings.Contains(s, svcSecret) || strings.Contains(s, runnerSecret) {
			t.Errorf("recorded %s run holds a secret: %s", run.Kind, s)
		}
	}
	runner.PreRun = []config.RunnerCommand{{Cmd: `echo "bad $RUNNER_SECRET" >&2; exit 3`}}
	_, err := rt.Fetch(t.Context(), target(t, k, "v2", module, runner, nil))
	if err == nil || strings.Contains(err.Error(), runnerSecret) || !strings.Contains(err.Error(), "bad (redacted)") {
		t.Errorf("failing preRun error: %v", err)
	}
}

// TestS4TerraformEscapedSecretRedacted: terraform prints a raw secret
// escaped (HCL: \" and $${), and so may a preRun's JSON encoder (\u003c):
// each form is redacted from the recorded runs, and a resource address made
// from the secret (a for_each key) from the apply's changes.
func TestS4TerraformEscapedSecretRedacted(t *testing.T) {
	requireBinary(t)
	t.Parallel()
	const secret = `p"w0rd<&>é/x${1}`
	module := writeModule(t, map[string]string{"main.tf": versionModule + `
variable "token" { type = string }
resource "terraform_data" "t" {
  for_each = toset([var.token])
  input    = each.key
}
output "token" { value = var.token }
`})
	runner := runnerConfig(t, time.Minute, time.Minute)
	// A preRun printing the secret as JSON, with PHP's escapes.
	runner.PreRun = []config.RunnerCommand{{Cmd: `printf '{"token":"%s"}\n' "$(printf '%s' "$TF_VAR_token" | sed -e 's/"/\\"/g' -e 's/</\\u003c/g' -e 's/&/\\u0026/g' -e 's/>/\\u003e/g' -e 's#/#\\/#g')"`}}
	rec := &recorder{}
	rt := newRuntime(t, t.TempDir(), runner, rec)
	k := key("web", "staging")
	tg := target(t, k, "v1", module, runner, nil)
	tg.Env = map[string]string{"TF_VAR_token": secret}
	tg.Secrets = []string{secret}
	changes := mustApply(t, rt, tg)
	for _, c := range changes {
		if strings.Contains(c.Object, "w0rd") {
			t.Errorf("change %+v holds the secret", c)
		}
	}
	runs := rec.of(k)
	if len(runs) < 3 {
		t.Fatalf("runs: %v", kinds(runs))
	}
	sawRedacted := false
	for _, run := range runs {
		s := fmt.Sprintf("%#v", run) // %+v would print run.InstanceKey.String()
		if strings.Contains(s, "w0rd") {
			t.Errorf("recorded %s run holds the secret: %s", run.Kind, s)
		}
		sawRedacted = sawRedacted || strings.Contains(run.Stdout, "(redacted)")
	}
	if !sawRedacted {
		t.Error("no run printed the secret: the test does not test anything")
	}
}
