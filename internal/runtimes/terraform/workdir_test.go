package terraform

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/runtimes"
	"github.com/drover-dev/drover/internal/runtimes/iacrun"
)

// testLimits allows modules in the temporary directory, with the default
// caps.
func testLimits(t testing.TB) iacrun.Limits {
	t.Helper()
	return moduleLimits(testSettings(t).ModuleRoots, nil)
}

// realTempDir is t.TempDir with its symbolic links resolved.
func realTempDir(t *testing.T) string {
	t.Helper()
	d, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// wantNothingCopied fails when dst holds any file.
func wantNothingCopied(t *testing.T, dst string) {
	t.Helper()
	_ = filepath.WalkDir(dst, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			t.Errorf("copied %s", p)
		}
		return nil
	})
}

// TestS15ModuleSizeCap: the tour's repro, a module beside a large file (a
// sparse 1 GiB one here), is refused with the cap's error before anything
// is copied; a module under the cap is copied by streaming, whole.
func TestS15ModuleSizeCap(t *testing.T) {
	t.Parallel()
	src, dst := realTempDir(t), filepath.Join(t.TempDir(), "module")
	write(t, filepath.Join(src, "main.tf"), `resource "terraform_data" "x" {}`)
	blob := filepath.Join(src, "blob.bin")
	write(t, blob, "")
	if err := os.Truncate(blob, 1<<30); err != nil {
		t.Fatal(err)
	}
	_, err := syncModule(src, dst, testLimits(t))
	if err == nil || !strings.Contains(err.Error(), "parameter path: module directory "+src) || !strings.Contains(err.Error(), "its files add up to more than 256 MiB") {
		t.Fatalf("1 GiB module: %v, want the size cap's error naming the path parameter and the directory", err)
	}
	wantNothingCopied(t, dst)

	// Under a smaller cap, a file that fits is copied whole and one that
	// does not is refused, also when it is the module's only file.
	lim := testLimits(t)
	lim.MaxBytes = 3 << 20
	data := bytes.Repeat([]byte("0123456789abcdef"), (2<<20+7)/16+1)[:2<<20+7]
	if err := os.WriteFile(blob, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := syncModule(src, dst, lim); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(dst, "blob.bin")); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("copied blob: %d bytes, %v; want the %d bytes of the module's", len(got), err, len(data))
	}
	lim.MaxBytes = 1 << 20
	if _, err := syncModule(src, filepath.Join(t.TempDir(), "module"), lim); err == nil || !strings.Contains(err.Error(), "more than 1 MiB") {
		t.Fatalf("module over a 1 MiB cap: %v", err)
	}
}

// TestS15ModuleEntriesCap: a module with more files and directories than
// the cap is refused before anything is copied.
func TestS15ModuleEntriesCap(t *testing.T) {
	t.Parallel()
	src, dst := realTempDir(t), filepath.Join(t.TempDir(), "module")
	for _, name := range []string{"a.tf", "b.tf", "sub/c.tf", "sub/d.tf", "sub/deeper/e.tf"} {
		write(t, filepath.Join(src, filepath.FromSlash(name)), "x")
	}
	lim := testLimits(t)
	lim.MaxEntries = 7 // five files and two directories
	if _, err := syncModule(src, dst, lim); err != nil {
		t.Fatalf("7 entries under a cap of 7: %v", err)
	}
	lim.MaxEntries = 6
	dst = filepath.Join(t.TempDir(), "module")
	if _, err := syncModule(src, dst, lim); err == nil || !strings.Contains(err.Error(), "holds more than 6 files and directories") {
		t.Fatalf("7 entries under a cap of 6: %v", err)
	}
	wantNothingCopied(t, dst)
}

// TestS15ModuleRoots: a module directory outside the roots (the file
// system's root, another directory, a link or a relative path leading out)
// is refused with an error naming the parameter, the directory and the flag.
func TestS15ModuleRoots(t *testing.T) {
	t.Parallel()
	root, other := realTempDir(t), realTempDir(t)
	write(t, filepath.Join(root, "mod", "main.tf"), "a")
	write(t, filepath.Join(other, "team-b", "main.tf"), "b")
	if err := os.Symlink(filepath.Join(other, "team-b"), filepath.Join(root, "via-link")); err != nil {
		t.Fatal(err)
	}
	lim := moduleLimits([]string{root}, nil)
	if _, err := syncModule(filepath.Join(root, "mod"), filepath.Join(t.TempDir(), "module"), lim); err != nil {
		t.Fatalf("module in the root: %v", err)
	}
	for _, src := range []string{
		"/",
		filepath.Join(other, "team-b"),
		filepath.Join(root, "via-link"),
		filepath.Join(root, "mod", "..", "..", filepath.Base(other), "team-b"),
	} {
		dst := filepath.Join(t.TempDir(), "module")
		_, err := syncModule(src, dst, lim)
		if err == nil || !strings.Contains(err.Error(), "parameter path: module directory "+src) ||
			!strings.Contains(err.Error(), "is outside the allowed module directories ("+root+")") || !strings.Contains(err.Error(), ModuleRootFlag+" DIR") {
			t.Errorf("%s: %v, want it refused as outside %s, naming %s", src, err, root, ModuleRootFlag)
		}
		wantNothingCopied(t, dst)
	}
	if _, err := syncModule(filepath.Join(root, "via-link"), t.TempDir(), lim); err == nil || !strings.Contains(err.Error(), "("+filepath.Join(other, "team-b")+" after symbolic links)") {
		t.Errorf("module through a link: %v, want the real path named", err)
	}
	none := moduleLimits(nil, nil)
	if _, err := syncModule(filepath.Join(root, "mod"), t.TempDir(), none); err == nil || !strings.Contains(err.Error(), "no module directory is (allow one with "+ModuleRootFlag) {
		t.Errorf("no roots: %v", err)
	}
}

// TestS15SymlinkOutOfRoot: a link in the module to a file or a directory
// outside the roots is refused (nothing copied); one to a directory
// elsewhere in the roots (a shared module) is followed.
func TestS15SymlinkOutOfRoot(t *testing.T) {
	t.Parallel()
	root, outside := realTempDir(t), realTempDir(t)
	mod := filepath.Join(root, "mod")
	write(t, filepath.Join(mod, "main.tf"), "a")
	write(t, filepath.Join(root, "shared", "shared.tf"), "s")
	write(t, filepath.Join(outside, "credentials"), "SECRET")
	if err := os.Symlink(filepath.Join(root, "shared"), filepath.Join(mod, "shared")); err != nil {
		t.Fatal(err)
	}
	lim := moduleLimits([]string{root}, nil)
	dst := filepath.Join(t.TempDir(), "module")
	if _, err := syncModule(mod, dst, lim); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dst, "shared", "shared.tf")); err != nil || string(b) != "s" {
		t.Fatalf("shared module in the root: %q, %v", b, err)
	}
	for name, target := range map[string]string{"creds.tf": filepath.Join(outside, "credentials"), "outdir": outside, "up": "../.."} {
		link := filepath.Join(mod, name)
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(t.TempDir(), "module")
		_, err := syncModule(mod, dst, lim)
		if err == nil || !strings.Contains(err.Error(), name+" is a symbolic link to ") || !strings.Contains(err.Error(), "outside the allowed module directories") {
			t.Errorf("link %s -> %s: %v, want it refused", name, target, err)
		}
		wantNothingCopied(t, dst)
		if err := os.Remove(link); err != nil {
			t.Fatal(err)
		}
	}
}

// TestS15DataDirectory: a module directory that holds the data directory,
// lies in it, or links into it is refused.
func TestS15DataDirectory(t *testing.T) {
	t.Parallel()
	root := realTempDir(t)
	data := filepath.Join(root, "data")
	write(t, filepath.Join(data, "secrets.key"), "KEY")
	write(t, filepath.Join(root, "main.tf"), "a")
	write(t, filepath.Join(root, "mod", "main.tf"), "a")
	lim := moduleLimits([]string{root}, []string{data})
	if _, err := syncModule(root, t.TempDir(), lim); err == nil || !strings.Contains(err.Error(), "holds the data directory "+data) {
		t.Errorf("module holding the data directory: %v", err)
	}
	if _, err := syncModule(data, t.TempDir(), lim); err == nil || !strings.Contains(err.Error(), "lies in the data directory "+data) {
		t.Errorf("module in the data directory: %v", err)
	}
	if err := os.Symlink(filepath.Join(data, "secrets.key"), filepath.Join(root, "mod", "key.tf")); err != nil {
		t.Fatal(err)
	}
	if _, err := syncModule(filepath.Join(root, "mod"), t.TempDir(), lim); err == nil || !strings.Contains(err.Error(), "key.tf is a symbolic link to "+filepath.Join(data, "secrets.key")+", which lies in the data directory") {
		t.Errorf("link into the data directory: %v", err)
	}
}

// TestS15RuntimeConfinesModules: through the runtime, a path parameter
// outside the roots it was given fails the fetch (before terraform runs)
// with an error naming the parameter and the flag; its own data directory
// is never a module.
func TestS15RuntimeConfinesModules(t *testing.T) {
	requireBinary(t)
	t.Parallel()
	root := realTempDir(t)
	write(t, filepath.Join(root, "mod", "main.tf"), versionModule)
	outside := writeModule(t, map[string]string{"main.tf": versionModule})
	dataDir := filepath.Join(root, "data")
	runner := runnerConfig(t, time.Minute, time.Minute)
	r, err := NewWith(&config.Runtime{Name: "tf", TerraformRunner: runner}, runtimes.Options{DataDir: dataDir}, Settings{ModuleRoots: []string{root}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	for _, path := range []string{outside, "/", dataDir} {
		_, err := r.Fetch(t.Context(), target(t, key("net", "staging"), "v1", path, runner, nil))
		if err == nil || !strings.Contains(err.Error(), "parameter path: module directory "+path) {
			t.Errorf("path %s: %v, want it refused", path, err)
		}
	}
	if _, err := r.Fetch(t.Context(), target(t, key("net", "staging"), "v1", outside, runner, nil)); err == nil || !strings.Contains(err.Error(), ModuleRootFlag) {
		t.Errorf("error does not name %s: %v", ModuleRootFlag, err)
	}
	if _, err := NewWith(&config.Runtime{Name: "tf", TerraformRunner: runner}, runtimes.Options{DataDir: t.TempDir()}, Settings{ModuleRoots: []string{filepath.Join(root, "missing")}}); err == nil || !strings.Contains(err.Error(), ModuleRootFlag+" "+filepath.Join(root, "missing")) {
		t.Errorf("missing root: %v", err)
	}
}

// TestS15DefaultModuleRoots: without configured roots, the working
// directory is the root, unless it is the file system's root.
func TestS15DefaultModuleRoots(t *testing.T) {
	dir := realTempDir(t)
	t.Chdir(dir)
	if roots, err := DefaultModuleRoots(); err != nil || len(roots) != 1 || roots[0] != dir {
		t.Errorf("in %s: roots %q, %v", dir, roots, err)
	}
	t.Chdir("/")
	if roots, err := DefaultModuleRoots(); err != nil || len(roots) != 0 {
		t.Errorf("in /: roots %q, %v; want none", roots, err)
	}
}

// TestRelativeDataDir: a data directory given relative to the working
// directory (drover server --data ./data) holds absolute working
// directories (terraform, run in module/, is given the plan's path), and
// is still never a module.
func TestRelativeDataDir(t *testing.T) {
	requireBinary(t)
	dir := realTempDir(t)
	t.Chdir(dir)
	r, err := NewWith(&config.Runtime{Name: "tf", TerraformRunner: &config.TerraformRunner{}}, runtimes.Options{DataDir: "data"}, Settings{ModuleRoots: []string{dir}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	if want := filepath.Join(dir, "data", "terraform", "tf"); r.Root != want {
		t.Errorf("root %s, want %s", r.Root, want)
	}
	if len(r.modules.Exclude) != 1 || r.modules.Exclude[0] != filepath.Join(dir, "data") {
		t.Errorf("excluded %q, want the data directory", r.modules.Exclude)
	}
}
