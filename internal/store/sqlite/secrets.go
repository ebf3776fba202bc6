package sqlite

import (
	"context"
	"fmt"

	"github.com/drover-dev/drover/internal/store"
)

// Secrets (table secrets, migration 0017): the versions of the secrets
// drover keeps. A version's value is sealed (seal) as it is written and
// opened as GetSecret returns it; a deleted version keeps its row without
// its value. The write transaction serializes puts: the next version is
// read and written in one.

// PutSecret implements store.Store.
func (s *Store) PutSecret(ctx context.Context, sec store.Secret) (store.Secret, error) {
	if err := sec.CheckPut(); err != nil {
		return store.Secret{}, err
	}
	if sec.CreatedAt.IsZero() {
		sec.CreatedAt = now()
	}
	sealed, err := s.seal(sec.Value)
	if err != nil {
		return store.Secret{}, fmt.Errorf("put secret %s: %w", sec.Key, err)
	}
	err = s.writeTx(ctx, func(tx *wtx) error {
		if err := tx.QueryRowContext(ctx, "SELECT COALESCE(MAX(version) + 1, 0) FROM secrets WHERE key = ?", sec.Key).Scan(&sec.Version); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, "INSERT INTO secrets (key, version, value, created_by, created_at) VALUES (?, ?, ?, ?, ?)",
			sec.Key, sec.Version, sealed, sec.CreatedBy, dbTime(sec.CreatedAt))
		return err
	})
	if err != nil {
		return store.Secret{}, fmt.Errorf("put secret %s: %w", sec.Key, err)
	}
	sec.Value, sec.CreatedAt = nil, sec.CreatedAt.UTC()
	return sec, nil
}

// GetSecret implements store.Store.
func (s *Store) GetSecret(ctx context.Context, key string, version int64) (store.Secret, error) {
	sec := store.Secret{Key: key, Version: version}
	err := s.reads.QueryRowContext(ctx, "SELECT value, created_by, created_at FROM secrets WHERE key = ? AND version = ? AND deleted_at IS NULL",
		key, version).Scan(&sec.Value, &sec.CreatedBy, scanTime{&sec.CreatedAt})
	if err != nil {
		return store.Secret{}, fmt.Errorf("get secret %s: %w", sec.VersionName(), notFound(err))
	}
	return store.UnsealSecret(s.sealer, sec)
}

// ListSecrets implements store.Store.
func (s *Store) ListSecrets(ctx context.Context) ([]store.Secret, error) {
	out, err := queryAll(ctx, s.reads, "SELECT key, version, created_by, created_at FROM secrets WHERE deleted_at IS NULL ORDER BY key, version", nil,
		func(row interface{ Scan(...any) error }) (store.Secret, error) {
			var sec store.Secret
			err := row.Scan(&sec.Key, &sec.Version, &sec.CreatedBy, scanTime{&sec.CreatedAt})
			return sec, err
		})
	if err != nil {
		return nil, fmt.Errorf("list secrets: %w", err)
	}
	return out, nil
}

// DeleteSecret implements store.Store.
func (s *Store) DeleteSecret(ctx context.Context, key string, version int64) (int, error) {
	var n int64
	err := s.writeTx(ctx, func(tx *wtx) error {
		q, args := "UPDATE secrets SET value = NULL, deleted_at = ? WHERE key = ? AND deleted_at IS NULL", []any{dbTime(now()), key}
		if version != store.AllSecretVersions {
			q, args = q+" AND version = ?", append(args, version)
		}
		res, err := tx.ExecContext(ctx, q, args...)
		if err != nil {
			return err
		}
		if n, err = res.RowsAffected(); err == nil && n == 0 {
			return store.ErrNotFound
		}
		return err
	})
	what := key
	if version != store.AllSecretVersions {
		what = store.SecretVersionName(key, version)
	}
	if err != nil {
		return 0, fmt.Errorf("delete secret %s: %w", what, err)
	}
	return int(n), nil
}
