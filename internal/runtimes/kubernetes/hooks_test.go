package kubernetes

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/drover-dev/drover/internal/runtimes"
)

// hookJob is a Job with generateName, as Argo CD PreSync hooks and
// migration Jobs are written.
func hookJob(version string) map[string]any {
	return map[string]any{
		"apiVersion": "batch/v1", "kind": "Job",
		"metadata": map[string]any{"generateName": "migrate-", "annotations": map[string]any{"argocd.argoproj.io/hook": "PreSync"}},
		"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
			"restartPolicy": "Never",
			"containers":    []any{map[string]any{"name": "migrate", "image": "registry.example/migrate:" + version}},
		}}},
	}
}

// liveJobs lists the instance's Jobs that are not being deleted.
func liveJobs(t *testing.T, ns string) []unstructured.Unstructured {
	t.Helper()
	list, err := client(t).Resource(jobs).Namespace(ns).List(context.Background(), metav1.ListOptions{LabelSelector: LabelService + "=generated"})
	if err != nil {
		t.Fatal(err)
	}
	var out []unstructured.Unstructured
	for _, j := range list.Items {
		if j.GetDeletionTimestamp() == nil {
			out = append(out, j)
		}
	}
	return out
}

// TestGenerateNameOncePerVersion: an object with generateName is created
// once per version (a second apply of the version, and one after the Job is
// gone, create none and see no drift), tracked in the inventory, and the
// previous version's is pruned when the next version creates its own.
func TestGenerateNameOncePerVersion(t *testing.T) {
	t.Parallel()
	r := newRuntime(t, Settings{})
	k := key("generated")
	ns := managedNamespace(r.settings.NamespacePrefix, k)
	v1 := target(t, k, "v1", deploymentObject("web", "v1", 1), hookJob("v1"))
	res := mustApply(t, r, v1)
	got := liveJobs(t, ns)
	if len(got) != 1 || !strings.HasPrefix(got[0].GetName(), "migrate-") {
		t.Fatalf("after the first apply: jobs %v", got)
	}
	first := got[0].GetName()
	if a := actions(res)["Job.batch/"+ns+"/"+first]; a != runtimes.ActionCreated {
		t.Errorf("first apply: %v", res.Changes)
	}
	waitConverged(t, r, v1)
	res = mustApply(t, r, v1)
	if got := liveJobs(t, ns); len(got) != 1 || got[0].GetName() != first {
		t.Errorf("a second apply of v1 created another Job: %d jobs", len(got))
	}
	if a := actions(res)["Job.batch/"+ns+"/"+first]; a != runtimes.ActionUnchanged {
		t.Errorf("second apply: %v", res.Changes)
	}
	if st := mustFetch(t, r, v1); !st.Converged || st.Drifted {
		t.Errorf("after the second apply: %+v", st)
	}

	// v2 creates its own and prunes v1's.
	v2 := target(t, k, "v2", deploymentObject("web", "v2", 1), hookJob("v2"))
	res = mustApply(t, r, v2)
	got = liveJobs(t, ns)
	if len(got) != 1 || got[0].GetName() == first || got[0].GetAnnotations()[AnnotationVersion] != "v2" {
		t.Fatalf("after v2: jobs %v", got)
	}
	second := got[0].GetName()
	if a := actions(res)["Job.batch/"+ns+"/"+first]; a != runtimes.ActionDeleted {
		t.Errorf("v1's Job not pruned: %v", res.Changes)
	}
	waitConverged(t, r, v2)

	// Gone (a TTL, a person): not drift, and not created again for v2.
	bg := metav1.DeletePropagationBackground
	if err := client(t).Resource(jobs).Namespace(ns).Delete(context.Background(), second, metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil {
		t.Fatal(err)
	}
	waitState(t, r, v2, time.Minute, "v2's Job gone from the cache, converged", func(st runtimes.State) bool {
		for _, o := range st.Objects {
			if o.Name == second {
				return false
			}
		}
		return st.Converged && !st.Drifted
	})
	mustApply(t, r, v2)
	if got := liveJobs(t, ns); len(got) != 0 {
		t.Errorf("v2 re-applied after its Job was removed: %d jobs", len(got))
	}
}

// TestHelmInstallHooks: a Helm hook of install events only is applied on
// the instance's first install, and later versions neither apply it again
// nor prune it, and still converge; a hook of upgrades too is applied with
// every version. A hook that is an object of the chart's CRD is applied
// after the CRD, whatever the order of the target.
func TestHelmInstallHooks(t *testing.T) {
	t.Parallel()
	r := newRuntime(t, Settings{})
	group := "h" + runID + ".drover.test"
	crd := map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "gadgets." + group},
		"spec": map[string]any{
			"group": group, "scope": "Namespaced",
			"names": map[string]any{"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
			"versions": []any{map[string]any{"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}},
		},
	}
	hook := func(obj map[string]any, events string) map[string]any {
		obj["metadata"].(map[string]any)["annotations"] = map[string]any{"helm.sh/hook": events}
		return obj
	}
	objs := func(version string) []map[string]any {
		return []map[string]any{
			hook(map[string]any{"apiVersion": group + "/v1", "kind": "Gadget", "metadata": map[string]any{"name": "setup"}, "spec": map[string]any{"v": version}}, "pre-install"),
			hook(configMapObject("installed", version), "post-install"),
			hook(configMapObject("every", version), "pre-install,pre-upgrade"),
			crd,
			configMapObject("app", version),
		}
	}
	k := key("hooks")
	ns := managedNamespace(r.settings.NamespacePrefix, k)
	v1 := target(t, k, "v1", objs("v1")...)
	got := actions(mustApply(t, r, v1))
	if got["Gadget."+group+"/"+ns+"/setup"] != runtimes.ActionCreated || got["ConfigMap/"+ns+"/installed"] != runtimes.ActionCreated {
		t.Errorf("first install: %v", got)
	}
	waitConverged(t, r, v1)

	v2 := target(t, k, "v2", objs("v2")...)
	got = actions(mustApply(t, r, v2))
	if got["Gadget."+group+"/"+ns+"/setup"] != runtimes.ActionSkipped || got["ConfigMap/"+ns+"/installed"] != runtimes.ActionSkipped {
		t.Errorf("upgrade: install hooks %v, want skipped", got)
	}
	if v, _, _ := unstructured.NestedString(get(t, configMaps, ns, "installed").Object, "data", "version"); v != "v1" {
		t.Errorf("the post-install hook was applied again: version %q", v)
	}
	if v, _, _ := unstructured.NestedString(get(t, configMaps, ns, "every").Object, "data", "version"); v != "v2" {
		t.Errorf("the pre-upgrade hook was not applied: version %q", v)
	}
	waitConverged(t, r, v2)
	if got := actions(mustApply(t, r, v2)); got["ConfigMap/"+ns+"/installed"] != runtimes.ActionSkipped || got["ConfigMap/"+ns+"/every"] != runtimes.ActionUnchanged {
		t.Errorf("v2 again: %v", got)
	}
	if st := mustFetch(t, r, v2); !st.Converged || st.Drifted {
		t.Errorf("v2: %+v", st)
	}
	// An install hook a later version adds is not applied either (the
	// instance is installed), and nothing is said to be pruned.
	v3 := target(t, k, "v3", append(objs("v3"), hook(configMapObject("late", "v3"), "pre-install"))...)
	res := mustApply(t, r, v3)
	for _, c := range res.Changes {
		if strings.Contains(c.Object, "/late") || c.Action == runtimes.ActionDeleted {
			t.Errorf("v3: %s %s", c.Object, c.Action)
		}
	}
	waitConverged(t, r, v3)
}
