package sqlite

import (
	"context"
	"database/sql"
	"time"

	"github.com/drover-dev/drover/internal/store/sqlcore"
)

// dialect is how this store keeps the values of the shared SQL core:
// times as TEXT (timeLayout), JSON as TEXT, ? placeholders.
type dialect struct{}

var _ sqlcore.Dialect = dialect{}

func (dialect) Time(t time.Time) any      { return dbTime(t) }
func (dialect) ScanTime(t *time.Time) any { return scanTime{t} }
func (dialect) Text(s string) any         { return s }
func (dialect) Numbered() bool            { return false }
func (dialect) JSON(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	return string(b)
}

// sqlReader is a sqlcore.Reader over the read connections or a
// transaction.
type sqlReader struct {
	db interface {
		QueryContext(context.Context, string, ...any) (*sql.Rows, error)
		QueryRowContext(context.Context, string, ...any) *sql.Row
	}
}

// QueryRow implements sqlcore.Reader.
func (r sqlReader) QueryRow(ctx context.Context, q string, args ...any) sqlcore.Scanner {
	return notFoundRow{r.db.QueryRowContext(ctx, q, args...)}
}

// Query implements sqlcore.Reader.
func (r sqlReader) Query(ctx context.Context, q string, args []any, fn func(sqlcore.Scanner) error) error {
	rows, err := r.db.QueryContext(ctx, q, args...)
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
type notFoundRow struct{ row *sql.Row }

func (r notFoundRow) Scan(dest ...any) error { return notFound(r.row.Scan(dest...)) }
