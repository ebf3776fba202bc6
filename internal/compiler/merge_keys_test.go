package compiler

import (
	"slices"
	"testing"

	"github.com/drover-dev/drover/internal/config"
)

// TestBackendKeys: the backend oneof is every field of config.ServiceBackend,
// Prodvana's and drover's own.
func TestBackendKeys(t *testing.T) {
	for _, k := range []string{"kubernetesConfig", "customRuntime", "helm", "awsEcs", "awsLambda", "googleCloudRun", "fly", "terraform", "pulumi"} {
		if !slices.Contains(backendKeys, k) {
			t.Errorf("backendKeys %v lacks %s", backendKeys, k)
		}
	}
	if slices.Contains(backendKeys, "") {
		t.Errorf("backendKeys %v has an empty name", backendKeys)
	}
}

// TestMergeReplacesBackendSource: a channel's source of a backend (a Cloud
// Run service's inlined YAML) replaces the service's whole (its file
// tree), as a kubernetesConfig's does; env named like a source key is
// merged as env.
func TestMergeReplacesBackendSource(t *testing.T) {
	svc := &config.Service{Name: "web", Application: "shop",
		ServiceBackend: config.ServiceBackend{GoogleCloudRun: &config.GoogleCloudRunConfig{Tree: &config.FileTree{SubPath: "x", Files: map[string]string{"x/s.yaml": "a"}}}},
		Env:            map[string]config.EnvValue{"local": {Value: "1"}},
		PerReleaseChannel: []config.PerReleaseChannel{{ReleaseChannel: "prod",
			ServiceBackend: config.ServiceBackend{GoogleCloudRun: &config.GoogleCloudRunConfig{Inlined: "kind: Service"}},
			Env:            map[string]config.EnvValue{"inlined": {Value: "2"}}}},
	}
	m, err := mergeService(svc, "prod")
	if err != nil {
		t.Fatal(err)
	}
	if g := m.Backend.GoogleCloudRun; g == nil || g.Tree != nil || g.Inlined != "kind: Service" {
		t.Errorf("prod's googleCloudRun: %+v, want the channel's inlined YAML only", g)
	}
	if m.Env["local"].Value != "1" || m.Env["inlined"].Value != "2" {
		t.Errorf("prod's env: %+v", m.Env)
	}
}
