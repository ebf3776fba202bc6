package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/drover-dev/drover/internal/store/sqlcore"
)

// dialect is how this store keeps the values of the shared SQL core:
// times as BIGINT nanoseconds (nanos), JSON as BYTEA, free text cleaned
// (text), numbered placeholders.
type dialect struct{}

var _ sqlcore.Dialect = dialect{}

func (dialect) Time(t time.Time) any      { return nanos(t) }
func (dialect) ScanTime(t *time.Time) any { return at(t) }
func (dialect) JSON(b []byte) any         { return b }
func (dialect) Text(s string) any         { return text(s) }
func (dialect) Numbered() bool            { return true }

// pgReader is a sqlcore.Reader over the pool or a transaction.
type pgReader struct {
	db interface {
		Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
		QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	}
}

// QueryRow implements sqlcore.Reader.
func (r pgReader) QueryRow(ctx context.Context, q string, args ...any) sqlcore.Scanner {
	return notFoundRow{r.db.QueryRow(ctx, q, args...)}
}

// Query implements sqlcore.Reader.
func (r pgReader) Query(ctx context.Context, q string, args []any, fn func(sqlcore.Scanner) error) error {
	rows, err := r.db.Query(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := fn(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// notFoundRow scans store.ErrNotFound for a row that is not there.
type notFoundRow struct{ row pgx.Row }

func (r notFoundRow) Scan(dest ...any) error { return notFound(r.row.Scan(dest...)) }

// bound is q of the shared SQL core with this store's placeholders.
func bound(q string) string { return sqlcore.Bind(dialect{}, q) }
