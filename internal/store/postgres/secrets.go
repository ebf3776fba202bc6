package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/drover-dev/drover/internal/store"
)

// Secrets (table secrets, migration 0008): the versions of the secrets
// drover keeps. A version's value is sealed (seal) as it is written and
// opened as GetSecret returns it; a deleted version keeps its row without
// its value. Puts of one key take the advisory lock of the key, so that
// concurrent puts read and write the next version one after another.

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
	err = s.tx(ctx, func(tx pgx.Tx) error {
		if err := lockName(ctx, tx, "secret", sec.Key); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, "SELECT COALESCE(MAX(version) + 1, 0) FROM secrets WHERE key = $1", sec.Key).Scan(&sec.Version); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, "INSERT INTO secrets (key, version, value, created_by, created_at) VALUES ($1, $2, $3, $4, $5)",
			sec.Key, sec.Version, sealed, text(sec.CreatedBy), nanos(sec.CreatedAt))
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
	err := s.pool.QueryRow(ctx, "SELECT value, created_by, created_at FROM secrets WHERE key = $1 AND version = $2 AND deleted_at IS NULL",
		key, version).Scan(&sec.Value, &sec.CreatedBy, at(&sec.CreatedAt))
	if err != nil {
		return store.Secret{}, fmt.Errorf("get secret %s: %w", sec.VersionName(), notFound(err))
	}
	return store.UnsealSecret(s.sealer, sec)
}

// ListSecrets implements store.Store.
func (s *Store) ListSecrets(ctx context.Context) ([]store.Secret, error) {
	out, err := queryAll(ctx, s.pool, "SELECT key, version, created_by, created_at FROM secrets WHERE deleted_at IS NULL ORDER BY key, version", nil,
		func(row scanner) (store.Secret, error) {
			var sec store.Secret
			err := row.Scan(&sec.Key, &sec.Version, &sec.CreatedBy, at(&sec.CreatedAt))
			return sec, err
		})
	if err != nil {
		return nil, fmt.Errorf("list secrets: %w", err)
	}
	return out, nil
}

// DeleteSecret implements store.Store.
func (s *Store) DeleteSecret(ctx context.Context, key string, version int64) (int, error) {
	q, args := "UPDATE secrets SET value = NULL, deleted_at = $1 WHERE key = $2 AND deleted_at IS NULL", []any{nanos(now()), key}
	what := key
	if version != store.AllSecretVersions {
		q, args, what = q+" AND version = $3", append(args, version), store.SecretVersionName(key, version)
	}
	tag, err := s.pool.Exec(ctx, q, args...)
	if err := s.health.wrote(err); err != nil {
		return 0, fmt.Errorf("delete secret %s: %w", what, err)
	}
	if tag.RowsAffected() == 0 {
		return 0, fmt.Errorf("delete secret %s: %w", what, store.ErrNotFound)
	}
	return int(tag.RowsAffected()), nil
}
