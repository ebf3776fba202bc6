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
	if err := s.read.QueryRowContext(ctx, "SELECT COUNT(compiled), SUM(LENGTH(compiled)) FROM desired_states").Scan(&copies, &total); err != nil {
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
