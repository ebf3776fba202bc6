package terraform

import (
	"os"
	"testing"
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
