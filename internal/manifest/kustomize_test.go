package manifest

import (
	"reflect"
	"strings"
	"testing"
)

func baseOverlayTree() map[string][]byte {
	return map[string][]byte{
		"base/kustomization.yaml": []byte(`resources:
- deployment.yaml
- service.yaml
`),
		"base/deployment.yaml": []byte(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 1
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
      annotations:
        drover.dev/version: "{{.Params.version}}"
    spec:
      containers:
      - name: web
        image: nginx:1.25
        env:
        - name: IMAGE
          value: "{{.Params.image}}"
      - name: sidecar
        image: "{{.Params.image}}"
`),
		"base/service.yaml": []byte(`apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  selector:
    app: web
  ports:
  - port: 80
`),
		"overlays/prod/kustomization.yaml": []byte(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- ../../base
namePrefix: prod-
commonLabels:
  env: prod
images:
- name: nginx
  newTag: "1.27"
`),
	}
}

func TestRenderKustomizeOverlay(t *testing.T) {
	t.Parallel()
	out, err := RenderKustomize(baseOverlayTree(), "overlays/prod")
	if err != nil {
		t.Fatal(err)
	}
	objs, err := Decode(out)
	if err != nil {
		t.Fatalf("rendered output does not decode: %v\n%s", err, out)
	}
	// Legacy order, as `kustomize build`: Service before Deployment.
	if got, want := names(objs), []string{"Service/prod-web", "Deployment/prod-web"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v\n%s", got, want, out)
	}
	svc, deploy := objs[0], objs[1]
	for _, o := range objs {
		labels := o["metadata"].(map[string]any)["labels"].(map[string]any)
		if labels["env"] != "prod" {
			t.Errorf("%s: commonLabels not applied: %v", ObjectName(o), labels)
		}
	}
	if sel := svc["spec"].(map[string]any)["selector"]; !reflect.DeepEqual(sel, map[string]any{"app": "web", "env": "prod"}) {
		t.Errorf("service selector = %v", sel)
	}
	podSpec := deploy["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
	containers := podSpec["containers"].([]any)
	if img := containers[0].(map[string]any)["image"]; img != "nginx:1.27" {
		t.Errorf("images transformer: image = %v, want nginx:1.27", img)
	}
}

// The compiler renders Go templates after kustomize, so template actions in
// quoted strings must come out of kustomize verbatim (and still be valid
// YAML strings).
func TestRenderKustomizeKeepsTemplates(t *testing.T) {
	t.Parallel()
	out, err := RenderKustomize(baseOverlayTree(), "overlays/prod")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(out), "{{.Params.image}}"); n != 2 {
		t.Errorf("{{.Params.image}} appears %d times, want 2:\n%s", n, out)
	}
	if !strings.Contains(string(out), "{{.Params.version}}") {
		t.Errorf("{{.Params.version}} lost:\n%s", out)
	}
	objs, err := Decode(out)
	if err != nil {
		t.Fatal(err)
	}
	podSpec := objs[1]["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
	sidecar := podSpec["containers"].([]any)[1].(map[string]any)
	if sidecar["image"] != "{{.Params.image}}" {
		t.Errorf("sidecar image = %v", sidecar["image"])
	}
}

func TestRenderKustomizeBase(t *testing.T) {
	t.Parallel()
	out, err := RenderKustomize(baseOverlayTree(), "base/")
	if err != nil {
		t.Fatal(err)
	}
	objs, err := Decode(out)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := names(objs), []string{"Service/web", "Deployment/web"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func TestRenderKustomizeRoot(t *testing.T) {
	t.Parallel()
	files := map[string][]byte{
		"Kustomization": []byte("resources: [cm.yaml]\nnamespace: ns\n"),
		"cm.yaml":       []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\n"),
	}
	for _, dir := range []string{"", "."} {
		out, err := RenderKustomize(files, dir)
		if err != nil {
			t.Fatalf("dir %q: %v", dir, err)
		}
		if !strings.Contains(string(out), "namespace: ns") {
			t.Errorf("dir %q: namespace not set:\n%s", dir, out)
		}
	}
}

func TestRenderKustomizeNamespaceAndPatch(t *testing.T) {
	t.Parallel()
	files := baseOverlayTree()
	files["./overlays/prod//kustomization.yaml"] = append(files["overlays/prod/kustomization.yaml"], []byte(`namespace: prod
patches:
- patch: |-
    apiVersion: apps/v1
    kind: Deployment
    metadata:
      name: web
    spec:
      template:
        spec:
          containers:
          - name: web
            resources: {limits: {cpu: "1"}}
`)...)
	delete(files, "overlays/prod/kustomization.yaml")
	out, err := RenderKustomize(files, "overlays/prod")
	if err != nil {
		t.Fatal(err)
	}
	objs, err := Decode(out)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := names(objs), []string{"Service/prod/prod-web", "Deployment/prod/prod-web"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	podSpec := objs[1]["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
	web := podSpec["containers"].([]any)[0].(map[string]any)
	if web["image"] != "nginx:1.27" || !reflect.DeepEqual(web["resources"], map[string]any{"limits": map[string]any{"cpu": "1"}}) {
		t.Errorf("strategic merge patch not applied: %v", web)
	}
}

func TestRenderKustomizeErrors(t *testing.T) {
	t.Parallel()
	cm := []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\n")
	tests := []struct {
		name  string
		files map[string][]byte
		dir   string
		want  []string
	}{
		{"missing kustomization", map[string][]byte{"app/deploy.yaml": cm}, "app",
			[]string{"kustomize app", "no kustomization.yaml"}},
		{"missing dir", baseOverlayTree(), "overlays/dev",
			[]string{"kustomize overlays/dev", "no kustomization.yaml"}},
		{"missing resource", map[string][]byte{"app/kustomization.yaml": []byte("resources: [missing.yaml]\n")}, "app",
			[]string{"kustomize app", "app/missing.yaml: no such file or directory"}},
		{"file outside root", map[string][]byte{
			"app/kustomization.yaml": []byte("resources: [../shared/cm.yaml]\n"),
			"shared/cm.yaml":         cm}, "app",
			[]string{"kustomize app", "is not in or below 'app'"}},
		{"remote git base", map[string][]byte{
			"app/kustomization.yaml": []byte("resources:\n- github.com/kubernetes-sigs/kustomize//examples/helloWorld?ref=v1.0.6\n")}, "app",
			[]string{"kustomize app", "app/kustomization.yaml", "remote bases and files are not supported", "github.com/kubernetes-sigs"}},
		{"remote base in a local base", map[string][]byte{
			"app/kustomization.yaml":  []byte("resources: [../base]\n"),
			"base/kustomization.yaml": []byte("Resources:\n- https://example.com/deploy.yaml\n")}, "app",
			[]string{"kustomize app", "base/kustomization.yaml", "remote", "https://example.com/deploy.yaml"}},
		{"remote ssh component", map[string][]byte{
			"app/kustomization.yaml": []byte("components:\n- git@github.com:org/repo.git//comp\n")}, "app",
			[]string{"remote", "git@github.com:org/repo.git//comp"}},
		{"remote patch", map[string][]byte{
			"app/kustomization.yaml": []byte("patches:\n- path: http://example.com/p.yaml\n")}, "app",
			[]string{"remote", "http://example.com/p.yaml"}},
		{"remote configmap file", map[string][]byte{
			"app/kustomization.yaml": []byte("configMapGenerator:\n- name: x\n  files:\n  - key=https://example.com/f\n")}, "app",
			[]string{"remote", "https://example.com/f"}},
		{"invalid kustomization", map[string][]byte{"app/kustomization.yaml": []byte("resources: [a.yaml\n")}, "app",
			[]string{"kustomize app", "invalid Kustomization"}},
		{"unknown field", map[string][]byte{"app/kustomization.yaml": []byte("resourcez: [a.yaml]\n")}, "app",
			[]string{"kustomize app", "resourcez"}},
		{"helm is disabled", map[string][]byte{"app/kustomization.yaml": []byte("helmCharts:\n- name: x\n  repo: https://example.com\n")}, "app",
			[]string{"kustomize app", "enable-helm"}},
		{"dir outside tree", baseOverlayTree(), "../x", []string{"kustomize ../x", "leaves the file tree"}},
		{"same file twice", map[string][]byte{"app/kustomization.yaml": nil, "./app/kustomization.yaml": nil}, "app",
			[]string{"same file"}},
		{"absolute file name", map[string][]byte{"app/kustomization.yaml": []byte("resources: []\n"), "/etc/passwd": nil}, "app",
			[]string{"invalid file name \"/etc/passwd\""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out, err := RenderKustomize(tt.files, tt.dir)
			if err == nil {
				t.Fatalf("RenderKustomize succeeded:\n%s", out)
			}
			t.Log(err)
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestIsKustomizationDir(t *testing.T) {
	t.Parallel()
	files := map[string][]byte{
		"a/kustomization.yaml":   nil,
		"b/kustomization.yml":    nil,
		"c/Kustomization":        nil,
		"d/deploy.yaml":          nil,
		"kustomization.yaml":     nil,
		"e/f/kustomization.yaml": nil,
	}
	for dir, want := range map[string]bool{
		"a": true, "a/": true, "./a": true, "b": true, "c": true, "d": false, "missing": false,
		"": true, ".": true, "e": false, "e/f": true, "../a": false, "/a": false,
	} {
		if got := IsKustomizationDir(files, dir); got != want {
			t.Errorf("IsKustomizationDir(%q) = %v, want %v", dir, got, want)
		}
	}
}

func TestIsRemote(t *testing.T) {
	t.Parallel()
	for ref, want := range map[string]bool{
		"../base":                     false,
		"deploy.yaml":                 false,
		"github.com/org/repo//dir":    true,
		"GitHub.com/org/repo":         true,
		"git::https://host/org/repo":  true,
		"https://host/file.yaml":      true,
		"HTTP://host/file.yaml":       true,
		"ssh://git@host/repo":         true,
		"file:///etc":                 true,
		"git@gitlab.com:org/repo.git": true,
		"gitlab.com/org/repo":         false, // kustomize treats it as a local path too
		"dir-with@sign":               true,  // conservative: looks like SCP-style user@host
		"@scoped/dir":                 false,
		"9user@host:repo":             false,
	} {
		if got := isRemote(ref); got != want {
			t.Errorf("isRemote(%q) = %v, want %v", ref, got, want)
		}
	}
}

func BenchmarkRenderKustomize(b *testing.B) {
	files := baseOverlayTree()
	for b.Loop() {
		if _, err := RenderKustomize(files, "overlays/prod"); err != nil {
			b.Fatal(err)
		}
	}
}

// TestRenderKustomizeAnyFileName: names kustomize's in-memory file system
// refuses but a real one allows build as `kustomize build` builds them, used
// or not; a reference out of the tree is refused.
func TestRenderKustomizeAnyFileName(t *testing.T) {
	t.Parallel()
	files := map[string][]byte{
		"kustomization.yaml":      []byte("resources: [base]\ncomponents: [\"components/ha-1.21+\"]\n"),
		"base/kustomization.yaml": []byte("resources: [\"cm (v1)+.yaml\"]\n"),
		"base/cm (v1)+.yaml":      []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\ndata: {a: b}\n"),
		"components/ha-1.21+/kustomization.yaml": []byte("apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\n" +
			"patches: [{patch: '[{\"op\": \"add\", \"path\": \"/data/ha\", \"value\": \"yes\"}]', target: {kind: ConfigMap}}]\n"),
		"unused/v2+beta@x/kustomization.yaml": []byte("resources: []\n"),
	}
	out, err := RenderKustomize(files, "")
	if err != nil {
		t.Fatal(err)
	}
	if want := "apiVersion: v1\ndata:\n  a: b\n  ha: \"yes\"\nkind: ConfigMap\nmetadata:\n  name: cm\n"; string(out) != want {
		t.Errorf("got\n%s\nwant\n%s", out, want)
	}
	escape := map[string][]byte{"kustomization.yaml": []byte("resources: [../../../../../../etc/hostname]\n")}
	if _, err := RenderKustomize(escape, ""); err == nil || strings.Contains(err.Error(), "drover-kustomize-") {
		t.Errorf("a reference out of the tree: %v", err)
	}
}

// TestRenderKustomizeRefOutsideTree: a reference that leads out of the
// in-memory tree is refused before kustomize runs, naming the
// kustomization, the field and the reference, rather than with the path
// kustomize would look for beside its temporary copy.
func TestRenderKustomizeRefOutsideTree(t *testing.T) {
	t.Parallel()
	files := map[string][]byte{
		"deploy/overlays/prod/kustomization.yaml": []byte("resources:\n- ../../base\n- ../../../../upstream/base\n"),
		"deploy/base/kustomization.yaml":          []byte("resources: [cm.yaml]\n"),
		"deploy/base/cm.yaml":                     []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\n"),
	}
	_, err := RenderKustomize(files, "deploy/overlays/prod")
	want := "deploy/overlays/prod/kustomization.yaml: resources[1]: ../../../../upstream/base is not in the tree"
	if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "drover-kustomize-") {
		t.Fatalf("got %v, want %q", err, want)
	}
	// The same overlay with the base in the tree renders.
	files["deploy/overlays/prod/kustomization.yaml"] = []byte("resources:\n- ../../base\n")
	if _, err := RenderKustomize(files, "deploy/overlays/prod"); err != nil {
		t.Fatal(err)
	}
}
