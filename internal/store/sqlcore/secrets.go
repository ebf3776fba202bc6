package sqlcore

import (
	"context"
	"fmt"
	"time"

	"github.com/drover-dev/drover/internal/store"
)

// Secrets (table secrets): the versions of the secrets drover keeps. A
// version's value is stored sealed; a deleted version keeps its row, with
// no value and its deleted_at set, so that its number is never given again.

// SecretColumns are the columns of a secret's row, in the order of
// SecretArgs and ScanSecretRow: what export and import carry.
//
//nolint:gosec // column names, not a credential
const SecretColumns = "key, version, value, created_by, created_at, deleted_at"

// Queries of secrets, with ? placeholders (Bind).
//
//nolint:gosec // queries, not credentials
const (
	// NextSecretVersion selects the next version of a key: the highest
	// ever given plus 1, deleted ones included (0 for a new key).
	NextSecretVersion = "SELECT COALESCE(MAX(version) + 1, 0) FROM secrets WHERE key = ?"
	// InsertSecret inserts SecretArgs.
	InsertSecret = "INSERT INTO secrets (" + SecretColumns + ") VALUES (?, ?, ?, ?, ?, ?)"
	// SelectSecrets selects every row of SecretColumns, deleted versions
	// included, by key and version.
	SelectSecrets = "SELECT " + SecretColumns + " FROM secrets ORDER BY key, version"

	selectSecret     = "SELECT value, created_by, created_at FROM secrets WHERE key = ? AND version = ? AND deleted_at IS NULL"
	selectSecretList = "SELECT key, version, created_by, created_at FROM secrets WHERE deleted_at IS NULL ORDER BY key, version"
	deleteSecret     = "UPDATE secrets SET value = NULL, deleted_at = ? WHERE key = ? AND deleted_at IS NULL"
)

// SecretRow is a secret's row: a version with its value sealed, and when
// it was deleted (zero: it was not).
type SecretRow struct {
	store.Secret
	DeletedAt time.Time
}

// SecretArgs are r's values for SecretColumns, in order.
func SecretArgs(d Dialect, r SecretRow) []any {
	return []any{r.Key, r.Version, r.Value, d.Text(r.CreatedBy), d.Time(r.CreatedAt), d.Time(r.DeletedAt)}
}

// ScanSecretRow scans a row of SecretColumns.
func ScanSecretRow(d Dialect, row Scanner) (SecretRow, error) {
	var r SecretRow
	err := row.Scan(&r.Key, &r.Version, &r.Value, &r.CreatedBy, d.ScanTime(&r.CreatedAt), d.ScanTime(&r.DeletedAt))
	return r, err
}

// GetSealedSecret is version version of secret key, its value sealed as
// stored; store.ErrNotFound for a deleted version too.
func GetSealedSecret(ctx context.Context, d Dialect, r Reader, key string, version int64) (store.Secret, error) {
	sec := store.Secret{Key: key, Version: version}
	err := r.QueryRow(ctx, Bind(d, selectSecret), key, version).Scan(&sec.Value, &sec.CreatedBy, d.ScanTime(&sec.CreatedAt))
	if err != nil {
		return store.Secret{}, fmt.Errorf("get secret %s: %w", sec.VersionName(), err)
	}
	return sec, nil
}

// ListSecrets implements store.Secrets over r: every version not deleted,
// without values, by key and version.
func ListSecrets(ctx context.Context, d Dialect, r Reader) ([]store.Secret, error) {
	out, err := queryAll(ctx, r, Bind(d, selectSecretList), nil, func(row Scanner) (store.Secret, error) {
		var sec store.Secret
		err := row.Scan(&sec.Key, &sec.Version, &sec.CreatedBy, d.ScanTime(&sec.CreatedAt))
		return sec, err
	})
	if err != nil {
		return nil, fmt.Errorf("list secrets: %w", err)
	}
	return out, nil
}

// DeleteSecret is the statement that deletes version version of key (or
// every version, store.AllSecretVersions) at at, its arguments, and the
// name of what it deletes for errors.
func DeleteSecret(d Dialect, key string, version int64, at time.Time) (q string, args []any, what string) {
	q, args, what = deleteSecret, []any{d.Time(at), key}, key
	if version != store.AllSecretVersions {
		q, args, what = q+" AND version = ?", append(args, version), store.SecretVersionName(key, version)
	}
	return Bind(d, q), args, what
}
