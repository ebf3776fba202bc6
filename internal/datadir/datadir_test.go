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
