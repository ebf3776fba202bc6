// Package corpus checks that drover renders public Helm charts and kustomize
// trees, copied unchanged under <case>/upstream/, exactly as their own tools
// do: <case>/expected.yaml is the output of a pinned `helm template` or
// `kustomize build` (the command is in <case>/corpus.yaml; README.md says how
// to record it again).
package corpus

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/drover-dev/drover/internal/compiler"
	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/kubeobj"
	"github.com/drover-dev/drover/internal/manifest"
)

func init() {
	config.RenderKustomize = manifest.RenderKustomizeDir
	config.KustomizeLocalRefs = manifest.KustomizeLocalRefs
}

// corpusCase is <case>/corpus.yaml.
type corpusCase struct {
	Source      string   `json:"source"`
	Commit      string   `json:"commit"`
	Path        string   `json:"path"`
	Licence     string   `json:"licence"`
	Tool        string   `json:"tool"` // helm or kustomize
	Command     string   `json:"command"`
	Release     string   `json:"release"`     // helm
	Namespace   string   `json:"namespace"`   // helm
	KubeVersion string   `json:"kubeVersion"` // helm
	APIVersions []string `json:"apiVersions"` // helm
	Values      string   `json:"values"`      // helm, optional, beside corpus.yaml
	Dir         string   `json:"dir"`         // kustomize, relative to upstream/
}

// TestCorpus compiles each case with drover, as a service of one release
// channel on a Kubernetes runtime, and compares the objects with the
// upstream tool's output (as sets: drover orders objects for apply).
func TestCorpus(t *testing.T) {
	cases, err := filepath.Glob("*/corpus.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) == 0 {
		t.Fatal("no corpus cases")
	}
	for _, c := range cases {
		dir := filepath.Dir(c)
		t.Run(dir, func(t *testing.T) {
			t.Parallel()
			raw, err := os.ReadFile(c)
			if err != nil {
				t.Fatal(err)
			}
			var cc corpusCase
			if err := yaml.UnmarshalStrict(raw, &cc); err != nil {
				t.Fatalf("%s: %v", c, err)
			}
			if cc.Source == "" || cc.Commit == "" || cc.Licence == "" || cc.Command == "" {
				t.Fatalf("%s: source, commit, licence and command are required", c)
			}
			if _, err := os.Stat(filepath.Join(dir, "LICENSE")); err != nil {
				t.Fatalf("the upstream licence is missing: %v", err)
			}
			want, err := os.ReadFile(filepath.Join(dir, "expected.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			got := compile(t, dir, cc)
			t.Logf("compiled %d objects in %v", len(got), time.Since(start).Round(time.Millisecond))
			compare(t, got, want)
		})
	}
}

// compile writes the configs of a one-channel application using the case's
// upstream tree into a temporary config tree and compiles it.
func compile(t *testing.T, dir string, cc corpusCase) []any {
	t.Helper()
	tmp := t.TempDir()
	if err := os.CopyFS(filepath.Join(tmp, "upstream"), os.DirFS(filepath.Join(dir, "upstream"))); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	switch cc.Tool {
	case "helm":
		rt := map[string]any{"name": "cluster", "kubernetes": map[string]any{
			"kubeconfig": "/nonexistent", "kubeVersion": cc.KubeVersion, "apiVersions": cc.APIVersions,
		}}
		files["runtime.pvn.yaml"] = mustYAML(t, map[string]any{"runtime": rt})
		files["app.pvn.yaml"] = mustYAML(t, map[string]any{"application": map[string]any{
			"name": "corpus", "releaseChannels": []any{map[string]any{
				"name": "prod", "runtimes": []any{map[string]any{
					"runtime": "cluster", "containerOrchestration": map[string]any{"k8s": map[string]any{"namespace": cc.Namespace}},
				}},
			}},
		}})
		helm := map[string]any{"local": map[string]any{"path": "upstream"}, "releaseName": cc.Release}
		if cc.Values != "" {
			values, err := os.ReadFile(filepath.Join(dir, cc.Values))
			if err != nil {
				t.Fatal(err)
			}
			files["values.yaml"] = string(values)
			helm["valuesOverrides"] = []any{map[string]any{"local": map[string]any{"path": "values.yaml"}}}
		}
		files["service.pvn.yaml"] = mustYAML(t, map[string]any{"service": map[string]any{
			"name": "svc", "application": "corpus", "helm": helm,
		}})
	case "kustomize":
		files["runtime.pvn.yaml"] = mustYAML(t, map[string]any{"runtime": map[string]any{"name": "cluster", "fake": map[string]any{}}})
		files["app.pvn.yaml"] = mustYAML(t, map[string]any{"application": map[string]any{
			"name": "corpus", "releaseChannels": []any{map[string]any{"name": "prod", "runtimes": []any{map[string]any{"runtime": "cluster"}}}},
		}})
		// Built through a subPath: the tree travels whole and kustomize
		// runs at compile time, as for a templated subPath.
		local := map[string]any{"path": "upstream", "subPath": cc.Dir}
		if cc.Dir == "" {
			local = map[string]any{"path": "upstream"}
		}
		files["service.pvn.yaml"] = mustYAML(t, map[string]any{"service": map[string]any{
			"name": "svc", "application": "corpus",
			// Without drover's env injection: the output is kustomize's.
			"kubernetesConfig": map[string]any{"type": "KUSTOMIZE", "local": local, "literal": true, "envInjectionMode": "ENV_INJECT_DISABLED"},
		}})
	default:
		t.Fatalf("tool %q: want helm or kustomize", cc.Tool)
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(tmp, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	sources, err := config.Load([]string{tmp + "/runtime.pvn.yaml", tmp + "/app.pvn.yaml", tmp + "/service.pvn.yaml"})
	if err != nil {
		t.Fatal(err)
	}
	set, errs := config.NewSet(sources)
	if len(errs) > 0 {
		t.Fatal(errs.Err())
	}
	if errs := set.Validate(); len(errs) > 0 {
		t.Fatal(errs.Err())
	}
	in, err := compiler.InputFor(set, config.ServiceKey{Application: "corpus", Service: "svc"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := compiler.Compile(in)
	if err != nil {
		t.Fatal(err)
	}
	return res.ReleaseChannels[0].Objects
}

func mustYAML(t *testing.T, v any) string {
	t.Helper()
	b, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// compare checks that got (drover's objects) and the upstream output hold
// the same objects, each identical as JSON.
func compare(t *testing.T, got []any, upstream []byte) {
	t.Helper()
	want, err := manifest.Decode(upstream)
	if err != nil {
		t.Fatalf("expected.yaml: %v", err)
	}
	index := func(objs []map[string]any) map[string]string {
		out := make(map[string]string, len(objs))
		for _, o := range objs {
			b, err := json.Marshal(o)
			if err != nil {
				t.Fatal(err)
			}
			out[kubeobj.Key(o)] = string(b)
		}
		return out
	}
	gotObjs := make([]map[string]any, 0, len(got))
	for _, o := range got {
		m, ok := o.(map[string]any)
		if !ok {
			t.Fatalf("object of type %T", o)
		}
		gotObjs = append(gotObjs, m)
	}
	g, w := index(gotObjs), index(want)
	var diffs []string
	for _, k := range slices.Sorted(maps.Keys(w)) {
		switch gv, ok := g[k]; {
		case !ok:
			diffs = append(diffs, "missing from drover's output: "+k)
		case gv != w[k]:
			diffs = append(diffs, fmt.Sprintf("%s differs:\n  drover:   %s\n  upstream: %s", k, gv, w[k]))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(g)) {
		if _, ok := w[k]; !ok {
			diffs = append(diffs, "only in drover's output: "+k)
		}
	}
	if len(diffs) > 0 {
		t.Errorf("%d of %d objects differ from the upstream tool's output:\n%s", len(diffs), len(w), strings.Join(diffs, "\n"))
	}
}
