package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/drover-dev/drover/internal/store"
	"github.com/drover-dev/drover/internal/store/sqlcore"
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
		if err := tx.QueryRow(ctx, bound(sqlcore.NextSecretVersion), sec.Key).Scan(&sec.Version); err != nil {
			return err
		}
		row := sqlcore.SecretRow{Secret: sec}
		row.Value = sealed
		_, err := tx.Exec(ctx, bound(sqlcore.InsertSecret), sqlcore.SecretArgs(dialect{}, row)...)
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
	sec, err := sqlcore.GetSealedSecret(ctx, dialect{}, pgReader{s.pool}, key, version)
	if err != nil {
		return store.Secret{}, err
	}
	return store.UnsealSecret(s.sealer, sec)
}

// ListSecrets implements store.Store.
func (s *Store) ListSecrets(ctx context.Context) ([]store.Secret, error) {
	return sqlcore.ListSecrets(ctx, dialect{}, pgReader{s.pool})
}

// DeleteSecret implements store.Store.
func (s *Store) DeleteSecret(ctx context.Context, key string, version int64) (int, error) {
	q, args, what := sqlcore.DeleteSecret(dialect{}, key, version, now())
	tag, err := s.pool.Exec(ctx, q, args...)
	if err := s.health.wrote(err); err != nil {
		return 0, fmt.Errorf("delete secret %s: %w", what, err)
	}
	if tag.RowsAffected() == 0 {
		return 0, fmt.Errorf("delete secret %s: %w", what, store.ErrNotFound)
	}
	return int(tag.RowsAffected()), nil
}
