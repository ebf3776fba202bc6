package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"

	"github.com/drover-dev/drover/internal/store/migration"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrations are the embedded schema migrations, in order.
var migrations = migration.MustLoad(migrationFiles, "migrations")

// createMigrations creates the table of applied migrations.
const createMigrations = `CREATE TABLE IF NOT EXISTS schema_migrations (
	version    BIGINT PRIMARY KEY,
	applied_at BIGINT NOT NULL
)`

// migrate brings the database's schema to the last of ms, one transaction
// per migration together with its schema_migrations row, and fails if the
// schema is newer than ms knows. It runs on one connection holding the
// session-level advisory lock migrateLock, so processes opening one database
// at once migrate it one after another: the first applies what is pending,
// the others then find nothing to do.
func migrate(ctx context.Context, pool *pgxpool.Pool, ms []migration.Migration) (err error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", migrateLock); err != nil {
		// The lock may have been granted as the call failed (a canceled
		// context): the connection goes, and the lock with it.
		discard(ctx, conn)
		return fmt.Errorf("migrate: take the migration lock: %w", err)
	}
	defer func() {
		err = errors.Join(err, unlockMigrations(ctx, conn))
	}()
	if _, err := conn.Exec(ctx, createMigrations); err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	current, err := schemaVersion(ctx, conn)
	if err != nil {
		return err
	}
	latest := ms[len(ms)-1].Version
	if current > latest {
		return fmt.Errorf("database schema version %d is newer than this binary supports (version %d): upgrade drover", current, latest)
	}
	for _, m := range ms {
		if m.Version <= current {
			continue
		}
		if err := apply(ctx, conn, m); err != nil {
			return fmt.Errorf("migrate schema to version %d (%s): %w", m.Version, m.Name, err)
		}
	}
	return nil
}

// apply runs one migration and records it, in one transaction.
func apply(ctx context.Context, conn *pgxpool.Conn, m migration.Migration) error {
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, m.SQL); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, "INSERT INTO schema_migrations (version, applied_at) VALUES ($1, $2)", m.Version, nanos(now()))
		return err
	})
}

// unlockMigrations releases the migration lock, even when ctx is done. A
// connection that cannot release it is closed (which releases it) rather than
// returned to the pool still holding it.
func unlockMigrations(ctx context.Context, conn *pgxpool.Conn) error {
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
	defer cancel()
	if _, err := conn.Exec(uctx, "SELECT pg_advisory_unlock($1)", migrateLock); err != nil {
		discard(ctx, conn)
		return fmt.Errorf("migrate: release the migration lock: %w", err)
	}
	return nil
}

// discard closes conn, ending its session (and the session's locks); the
// pool drops it when it is released.
func discard(ctx context.Context, conn *pgxpool.Conn) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
	defer cancel()
	_ = conn.Conn().Close(cctx)
}

// schemaVersion returns the newest applied migration (0 = none).
func schemaVersion(ctx context.Context, q interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}) (int64, error) {
	var v int64
	if err := q.QueryRow(ctx, "SELECT COALESCE(MAX(version), 0) FROM schema_migrations").Scan(&v); err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	return v, nil
}

// latestVersion is the schema version of this binary.
func latestVersion() int64 { return migrations[len(migrations)-1].Version }
