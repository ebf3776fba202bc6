package kubernetes

import (
	"encoding/json"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/drover-dev/drover/internal/manifest"
	"github.com/drover-dev/drover/internal/runtimes"
)

func TestManagedNamespace(t *testing.T) {
	t.Parallel()
	k := runtimes.InstanceKey{Application: "shop", Service: "web", ReleaseChannel: "staging"}
	if got := managedNamespace("drover-", k); got != "drover-shop-staging" {
		t.Errorf("managedNamespace = %q, want drover-shop-staging", got)
	}
	long := runtimes.InstanceKey{Application: strings.Repeat("a", 40), Service: "web", ReleaseChannel: strings.Repeat("b", 40)}
	other := runtimes.InstanceKey{Application: strings.Repeat("a", 40), Service: "web", ReleaseChannel: strings.Repeat("b", 39) + "c"}
	a, b := managedNamespace("drover-", long), managedNamespace("drover-", other)
	for _, ns := range []string{a, b} {
		if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
			t.Errorf("managedNamespace = %q: %v", ns, msgs)
		}
	}
	if a == b {
		t.Errorf("two long names truncate to the same namespace %q", a)
	}
	if !strings.HasPrefix(a, "drover-aaaa") {
		t.Errorf("truncated namespace %q lost its prefix", a)
	}
	// A cut falling on a dash leaves no dash before the hash.
	if got := DNSLabel(strings.Repeat("x", 53) + "-" + strings.Repeat("y", 20)); strings.Contains(got, "--") || len(got) > 63 {
		t.Errorf("dnsLabel = %q", got)
	}
}

func TestValidateKey(t *testing.T) {
	t.Parallel()
	if err := validateKey(runtimes.InstanceKey{Application: "shop", Service: "web", ReleaseChannel: "prod-eu"}); err != nil {
		t.Errorf("valid key: %v", err)
	}
	for _, k := range []runtimes.InstanceKey{
		{Application: "Shop", Service: "web", ReleaseChannel: "prod"},
		{Application: "shop", Service: "", ReleaseChannel: "prod"},
		{Application: "shop", Service: "web", ReleaseChannel: strings.Repeat("p", 64)},
	} {
		if err := validateKey(k); err == nil {
			t.Errorf("validateKey(%v) = nil, want an error", k)
		}
	}
}

// staticMapper maps the kinds the tests use.
func staticMapper() meta.RESTMapper {
	m := meta.NewDefaultRESTMapper(nil)
	for _, k := range []struct {
		gvk   schema.GroupVersionKind
		scope meta.RESTScope
	}{
		{schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, meta.RESTScopeNamespace},
		{schema.GroupVersionKind{Group: "batch", Version: "v1", Kind: "Job"}, meta.RESTScopeNamespace},
		{schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, meta.RESTScopeNamespace},
		{schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, meta.RESTScopeRoot},
		{schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole"}, meta.RESTScopeRoot},
	} {
		m.Add(k.gvk, k.scope)
	}
	return m
}

func rawObjects(t testing.TB, objs ...map[string]any) []json.RawMessage {
	t.Helper()
	out := make([]json.RawMessage, len(objs))
	for i, o := range objs {
		b, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = b
	}
	return out
}

func TestPrepare(t *testing.T) {
	t.Parallel()
	key := runtimes.InstanceKey{Application: "shop", Service: "web", ReleaseChannel: "staging"}
	target := func(version, ds string) runtimes.Target {
		return runtimes.Target{
			InstanceKey: key, Version: version, DesiredStateID: ds,
			Objects: rawObjects(t,
				map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "cfg", "namespace": "elsewhere"}},
				deploymentObject("web", version, 2),
				map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": map[string]any{"name": "reader", "namespace": "ignored"}},
				map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "extra"}},
				map[string]any{"apiVersion": "batch/v1", "kind": "Job", "metadata": map[string]any{"name": "migrate", "resourceVersion": "12", "uid": "u"}, "status": map[string]any{"active": 1},
					"spec": map[string]any{"template": map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "m", "image": "m"}}}}}},
			),
		}
	}
	render := func(tg runtimes.Target) []*item {
		items, err := decode(&tg)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range items {
			if err := mapItem(staticMapper(), it, "ns1"); err != nil {
				t.Fatal(err)
			}
			if err := prepare(it, &tg); err != nil {
				t.Fatal(err)
			}
		}
		return items
	}
	items := render(target("v1", "ds1"))
	var ids []string
	for _, it := range items {
		ids = append(ids, it.ref.id())
	}
	want := "Namespace/extra ConfigMap/elsewhere/cfg Deployment.apps/ns1/web ClusterRole.rbac.authorization.k8s.io/reader Job.batch/ns1/migrate"
	if got := strings.Join(ids, " "); got != want {
		t.Errorf("objects in apply order:\n got %s\nwant %s", got, want)
	}
	for _, it := range items {
		l, a := it.obj.GetLabels(), it.obj.GetAnnotations()
		if l[LabelApplication] != "shop" || l[LabelService] != "web" || l[LabelReleaseChannel] != "staging" {
			t.Errorf("%s: labels %v", it.ref.id(), l)
		}
		if a[AnnotationVersion] != "v1" || a[AnnotationDesiredState] != "ds1" || a[AnnotationAppliedHash] != it.hash || it.hash == "" {
			t.Errorf("%s: annotations %v (hash %s)", it.ref.id(), a, it.hash)
		}
	}
	dep, job := items[2].obj, items[4].obj
	if v, _, _ := unstructured.NestedString(dep.Object, "spec", "template", "metadata", "annotations", AnnotationVersion); v != "v1" {
		t.Errorf("Deployment pod template version annotation = %q, want v1", v)
	}
	if v, _, _ := unstructured.NestedString(job.Object, "spec", "template", "metadata", "annotations", AnnotationVersion); v != "v1" {
		t.Errorf("Job pod template version annotation = %q, want v1", v)
	}
	if _, ok := job.Object["status"]; ok || job.GetResourceVersion() != "" || job.GetUID() != "" {
		t.Errorf("read-only fields kept: %v", job.Object)
	}
	if items[0].obj.GetNamespace() != "" || items[3].obj.GetNamespace() != "" {
		t.Errorf("cluster-scoped objects got a namespace")
	}

	// The desired state is not part of the hash; the version is.
	for i, it := range render(target("v1", "ds2")) {
		if it.hash != items[i].hash {
			t.Errorf("%s: hash changed with the desired state only", it.ref.id())
		}
	}
	for i, it := range render(target("v2", "ds1")) {
		if it.hash == items[i].hash {
			t.Errorf("%s: hash did not change with the version", it.ref.id())
		}
	}
}

// refusedObjects are targets the runtime refuses to apply, each but the last
// also as the YAML a user would write.
var refusedObjects = []struct {
	name string
	objs []map[string]any
}{
	{"no kind", []map[string]any{{"apiVersion": "v1", "metadata": map[string]any{"name": "x"}}}},
	{"no apiVersion", []map[string]any{{"kind": "ConfigMap", "metadata": map[string]any{"name": "x"}}}},
	{"no name", []map[string]any{{"apiVersion": "v1", "kind": "ConfigMap"}}},
	{"list", []map[string]any{{"apiVersion": "v1", "kind": "ConfigMapList", "metadata": map[string]any{"name": "x"}}}},
	{"duplicate", []map[string]any{
		{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "x"}},
		{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "x"}},
	}},
}

func TestDecodeRejects(t *testing.T) {
	t.Parallel()
	for _, tc := range refusedObjects {
		if _, err := decode(&runtimes.Target{Objects: rawObjects(t, tc.objs...)}); err == nil {
			t.Errorf("%s: decode succeeded", tc.name)
		}
	}
	if _, err := decode(&runtimes.Target{Objects: []json.RawMessage{json.RawMessage(`{`)}}); err == nil {
		t.Error("not JSON: decode succeeded")
	}
}

// TestRefusedAtValidate: every object the runtime refuses to apply is
// refused by the decoder the compiler uses (validate, compile, push), so no
// push is accepted that every apply would fail.
func TestRefusedAtValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range refusedObjects {
		var stream strings.Builder
		for _, o := range tc.objs {
			b, err := json.Marshal(o) // JSON is YAML
			if err != nil {
				t.Fatal(err)
			}
			stream.WriteString("---\n")
			stream.Write(b)
			stream.WriteString("\n")
		}
		if _, err := manifest.DecodeApplicable([]byte(stream.String())); err == nil {
			t.Errorf("%s: the runtime refuses it, the compiler's decoder accepts it", tc.name)
		}
	}
}

func TestSummarize(t *testing.T) {
	t.Parallel()
	dep := func(version string, st string, avail int32) observed {
		o := observed{present: true, workload: true, obj: runtimes.Object{ObjectType: "Deployment.apps", Name: "web", Version: version, TargetReplicas: 3, AvailableReplicas: avail}}
		switch st {
		case "current":
			o.status = "Current"
		case "failed":
			o.status, o.detail = "Failed", "Deployment/web failed: ProgressDeadlineExceeded"
		default:
			o.status, o.detail = "InProgress", "Deployment/web: 2/3 replicas available (UPDATING_PODS)"
		}
		return o
	}
	cm := observed{present: true, status: "Current", obj: runtimes.Object{ObjectType: "ConfigMap", Name: "cfg", Version: "v1"}}
	for name, c := range map[string]struct {
		objs                       []observed
		version                    string
		converged, failed, drifted bool
		message                    string
	}{
		"converged":   {[]observed{dep("v1", "current", 3), cm}, "v1", true, false, false, "v1 running: 3/3 replicas available"},
		"progressing": {[]observed{dep("v1", "progress", 2), cm}, "v1", false, false, false, "UPDATING_PODS"},
		"failed":      {[]observed{dep("v1", "failed", 2), cm}, "v1", false, true, false, "RUNTIME_OBJECT_FAILED"},
		"mixed":       {[]observed{dep("v2", "current", 3), cm}, "", false, false, false, "VERSION_MISMATCH"},
		"missing":     {[]observed{{drift: "Deployment/web is missing", obj: runtimes.Object{Name: "web"}}, cm}, "", false, false, true, "is missing"},
		"drifted": {[]observed{func() observed {
			o := dep("v1", "current", 3)
			o.drift = "Deployment/web was changed outside drover"
			return o
		}(), cm}, "v1", false, false, true, "changed outside drover"},
	} {
		st := summarize(c.objs)
		if st.Version != c.version || st.Converged != c.converged || st.Failed != c.failed || st.Drifted != c.drifted || !strings.Contains(st.Message, c.message) {
			t.Errorf("%s: got %+v\nwant version %q converged %v failed %v drifted %v message containing %q", name, st, c.version, c.converged, c.failed, c.drifted, c.message)
		}
	}
}

func TestRVAtLeast(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		have, want string
		ok         bool
	}{{"10", "9", true}, {"9", "10", false}, {"10", "10", true}, {"a", "a", true}, {"a", "b", false}, {"", "1", false}} {
		if got := rvAtLeast(c.have, c.want); got != c.ok {
			t.Errorf("rvAtLeast(%q, %q) = %v", c.have, c.want, got)
		}
	}
}
