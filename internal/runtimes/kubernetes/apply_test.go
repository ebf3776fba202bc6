package kubernetes

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/drover-dev/drover/internal/runtimes"
	"github.com/drover-dev/drover/internal/testing/kubetest"
)

var (
	statefulSets = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "statefulsets"}
	daemonSets   = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "daemonsets"}
	jobs         = schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}
	clusterRoles = schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"}
)

func podTemplate(name, version string) map[string]any {
	return map[string]any{
		"metadata": map[string]any{"labels": map[string]any{"app": name}},
		"spec": map[string]any{
			"containers": []any{map[string]any{"name": "app", "image": "registry.example/" + name + ":" + version}},
		},
	}
}

func workloads(version string) []map[string]any {
	job := podTemplate("migrate", version)
	job["spec"].(map[string]any)["restartPolicy"] = "Never"
	return []map[string]any{
		configMapObject("settings", version),
		deploymentObject("web", version, 2),
		{"apiVersion": "v1", "kind": "Service", "metadata": map[string]any{"name": "db"},
			"spec": map[string]any{"clusterIP": "None", "selector": map[string]any{"app": "db"}, "ports": []any{map[string]any{"port": int64(5432)}}}},
		{"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": map[string]any{"name": "db"},
			"spec": map[string]any{"serviceName": "db", "replicas": int64(2), "selector": map[string]any{"matchLabels": map[string]any{"app": "db"}}, "template": podTemplate("db", version)}},
		{"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": map[string]any{"name": "agent"},
			"spec": map[string]any{"selector": map[string]any{"matchLabels": map[string]any{"app": "agent"}}, "template": podTemplate("agent", version)}},
		{"apiVersion": "batch/v1", "kind": "Job", "metadata": map[string]any{"name": "migrate"},
			"spec": map[string]any{"backoffLimit": int64(0), "template": job}},
	}
}

// TestWorkloads applies and upgrades a Deployment, a StatefulSet, a
// DaemonSet and a Job (with a ConfigMap and a Service) and checks health,
// replica counts, labels and annotations.
func TestWorkloads(t *testing.T) {
	t.Parallel()
	r := newRuntime(t, Settings{})
	k := key("workloads")
	v1 := target(t, k, "v1", workloads("v1")...)
	res := mustApply(t, r, v1)
	if len(res.Changes) != 6 {
		t.Fatalf("changes %+v, want 6", res.Changes)
	}
	for _, c := range res.Changes {
		if c.Action != runtimes.ActionCreated {
			t.Errorf("first apply: %s %s, want created", c.Object, c.Action)
		}
	}
	start := time.Now()
	st := waitConverged(t, r, v1)
	t.Logf("v1 converged in %v: %s", time.Since(start).Round(time.Millisecond), st.Message)
	ns := managedNamespace(r.settings.NamespacePrefix, k)
	want := map[string][3]int32{ // target, ready, available
		"Deployment.apps/web":  {2, 2, 2},
		"StatefulSet.apps/db":  {2, 2, 2},
		"DaemonSet.apps/agent": {2, 2, 2}, // one pod per simulated node
		"Job.batch/migrate":    {1, 0, 1},
	}
	for _, o := range st.Objects {
		if o.Status != runtimes.ObjectSucceeded || o.Version != "v1" || o.Namespace != ns {
			t.Errorf("object %+v: want SUCCEEDED at v1 in %s", o, ns)
		}
		if w, ok := want[o.ObjectType+"/"+o.Name]; ok && [3]int32{o.TargetReplicas, o.Replicas, o.AvailableReplicas} != w {
			t.Errorf("%s/%s: target/ready/available %d/%d/%d, want %v", o.ObjectType, o.Name, o.TargetReplicas, o.Replicas, o.AvailableReplicas, w)
		}
	}

	// Labels and annotations on every object; the version on pod templates.
	for _, g := range []struct {
		gvr  schema.GroupVersionResource
		name string
	}{{configMaps, "settings"}, {deployments, "web"}, {statefulSets, "db"}, {daemonSets, "agent"}, {jobs, "migrate"}, {schema.GroupVersionResource{Version: "v1", Resource: "services"}, "db"}} {
		obj := get(t, g.gvr, ns, g.name)
		l, a := obj.GetLabels(), obj.GetAnnotations()
		if l[LabelApplication] != "shop" || l[LabelService] != "workloads" || l[LabelReleaseChannel] != "staging" {
			t.Errorf("%s %s: labels %v", g.gvr.Resource, g.name, l)
		}
		if a[AnnotationVersion] != "v1" || a[AnnotationDesiredState] != "ds-v1" || a[AnnotationAppliedHash] == "" {
			t.Errorf("%s %s: annotations %v", g.gvr.Resource, g.name, a)
		}
		if g.gvr.Resource != "configmaps" && g.gvr.Resource != "services" {
			if v, _, _ := unstructured.NestedString(obj.Object, "spec", "template", "metadata", "annotations", AnnotationVersion); v != "v1" {
				t.Errorf("%s %s: pod template version %q, want v1", g.gvr.Resource, g.name, v)
			}
		}
	}
	oldJob := get(t, jobs, ns, "migrate").GetUID()

	// v2 rolls every workload; the Job, whose template is immutable, is recreated.
	v2 := target(t, k, "v2", workloads("v2")...)
	res = mustApply(t, r, v2)
	for _, c := range res.Changes {
		if c.Action != runtimes.ActionConfigured {
			t.Errorf("upgrade: %s %s, want configured", c.Object, c.Action)
		}
	}
	start = time.Now()
	st = waitConverged(t, r, v2)
	t.Logf("v2 converged in %v: %s", time.Since(start).Round(time.Millisecond), st.Message)
	if job := get(t, jobs, ns, "migrate"); job.GetUID() == oldJob || job.GetAnnotations()[AnnotationVersion] != "v2" {
		t.Errorf("the Job of v1 was not replaced: uid %s (was %s), version %s", job.GetUID(), oldJob, job.GetAnnotations()[AnnotationVersion])
	}
}

// TestReplay: a person replaying drover's apply with kubectl (same field
// manager, same objects) changes nothing, and drover sees no drift.
func TestReplay(t *testing.T) {
	t.Parallel()
	c := kubetest.Shared(t)
	r := newRuntime(t, Settings{})
	k := key("replay")
	tg := target(t, k, "v1", deploymentObject("replay", "v1", 1), configMapObject("replay", "v1"))
	mustApply(t, r, tg)
	waitConverged(t, r, tg)
	ns := managedNamespace(r.settings.NamespacePrefix, k)

	objs, err := r.Render(context.Background(), tg)
	if err != nil {
		t.Fatal(err)
	}
	list, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": objs})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "replay.json")
	if err := os.WriteFile(file, list, 0o600); err != nil {
		t.Fatal(err)
	}
	rvs := func() [2]string {
		return [2]string{get(t, deployments, ns, "replay").GetResourceVersion(), get(t, configMaps, ns, "replay").GetResourceVersion()}
	}
	before := rvs()
	out := c.Kubectl(t, "apply", "--server-side", "--field-manager="+FieldManager, "--force-conflicts", "-f", file)
	t.Logf("kubectl: %s", strings.TrimSpace(out))
	if after := rvs(); after != before {
		t.Errorf("kubectl replay changed the objects: resourceVersions %v -> %v", before, after)
	}
	res := mustApply(t, r, tg)
	for _, ch := range res.Changes {
		if ch.Action != runtimes.ActionUnchanged {
			t.Errorf("apply after the replay: %s %s, want unchanged", ch.Object, ch.Action)
		}
	}
	if st := mustFetch(t, r, tg); !st.Converged || st.Drifted {
		t.Errorf("after the replay: %+v, want converged without drift", st)
	}
}

// TestNamespaces: a managed namespace is created and labelled; an existing
// one is used and never deleted; explicit namespaces are kept, cluster-scoped
// objects get none; removing every object prunes them all, cluster-scoped
// objects and namespaces the target created included.
func TestNamespaces(t *testing.T) {
	t.Parallel()
	r := newRuntime(t, Settings{})
	dyn := client(t)
	ctx := context.Background()

	managedKey := key("nsmanaged")
	m := target(t, managedKey, "v1", deploymentObject("nsmanaged", "v1", 1))
	mustApply(t, r, m)
	managed := managedNamespace(r.settings.NamespacePrefix, managedKey)
	nsObj := get(t, namespaces, "", managed)
	if l := nsObj.GetLabels(); l[LabelManaged] != "true" || l[LabelApplication] != "shop" || l[LabelReleaseChannel] != "staging" {
		t.Errorf("managed namespace %s: labels %v", managed, l)
	}
	get(t, deployments, managed, "nsmanaged")

	existing := "t" + runID + "-existing"
	extra := "t" + runID + "-extra"
	role := "t" + runID + "-reader"
	if _, err := dyn.Resource(namespaces).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": existing},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Another release channel: its managed namespace would be another one.
	k := runtimes.InstanceKey{Application: "shop", Service: "nsexisting", ReleaseChannel: "prod"}
	explicit := configMapObject("explicit", "v1")
	explicit["metadata"].(map[string]any)["namespace"] = managed
	inExtra := configMapObject("in-extra", "v1")
	inExtra["metadata"].(map[string]any)["namespace"] = extra
	tg := target(t, k, "v1",
		deploymentObject("nsexisting", "v1", 1),
		explicit,
		inExtra,
		map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": map[string]any{"name": role},
			"rules": []any{map[string]any{"apiGroups": []any{""}, "resources": []any{"pods"}, "verbs": []any{"get"}}}},
		map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": extra}},
	)
	tg.Namespace = existing
	res := mustApply(t, r, tg)
	if got := actions(res); len(got) != 5 || got["Namespace/"+extra] != runtimes.ActionCreated || got["ClusterRole.rbac.authorization.k8s.io/"+role] != runtimes.ActionCreated {
		t.Errorf("changes %v", got)
	}
	get(t, deployments, existing, "nsexisting")
	get(t, configMaps, managed, "explicit")
	get(t, configMaps, extra, "in-extra")
	get(t, clusterRoles, "", role)
	if _, err := dyn.Resource(namespaces).Get(ctx, managedNamespace(r.settings.NamespacePrefix, k), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a managed namespace was created although the target names one: %v", err)
	}
	waitConverged(t, r, tg)

	// Nothing left: everything is pruned but the namespaces drover did not create.
	empty := target(t, k, "v2")
	empty.Namespace = existing
	res = mustApply(t, r, empty)
	for _, c := range res.Changes {
		if c.Action != runtimes.ActionDeleted {
			t.Errorf("prune: %s %s, want deleted", c.Object, c.Action)
		}
	}
	if len(res.Changes) != 5 {
		t.Errorf("prune changes %+v, want 5 deleted", res.Changes)
	}
	if _, err := dyn.Resource(clusterRoles).Get(ctx, role, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("cluster role after prune: %v, want not found", err)
	}
	if obj, err := dyn.Resource(namespaces).Get(ctx, extra, metav1.GetOptions{}); err == nil && obj.GetDeletionTimestamp() == nil {
		t.Errorf("namespace %s created by the target survived the prune", extra)
	}
	for _, ns := range []string{existing, managed} {
		if obj := get(t, namespaces, "", ns); obj.GetDeletionTimestamp() != nil {
			t.Errorf("namespace %s is being deleted", ns)
		}
	}
	if st := mustFetch(t, r, empty); st.Version != "" || st.Converged {
		t.Errorf("after pruning everything: %+v, want nothing deployed", st)
	}
}

// TestPruneAfterRestart: the inventory survives drover: a new runtime sees
// the instance converged without applying, and prunes what the old one applied.
func TestPruneAfterRestart(t *testing.T) {
	t.Parallel()
	prefix := uniquePrefix()
	r1 := newRuntime(t, Settings{NamespacePrefix: prefix})
	k := key("prune")
	v1 := target(t, k, "v1", deploymentObject("prune", "v1", 1), configMapObject("prune-old", "v1"), configMapObject("prune-kept", "v1"))
	mustApply(t, r1, v1)
	waitConverged(t, r1, v1)
	if err := r1.Close(); err != nil {
		t.Fatal(err)
	}

	r2 := newRuntime(t, Settings{NamespacePrefix: prefix})
	waitConverged(t, r2, v1)
	v2 := target(t, k, "v2", deploymentObject("prune", "v2", 1), configMapObject("prune-kept", "v2"))
	ns := managedNamespace(prefix, k)
	got := actions(mustApply(t, r2, v2))
	wantActions := map[string]runtimes.Action{
		"Deployment.apps/" + ns + "/prune": runtimes.ActionConfigured,
		"ConfigMap/" + ns + "/prune-kept":  runtimes.ActionConfigured,
		"ConfigMap/" + ns + "/prune-old":   runtimes.ActionDeleted,
	}
	if len(got) != len(wantActions) {
		t.Errorf("changes %v, want %v", got, wantActions)
	}
	for o, a := range wantActions {
		if got[o] != a {
			t.Errorf("%s: %s, want %s", o, got[o], a)
		}
	}
	if _, err := client(t).Resource(configMaps).Namespace(ns).Get(context.Background(), "prune-old", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("pruned ConfigMap: %v, want not found", err)
	}
	st := waitConverged(t, r2, v2)
	if len(st.Objects) != 2 {
		t.Errorf("objects after prune: %+v", st.Objects)
	}
}

// TestCustomResources: a CRD and an object of its kind in one target: the
// CRD is applied first and the object once the apiserver serves the kind.
func TestCustomResources(t *testing.T) {
	t.Parallel()
	r := newRuntime(t, Settings{})
	group := "t" + runID + ".drover.test"
	crd := map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "widgets." + group},
		"spec": map[string]any{
			"group": group, "scope": "Namespaced",
			"names": map[string]any{"plural": "widgets", "singular": "widget", "kind": "Widget"},
			"versions": []any{map[string]any{"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}},
		},
	}
	widget := func(version string) map[string]any {
		return map[string]any{"apiVersion": group + "/v1", "kind": "Widget", "metadata": map[string]any{"name": "gear"}, "spec": map[string]any{"size": version}}
	}
	k := key("crd")
	// The custom object comes first: Apply orders the CRD before it.
	v1 := target(t, k, "v1", widget("v1"), crd)
	got := actions(mustApply(t, r, v1))
	ns := managedNamespace(r.settings.NamespacePrefix, k)
	if got["Widget."+group+"/"+ns+"/gear"] != runtimes.ActionCreated || got["CustomResourceDefinition.apiextensions.k8s.io/widgets."+group] != runtimes.ActionCreated {
		t.Errorf("changes %v", got)
	}
	waitConverged(t, r, v1)
	v2 := target(t, k, "v2", widget("v2"), crd)
	mustApply(t, r, v2)
	waitConverged(t, r, v2)
}
