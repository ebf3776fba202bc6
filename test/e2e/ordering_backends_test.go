package e2e

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestOrderingAcrossBackends: a Terraform migration before a deployment of
// another backend, in one release: the deployment starts only once
// terraform applied and the module converged.
func TestOrderingAcrossBackends(t *testing.T) {
	requireE2E(t)
	crTerraformBinary(t)
	tmp := t.TempDir()
	src, err := os.ReadFile(filepath.Join(repoRoot, "test", "e2e", "testdata", "terraform", "module", "main.tf"))
	if err != nil {
		t.Fatal(err)
	}
	writeTree(t, filepath.Join(tmp, "modules", "staging"), map[string]string{"main.tf": string(src), "external.txt": "v1\n"})
	applyLog, envDir := filepath.Join(tmp, "apply.log"), filepath.Join(tmp, "env")
	if err := os.MkdirAll(envDir, 0o755); err != nil {
		t.Fatal(err)
	}
	dir := crWriteConfigs(t, filepath.Join(tmp, "config"), map[string]crObj{
		"runtime": {"runtime": crObj{"name": "tf", "terraformRunner": crObj{
			"pollInterval": "1s", "steadyStatePollInterval": "1m",
			"env": crObj{"APPLY_LOG": crObj{"value": applyLog}, "ENV_DIR": crObj{"value": envDir}},
		}}},
		"app": {"application": crObj{"name": "shop", "releaseChannels": []crObj{{
			"name": "staging", "runtimes": []crObj{{"runtime": "tf"}, {"runtime": "cluster"}},
			"constants": []crObj{{"name": "replicas", "string": crObj{"value": "1"}}},
		}}}},
		"migrate": {"service": crObj{"name": "migrate", "application": "shop", "runtimeConnection": "tf",
			"customRuntime": crObj{"parameterValues": []crObj{{"name": "path", "string": tmp + "/modules/{{.Builtins.ReleaseChannel.Name}}"}}}}},
	})
	files := serviceFiles("shop", "api")
	files["services/api/api.pvn.yaml"] += "  runtimeConnection: cluster\n  dependsOn:\n    - service: migrate\n"
	files["cluster.pvn.yaml"] = fakeRuntime("cluster", "1s", "")
	writeTree(t, dir, files)
	tfrc := filepath.Join(tmp, "empty.tfrc")
	if err := os.WriteFile(tfrc, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	s := crStartServer(t, []string{"TF_CLI_CONFIG_FILE=" + tfrc, "CHECKPOINT_DISABLE=1"}, "--program-root", tmp)
	s.ok("alice", "apply", dir+"/...")
	rel := s.release("dev", "shop", "--service", "migrate", "--param", "api.image=1.0")
	ids, versions := map[string]string{}, map[string]string{}
	for _, m := range rel.Services {
		ids[m.Service], versions[m.Service] = m.DesiredStateID, m.Version
	}
	s.waitStatus("shop", "api", 90*time.Second, "api converged after the migration", channelIs("staging", "CONVERGED", versions["api"]))
	converged := s.eventAt("shop", "migrate", "staging", "converged", ids["migrate"])
	started := s.eventAt("shop", "api", "staging", "started", ids["api"])
	if started.Before(converged) {
		t.Fatalf("api started at %v, before the terraform migration converged at %v", started, converged)
	}
	if crReadFile(t, applyLog) == "" {
		t.Errorf("terraform never applied the migration")
	}
	t.Logf("terraform migration converged -> api started: %v", started.Sub(converged))
}
