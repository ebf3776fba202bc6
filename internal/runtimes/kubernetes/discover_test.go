package kubernetes

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/runtimes"
)

var _ runtimes.Discoverer = (*Runtime)(nil)

// TestDiscover: the cluster reports its version and its API versions, each
// group version alone and with its kinds, sorted; a context that ends stops
// the wait.
func TestDiscover(t *testing.T) {
	t.Parallel()
	r := newRuntime(t, Settings{})
	f, err := r.Discover(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(f.KubeVersion, "v1.") {
		t.Errorf("kube version %q", f.KubeVersion)
	}
	for _, want := range []string{"v1", "v1/ConfigMap", "apps/v1", "apps/v1/Deployment", "apiextensions.k8s.io/v1/CustomResourceDefinition"} {
		if !slices.Contains(f.APIVersions, want) {
			t.Errorf("API versions lack %s", want)
		}
	}
	if !slices.IsSorted(f.APIVersions) || len(slices.Compact(slices.Clone(f.APIVersions))) != len(f.APIVersions) {
		t.Error("API versions are not sorted and unique")
	}
	ctx, cancel := context.WithDeadline(t.Context(), time.Now().Add(-time.Second))
	defer cancel()
	if _, err := r.Discover(ctx); err == nil {
		t.Error("discovery with an ended context succeeded")
	}
}
