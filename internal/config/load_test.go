package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// writeTree writes files (slash-separated paths relative to dir) and returns dir.
func writeTree(t *testing.T, dir string, files map[string]string) string {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// rel makes paths relative to dir with slashes, for comparing.
func rel(t *testing.T, dir string, paths []string) []string {
	t.Helper()
	out := make([]string, len(paths))
	for i, p := range paths {
		r, err := filepath.Rel(dir, p)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = filepath.ToSlash(r)
	}
	return out
}

const (
	minimalApp = "application:\n  name: shop\n"
	minimalRT  = "runtime:\n  name: k8s\n"
)

func TestIsConfigFile(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]bool{
		"app.pvn.yaml": true, "app.pvn.yml": true, "a/b/app.pvn.yaml": true,
		"app.yaml": false, "app.pvn.yaml.bak": false, "pvn.yaml": false, "app.pvn.json": false,
	} {
		if got := IsConfigFile(name); got != want {
			t.Errorf("IsConfigFile(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestDiscover(t *testing.T) {
	t.Parallel()
	dir := writeTree(t, t.TempDir(), map[string]string{
		"b.pvn.yaml":              minimalApp,
		"a.pvn.yml":               minimalRT,
		"deploy.yaml":             "kind: Deployment\n",
		"notes.txt":               "x",
		"sub/c.pvn.yaml":          minimalRT,
		"sub/deeper/d.pvn.yaml":   minimalRT,
		"sub/.hidden/e.pvn.yaml":  minimalRT,
		".git/f.pvn.yaml":         minimalRT,
		"dir.pvn.yaml/g.pvn.yaml": minimalRT, // a directory with a config-like name
	})
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"file", []string{"sub/c.pvn.yaml"}, []string{"sub/c.pvn.yaml"}},
		{"any file named explicitly", []string{"deploy.yaml"}, []string{"deploy.yaml"}},
		{"directory is one level", []string{"."}, []string{"a.pvn.yml", "b.pvn.yaml"}},
		{"subdirectory", []string{"sub"}, []string{"sub/c.pvn.yaml"}},
		{"recursive", []string{"..."}, []string{"a.pvn.yml", "b.pvn.yaml", "dir.pvn.yaml/g.pvn.yaml", "sub/c.pvn.yaml", "sub/deeper/d.pvn.yaml"}},
		{"recursive subdirectory", []string{"sub/..."}, []string{"sub/c.pvn.yaml", "sub/deeper/d.pvn.yaml"}},
		{"recursive into a dot directory named explicitly", []string{"sub/.hidden/..."}, []string{"sub/.hidden/e.pvn.yaml"}},
		{"order of arguments is kept, duplicates dropped", []string{"sub/...", ".", "sub/c.pvn.yaml", "sub/./c.pvn.yaml"}, []string{"sub/c.pvn.yaml", "sub/deeper/d.pvn.yaml", "a.pvn.yml", "b.pvn.yaml"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			args := make([]string, len(tt.args))
			for i, a := range tt.args {
				args[i] = dir + "/" + a // not filepath.Join, which would clean the paths
			}
			got, err := Discover(args)
			if err != nil {
				t.Fatalf("Discover: %v", err)
			}
			if got := rel(t, dir, got); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Discover(%v) = %v, want %v", tt.args, got, tt.want)
			}
		})
	}
}

func TestDiscoverErrors(t *testing.T) {
	t.Parallel()
	dir := writeTree(t, t.TempDir(), map[string]string{
		"k8s/deploy.yaml":          "kind: Deployment\n",
		"k8s/.hidden/app.pvn.yaml": minimalApp,
	})
	for _, args := range [][]string{
		{filepath.Join(dir, "k8s")},
		{filepath.Join(dir, "k8s") + "/..."},
		{filepath.Join(dir, "k8s"), filepath.Join(dir, "k8s") + "/..."},
	} {
		_, err := Discover(args)
		if !errors.Is(err, ErrNoConfigs) {
			t.Errorf("Discover(%v) error = %v, want ErrNoConfigs", args, err)
		}
	}
	_, err := Discover([]string{filepath.Join(dir, "missing.pvn.yaml")})
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Discover(missing) error = %v, want not exist", err)
	}
	if _, err := Discover([]string{filepath.Join(dir, "missing") + "/..."}); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Discover(missing/...) error = %v, want not exist", err)
	}
}

// loadOne loads dir/svc.pvn.yaml and returns its service.
func loadService(t *testing.T, dir string) *Service {
	t.Helper()
	sources, err := Load([]string{filepath.Join(dir, "svc.pvn.yaml")})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return sources[0].File.Service
}

func svcWithLocal(local string) string {
	return "service:\n  name: web\n  application: shop\n  kubernetesConfig:\n    type: KUBERNETES\n    local:\n" + local
}

func TestLoadLocalPath(t *testing.T) {
	t.Parallel()
	dir := writeTree(t, t.TempDir(), map[string]string{
		"svc.pvn.yaml":           svcWithLocal("      path: k8s\n"),
		"k8s/b-service.yaml":     "kind: Service\n",
		"k8s/a-deploy.yml":       "kind: Deployment", // no trailing newline
		"k8s/other.pvn.yaml":     minimalRT,          // configs are not Kubernetes files
		"k8s/readme.md":          "# docs\n",
		"k8s/nested/ignored.yml": "kind: Secret\n",
	})
	kc := loadService(t, dir).KubernetesConfig
	if kc.Local != nil {
		t.Errorf("local = %+v, want it resolved", kc.Local)
	}
	a, b := filepath.ToSlash(filepath.Join(dir, "k8s", "a-deploy.yml")), filepath.ToSlash(filepath.Join(dir, "k8s", "b-service.yaml"))
	want := "# Source: " + a + "\nkind: Deployment\n---\n# Source: " + b + "\nkind: Service\n"
	if kc.Inlined != want {
		t.Errorf("inlined =\n%s\nwant\n%s", kc.Inlined, want)
	}
	for line, want := range map[int]struct {
		file string
		line int
	}{2: {a, 1}, 5: {b, 1}} {
		if f, l := LocateSource(kc.Inlined, line); f != want.file || l != want.line {
			t.Errorf("LocateSource(inlined, %d) = %s:%d, want %s:%d", line, f, l, want.file, want.line)
		}
	}
}

func TestLoadLocalPathFileAndPaths(t *testing.T) {
	t.Parallel()
	dir := writeTree(t, t.TempDir(), map[string]string{
		"svc.pvn.yaml":           svcWithLocal("      paths: [deploy.yaml, extra]\n"),
		"deploy.yaml":            "kind: Deployment\n",
		"extra/config.yaml":      "kind: ConfigMap\n",
		"extra/service.pvn.yaml": minimalRT,
	})
	kc := loadService(t, dir).KubernetesConfig
	want := SourceMarker(filepath.Join(dir, "deploy.yaml")) + "kind: Deployment\n---\n" +
		SourceMarker(filepath.Join(dir, "extra", "config.yaml")) + "kind: ConfigMap\n"
	if kc.Inlined != want || kc.Local != nil {
		t.Errorf("inlined =\n%s\nwant\n%s", kc.Inlined, want)
	}

	// A single file in path.
	dir = writeTree(t, t.TempDir(), map[string]string{
		"svc.pvn.yaml": svcWithLocal("      path: ./deploy.yaml\n"),
		"deploy.yaml":  "kind: Deployment\n",
	})
	if got := loadService(t, dir).KubernetesConfig.Inlined; got != SourceMarker(filepath.Join(dir, "deploy.yaml"))+"kind: Deployment\n" {
		t.Errorf("inlined = %q", got)
	}
}

func TestLoadLocalSubPath(t *testing.T) {
	t.Parallel()
	files := map[string]string{
		"base/kustomization.yaml":           "resources: [deploy.yaml]\n",
		"base/deploy.yaml":                  "kind: Deployment\n",
		"base/README.md":                    "docs\n",
		"overlays/prod/kustomization.yaml":  "resources: [../../base]\n",
		"overlays/prod/notes/todo.txt":      "x\n",
		"overlays/staging/kustomization.md": "x\n",
		".git/config":                       "[core]\n",
		"tmp/scratch.yaml":                  "x: 1\n",
	}
	tests := []struct {
		name  string
		local string
		want  []string
	}{
		{"everything but .git", "", []string{"base/README.md", "base/deploy.yaml", "base/kustomization.yaml", "overlays/prod/kustomization.yaml", "overlays/prod/notes/todo.txt", "overlays/staging/kustomization.md", "tmp/scratch.yaml"}},
		{"include by extension at any depth", "      includePatterns: ['*.yaml']\n", []string{"base/deploy.yaml", "base/kustomization.yaml", "overlays/prod/kustomization.yaml", "tmp/scratch.yaml"}},
		{"exclude a directory by name", "      excludePatterns: [tmp/, notes]\n", []string{"base/README.md", "base/deploy.yaml", "base/kustomization.yaml", "overlays/prod/kustomization.yaml", "overlays/staging/kustomization.md"}},
		{"anchored pattern", "      includePatterns: [/base]\n", []string{"base/README.md", "base/deploy.yaml", "base/kustomization.yaml"}},
		{"pattern with a slash is anchored", "      includePatterns: ['overlays/*/kustomization.*']\n", []string{"overlays/prod/kustomization.yaml", "overlays/staging/kustomization.md"}},
		{"double star", "      includePatterns: ['overlays/**/*.txt', 'base/*.md']\n", []string{"base/README.md", "overlays/prod/notes/todo.txt"}},
		{"include and exclude", "      includePatterns: ['*.yaml']\n      excludePatterns: [kustomization.yaml, '/tmp']\n", []string{"base/deploy.yaml"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fs := map[string]string{"svc.pvn.yaml": svcWithLocal("      path: k8s\n      subPath: overlays/{{.Builtins.ReleaseChannel.Name}}\n" + tt.local)}
			for k, v := range files {
				fs["k8s/"+k] = v
			}
			dir := writeTree(t, t.TempDir(), fs)
			kc := loadService(t, dir).KubernetesConfig
			if kc.Local != nil || kc.Tree == nil {
				t.Fatalf("kubernetesConfig = %+v, want local replaced by tree", kc)
			}
			if kc.Tree.Root != filepath.ToSlash(filepath.Join(dir, "k8s")) || kc.Tree.SubPath != "overlays/{{.Builtins.ReleaseChannel.Name}}" {
				t.Errorf("tree root/subPath = %q/%q", kc.Tree.Root, kc.Tree.SubPath)
			}
			var got []string
			for name, content := range kc.Tree.Files {
				got = append(got, name)
				if content != files[name] {
					t.Errorf("tree file %s = %q, want %q", name, content, files[name])
				}
			}
			sortStrings(got)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("tree files = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestLoadLocalErrors(t *testing.T) {
	t.Parallel()
	// The value of local starts on line 7, column 7 in every service below.
	tests := []struct {
		name  string
		local string
		files map[string]string
		want  string
	}{
		{"path and paths", "      path: a\n      paths: [b]\n", nil, "set only one of path and paths"},
		{"neither", "      subPath: x\n", nil, "path or paths is required"},
		{"subPath with paths", "      paths: [k8s]\n      subPath: x\n", nil, "subPath needs path (a directory), not paths"},
		{"patterns without subPath", "      path: k8s\n      excludePatterns: ['*.md']\n", nil, "includePatterns and excludePatterns apply only with subPath"},
		{"missing file", "      path: nope.yaml\n", nil, "stat DIR/nope.yaml: no such file or directory"},
		{"no Kubernetes files", "      path: k8s\n", map[string]string{"k8s/x.pvn.yaml": minimalRT, "k8s/notes.txt": ""}, "no Kubernetes configs found at DIR/k8s"},
		{"subPath on a file", "      path: k8s/a.yaml\n      subPath: x\n", map[string]string{"k8s/a.yaml": "a: 1\n"}, "DIR/k8s/a.yaml is not a directory (subPath needs a directory in path)"},
		{"bad pattern", "      path: k8s\n      subPath: x\n      includePatterns: ['[']\n", map[string]string{"k8s/a.yaml": "a: 1\n"}, `includePatterns: invalid pattern "**/["`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			files := map[string]string{"svc.pvn.yaml": svcWithLocal(tt.local)}
			for k, v := range tt.files {
				files[k] = v
			}
			dir := writeTree(t, t.TempDir(), files)
			cfg := filepath.Join(dir, "svc.pvn.yaml")
			_, err := Load([]string{cfg})
			want := cfg + ":7:7: service.kubernetesConfig.local: " + strings.ReplaceAll(tt.want, "DIR", dir)
			if err == nil || err.Error() != want {
				t.Errorf("Load error:\n%v\nwant:\n%s", err, want)
			}
		})
	}

	// inlined and local together.
	dir := writeTree(t, t.TempDir(), map[string]string{
		"svc.pvn.yaml": "service:\n  name: web\n  kubernetesConfig:\n    type: KUBERNETES\n    inlined: x\n    local: {path: k8s}\n",
	})
	cfg := filepath.Join(dir, "svc.pvn.yaml")
	_, err := Load([]string{cfg})
	if want := cfg + ":6:12: service.kubernetesConfig.local: set only one of inlined and local"; err == nil || err.Error() != want {
		t.Errorf("Load error:\n%v\nwant:\n%s", err, want)
	}
}

func TestLoadResolvesEveryKubernetesConfig(t *testing.T) {
	t.Parallel()
	dir := writeTree(t, t.TempDir(), map[string]string{
		"svc.pvn.yaml": `service:
  name: web
  application: shop
  kubernetesConfig: {type: KUBERNETES, local: {path: base.yaml}}
  perReleaseChannel:
    - releaseChannel: prod
      kubernetesConfig: {type: KUBERNETES, local: {path: prod.yaml}}
  convergenceExtensions:
    - lifecycle: DEPLOYMENT
      inlined:
        kubernetesConfig: {type: KUBERNETES, local: {path: missing.yaml}}
`,
		"base.yaml": "kind: Deployment\n",
		"prod.yaml": "kind: Deployment # prod\n",
	})
	cfg := filepath.Join(dir, "svc.pvn.yaml")
	_, err := Load([]string{cfg})
	want := cfg + ":11:53: service.convergenceExtensions[0].inlined.kubernetesConfig.local: stat " + filepath.Join(dir, "missing.yaml") + ": no such file or directory"
	if err == nil || err.Error() != want {
		t.Fatalf("Load error:\n%v\nwant:\n%s", err, want)
	}

	if err := os.WriteFile(filepath.Join(dir, "missing.yaml"), []byte("kind: Job\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	svc := loadService(t, dir)
	for name, kc := range map[string]*KubernetesConfig{
		"top level":         svc.KubernetesConfig,
		"per release":       svc.PerReleaseChannel[0].KubernetesConfig,
		"inlined extension": svc.ConvergenceExtensions[0].Inlined.KubernetesConfig,
	} {
		if kc.Local != nil || !strings.HasPrefix(kc.Inlined, "# Source: ") {
			t.Errorf("%s: %+v, want local resolved", name, kc)
		}
	}
}

// TestLoadKustomize replaces the RenderKustomize hook, so it does not run in parallel.
func TestLoadKustomize(t *testing.T) {
	saved := RenderKustomize
	t.Cleanup(func() { RenderKustomize = saved })
	var rendered []string
	RenderKustomize = func(dir string, _ func(string) error) ([]byte, error) {
		rendered = append(rendered, dir)
		if strings.HasSuffix(dir, "broken") {
			return nil, errors.New("accumulating resources: boom")
		}
		return []byte("kind: Rendered # " + filepath.Base(dir)), nil // no trailing newline
	}
	dir := writeTree(t, t.TempDir(), map[string]string{
		"svc.pvn.yaml":    "service:\n  name: web\n  kubernetesConfig:\n    type: KUSTOMIZE\n    local:\n      paths: [overlays/prod, overlays/extra]\n",
		"broken.pvn.yaml": "service:\n  name: broken\n  kubernetesConfig:\n    type: KUSTOMIZE\n    local: {path: broken}\n",
		// With subPath, kustomize runs later (per release channel), not at load.
		"tree.pvn.yaml":                   "service:\n  name: tree\n  kubernetesConfig:\n    type: KUSTOMIZE\n    local: {path: k8s, subPath: overlays/prod}\n",
		"k8s/overlays/prod/kustomization": "resources: []\n",
	})
	_, err := Load([]string{dir})
	broken := filepath.Join(dir, "broken.pvn.yaml")
	want := broken + ":5:12: service.kubernetesConfig.local: kustomize " + filepath.Join(dir, "broken") + ": accumulating resources: boom"
	if err == nil || err.Error() != want {
		t.Fatalf("Load error:\n%v\nwant:\n%s", err, want)
	}
	if err := os.Remove(broken); err != nil {
		t.Fatal(err)
	}
	rendered = nil
	sources, err := Load([]string{dir})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	wantDirs := []string{filepath.Join(dir, "overlays/prod"), filepath.Join(dir, "overlays/extra")}
	if !reflect.DeepEqual(rendered, wantDirs) {
		t.Errorf("rendered %v, want %v", rendered, wantDirs)
	}
	kc := sources[0].File.Service.KubernetesConfig
	wantText := SourceMarker(wantDirs[0]) + "kind: Rendered # prod\n---\n" + SourceMarker(wantDirs[1]) + "kind: Rendered # extra\n"
	if kc.Type != KubernetesTypeKubernetes || kc.Local != nil || kc.Inlined != wantText {
		t.Errorf("kustomize config = %+v\nwant type KUBERNETES and inlined\n%s", kc, wantText)
	}
	if tree := sources[1].File.Service.KubernetesConfig; tree.Type != KubernetesTypeKustomize || tree.Tree == nil {
		t.Errorf("subPath config = %+v, want a KUSTOMIZE tree", tree)
	}

	// A per-release-channel kubernetesConfig may leave out type: it is merged
	// over the service's, so its local directory is rendered with kustomize too.
	dir = writeTree(t, t.TempDir(), map[string]string{
		"svc.pvn.yaml": `service:
  name: web
  kubernetesConfig:
    type: KUSTOMIZE
    local: {path: overlays/staging}
  perReleaseChannel:
    - releaseChannel: prod
      kubernetesConfig:
        local: {path: overlays/prod}
    - releaseChannel: dev
      kubernetesConfig:
        type: KUBERNETES
        local: {path: dev.yaml}
`,
		"overlays/prod/kustomization.yaml": "resources: []\n",
		"dev.yaml":                         "kind: ConfigMap\n",
	})
	rendered = nil
	sources, err = Load([]string{dir})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	svc := sources[0].File.Service
	if want := []string{filepath.Join(dir, "overlays/staging"), filepath.Join(dir, "overlays/prod")}; !reflect.DeepEqual(rendered, want) {
		t.Errorf("rendered %v, want %v", rendered, want)
	}
	if kc := svc.PerReleaseChannel[0].KubernetesConfig; kc.Type != KubernetesTypeKubernetes || kc.Inlined != SourceMarker(filepath.Join(dir, "overlays/prod"))+"kind: Rendered # prod\n" {
		t.Errorf("per-channel kustomize config = %+v, want it rendered", kc)
	}
	if kc := svc.PerReleaseChannel[1].KubernetesConfig; kc.Type != KubernetesTypeKubernetes || kc.Inlined != SourceMarker(filepath.Join(dir, "dev.yaml"))+"kind: ConfigMap\n" {
		t.Errorf("per-channel KUBERNETES config = %+v", kc)
	}
}

func TestLoadReportsEveryFile(t *testing.T) {
	t.Parallel()
	dir := writeTree(t, t.TempDir(), map[string]string{
		"b.pvn.yaml": "service:\n  name: 1\n  bogus: x\n",
		"a.pvn.yaml": "application: [\n",
		"c.pvn.yaml": svcWithLocal("      path: nothing\n"),
		"d.pvn.yaml": minimalApp,
	})
	_, err := Load([]string{dir})
	l, ok := AsErrorList(err)
	if !ok {
		t.Fatalf("Load error = %v, want located errors", err)
	}
	var got []string
	for _, e := range l {
		got = append(got, filepath.Base(e.File)+":"+e.Field)
	}
	want := []string{"a.pvn.yaml:", "b.pvn.yaml:service.name", "b.pvn.yaml:service.bogus", "c.pvn.yaml:service.kubernetesConfig.local"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("errors %v, want %v\n%v", got, want, err)
	}
}

func TestLoadNoConfigs(t *testing.T) {
	t.Parallel()
	if _, err := Load([]string{t.TempDir()}); !errors.Is(err, ErrNoConfigs) {
		t.Errorf("Load(empty dir) = %v, want ErrNoConfigs", err)
	}
}

func TestLocateSource(t *testing.T) {
	t.Parallel()
	text := "# Source: k8s/a.yaml\nkind: A\nmetadata: {}\n---\n# Source: k8s/b.yaml\nkind: B\n"
	tests := []struct {
		line     int
		wantFile string
		wantLine int
	}{
		{2, "k8s/a.yaml", 1},
		{3, "k8s/a.yaml", 2},
		{6, "k8s/b.yaml", 1},
	}
	for _, tt := range tests {
		if f, l := LocateSource(text, tt.line); f != tt.wantFile || l != tt.wantLine {
			t.Errorf("LocateSource(%d) = %s:%d, want %s:%d", tt.line, f, l, tt.wantFile, tt.wantLine)
		}
	}
	if f, l := LocateSource("kind: A\nx: 1\n", 2); f != "" || l != 2 {
		t.Errorf("LocateSource without markers = %q:%d, want \"\":2", f, l)
	}
	if got := SourceMarker(filepath.Join("a", "b.yaml")); got != "# Source: a/b.yaml\n" {
		t.Errorf("SourceMarker = %q", got)
	}
}

func TestKubernetesConfigsPaths(t *testing.T) {
	t.Parallel()
	d := mustDecode(t, `runtime:
  name: ext
  custom:
    apply:
      kubernetesConfig: {type: KUBERNETES, inlined: a}
    fetch:
      kubernetesConfig: {type: KUBERNETES, inlined: b}
`)
	var got []string
	KubernetesConfigs(d.File, func(path string, kc *KubernetesConfig) {
		got = append(got, path+"="+kc.Inlined)
	})
	want := []string{"runtime.custom.apply.kubernetesConfig=a", "runtime.custom.fetch.kubernetesConfig=b"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("KubernetesConfigs = %v, want %v", got, want)
	}
}

func TestSourceKindAndName(t *testing.T) {
	t.Parallel()
	for src, want := range map[string][2]string{
		minimalApp:                                   {"application", "shop"},
		"service:\n  name: web\n":                    {"service", "web"},
		minimalRT:                                    {"runtime", "k8s"},
		"protection:\n  name: p\n":                   {"protection", "p"},
		"deliveryExtension:\n  name: d\n":            {"deliveryExtension", "d"},
		"releaseChannel:\n  name: rc\n":              {"releaseChannel", "rc"},
		"service:\n  name: web\nserviceMetadata: {}": {"service", "web"},
	} {
		s := &Source{Path: "x", Decoded: mustDecode(t, src)}
		if s.Kind() != want[0] || s.Name() != want[1] {
			t.Errorf("%q: kind/name = %s/%s, want %s/%s", src, s.Kind(), s.Name(), want[0], want[1])
		}
	}
}
