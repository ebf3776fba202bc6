package sqlite

import (
	"context"
	"database/sql"
	"sync"
)

// stmtCache prepares each read query once per pool instead of at every call:
// parsing SQL is a large share of a small query's cost in SQLite. database/sql
// re-prepares a *sql.Stmt on each connection of the pool as needed.
type stmtCache struct {
	db *sql.DB
	m  sync.Map // query -> *sql.Stmt
}

func (c *stmtCache) stmt(ctx context.Context, q string) (*sql.Stmt, error) {
	if st, ok := c.m.Load(q); ok {
		return st.(*sql.Stmt), nil
	}
	st, err := c.db.PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	if prev, loaded := c.m.LoadOrStore(q, st); loaded {
		_ = st.Close()
		return prev.(*sql.Stmt), nil
	}
	return st, nil
}

// QueryContext runs a cached query.
func (c *stmtCache) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	st, err := c.stmt(ctx, q)
	if err != nil {
		return nil, err
	}
	return st.QueryContext(ctx, args...)
}

// QueryRowContext runs a cached single-row query.
func (c *stmtCache) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	st, err := c.stmt(ctx, q)
	if err != nil {
		return c.db.QueryRowContext(ctx, q, args...) // reports the same error through Scan
	}
	return st.QueryRowContext(ctx, args...)
}

func (c *stmtCache) close() {
	c.m.Range(func(_, v any) bool {
		_ = v.(*sql.Stmt).Close()
		return true
	})
}
