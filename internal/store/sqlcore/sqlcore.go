// Package sqlcore is the SQL both store backends share: for each record
// moved here, its columns, its queries and its row codec (the Go value to
// column values and back), written once and used by the SQLite and
// PostgreSQL stores and by their export and import (package dump). What
// differs between the databases — how a time or a JSON document is kept,
// how placeholders are numbered, which rows are missing — is a Dialect and
// a Reader each backend gives. Transactions, locking and conflict
// detection stay with the backends: they differ on purpose.
package sqlcore

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Dialect is how a backend keeps the values the codecs write.
type Dialect interface {
	// Time is the column value of t; the zero time is NULL.
	Time(t time.Time) any
	// ScanTime is a scan target that decodes a time column into *t (NULL:
	// the zero time), in UTC.
	ScanTime(t *time.Time) any
	// JSON is the column value of the JSON document b; nil is NULL.
	JSON(b []byte) any
	// Text is the column value of free text (names and keys are not
	// free text: they are stored as given).
	Text(s string) any
	// Numbered says placeholders are numbered ($1, $2...) rather than
	// written as ?.
	Numbered() bool
}

// Bind writes q, whose placeholders are ?, as d numbers them.
func Bind(d Dialect, q string) string {
	if !d.Numbered() {
		return q
	}
	var b strings.Builder
	n := 0
	for _, r := range q {
		if r != '?' {
			b.WriteRune(r)
			continue
		}
		n++
		b.WriteByte('$')
		b.WriteString(strconv.Itoa(n))
	}
	return b.String()
}

// Scanner is a row to scan.
type Scanner interface{ Scan(dest ...any) error }

// Reader runs the read queries of the codecs. Queries come bound (Bind).
type Reader interface {
	// QueryRow runs q and returns its first row; a query that returns no
	// row scans store.ErrNotFound.
	QueryRow(ctx context.Context, q string, args ...any) Scanner
	// Query runs q and calls fn with each row, in order, stopping at fn's
	// first error.
	Query(ctx context.Context, q string, args []any, fn func(Scanner) error) error
}

// queryAll is every row of q, scanned by scan.
func queryAll[T any](ctx context.Context, r Reader, q string, args []any, scan func(Scanner) (T, error)) ([]T, error) {
	var out []T
	err := r.Query(ctx, q, args, func(row Scanner) error {
		v, err := scan(row)
		if err != nil {
			return err
		}
		out = append(out, v)
		return nil
	})
	return out, err
}

// JSONColumn is a scan target that decodes a JSON column (text or bytes)
// into V; NULL, "", "null" and "[]" leave V as it is (an empty list reads
// back as nil, as both backends write it). Both backends scan their JSON
// columns with it.
type JSONColumn struct{ V any }

// Scan implements sql.Scanner (pgx uses it too).
func (c JSONColumn) Scan(src any) error {
	var text []byte
	switch v := src.(type) {
	case nil:
		return nil
	case string:
		text = []byte(v)
	case []byte:
		text = v
	default:
		return fmt.Errorf("json column: unexpected %T", src)
	}
	switch string(text) {
	case "", "null", "[]":
		return nil
	}
	if err := json.Unmarshal(text, c.V); err != nil {
		return fmt.Errorf("json column: %w", err)
	}
	return nil
}
