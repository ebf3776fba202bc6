package kubeobj

import "testing"

func TestKey(t *testing.T) {
	t.Parallel()
	obj := func(apiVersion, kind, ns, name string) map[string]any {
		return map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": map[string]any{"namespace": ns, "name": name}}
	}
	same := [][2]map[string]any{
		{obj("apps/v1", "Deployment", "a", "web"), obj("apps/v1beta1", "Deployment", "a", "web")}, // versions of one object
	}
	differ := [][2]map[string]any{
		{obj("v1", "ConfigMap", "a", "x"), obj("v1", "ConfigMap", "b", "x")},
		{obj("v1", "ConfigMap", "a", "x"), obj("v1", "Secret", "a", "x")},
		{obj("v1", "Service", "a", "x"), obj("serving.knative.dev/v1", "Service", "a", "x")},
	}
	for _, p := range same {
		if Key(p[0]) != Key(p[1]) {
			t.Errorf("%s and %s differ", Key(p[0]), Key(p[1]))
		}
	}
	for _, p := range differ {
		if Key(p[0]) == Key(p[1]) {
			t.Errorf("%s given for two objects", Key(p[0]))
		}
	}
}

func TestProblem(t *testing.T) {
	t.Parallel()
	ok := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "x", "generateName": "y-"}}
	if f, msg := Problem(ok); msg != "" {
		t.Errorf("a named object refused: %s: %s", f, msg)
	}
	gen := map[string]any{"apiVersion": "batch/v1", "kind": "Job", "metadata": map[string]any{"generateName": "y-"}}
	if f, msg := Problem(gen); msg != "" {
		t.Errorf("generateName refused: %q %q", f, msg)
	}
	if k := Key(gen); k != "Job.batch//y-*" {
		t.Errorf("Key of a generateName object = %q", k)
	}
	if f, msg := Problem(map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{}}); f != "metadata.name" || msg == "" {
		t.Errorf("no name: %q %q", f, msg)
	}
}
