package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5/pgconn"
)

// health remembers the outcome of the last write for Check: a write that
// failed because the database cannot store (a full disk, an I/O error, a
// corrupted page, a read-only database), until a write succeeds again.
type health struct {
	mu        sync.Mutex
	lastWrite error
}

// wrote records the outcome of a write and returns err.
func (h *health) wrote(err error) error {
	if err != nil && !storageError(err) {
		return err
	}
	h.mu.Lock()
	h.lastWrite = err
	h.mu.Unlock()
	return err
}

// last returns the storage error of the last write, or nil.
func (h *health) last() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lastWrite
}

// storageError reports whether err is PostgreSQL failing to store, rather
// than a constraint, a canceled context or a caller's mistake.
func storageError(err error) bool {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return false
	}
	switch pe.Code {
	case "53100", // disk_full
		"58030", // io_error
		"XX001", // data_corrupted
		"XX002", // index_corrupted
		"25006": // read_only_sql_transaction
		return true
	}
	return false
}

// Check implements store.Store with one small query: it fails when the
// database cannot be reached or read, when it cannot take writes (a standby
// in recovery, or read-only transactions by default), when its schema is not
// this binary's (schema_migrations gone, or a newer binary migrated it), and
// when the last write failed for a reason of the storage (a full disk, an I/O
// error) and no write has succeeded since.
func (s *Store) Check(ctx context.Context) error {
	var (
		recovery bool
		readOnly string
		version  int64
	)
	err := s.pool.QueryRow(ctx, "SELECT pg_is_in_recovery(), current_setting('default_transaction_read_only'),"+
		" (SELECT COALESCE(MAX(version), 0) FROM schema_migrations)").Scan(&recovery, &readOnly, &version)
	switch {
	case err != nil:
		return fmt.Errorf("check store: read: %w", err)
	case recovery:
		return errors.New("check store: the database is a standby in recovery: it takes no writes")
	case readOnly == "on":
		return errors.New("check store: the database is read-only (default_transaction_read_only is on)")
	case version != latestVersion():
		return fmt.Errorf("check store: the database schema is version %d, this binary's is %d", version, latestVersion())
	}
	if last := s.health.last(); last != nil {
		return fmt.Errorf("check store: the last write failed: %w", last)
	}
	return nil
}
