package compiler

import (
	"slices"
	"testing"
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
