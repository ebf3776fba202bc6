package cli

import (
	"os"
	"path/filepath"
	"strings"
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
