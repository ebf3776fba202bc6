package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	sqlite3 "modernc.org/sqlite"
	sqlitelib "modernc.org/sqlite/lib"
)

// health tracks what Check reports (B4, B6, B25): whether the database file
// is still the one opened, and whether the last write failed for a reason
// of the storage (a full disk, an I/O error, a corrupted page).
type health struct {
	mu sync.Mutex
	// id is the database file's identity; files is false for MemoryPath.
	id    identity
	files bool
	// gone is set, for good, once the file or directory was found removed
	// or replaced: a directory recreated later is still not this database.
	gone error
	// lastWrite is the storage error of the last write, nil once a write
	// succeeds again.
	lastWrite error
	// failure is the last storage error of any write, at failedAt: on a
	// full disk small writes (a lease renewed in a page the file has)
	// still succeed between the ones that fail, so one success says
	// little (tour 3's B31).
	failure  error
	failedAt time.Time
	// dir is the database's directory, whose file system's free space
	// Check looks at ("" for MemoryPath), through free (freeSpace unless
	// a test sets another).
	dir  string
	free func(dir string) (uint64, error)
}

// Health thresholds.
const (
	// recentFailure is how long a storage error of a write keeps Check
	// failing after writes succeed again.
	recentFailure = 2 * time.Minute
	// minFreeBytes is the free space under which Check fails: a
	// database that cannot grow refuses the next push, approval or
	// event that needs a new page.
	minFreeBytes = 4 << 20
)

// adoptFiles runs once the database is open: it writes the marker, makes
// the files private and remembers their identity.
func (s *Store) adoptFiles(path string) error {
	if err := writeMarker(path); err != nil {
		return err
	}
	if err := tightenFiles(path); err != nil {
		return err
	}
	id, err := newIdentity(path)
	if err != nil {
		return err
	}
	s.health.mu.Lock()
	s.health.id, s.health.files, s.health.dir = id, true, filepath.Dir(path)
	s.health.mu.Unlock()
	return nil
}

// checkFiles fails with ErrReplaced once the database file or its directory
// is not the one opened. It costs two stat calls.
func (h *health) checkFiles() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.gone != nil {
		return h.gone
	}
	if !h.files {
		return nil
	}
	err := h.id.check()
	if errors.Is(err, ErrReplaced) {
		h.gone = err
	}
	return err
}

// wrote records the outcome of a write transaction and returns err.
func (h *health) wrote(err error) error {
	if err != nil && !storageError(err) {
		return err
	}
	h.mu.Lock()
	h.lastWrite = err
	if err != nil {
		h.failure, h.failedAt = err, time.Now()
	}
	h.mu.Unlock()
	return err
}

// writeTrouble is why writes are failing or about to, nil if none: the
// last write failed, one failed a short while ago, or the file system
// holding the database is (nearly) full.
func (h *health) writeTrouble(now time.Time) error {
	h.mu.Lock()
	last, failure, failedAt, dir, free := h.lastWrite, h.failure, h.failedAt, h.dir, h.free
	h.mu.Unlock()
	if free == nil {
		free = freeSpace
	}
	switch {
	case last != nil:
		return fmt.Errorf("the last write failed: %w", last)
	case failure != nil && now.Sub(failedAt) < recentFailure:
		return fmt.Errorf("a write failed %s ago (writes have succeeded since): %w", now.Sub(failedAt).Round(time.Second), failure)
	case dir == "":
		return nil
	}
	n, err := free(dir)
	if err != nil {
		return fmt.Errorf("free space of %s: %w", dir, err)
	}
	if n < minFreeBytes {
		return fmt.Errorf("the file system of %s is full: %d KiB free (at least %d MiB are needed); free some space", dir, n>>10, minFreeBytes>>20)
	}
	return nil
}

// storageError reports whether err is SQLite failing to use its files,
// rather than a constraint, a canceled context or a caller's mistake.
func storageError(err error) bool {
	var se *sqlite3.Error
	if !errors.As(err, &se) {
		return false
	}
	switch se.Code() & 0xff {
	case sqlitelib.SQLITE_FULL, sqlitelib.SQLITE_IOERR, sqlitelib.SQLITE_CORRUPT, sqlitelib.SQLITE_NOTADB,
		sqlitelib.SQLITE_READONLY, sqlitelib.SQLITE_CANTOPEN:
		return true
	}
	return false
}

// Check implements store.Store: it fails when the database file or its
// directory was removed or replaced since Open (ErrReplaced), when a read
// fails, when a write failed for a reason of the storage (a full disk, an
// I/O error, a corrupted page) and no write has succeeded since or it was
// less than recentFailure ago, or when the file system holding the
// database has less than minFreeBytes free. It costs three stat calls and
// one small read.
func (s *Store) Check(ctx context.Context) error {
	if err := s.health.checkFiles(); err != nil {
		return fmt.Errorf("check store: %w", err)
	}
	var n int
	if err := s.read.QueryRowContext(ctx, "SELECT COUNT(*) FROM schema_migrations").Scan(&n); err != nil {
		return fmt.Errorf("check store: read: %w", err)
	}
	if err := s.health.writeTrouble(time.Now()); err != nil {
		return fmt.Errorf("check store: %w", err)
	}
	return nil
}

// quickCheck runs PRAGMA quick_check: a pass over every page that finds
// corrupted b-trees and records, without comparing indexes to their tables
// (integrity_check does that, at several times the cost).
func quickCheck(ctx context.Context, db *sql.DB) error {
	rows, err := db.QueryContext(ctx, "PRAGMA quick_check(5)")
	if err != nil {
		return corrupted(err.Error(), err)
	}
	defer func() { _ = rows.Close() }()
	var msgs []string
	for rows.Next() {
		var m string
		if err := rows.Scan(&m); err != nil {
			return corrupted(err.Error(), err)
		}
		msgs = append(msgs, m)
	}
	if err := rows.Err(); err != nil {
		return corrupted(err.Error(), err)
	}
	if len(msgs) == 1 && msgs[0] == "ok" {
		return nil
	}
	return corrupted(strings.Join(msgs, "; "), ErrCorrupt)
}

// ErrCorrupt is returned by Open when PRAGMA quick_check finds damage.
var ErrCorrupt = errors.New("database is corrupted")

func corrupted(detail string, err error) error {
	var se *sqlite3.Error
	damaged := errors.As(err, &se) && (se.Code()&0xff == sqlitelib.SQLITE_CORRUPT || se.Code()&0xff == sqlitelib.SQLITE_NOTADB)
	if !damaged && !errors.Is(err, ErrCorrupt) {
		return err
	}
	detail = strings.Join(strings.Fields(detail), " ") // quick_check's lines on one line
	const advice = "restore it from a backup, or move it aside to start an empty server"
	if errors.Is(err, ErrCorrupt) {
		return fmt.Errorf("%w (quick_check: %s): %s", ErrCorrupt, detail, advice)
	}
	return fmt.Errorf("%w: %s: %w", ErrCorrupt, advice, err)
}
