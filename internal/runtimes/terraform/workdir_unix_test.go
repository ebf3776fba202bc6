//go:build unix

package terraform

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestS15SpecialFiles: a FIFO in a module (or a link to a device) is
// refused, without blocking on it, and nothing is copied.
func TestS15SpecialFiles(t *testing.T) {
	t.Parallel()
	src := realTempDir(t)
	write(t, filepath.Join(src, "main.tf"), "a")
	if err := unix.Mkfifo(filepath.Join(src, "pipe.tf"), 0o600); err != nil {
		t.Fatal(err)
	}
	lim := testLimits(t)
	dst := filepath.Join(t.TempDir(), "module")
	if _, err := syncModule(src, dst, lim); err == nil || !strings.Contains(err.Error(), "pipe.tf is a FIFO: only regular files, directories and symbolic links to them can be copied") {
		t.Fatalf("FIFO: %v", err)
	}
	wantNothingCopied(t, dst)
	if err := os.Remove(filepath.Join(src, "pipe.tf")); err != nil {
		t.Fatal(err)
	}
	lim.Roots = append(lim.Roots, "/dev")
	if err := os.Symlink("/dev/zero", filepath.Join(src, "zero.tf")); err != nil {
		t.Fatal(err)
	}
	if _, err := syncModule(src, dst, lim); err == nil || !strings.Contains(err.Error(), "zero.tf is a device") {
		t.Fatalf("link to /dev/zero: %v", err)
	}
	wantNothingCopied(t, dst)
}
