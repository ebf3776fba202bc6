package sqlite

import (
	"context"
	"fmt"

	"github.com/drover-dev/drover/internal/store"
	"github.com/drover-dev/drover/internal/store/sqlcore"
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
		if err := tx.QueryRowContext(ctx, sqlcore.NextSecretVersion, sec.Key).Scan(&sec.Version); err != nil {
			return err
		}
		row := sqlcore.SecretRow{Secret: sec}
		row.Value = sealed
		_, err := tx.ExecContext(ctx, sqlcore.InsertSecret, sqlcore.SecretArgs(dialect{}, row)...)
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
	sec, err := sqlcore.GetSealedSecret(ctx, dialect{}, sqlReader{s.reads}, key, version)
	if err != nil {
		return store.Secret{}, err
	}
	return store.UnsealSecret(s.sealer, sec)
}

// ListSecrets implements store.Store.
func (s *Store) ListSecrets(ctx context.Context) ([]store.Secret, error) {
	return sqlcore.ListSecrets(ctx, dialect{}, sqlReader{s.reads})
}

// DeleteSecret implements store.Store.
func (s *Store) DeleteSecret(ctx context.Context, key string, version int64) (int, error) {
	var n int64
	q, args, what := sqlcore.DeleteSecret(dialect{}, key, version, now())
	err := s.writeTx(ctx, func(tx *wtx) error {
		res, err := tx.ExecContext(ctx, q, args...)
		if err != nil {
			return err
		}
		if n, err = res.RowsAffected(); err == nil && n == 0 {
			return store.ErrNotFound
		}
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("delete secret %s: %w", what, err)
	}
	return int(n), nil
}
