package postgres

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/drover-dev/drover/internal/store"
)

// PostgreSQL error codes the store acts on.
const (
	codeUniqueViolation      = "23505"
	codeSerializationFailure = "40001"
	codeDeadlockDetected     = "40P01"
)

// Advisory lock keys (the one-bigint form). The migration lock is a session
// lock; the others are transaction locks, released at commit or rollback.
const (
	// migrateLock serializes Open's migrations across processes.
	migrateLock int64 = 0x64726f7665720001 // "drover" 0001
	// eventsLock serializes the tails of transactions that append events,
	// so that seqs commit in order (see insertEvents).
	eventsLock int64 = 0x64726f7665720002
	// auditLock serializes appends to the audit log, so that its seqs
	// commit in order (see AppendAudit).
	auditLock int64 = 0x64726f7665720003
)

// rollbackTimeout bounds the rollback of a failed transaction, which runs
// even when the caller's context is done.
const rollbackTimeout = 5 * time.Second

// tx runs fn in a READ COMMITTED transaction and commits it when fn
// succeeds. A transaction that PostgreSQL aborts as a deadlock victim (or
// for a serialization failure, which READ COMMITTED does not raise but which
// is retried all the same) is run again, fn included, until it succeeds,
// fails otherwise or ctx is done: callers never see those errors. A unique
// violation is returned as store.ErrConflict (wrapping PostgreSQL's error).
func (s *Store) tx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	for attempt := 0; ; attempt++ {
		err := s.health.wrote(s.runTx(ctx, fn))
		if !retryable(err) {
			return conflict(err)
		}
		if err := pause(ctx, attempt); err != nil {
			return err
		}
	}
}

// runTx runs fn in one transaction.
func (s *Store) runTx(ctx context.Context, fn func(tx pgx.Tx) error) (err error) {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
			defer cancel()
			// A connection whose rollback fails is closed by the pool.
			_ = tx.Rollback(rctx)
		}
	}()
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// retryable reports whether err aborted a transaction that may succeed if
// run again.
func retryable(err error) bool {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return false
	}
	return pe.Code == codeSerializationFailure || pe.Code == codeDeadlockDetected
}

// pause waits before attempt+1 of a transaction: a short, growing, jittered
// delay, so that transactions that deadlocked do not meet again.
func pause(ctx context.Context, attempt int) error {
	limit := time.Millisecond << min(attempt, 6)  // 1 ms .. 64 ms
	d := time.Duration(rand.Int64N(int64(limit))) //nolint:gosec // jitter, not a secret
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// conflict wraps a unique violation as store.ErrConflict.
func conflict(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == codeUniqueViolation {
		return fmt.Errorf("%w: %w", store.ErrConflict, err)
	}
	return err
}

// notFound maps pgx.ErrNoRows to store.ErrNotFound.
func notFound(err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return store.ErrNotFound
	}
	return err
}

// lockName takes the transaction-level advisory lock of name (its parts
// joined), held until tx ends: transactions that take the same name run
// their locked parts one after another. Names are hashed to 64 bits; two
// names that collide only wait for each other.
func lockName(ctx context.Context, tx pgx.Tx, parts ...string) error {
	h := fnv.New64a()
	for _, p := range parts {
		_, _ = h.Write([]byte(p))
		_, _ = h.Write([]byte{0})
	}
	key := int64(h.Sum64()) //nolint:gosec // a hash: wrapping is intended
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", key); err != nil {
		return fmt.Errorf("lock %q: %w", parts, err)
	}
	return nil
}

// limitArg is the argument of a "LIMIT $n" clause: NULL (no limit) for n <= 0.
func limitArg(n int) any {
	if n <= 0 {
		return nil
	}
	return int64(n)
}

// scanner is a row to scan (pgx.Row, pgx.Rows).
type scanner interface{ Scan(dest ...any) error }

// queryAll runs a query and scans every row with scan.
func queryAll[T any](ctx context.Context, q interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}, sql string, args []any, scan func(scanner) (T, error)) ([]T, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (T, error) { return scan(row) })
}
