package manifest

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// remoteServer answers a ConfigMap (or a patch) to every request and
// counts them.
func remoteServer(t *testing.T) (string, *atomic.Int32) {
	t.Helper()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		_, _ = w.Write([]byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: fetched}\n"))
	}))
	t.Cleanup(srv.Close)
	return srv.URL, &hits
}

// pluginTrees are kustomizations whose plugin configs (generators,
// transformers, validators: files, inline, or listed by a kustomization)
// name a URL kustomize would fetch; want is what the error names.
func pluginTrees(url string) map[string]struct {
	files map[string][]byte
	want  string
} {
	cm := []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\n")
	patch := func(path string) string {
		return "apiVersion: builtin\nkind: PatchTransformer\nmetadata: {name: p}\npath: " + path + "\ntarget: {kind: ConfigMap}\n"
	}
	type tree = struct {
		files map[string][]byte
		want  string
	}
	return map[string]tree{
		"transformer file": {map[string][]byte{
			"kustomization.yaml": []byte("resources: [cm.yaml]\ntransformers: [t.yaml]\n"), "cm.yaml": cm,
			"t.yaml": []byte("# a comment\n---\n" + patch(url+"/t"))}, "t.yaml: path: "},
		"generator file": {map[string][]byte{
			"kustomization.yaml": []byte("generators: [g.yaml]\n"),
			"g.yaml":             []byte("apiVersion: builtin\nkind: ConfigMapGenerator\nmetadata: {name: g}\nfiles: [k=" + url + "/g]\n")}, "g.yaml: files[0]: "},
		"inline transformer": {map[string][]byte{
			"kustomization.yaml": []byte("resources: [cm.yaml]\ntransformers:\n- |\n  " + strings.ReplaceAll(strings.TrimSpace(patch(url+"/i")), "\n", "\n  ") + "\n"), "cm.yaml": cm},
			"kustomization.yaml: transformers[0].path: "},
		"one-line inline transformer": {map[string][]byte{
			"kustomization.yaml": []byte("resources: [cm.yaml]\ntransformers:\n- '{apiVersion: builtin, kind: PatchTransformer, metadata: {name: p}, path: \"" + url + "/o\", target: {kind: ConfigMap}}'\n"), "cm.yaml": cm},
			"kustomization.yaml: transformers[0].path: "},
		"replacement file": {map[string][]byte{
			"kustomization.yaml": []byte("resources: [cm.yaml]\ntransformers: [r.yaml]\n"), "cm.yaml": cm,
			"r.yaml": []byte("apiVersion: builtin\nkind: ReplacementTransformer\nmetadata: {name: r}\nreplacements: [{path: " + url + "/r}]\n")}, "r.yaml: replacements[0].path: "},
		"validator in a base": {map[string][]byte{
			"kustomization.yaml":      []byte("resources: [base]\n"),
			"base/kustomization.yaml": []byte("resources: [cm.yaml]\nvalidators: [v.yaml]\n"), "base/cm.yaml": cm,
			"base/v.yaml": []byte(patch(url + "/v"))}, "v.yaml: path: "},
		"transformers listed by a kustomization": {map[string][]byte{
			"kustomization.yaml": []byte("resources: [cm.yaml]\ntransformers: [plugins]\n"), "cm.yaml": cm,
			"plugins/kustomization.yaml": []byte("resources: [t.yaml]\n"),
			"plugins/t.yaml":             []byte(patch(url + "/k"))}, "plugins/t.yaml: path: "},
		"plugin configs patched": {map[string][]byte{
			"kustomization.yaml": []byte("resources: [cm.yaml]\ntransformers: [plugins]\n"), "cm.yaml": cm,
			"plugins/kustomization.yaml": []byte("resources: [t.yaml]\npatches:\n- patch: '[{\"op\": \"replace\", \"path\": \"/path\", \"value\": \"" + url + "/x\"}]'\n  target: {kind: PatchTransformer}\n"),
			"plugins/t.yaml":             []byte(patch("local.yaml")),
			"plugins/local.yaml":         []byte("[]\n")}, "plugins/kustomization.yaml: patches: a kustomization used as generators, transformers or validators cannot change the plugin configs it lists"},
	}
}

// TestRenderKustomizePluginConfigsFetchNothing: a kustomization rendered
// from an in-memory tree (a subPath tree, which the server compiles) is
// refused when a plugin config names a URL, with no request made.
func TestRenderKustomizePluginConfigsFetchNothing(t *testing.T) {
	t.Parallel()
	url, hits := remoteServer(t)
	for name, tc := range pluginTrees(url) {
		_, err := RenderKustomize(tc.files, "")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", name, err, tc.want)
		}
		if n := hits.Swap(0); n != 0 {
			t.Errorf("%s: %d requests", name, n)
		}
	}
}

// TestRenderKustomizeDirAsksCheck: on disk, every remote reference is put
// to check before kustomize runs (refused: no request); allowed, kustomize
// fetches it.
func TestRenderKustomizeDirAsksCheck(t *testing.T) {
	t.Parallel()
	url, hits := remoteServer(t)
	refuse := errors.New("refused by check")
	var asked []string
	check := func(p string) error {
		if !filepath.IsAbs(p) {
			asked = append(asked, p)
			return refuse
		}
		return nil
	}
	for name, tc := range pluginTrees(url) {
		dir := t.TempDir()
		for f, data := range tc.files {
			p := filepath.Join(dir, filepath.FromSlash(f))
			if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, data, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		_, err := RenderKustomizeDir(dir, check)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", name, err, tc.want)
		}
		if n := hits.Swap(0); n != 0 {
			t.Errorf("%s: %d requests", name, n)
		}
	}
	if len(asked) == 0 || !strings.HasPrefix(asked[0], url) {
		t.Errorf("check was asked %q", asked)
	}

	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte("resources: [\""+url+"/cm\"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := RenderKustomizeDir(dir, check); err == nil || !strings.Contains(err.Error(), "kustomization.yaml: resources[0]: refused by check") {
		t.Errorf("refused resource: %v", err)
	}
	if hits.Load() != 0 {
		t.Fatal("refused, yet fetched")
	}
	out, err := RenderKustomizeDir(dir, func(string) error { return nil })
	if err != nil || !strings.Contains(string(out), "fetched") || hits.Load() != 1 {
		t.Errorf("allowed: %s, %v, %d requests", out, err, hits.Load())
	}
}
