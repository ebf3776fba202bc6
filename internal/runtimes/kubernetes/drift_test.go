package kubernetes

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/drover-dev/drover/internal/runtimes"
	"github.com/drover-dev/drover/internal/testing/kubetest"
)

// notifyWithin is how soon a change in the cluster must be reported.
const notifyWithin = 5 * time.Second

// TestDrift changes a converged Deployment behind drover's back with kubectl
// (set image, scale, delete): each change is reported by Watch within
// seconds, Fetch shows the drift, and an apply heals it.
func TestDrift(t *testing.T) {
	t.Parallel()
	c := kubetest.Shared(t)
	r := newRuntime(t, Settings{})
	n := watch(t, r)
	k := key("drift")
	tg := target(t, k, "v1", deploymentObject("drift", "v1", 2))
	mustApply(t, r, tg)
	waitConverged(t, r, tg)
	ns := managedNamespace(r.settings.NamespacePrefix, k)

	heal := func(what string) {
		t.Helper()
		res := mustApply(t, r, tg)
		if a := actions(res)["Deployment.apps/"+ns+"/drift"]; a != runtimes.ActionConfigured && a != runtimes.ActionCreated {
			t.Errorf("%s: healing apply: %s, want configured or created", what, a)
		}
		start := time.Now()
		waitConverged(t, r, tg)
		t.Logf("%s: healed in %v", what, time.Since(start).Round(time.Millisecond))
	}
	drifted := func(what string, cond func(runtimes.State) bool) runtimes.State {
		t.Helper()
		took := n.wait(t, k, notifyWithin)
		st := waitState(t, r, tg, notifyWithin, what, cond)
		t.Logf("%s: notified after %v: %s", what, took.Round(time.Millisecond), st.Message)
		return st
	}

	// Another field manager changes the image.
	n.reset()
	c.Kubectl(t, "-n", ns, "set", "image", "deployment/drift", "app=registry.example/drift:hacked")
	st := drifted("set image", func(st runtimes.State) bool { return st.Drifted })
	if st.Converged || !strings.Contains(st.Message, "kubectl") {
		t.Errorf("after set image: %+v, want drifted, not converged, naming kubectl", st)
	}
	heal("set image")
	dep := get(t, deployments, ns, "drift")
	if containers, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "containers"); len(containers) != 1 || containers[0].(map[string]any)["image"] != "registry.example/drift:v1" {
		t.Errorf("image after healing: %v", containers)
	}

	// Scale.
	n.reset()
	c.Kubectl(t, "-n", ns, "scale", "deployment/drift", "--replicas=4")
	drifted("scale", func(st runtimes.State) bool { return st.Drifted && !st.Converged })
	heal("scale")
	if replicas, _, _ := unstructured.NestedInt64(get(t, deployments, ns, "drift").Object, "spec", "replicas"); replicas != 2 {
		t.Errorf("replicas after healing: %d, want 2", replicas)
	}

	// Delete.
	n.reset()
	c.Kubectl(t, "-n", ns, "delete", "deployment", "drift", "--wait=false")
	drifted("delete", func(st runtimes.State) bool { return st.Version == "" && !st.Converged && st.Drifted })
	heal("delete")
}

// TestStuckRolloutFails: a Deployment whose pods cannot be scheduled fails at
// its progress deadline, with the reason; applying the previous version
// again (the engine's rollback) converges.
func TestStuckRolloutFails(t *testing.T) {
	t.Parallel()
	r := newRuntime(t, Settings{})
	k := key("stuck")
	good := target(t, k, "v1", deploymentObject("stuck", "v1", 1))
	mustApply(t, r, good)
	waitConverged(t, r, good)

	obj := deploymentObject("stuck", "v2", 1)
	spec := obj["spec"].(map[string]any)
	spec["progressDeadlineSeconds"] = int64(5)
	spec["template"].(map[string]any)["spec"].(map[string]any)["nodeSelector"] = map[string]any{"drover.dev/no-such-node": "true"}
	bad := target(t, k, "v2", obj)
	mustApply(t, r, bad)
	start := time.Now()
	st := waitState(t, r, bad, 60*time.Second, "failed", func(st runtimes.State) bool { return st.Failed })
	t.Logf("failed after %v: %s", time.Since(start).Round(time.Millisecond), st.Message)
	if st.Version != "v2" || st.Converged || !strings.Contains(st.Message, "ProgressDeadlineExceeded") || !strings.Contains(st.Message, "RUNTIME_OBJECT_FAILED") {
		t.Errorf("stuck rollout: %+v, want v2 failed with ProgressDeadlineExceeded", st)
	}
	if len(st.Objects) != 1 || st.Objects[0].Status != runtimes.ObjectFailed {
		t.Errorf("objects %+v, want the Deployment FAILED", st.Objects)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := r.Apply(ctx, good); err != nil {
		t.Fatal(err)
	}
	waitConverged(t, r, good)
}
