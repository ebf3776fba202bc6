package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// loadErr loads args and returns the error text ("" when it loaded).
func loadErr(t *testing.T, opts LoadOptions, args ...string) string {
	t.Helper()
	_, err := LoadWith(args, opts)
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestS7LocalPathOutsideTreeRefused: local references that resolve outside
// the config tree (by .., by a symlink, in a file, a directory, paths, a
// subPath tree, a Helm chart or values file) are refused with the file, line
// and field, and nothing of the outside file is echoed.
func TestS7LocalPathOutsideTreeRefused(t *testing.T) {
	t.Parallel()
	top := t.TempDir()
	writeTree(t, top, map[string]string{
		"secret/kubeconfig.yaml":  "kind: Config\ntoken: KUBETOKEN-5c3e\n",
		"secret/chart/Chart.yaml": "name: c\n",
	})
	outside := filepath.Join(top, "secret")
	tests := []struct {
		name  string
		local string
		links map[string]string // link name in the tree -> target
		want  string
	}{
		{"dot dot file", "      path: ../secret/kubeconfig.yaml\n", nil, "path ../secret/kubeconfig.yaml resolves outside the config tree TREE (pass --allow-path to allow it)"},
		{"deep dot dot", "      path: ../../../../../../../../" + strings.TrimPrefix(filepath.ToSlash(outside), "/") + "/kubeconfig.yaml\n", nil, "resolves outside the config tree TREE"},
		{"dot dot directory", "      path: ../secret\n", nil, "path ../secret resolves outside the config tree TREE"},
		{"in paths", "      paths: [ok.yaml, ../secret/kubeconfig.yaml]\n", nil, "path ../secret/kubeconfig.yaml resolves outside"},
		{"subPath tree", "      path: ../secret\n      subPath: x\n", nil, "path ../secret resolves outside"},
		{"symlinked file", "      path: link.yaml\n", map[string]string{"link.yaml": filepath.Join(outside, "kubeconfig.yaml")}, "path link.yaml (" + filepath.Join(outside, "kubeconfig.yaml") + ") resolves outside"},
		{"symlink inside a directory", "      path: k8s\n", map[string]string{"k8s/x.yaml": filepath.Join(outside, "kubeconfig.yaml")}, "k8s/x.yaml (" + filepath.Join(outside, "kubeconfig.yaml") + ") resolves outside"},
		{"symlink inside a subPath tree", "      path: k8s\n      subPath: x\n", map[string]string{"k8s/x.yaml": filepath.Join(outside, "kubeconfig.yaml")}, "resolves outside"},
		{"a path too long to echo", "      path: " + strings.Repeat("a/", 3000) + "x.yaml\n", nil, "path is 6006 bytes long: at most 4096 are allowed"},
		{"symlinked directory inside a subPath tree", "      path: k8s\n      subPath: x\n", map[string]string{"k8s/sub": outside}, "k8s/sub (" + outside + ") resolves outside"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tree, err := os.MkdirTemp(top, "tree")
			if err != nil {
				t.Fatal(err)
			}
			dir := writeTree(t, tree, map[string]string{"svc.pvn.yaml": svcWithLocal(tt.local), "ok.yaml": "kind: A\n", "k8s/a.yaml": "kind: B\n"})
			for name, target := range tt.links {
				if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
					t.Fatal(err)
				}
			}
			cfg := filepath.Join(dir, "svc.pvn.yaml")
			got := loadErr(t, LoadOptions{}, cfg)
			root, err := filepath.EvalSymlinks(dir)
			if err != nil {
				t.Fatal(err)
			}
			want := strings.ReplaceAll(tt.want, "TREE", root)
			if !strings.HasPrefix(got, cfg+":7:7: service.kubernetesConfig.local: ") || !strings.Contains(got, want) {
				t.Errorf("Load error:\n%s\nwant it located at %s:7:7 and to contain:\n%s", got, cfg, want)
			}
			if strings.Contains(got, "KUBETOKEN") {
				t.Errorf("the error echoes the outside file: %s", got)
			}
			// --allow-path lets the same reference through.
			if got := loadErr(t, LoadOptions{AllowPaths: []string{outside}}, cfg); strings.Contains(got, "resolves outside") {
				t.Errorf("with --allow-path %s: %s", outside, got)
			}
		})
	}

	// Helm: a chart directory and a values file outside the tree.
	dir := writeTree(t, t.TempDir(), map[string]string{
		"chart.pvn.yaml":   "service:\n  name: web\n  application: shop\n  helm:\n    local: {path: ../secret/chart}\n",
		"values.pvn.yaml":  "service:\n  name: api\n  application: shop\n  helm:\n    local: {path: chart}\n    valuesOverrides:\n      - local: {path: ../secret/kubeconfig.yaml}\n",
		"chart/Chart.yaml": "name: c\n",
	})
	if err := os.Rename(dir, filepath.Join(top, "tree")); err != nil {
		t.Fatal(err)
	}
	dir = filepath.Join(top, "tree")
	got := loadErr(t, LoadOptions{}, dir)
	for _, want := range []string{
		filepath.Join(dir, "chart.pvn.yaml") + ":5:12: service.helm.local: path ../secret/chart resolves outside the config tree",
		filepath.Join(dir, "values.pvn.yaml") + ":7:16: service.helm.valuesOverrides[0].local: path ../secret/kubeconfig.yaml resolves outside the config tree",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("Load error:\n%s\nwant a line with:\n%s", got, want)
		}
	}
	if got := loadErr(t, LoadOptions{AllowPaths: []string{outside}}, dir); got != "" {
		t.Errorf("with --allow-path: %s", got)
	}
	if got := loadErr(t, LoadOptions{AllowPaths: []string{filepath.Join(top, "nope")}}, dir); !strings.Contains(got, "--allow-path "+filepath.Join(top, "nope")+": ") {
		t.Errorf("a missing --allow-path directory: %q", got)
	}
}

// TestS7ConfigTreeIsTheGitRepository: inside a git repository the tree is the
// repository, so configs may reference manifests elsewhere in it; the
// directory given is the tree otherwise. DIR, DIR/... and a file agree.
func TestS7ConfigTreeIsTheGitRepository(t *testing.T) {
	t.Parallel()
	for _, repo := range []bool{true, false} {
		top := writeTree(t, t.TempDir(), map[string]string{
			"deploy/pvn/svc.pvn.yaml": svcWithLocal("      path: ../../k8s/web.yaml\n"),
			"k8s/web.yaml":            "kind: Deployment\n",
		})
		if repo {
			if err := os.Mkdir(filepath.Join(top, ".git"), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		cfgDir := filepath.Join(top, "deploy", "pvn")
		for _, arg := range []string{cfgDir, cfgDir + "/...", filepath.Join(cfgDir, "svc.pvn.yaml")} {
			got := loadErr(t, LoadOptions{}, arg)
			if refused := strings.Contains(got, "resolves outside the config tree"); refused == repo {
				t.Errorf("repository %v, load %s: %q", repo, arg, got)
			}
		}
	}
}

// TestB21AbsoluteLocalPathNotRebased: an absolute local.path is read as it is
// when it lies in the tree, refused (saying it is absolute) when it does not,
// and never looked up under the config directory.
func TestB21AbsoluteLocalPathNotRebased(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	inside := filepath.Join(dir, "in", "k8s", "web.yaml")
	writeTree(t, dir, map[string]string{
		"in/k8s/web.yaml":   "kind: Deployment\n",
		"in/svc.pvn.yaml":   svcWithLocal("      path: " + inside + "\n"),
		"out/svc.pvn.yaml":  svcWithLocal("      path: /etc/hostname\n"),
		"out/etc/hostname":  "kind: REBASED-MARK\n",
		"miss/svc.pvn.yaml": svcWithLocal("      path: " + filepath.Join(dir, "miss", "nope.yaml") + "\n"),
	})
	sources, err := Load([]string{dir + "/in/..."})
	if err != nil {
		t.Fatalf("an absolute path inside the tree: %v", err)
	}
	if kc := sources[0].File.Service.KubernetesConfig; kc.Inlined != SourceMarker(inside)+"kind: Deployment\n" {
		t.Errorf("inlined = %q", kc.Inlined)
	}
	got := loadErr(t, LoadOptions{}, dir+"/out/...")
	if !strings.Contains(got, "service.kubernetesConfig.local: absolute path /etc/hostname") || !strings.Contains(got, "resolves outside the config tree") || strings.Contains(got, "REBASED-MARK") {
		t.Errorf("an absolute path outside the tree: %s", got)
	}
	got = loadErr(t, LoadOptions{}, dir+"/miss/...")
	if want := "stat " + filepath.Join(dir, "miss", "nope.yaml") + ": no such file or directory"; !strings.Contains(got, want) {
		t.Errorf("a missing absolute path: %s\nwant %s", got, want)
	}
}

// TestB8DeviceFIFOAndSocketRefused: only regular files are read; a FIFO is
// refused at once instead of hanging, a device instead of reading forever,
// and a file larger than the cap is refused.
func TestB8DeviceFIFOAndSocketRefused(t *testing.T) {
	t.Parallel()
	if runtime.GOOS == "windows" {
		t.Skip("no FIFOs")
	}
	dir := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(dir, "pipe.yaml"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/dev/zero", filepath.Join(dir, "zero.yaml")); err != nil {
		t.Fatal(err)
	}
	big, err := os.Create(filepath.Join(dir, "big.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := big.Truncate(maxFileBytes + 1); err != nil {
		t.Fatal(err)
	}
	_ = big.Close()
	writeTree(t, dir, map[string]string{
		"fifo.pvn.yaml":     svcWithLocal("      path: pipe.yaml\n"),
		"dev.pvn.yaml":      svcWithLocal("      path: /dev/zero\n"),
		"devlink.pvn.yaml":  svcWithLocal("      path: zero.yaml\n"),
		"big.pvn.yaml":      svcWithLocal("      path: big.yaml\n"),
		"fifodir.pvn.yaml":  svcWithLocal("      path: fifos\n"),
		"fifotree.pvn.yaml": svcWithLocal("      path: fifos\n      subPath: x\n"),
		"values.pvn.yaml":   "service:\n  name: api\n  application: shop\n  helm:\n    valuesOverrides:\n      - local: {path: pipe.yaml}\n",
	})
	if err := os.Mkdir(filepath.Join(dir, "fifos"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifos", "p.yaml"), 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan string, 1)
	go func() {
		_, err := LoadWith([]string{dir}, LoadOptions{AllowPaths: []string{"/dev"}})
		if err == nil {
			done <- ""
			return
		}
		done <- err.Error()
	}()
	var got string
	select {
	case got = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Load hangs on a FIFO")
	}
	for file, want := range map[string]string{
		"fifo.pvn.yaml":     filepath.Join(dir, "pipe.yaml") + " is a FIFO, not a regular file: only regular files can be referenced",
		"dev.pvn.yaml":      "/dev/zero is a device, not a regular file",
		"devlink.pvn.yaml":  filepath.Join(dir, "zero.yaml") + " is a device",
		"big.pvn.yaml":      filepath.Join(dir, "big.yaml") + " is larger than 32 MiB",
		"fifodir.pvn.yaml":  filepath.Join(dir, "fifos", "p.yaml") + " is a FIFO",
		"fifotree.pvn.yaml": filepath.Join(dir, "fifos", "p.yaml") + " is a FIFO",
		"values.pvn.yaml":   "is a FIFO",
	} {
		prefix := filepath.Join(dir, file) + ":"
		found := false
		for _, line := range strings.Split(got, "\n") {
			if strings.HasPrefix(line, prefix) && strings.Contains(line, want) {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: want an error with %q in:\n%s", file, want, got)
		}
	}
	if _, err := readRegular(filepath.Join(dir, "pipe.yaml")); !errors.Is(err, ErrNotRegular) {
		t.Errorf("readRegular(FIFO) = %v, want ErrNotRegular", err)
	}
}

// TestB20SymlinkedDirectoryInSubPathTree: a symlink to a directory inside a
// subPath tree is followed (its files appear under the link's name); a link
// back up the tree (a loop) is skipped; neither makes the config unusable.
func TestB20SymlinkedDirectoryInSubPathTree(t *testing.T) {
	t.Parallel()
	dir := writeTree(t, t.TempDir(), map[string]string{
		"svc.pvn.yaml":               svcWithLocal("      path: tree\n      subPath: \"{{.Builtins.ReleaseChannel.Name}}\"\n"),
		"tree/staging/deploy.yaml":   "kind: Deployment\n",
		"shared/common/config.yaml":  "kind: ConfigMap\n",
		"tree/staging/nested/x.yaml": "kind: X\n",
	})
	for name, target := range map[string]string{
		"tree/up":                  "..",               // loops back above the tree
		"tree/self":                ".",                // loops to the tree itself
		"tree/prod":                "staging",          // a directory in the tree
		"tree/common":              "../shared/common", // a directory outside the tree dir, inside the config tree
		"tree/staging/nested/back": "../..",            // loops to the tree from below
	} {
		if err := os.Symlink(target, filepath.Join(dir, filepath.FromSlash(name))); err != nil {
			t.Fatal(err)
		}
	}
	// An excluded link may lead anywhere, even nowhere.
	if err := os.Symlink("/etc/hostname", filepath.Join(dir, "tree", "excluded.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("nowhere", filepath.Join(dir, "tree", "dangling.txt")); err != nil {
		t.Fatal(err)
	}
	writeTree(t, dir, map[string]string{"svc.pvn.yaml": svcWithLocal("      path: tree\n      subPath: \"{{.Builtins.ReleaseChannel.Name}}\"\n      excludePatterns: ['*.txt']\n")})
	sources, err := Load([]string{filepath.Join(dir, "svc.pvn.yaml")})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	var got []string
	for name := range sources[0].File.Service.KubernetesConfig.Tree.Files {
		got = append(got, name)
	}
	sortStrings(got)
	want := []string{"common/config.yaml", "prod/deploy.yaml", "prod/nested/x.yaml", "staging/deploy.yaml", "staging/nested/x.yaml"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("tree files = %v, want %v", got, want)
	}
}
