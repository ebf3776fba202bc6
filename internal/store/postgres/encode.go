package postgres

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/drover-dev/drover/internal/store"
)

// nanos is a time as the store keeps it: a BIGINT of nanoseconds since the
// Unix epoch, NULL for the zero time. As an argument it encodes (a time
// outside what nanoseconds in an int64 hold, years 1678 to 2262, fails the
// statement); as a scan target, *nanos decodes into the time.Time it points
// to, in UTC.
type nanos time.Time

// Time limits of nanos.
var (
	minNanos = time.Unix(0, math.MinInt64)
	maxNanos = time.Unix(0, math.MaxInt64)
)

// Int64Value implements pgtype.Int64Valuer.
func (n nanos) Int64Value() (pgtype.Int8, error) {
	t := time.Time(n)
	if t.IsZero() {
		return pgtype.Int8{}, nil
	}
	if t.Before(minNanos) || t.After(maxNanos) {
		return pgtype.Int8{}, fmt.Errorf("time %s is out of range (years 1678 to 2262)", t.UTC().Format(time.RFC3339Nano))
	}
	return pgtype.Int8{Int64: t.UnixNano(), Valid: true}, nil
}

// ScanInt64 implements pgtype.Int64Scanner.
func (n *nanos) ScanInt64(v pgtype.Int8) error {
	if !v.Valid {
		*n = nanos{}
		return nil
	}
	*n = nanos(time.Unix(0, v.Int64).UTC())
	return nil
}

// at returns the scan target of a time column for *t.
func at(t *time.Time) *nanos { return (*nanos)(t) }

// text makes s storable in a TEXT column: PostgreSQL refuses NUL bytes and
// invalid UTF-8, which free text quoting a command's output may hold. Those
// become U+FFFD; valid text is kept as it is. Names and keys are not cleaned:
// invalid ones fail the write.
func text(s string) string {
	if utf8.ValidString(s) && !strings.ContainsRune(s, 0) {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

// texts is text for each string of a list; an empty list is NULL.
func texts(list []string) []string {
	if len(list) == 0 {
		return nil
	}
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = text(s)
	}
	return out
}

// raw encodes a string for a BYTEA column kept byte for byte ("" is an
// empty value, not NULL).
func raw(s string) []byte {
	if s == "" {
		return []byte{}
	}
	return []byte(s)
}

// checksJSON is the BYTEA form of an instance's check results: a JSON array,
// NULL when empty.
func checksJSON(list []store.CheckResult) []byte {
	if len(list) == 0 {
		return nil
	}
	b, err := json.Marshal(list)
	if err != nil { // plain fields always marshal
		return nil
	}
	return b
}
