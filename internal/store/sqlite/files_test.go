package sqlite

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestS8DatabaseFilesPrivate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "drover.db")
	s, err := Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	if err := pushOne(t.Context(), s, "ds-1", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		for _, p := range []string{path, path + "-wal", path + "-shm", path + MarkerSuffix} {
			fi, err := os.Stat(p)
			if err != nil {
				t.Fatalf("%s: %v", when, err)
			}
			if fi.Mode().Perm() != 0o600 {
				t.Errorf("%s: %s has mode %04o, want 0600", when, filepath.Base(p), fi.Mode().Perm())
			}
		}
	}
	check("created")
	// Files left world-readable by an older version are tightened at open.
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if err := os.Chmod(p, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s2, err := Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	check("reopened")
	s2.Close()
	s.Close()
}

func TestB23DiskFullExplained(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// A real SQLITE_FULL: a database that may not grow.
	s, _ := openTemp(t)
	defer s.Close()
	ctx := t.Context()
	if _, err := s.write.ExecContext(ctx, "PRAGMA max_page_count = 1"); err != nil {
		t.Fatal(err)
	}
	sqliteFull := pushOne(ctx, s, "ds-1", []byte(`"`+strings.Repeat("x", 64<<10)+`"`))
	if sqliteFull == nil {
		t.Fatal("a write beyond max_page_count succeeded")
	}
	for _, tc := range []struct {
		name string
		err  error
		full bool
	}{
		{"enospc", fmt.Errorf("write: %w", syscall.ENOSPC), true},
		{"sqlite full", sqliteFull, true},
		{"other", errors.New("file is not a database (26)"), false},
	} {
		got := explainDiskFull(dir, tc.err)
		if isFull := strings.Contains(got.Error(), "no space left on device on "+dir); isFull != tc.full {
			t.Errorf("%s: explainDiskFull = %v, want full=%v", tc.name, got, tc.full)
		}
		if !errors.Is(got, tc.err) {
			t.Errorf("%s: the cause is not wrapped: %v", tc.name, got)
		}
	}
}

func TestB10IdenticalPushStoresOneCopy(t *testing.T) {
	t.Parallel()
	s, _ := openTemp(t)
	defer s.Close()
	ctx := t.Context()
	compiled := []byte(`{"pad": "` + strings.Repeat("x", 1<<20) + `"}`)
	for _, id := range []string{"ds-1", "ds-2", "ds-3"} {
		if err := pushOne(ctx, s, id, compiled); err != nil {
			t.Fatal(err)
		}
	}
	var copies, total int64
	if err := s.read.QueryRowContext(ctx, "SELECT COUNT(compiled), SUM(LENGTH(compiled)) FROM desired_state_compiled").Scan(&copies, &total); err != nil {
		t.Fatal(err)
	}
	if copies != 1 || total != int64(len(compiled)) {
		t.Errorf("three identical pushes stored %d copies (%d bytes), want 1", copies, total)
	}
	for _, id := range []string{"ds-1", "ds-2", "ds-3"} {
		got, err := s.GetDesiredState(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if string(got.Compiled) != string(compiled) {
			t.Errorf("%s: compiled copy of %d bytes, want the pushed %d", id, len(got.Compiled), len(compiled))
		}
	}
	// A different push stores its own copy.
	if err := pushOne(ctx, s, "ds-4", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetDesiredState(ctx, "ds-4")
	if err != nil || string(got.Compiled) != `{}` {
		t.Fatalf("active = %s %q, %v", got.ID, got.Compiled, err)
	}
}

// TestPruneDeletesCopies checks that retention deletes the compiled copies
// it prunes (not only hides them), and that a copy another row shares
// stays until that row is pruned too.
func TestPruneDeletesCopies(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "drover.db")
	s, err := Open(t.Context(), path, KeepSuperseded(1))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := t.Context()
	copies := func() int {
		t.Helper()
		var n int
		if err := s.read.QueryRowContext(ctx, "SELECT count(*) FROM desired_state_compiled").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	// ds-1 and ds-2 share a copy; ds-3, ds-4 and ds-5 have their own.
	for _, p := range []struct{ id, body string }{{"ds-1", `{"a":1}`}, {"ds-2", `{"a":1}`}, {"ds-3", `{"b":1}`}, {"ds-4", `{"c":1}`}} {
		if err := pushOne(ctx, s, p.id, []byte(p.body)); err != nil {
			t.Fatal(err)
		}
	}
	// Active ds-4, kept ds-3; ds-1 and ds-2 pruned, with their one copy.
	if n := copies(); n != 2 {
		t.Errorf("after 4 pushes keeping 1 superseded: %d copies stored, want 2", n)
	}
	if err := pushOne(ctx, s, "ds-5", []byte(`{"d":1}`)); err != nil {
		t.Fatal(err)
	}
	if n := copies(); n != 2 {
		t.Errorf("after 5 pushes keeping 1 superseded: %d copies stored, want 2", n)
	}
	for id, want := range map[string]string{"ds-1": "", "ds-2": "", "ds-3": "", "ds-4": `{"c":1}`, "ds-5": `{"d":1}`} {
		got, err := s.GetDesiredState(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if string(got.Compiled) != want || (want == "") != !got.PrunedAt.IsZero() {
			t.Errorf("%s: compiled %q pruned at %v, want %q", id, got.Compiled, got.PrunedAt, want)
		}
	}
}
