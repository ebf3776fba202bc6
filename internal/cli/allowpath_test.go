package cli

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// TestS7AllowPathFlag: validate, compile and apply refuse a local reference
// outside the config tree (exit 1, located, nothing read is echoed), and
// --allow-path lets it through.
func TestS7AllowPathFlag(t *testing.T) {
	t.Parallel()
	top := t.TempDir()
	files := map[string]string{
		"outside/kubeconfig.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: leak}\ndata: {token: KUBETOKEN-5c3e}\n",
		"tree/app.pvn.yaml":       "application:\n  name: kapp\n  releaseChannels:\n    - name: staging\n      runtimes: [{runtime: rt}]\n",
		"tree/rt.pvn.yaml":        "runtime: {name: rt, fake: {}}\n",
		"tree/svc/k.pvn.yaml":     "service: {name: k, application: kapp, kubernetesConfig: {type: KUBERNETES, local: {path: ../../outside/kubeconfig.yaml}}}\n",
	}
	for name, content := range files {
		p := filepath.Join(top, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tree := filepath.Join(top, "tree") + "/..."
	outside := filepath.Join(top, "outside")
	for _, verb := range [][]string{
		{"validate", tree},
		{"compile", tree, "-o", "json"},
		{"apply", tree, "--server", noServer},
	} {
		code, stdout, stderr := runMain(verb...)
		want := filepath.Join(top, "tree", "svc", "k.pvn.yaml") + ":1:83: service.kubernetesConfig.local: path ../../outside/kubeconfig.yaml resolves outside the config tree"
		if code != exitError || !strings.Contains(stderr, want) || !strings.Contains(stderr, "(pass --allow-path to allow it)") {
			t.Errorf("%v: exit %d, want 1 with %q\nstderr:\n%s", verb, code, want, stderr)
		}
		if strings.Contains(stdout+stderr, "KUBETOKEN") {
			t.Errorf("%v echoes the outside file:\n%s%s", verb, stdout, stderr)
		}
	}
	if code, stdout, stderr := runMain("validate", tree, "--allow-path", outside); code != exitOK {
		t.Errorf("validate --allow-path: exit %d\n%s%s", code, stdout, stderr)
	}
	if code, stdout, stderr := runMain("compile", tree, "--allow-path", outside, "-o", "json"); code != exitOK || !strings.Contains(stdout, "leak") {
		t.Errorf("compile --allow-path: exit %d\n%s%s", code, stdout, stderr)
	}
}

// TestS7KustomizeReadsConfined: what kustomize reads for a KUSTOMIZE
// local.path (a base elsewhere on disk) is confined like local.path itself,
// and --allow-path lets it through.
func TestS7KustomizeReadsConfined(t *testing.T) {
	t.Parallel()
	top := t.TempDir()
	files := map[string]string{
		"outside/base/kustomization.yaml":     "resources: [cm.yaml]\n",
		"outside/base/cm.yaml":                "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: leak}\ndata: {token: KUBETOKEN-5c3e}\n",
		"tree/app.pvn.yaml":                   "application:\n  name: kapp\n  releaseChannels:\n    - name: staging\n      runtimes: [{runtime: rt}]\n",
		"tree/rt.pvn.yaml":                    "runtime: {name: rt, fake: {}}\n",
		"tree/svc/k.pvn.yaml":                 "service: {name: k, application: kapp, kubernetesConfig: {type: KUSTOMIZE, local: {path: overlay}}}\n",
		"tree/svc/overlay/kustomization.yaml": "resources: [../../../outside/base]\n",
	}
	for name, content := range files {
		p := filepath.Join(top, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tree := filepath.Join(top, "tree") + "/..."
	code, stdout, stderr := runMain("validate", tree)
	if code != exitError || !strings.Contains(stderr, "resolves outside the config tree") || strings.Contains(stdout+stderr, "KUBETOKEN") {
		t.Errorf("validate: exit %d, want 1 with resolves outside\n%s%s", code, stdout, stderr)
	}
	if code, stdout, stderr := runMain("validate", tree, "--allow-path", filepath.Join(top, "outside")); code != exitOK {
		t.Errorf("validate --allow-path: exit %d\n%s%s", code, stdout, stderr)
	}
}

// s17Tree writes a config tree whose service is a KUSTOMIZE local.path
// overlay with the given kustomization (and a local cm.yaml beside it),
// and returns its DIR/... argument.
func s17Tree(t *testing.T, kustomization string, extra map[string]string) string {
	t.Helper()
	top := t.TempDir()
	files := map[string]string{
		"tree/app.pvn.yaml":                   "application:\n  name: kz\n  releaseChannels:\n    - name: staging\n      runtimes: [{runtime: rt}]\n",
		"tree/rt.pvn.yaml":                    "runtime: {name: rt, fake: {}}\n",
		"tree/svc/k.pvn.yaml":                 "service: {name: k, application: kz, kubernetesConfig: {type: KUSTOMIZE, local: {path: overlay}}}\n",
		"tree/svc/overlay/kustomization.yaml": kustomization,
		"tree/svc/overlay/cm.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: local}\ndata: {a: b}\n",
	}
	for name, content := range extra {
		files["tree/svc/overlay/"+name] = content
	}
	for name, content := range files {
		p := filepath.Join(top, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(top, "tree") + "/..."
}

// s17Server is a web server on 127.0.0.1 that answers a ConfigMap and
// counts the requests it gets.
func s17Server(t *testing.T) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		_, _ = w.Write([]byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: fetched-from-url}\ndata: {from: " + r.URL.Path + "}\n"))
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

// TestS17KustomizeRemoteResourceRefused: the tour's repro. A kustomization
// listing a URL among its resources makes validate, compile and apply fail
// (exit 1) naming the kustomization file, the field and the resource,
// without a request to the URL; --allow-path with the URL, or a prefix of
// it, lets it through and the fetched object is compiled in.
func TestS17KustomizeRemoteResourceRefused(t *testing.T) {
	t.Parallel()
	srv, hits := s17Server(t)
	tree := s17Tree(t, "resources: [cm.yaml, \""+srv.URL+"/cm\"]\n", nil)
	kfile := filepath.Join(strings.TrimSuffix(tree, "/..."), "svc", "overlay", "kustomization.yaml")
	for _, verb := range [][]string{
		{"validate", tree},
		{"compile", tree, "-o", "json"},
		{"apply", tree, "--server", noServer},
		{"validate", tree, "--allow-path", srv.URL + "/other"},
		{"validate", tree, "--allow-path", srv.URL + "/c"},
		{"validate", tree, "--allow-path", "http://127.0.0.1/"},
	} {
		code, stdout, stderr := runMain(verb...)
		want := kfile + ": resources[1]: remote resource \"" + srv.URL + "/cm\" is refused: kustomize would fetch it from the network (pass --allow-path " + srv.URL + "/cm, or a prefix of it, to allow it"
		if code != exitError || !strings.Contains(stderr, want) {
			t.Errorf("%v: exit %d, want 1 with %q\nstdout:\n%s\nstderr:\n%s", verb, code, want, stdout, stderr)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the URL got %d requests while refused", n)
	}
	for _, allow := range []string{srv.URL + "/cm", srv.URL, srv.URL + "/", strings.ToUpper("http") + strings.TrimPrefix(srv.URL, "http")} {
		if code, stdout, stderr := runMain("validate", tree, "--allow-path", allow); code != exitOK {
			t.Errorf("validate --allow-path %s: exit %d\n%s%s", allow, code, stdout, stderr)
		}
	}
	code, stdout, stderr := runMain("compile", tree, "--allow-path", srv.URL+"/", "-o", "json")
	if code != exitOK || !strings.Contains(stdout, "fetched-from-url") || !strings.Contains(stdout, "local") {
		t.Errorf("compile --allow-path: exit %d, want both ConfigMaps\n%s%s", code, stdout, stderr)
	}
	if hits.Load() == 0 {
		t.Error("allowed, the URL got no request")
	}
}

// TestS17KustomizeRemoteElsewhereRefused: remote references kustomize
// would follow elsewhere than in resources (a git base, a patch, a
// generator's file, a transformer config's path, in a local base) are
// refused the same way, before any request.
func TestS17KustomizeRemoteElsewhereRefused(t *testing.T) {
	t.Parallel()
	srv, hits := s17Server(t)
	cases := []struct {
		name, kustomization string
		extra               map[string]string
		want                string
	}{
		{"git base", "resources: [cm.yaml, \"git::" + srv.URL + "/repo.git//base\"]\n", nil,
			`resources[1]: remote resource "git::` + srv.URL + `/repo.git//base" is refused`},
		{"patch", "resources: [cm.yaml]\npatches:\n- path: " + srv.URL + "/patch.yaml\n", nil,
			`patches[0].path: remote resource "` + srv.URL + `/patch.yaml" is refused`},
		{"generator file", "configMapGenerator:\n- name: g\n  files: [k=" + srv.URL + "/f]\n", nil,
			`configMapGenerator[0].files[0]: remote resource "` + srv.URL + `/f" is refused`},
		{"transformer config", "resources: [cm.yaml]\ntransformers: [t.yaml]\n",
			map[string]string{"t.yaml": "apiVersion: builtin\nkind: PatchTransformer\nmetadata: {name: p}\npath: " + srv.URL + "/p\ntarget: {kind: ConfigMap}\n"},
			`t.yaml: path: remote resource "` + srv.URL + `/p" is refused`},
		{"in a local base", "resources: [base]\n",
			map[string]string{"base/kustomization.yaml": "resources: [\"" + srv.URL + "/b\"]\n"},
			`base/kustomization.yaml: resources[0]: remote resource "` + srv.URL + `/b" is refused`},
	}
	for _, c := range cases {
		tree := s17Tree(t, c.kustomization, c.extra)
		if code, stdout, stderr := runMain("validate", tree); code != exitError || !strings.Contains(stderr, c.want) {
			t.Errorf("%s: exit %d, want 1 with %q\n%s%s", c.name, code, c.want, stdout, stderr)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the URL got %d requests while refused", n)
	}
	if code, _, stderr := runMain("validate", s17Tree(t, "resources: []\n", nil), "--allow-path", "https://"); code != exitError || !strings.Contains(stderr, "--allow-path https://: a remote reference must name its host") {
		t.Errorf("--allow-path https://: exit %d\n%s", code, stderr)
	}
}
