package manifest

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

const patchFixture = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: prod
  labels: {patched: "no"}
  annotations:
    drover.dev/version: "1"
spec:
  replicas: 2
  template:
    spec:
      containers:
      - name: web
        image: nginx:1.25
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: api
  namespace: staging
  labels: {patched: "no"}
spec:
  replicas: 1
---
apiVersion: v1
kind: Service
metadata:
  name: web
  namespace: prod
  labels: {patched: "no"}
---
apiVersion: batch/v1beta1
kind: CronJob
metadata:
  name: nightly
  labels: {patched: "no"}
`

func patchedNames(t *testing.T, target *Target) []string {
	t.Helper()
	objs := mustDecode(t, patchFixture)
	if err := ApplyPatches(objs, []Patch{{Target: target, Path: "/metadata/labels/patched", Value: "yes"}}); err != nil {
		t.Fatalf("target %v: %v", target, err)
	}
	var out []string
	for _, o := range objs {
		if o["metadata"].(map[string]any)["labels"].(map[string]any)["patched"] == "yes" {
			out = append(out, ObjectName(o))
		}
	}
	return out
}

func TestApplyPatchesTargets(t *testing.T) {
	t.Parallel()
	all := []string{"Deployment/prod/web", "Deployment/staging/api", "Service/prod/web", "CronJob/nightly"}
	tests := []struct {
		name   string
		target *Target
		want   []string
	}{
		{"nil target", nil, all},
		{"empty target", &Target{}, all},
		{"group apps", &Target{Group: "apps"}, []string{"Deployment/prod/web", "Deployment/staging/api"}},
		{"core group is empty", &Target{Version: "v1", Kind: "Service"}, []string{"Service/prod/web"}},
		{"group batch", &Target{Group: "batch"}, []string{"CronJob/nightly"}},
		{"version v1", &Target{Version: "v1"}, []string{"Deployment/prod/web", "Deployment/staging/api", "Service/prod/web"}},
		{"version v1beta1", &Target{Version: "v1beta1"}, []string{"CronJob/nightly"}},
		{"kind", &Target{Kind: "Deployment"}, []string{"Deployment/prod/web", "Deployment/staging/api"}},
		{"name", &Target{Name: "web"}, []string{"Deployment/prod/web", "Service/prod/web"}},
		{"namespace", &Target{Namespace: "staging"}, []string{"Deployment/staging/api"}},
		{"all fields", &Target{Group: "apps", Version: "v1", Kind: "Deployment", Name: "web", Namespace: "prod"}, []string{"Deployment/prod/web"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := patchedNames(t, tt.target); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("patched %v, want %v", got, tt.want)
			}
		})
	}
}

func TestApplyPatchesValues(t *testing.T) {
	t.Parallel()
	objs := mustDecode(t, patchFixture)
	deploy := &Target{Kind: "Deployment", Name: "web"}
	before := objs[0]
	err := ApplyPatches(objs, []Patch{
		{Target: deploy, Path: "/spec/replicas", Value: int64(5)},
		{Target: deploy, Path: "/spec/template/spec/containers/0/image", Value: "nginx:1.27"},
		{Target: deploy, Path: "/metadata/annotations/drover.dev~1version", Value: "2"},
		{Target: &Target{Name: "api"}, Path: "/spec/replicas", Value: 2.0},
		{Target: &Target{Name: "api"}, Path: "/metadata/labels", Value: map[string]any{"a": 1}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if reflect.ValueOf(objs[0]).Pointer() != reflect.ValueOf(before).Pointer() {
		t.Error("patched object was replaced instead of updated in place")
	}
	j, err := json.Marshal(objs[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"replicas":5`, `"image":"nginx:1.27"`, `"drover.dev/version":"2"`} {
		if !strings.Contains(string(j), want) {
			t.Errorf("JSON %s lacks %s", j, want)
		}
	}
	spec := objs[0]["spec"].(map[string]any)
	if spec["replicas"] != int64(5) {
		t.Errorf("replicas = %#v, want int64(5)", spec["replicas"])
	}
	// Values follow the numeric convention whatever Go type the compiler used.
	if got := objs[1]["spec"].(map[string]any)["replicas"]; got != int64(2) {
		t.Errorf("api replicas = %#v, want int64(2)", got)
	}
	if got := objs[1]["metadata"].(map[string]any)["labels"]; !reflect.DeepEqual(got, map[string]any{"a": int64(1)}) {
		t.Errorf("api labels = %#v", got)
	}
	// Untouched objects keep their values.
	if got := objs[2]["metadata"].(map[string]any)["labels"].(map[string]any)["patched"]; got != "no" {
		t.Errorf("service label = %v", got)
	}
}

func TestApplyPatchesIntAsStringRoundTrip(t *testing.T) {
	t.Parallel()
	// A value decoded from YAML and the same value passed as int64 by the
	// compiler must be indistinguishable.
	decoded := mustDecode(t, "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec: {replicas: 5}\n")
	patched := mustDecode(t, "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec: {replicas: 1}\n")
	if err := ApplyPatches(patched, []Patch{{Path: "/spec/replicas", Value: int64(5)}}); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(decoded, patched) {
		t.Errorf("decoded %#v != patched %#v", decoded, patched)
	}
}

func TestApplyPatchesErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		patches []Patch
		want    []string
	}{
		{"missing path", []Patch{{Target: &Target{Kind: "Service"}, Path: "/spec/replicas", Value: 3}},
			[]string{"Service/prod/web", "/spec/replicas", "patches[0]"}},
		{"missing parent", []Patch{{Target: &Target{Kind: "CronJob"}, Path: "/spec/schedule", Value: "x"}},
			[]string{"CronJob/nightly", "/spec/schedule"}},
		{"index out of range", []Patch{{Target: &Target{Name: "web", Kind: "Deployment"}, Path: "/spec/template/spec/containers/1/image", Value: "x"}},
			[]string{"Deployment/prod/web", "/spec/template/spec/containers/1/image"}},
		{"negative index", []Patch{{Target: &Target{Name: "web", Kind: "Deployment"}, Path: "/spec/template/spec/containers/-1/image", Value: "x"}},
			[]string{"Deployment/prod/web"}},
		{"missing in one of several targets", []Patch{{Target: &Target{Name: "web"}, Path: "/spec/replicas", Value: 3}},
			[]string{"Service/prod/web", "/spec/replicas"}},
		{"no match", []Patch{{Target: &Target{Kind: "Deployment", Name: "nope"}, Path: "/spec/replicas", Value: 3}},
			[]string{"matches no object", `kind="Deployment"`, `name="nope"`}},
		{"second patch fails", []Patch{
			{Path: "/metadata/labels/patched", Value: "yes"},
			{Target: &Target{Namespace: "nowhere"}, Path: "/spec/replicas", Value: 1}},
			[]string{"patches[1]", "matches no object", `namespace="nowhere"`}},
		{"relative path", []Patch{{Path: "spec/replicas", Value: 3}}, []string{"JSON pointer"}},
		{"unencodable value", []Patch{{Path: "/spec/replicas", Value: func() {}}}, []string{"cannot be encoded"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			objs := mustDecode(t, patchFixture)
			orig := mustDecode(t, patchFixture)
			err := ApplyPatches(objs, tt.patches)
			if err == nil {
				t.Fatal("ApplyPatches succeeded; want error")
			}
			t.Log(err)
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			if !reflect.DeepEqual(objs, orig) {
				t.Error("objects were modified by a failing ApplyPatches")
			}
		})
	}
}

func TestApplyPatchesSeesEarlierPatches(t *testing.T) {
	t.Parallel()
	objs := mustDecode(t, patchFixture)
	err := ApplyPatches(objs, []Patch{
		{Target: &Target{Kind: "Service"}, Path: "/metadata/name", Value: "renamed"},
		{Target: &Target{Name: "renamed"}, Path: "/metadata/labels/patched", Value: "yes"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := ObjectName(objs[2]); got != "Service/prod/renamed" {
		t.Errorf("got %s", got)
	}
}

func TestApplyPatchesNoPatches(t *testing.T) {
	t.Parallel()
	if err := ApplyPatches(nil, nil); err != nil {
		t.Fatal(err)
	}
}
