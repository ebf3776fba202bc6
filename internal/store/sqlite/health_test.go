package sqlite

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/store"
)

func pushOne(ctx context.Context, s *Store, id string, compiled []byte) error {
	return s.CreateDesiredState(ctx, store.DesiredState{ID: id, Application: "shop", Service: "web", Version: id, Compiled: compiled},
		store.Event{Application: "shop", Service: "web", Type: "pushed", Message: "pushed " + id})
}

func wantReplaced(t *testing.T, s *Store, what string) {
	t.Helper()
	ctx := t.Context()
	if err := pushOne(ctx, s, "ds-after", []byte(`{}`)); !errors.Is(err, ErrReplaced) {
		t.Errorf("%s: write = %v, want ErrReplaced", what, err)
	}
	err := s.Check(ctx)
	if !errors.Is(err, ErrReplaced) || !strings.Contains(err.Error(), "restart it") {
		t.Errorf("%s: Check = %v, want ErrReplaced", what, err)
	}
}

func TestB4RemovedDataDirRefusesWrites(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	s, err := Open(t.Context(), filepath.Join(dir, "drover.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := pushOne(t.Context(), s, "ds-1", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	wantReplaced(t, s, "after rm -rf of the directory")
	// A directory recreated under the same name is not the database opened.
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	wantReplaced(t, s, "after the directory was recreated")
}

func TestB4ReplacedDatabaseRefusesWrites(t *testing.T) {
	t.Parallel()
	s, path := openTemp(t)
	defer s.Close()
	if err := s.Check(t.Context()); err != nil {
		t.Fatalf("Check of a new store = %v", err)
	}
	other := path + ".other"
	if err := os.WriteFile(other, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(other, path); err != nil {
		t.Fatal(err)
	}
	wantReplaced(t, s, "after the database file was replaced")
}

func TestB22EmptyDatabaseRefused(t *testing.T) {
	t.Parallel()
	s, path := openTemp(t)
	if err := pushOne(t.Context(), s, "ds-1", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path + MarkerSuffix); err != nil {
		t.Fatalf("no marker after the first open: %v", err)
	}
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	_, err := Open(t.Context(), path)
	if !errors.Is(err, ErrMissing) || !strings.Contains(err.Error(), "is empty (0 bytes)") || !strings.Contains(err.Error(), "restore drover.db from a backup") {
		t.Fatalf("Open of a truncated database = %v, want ErrMissing with advice", err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(t.Context(), path); !errors.Is(err, ErrMissing) || !strings.Contains(err.Error(), "is missing") {
		t.Fatalf("Open of a removed database = %v, want ErrMissing", err)
	}
	// Moving the marker aside, as the message says, starts an empty server.
	if err := os.Remove(path + MarkerSuffix); err != nil {
		t.Fatal(err)
	}
	s, err = Open(t.Context(), path)
	if err != nil {
		t.Fatalf("Open after moving the marker aside = %v", err)
	}
	s.Close()
}

func TestB6CorruptedDatabaseRefused(t *testing.T) {
	t.Parallel()
	s, path := openTemp(t)
	ctx := t.Context()
	pad := strings.Repeat("x", 64<<10)
	for i := range 20 {
		if err := pushOne(ctx, s, "ds-"+strconv.Itoa(i), []byte(`{"n": `+strconv.Itoa(i)+`, "pad": "`+pad+`"}`)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil { // checkpoints the WAL into the file
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	fi, _ := f.Stat()
	junk := []byte(strings.Repeat("\xde\xad\xbe\xef", 1024))
	for _, off := range []int64{fi.Size() / 4, fi.Size() / 2, fi.Size() * 3 / 4} {
		if _, err := f.WriteAt(junk, off&^4095); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = Open(ctx, path)
	if !errors.Is(err, ErrCorrupt) && (err == nil || !strings.Contains(err.Error(), "database is corrupted")) {
		t.Fatalf("Open of a corrupted database = %v, want a corruption error", err)
	}
	if !strings.Contains(err.Error(), "restore it from a backup") {
		t.Errorf("error %q does not say what to do", err)
	}
}

func TestB25CheckReportsFailedWrite(t *testing.T) {
	t.Parallel()
	s, _ := openTemp(t)
	defer s.Close()
	ctx := t.Context()
	// A database that may not grow behaves like a full disk: SQLITE_FULL.
	var pages int64
	if err := s.write.QueryRowContext(ctx, "PRAGMA page_count").Scan(&pages); err != nil {
		t.Fatal(err)
	}
	if _, err := s.write.ExecContext(ctx, "PRAGMA max_page_count = "+strconv.FormatInt(pages, 10)); err != nil {
		t.Fatal(err)
	}
	big := []byte(`"` + strings.Repeat("x", 256<<10) + `"`)
	if err := pushOne(ctx, s, "ds-1", big); err == nil {
		t.Fatal("a write beyond max_page_count succeeded")
	}
	if err := s.Check(ctx); err == nil || !strings.Contains(err.Error(), "full") {
		t.Fatalf("Check after a failed write = %v, want it to report a full database", err)
	}
	if _, err := s.write.ExecContext(ctx, "PRAGMA max_page_count = 1073741823"); err != nil {
		t.Fatal(err)
	}
	if err := pushOne(ctx, s, "ds-2", big); err != nil {
		t.Fatal(err)
	}
	// On a full disk small writes still succeed between the ones that
	// fail (tour 3's B31): a recent failure keeps Check failing.
	if err := s.Check(ctx); err == nil || !strings.Contains(err.Error(), "writes have succeeded since") || !strings.Contains(err.Error(), "full") {
		t.Fatalf("Check right after a successful write = %v, want the recent failure", err)
	}
	if err := s.health.writeTrouble(time.Now().Add(recentFailure)); err != nil {
		t.Fatalf("Check once the failure is old = %v", err)
	}
}

// TestB31CheckReportsAFullFileSystem: health is not ok while the file
// system of the database has (nearly) no space left, before any write
// failed.
func TestB31CheckReportsAFullFileSystem(t *testing.T) {
	t.Parallel()
	s, path := openTemp(t)
	defer s.Close()
	free := uint64(minFreeBytes - 1)
	s.health.mu.Lock()
	s.health.free = func(dir string) (uint64, error) {
		if dir != filepath.Dir(path) {
			t.Errorf("free space asked of %s, want the database's directory", dir)
		}
		return free, nil
	}
	s.health.mu.Unlock()
	err := s.Check(t.Context())
	if err == nil || !strings.Contains(err.Error(), "is full: 4095 KiB free") {
		t.Fatalf("Check on a full file system = %v", err)
	}
	s.health.mu.Lock()
	free = minFreeBytes
	s.health.mu.Unlock()
	if err := s.Check(t.Context()); err != nil {
		t.Fatalf("Check with space enough = %v", err)
	}
	// The real file system of the test's temporary directory answers.
	if n, err := freeSpace(filepath.Dir(path)); err != nil || n == 0 {
		t.Errorf("freeSpace = %d, %v", n, err)
	}
}

// TestB6EveryDamagedPageGetsAdvice overwrites one page of a database at a
// time: Open either works (the page was free, or is not read at open) or
// fails with the corruption advice, never with a bare SQLite error.
func TestB6EveryDamagedPageGetsAdvice(t *testing.T) {
	t.Parallel()
	s, path := openTemp(t)
	ctx := t.Context()
	pad := strings.Repeat("x", 8<<10)
	for i := range 12 {
		if err := pushOne(ctx, s, "ds-"+strconv.Itoa(i), []byte(`{"n": `+strconv.Itoa(i)+`, "pad": "`+pad+`"}`)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	clean, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const page = 4096
	junk := []byte(strings.Repeat("\xde\xad\xbe\xef", page/4))
	refused := 0
	for p := 0; p < len(clean)/page; p++ {
		dir := t.TempDir()
		damaged := filepath.Join(dir, "drover.db")
		b := slices.Clone(clean)
		copy(b[p*page:], junk)
		if err := os.WriteFile(damaged, b, 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := Open(ctx, damaged)
		if err == nil {
			_ = s.Close()
			continue
		}
		refused++
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "restore it from a backup") || strings.Contains(err.Error(), "\n") {
			t.Errorf("page %d damaged: Open = %v, want the corruption advice on one line", p, err)
		}
	}
	if refused == 0 {
		t.Fatal("no damaged page was noticed")
	}
}
