package datadir

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestB1SecondLockRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first, err := Acquire(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := first.SetListen("127.0.0.1:7420"); err != nil {
		t.Fatal(err)
	}
	_, err = Acquire(dir)
	var inUse *InUseError
	if !errors.As(err, &inUse) || !errors.Is(err, ErrInUse) {
		t.Fatalf("second Acquire = %v, want an *InUseError", err)
	}
	want := "data directory " + dir + " is in use by drover server PID " + strconv.Itoa(os.Getpid()) + " (listening on 127.0.0.1:7420)"
	if !strings.HasPrefix(err.Error(), want) {
		t.Errorf("error = %q, want it to start with %q", err, want)
	}
	if err := first.Release(); err != nil {
		t.Fatal(err)
	}
	again, err := Acquire(dir)
	if err != nil {
		t.Fatalf("Acquire after Release = %v", err)
	}
	if err := again.Release(); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, LockFile))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("lock file mode = %04o, want 0600", fi.Mode().Perm())
	}
}

func TestS8DataDirTightened(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	existing := filepath.Join(base, "existing")
	if err := os.Mkdir(existing, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(existing, 0o755); err != nil { // whatever the umask
		t.Fatal(err)
	}
	fresh := filepath.Join(base, "a", "fresh")
	for _, dir := range []string{existing, fresh} {
		warn, err := Prepare(dir)
		if err != nil || warn != nil {
			t.Fatalf("Prepare(%s) = %v, %v", dir, warn, err)
		}
		fi, err := os.Stat(dir)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o700 {
			t.Errorf("%s: mode %04o, want 0700", dir, fi.Mode().Perm())
		}
	}
	file := filepath.Join(base, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Prepare(file); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("Prepare(a file) = %v, want a 'not a directory' error", err)
	}
}

// A mistyped --data naming a shared directory (other files in it, or the
// sticky bit as on /tmp) is not chmod-ed: the server warns instead.
func TestS8SharedDirectoryLeftAsIs(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	shared := filepath.Join(base, "shared")
	sticky := filepath.Join(base, "sticky")
	for _, dir := range []string{shared, sticky} {
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(shared, "someone-elses.txt"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(shared, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(sticky, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	for dir, want := range map[string]os.FileMode{shared: 0o755, sticky: 0o777} {
		warn, err := Prepare(dir)
		if err != nil || warn == nil || !strings.Contains(warn.Error(), "left as is") {
			t.Errorf("Prepare(%s) = %v, %v; want a warning that it was left as is", dir, warn, err)
		}
		fi, err := os.Stat(dir)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s: mode %04o, want %04o (unchanged)", dir, fi.Mode().Perm(), want)
		}
	}
	// A directory that already holds drover's database is drover's: tightened.
	own := filepath.Join(base, "own")
	if err := os.Mkdir(own, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(own, "drover.db"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(own, 0o755); err != nil {
		t.Fatal(err)
	}
	if warn, err := Prepare(own); err != nil || warn != nil {
		t.Fatalf("Prepare(%s) = %v, %v", own, warn, err)
	}
	if fi, err := os.Stat(own); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("%s: %v, %v; want mode 0700", own, fi.Mode(), err)
	}
}
