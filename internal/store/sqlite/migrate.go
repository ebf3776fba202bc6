package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"fmt"

	"github.com/drover-dev/drover/internal/store/migration"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrations are the embedded schema migrations, in order.
var migrations = migration.MustLoad(migrationFiles, "migrations")

// migrate brings db's schema to the last of ms, one transaction per
// migration, and fails if the schema is newer than ms knows.
func migrate(ctx context.Context, db *sql.DB, ms []migration.Migration) error {
	const create = `CREATE TABLE IF NOT EXISTS schema_migrations (
	version    INTEGER PRIMARY KEY,
	applied_at TEXT NOT NULL
)`
	if _, err := db.ExecContext(ctx, create); err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	latest := ms[len(ms)-1].Version
	current, err := schemaVersion(ctx, db)
	if err != nil {
		return err
	}
	if current > latest {
		return fmt.Errorf("database schema version %d is newer than this binary supports (version %d): upgrade drover", current, latest)
	}
	for _, m := range ms {
		if m.Version <= current {
			continue
		}
		err := func() error {
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			defer func() { _ = tx.Rollback() }()
			// Another process may have migrated since we looked; the
			// IMMEDIATE transaction makes this re-check authoritative.
			v, err := schemaVersion(ctx, tx)
			if err != nil {
				return err
			}
			if v >= m.Version {
				return nil
			}
			if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, "INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)", m.Version, dbTime(now())); err != nil {
				return err
			}
			return tx.Commit()
		}()
		if err != nil {
			return fmt.Errorf("migrate schema to version %d (%s): %w", m.Version, m.Name, err)
		}
	}
	return nil
}

type queryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func schemaVersion(ctx context.Context, q queryer) (int64, error) {
	var v int64
	if err := q.QueryRowContext(ctx, "SELECT COALESCE(MAX(version), 0) FROM schema_migrations").Scan(&v); err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	return v, nil
}
