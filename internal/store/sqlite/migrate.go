package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrations are the embedded schema migrations, in order.
var migrations = mustLoadMigrations(migrationFiles, "migrations")

// migration is one schema step: migrations/NNNN_name.sql brings the schema to
// version NNNN.
type migration struct {
	version int64
	name    string
	sql     string
}

func mustLoadMigrations(fsys fs.FS, dir string) []migration {
	ms, err := loadMigrations(fsys, dir)
	if err != nil {
		panic(err)
	}
	return ms
}

// loadMigrations reads dir/*.sql. Versions must be 1, 2, 3... with no gap.
func loadMigrations(fsys fs.FS, dir string) ([]migration, error) {
	names, err := fs.Glob(fsys, path.Join(dir, "*.sql"))
	if err != nil {
		return nil, err
	}
	var ms []migration
	for _, name := range names { // fs.Glob sorts
		base := path.Base(name)
		num, _, ok := strings.Cut(base, "_")
		v, err := strconv.ParseInt(num, 10, 64)
		if !ok || err != nil {
			return nil, fmt.Errorf("migration %s: name must be NNNN_description.sql", name)
		}
		if want := int64(len(ms) + 1); v != want {
			return nil, fmt.Errorf("migration %s: version %d, want %d (versions start at 1 with no gaps)", name, v, want)
		}
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		ms = append(ms, migration{version: v, name: base, sql: string(b)})
	}
	if len(ms) == 0 {
		return nil, fmt.Errorf("no migrations in %s", dir)
	}
	return ms, nil
}

// migrate brings db's schema to the last of ms, one transaction per
// migration, and fails if the schema is newer than ms knows.
func migrate(ctx context.Context, db *sql.DB, ms []migration) error {
	const create = `CREATE TABLE IF NOT EXISTS schema_migrations (
	version    INTEGER PRIMARY KEY,
	applied_at TEXT NOT NULL
)`
	if _, err := db.ExecContext(ctx, create); err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	latest := ms[len(ms)-1].version
	current, err := schemaVersion(ctx, db)
	if err != nil {
		return err
	}
	if current > latest {
		return fmt.Errorf("database schema version %d is newer than this binary supports (version %d): upgrade drover", current, latest)
	}
	for _, m := range ms {
		if m.version <= current {
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
			if v >= m.version {
				return nil
			}
			if _, err := tx.ExecContext(ctx, m.sql); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, "INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)", m.version, dbTime(now())); err != nil {
				return err
			}
			return tx.Commit()
		}()
		if err != nil {
			return fmt.Errorf("migrate schema to version %d (%s): %w", m.version, m.name, err)
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
