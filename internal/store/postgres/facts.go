package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/drover-dev/drover/internal/store"
	"github.com/drover-dev/drover/internal/store/sqlcore"
)

// PutRuntimeFacts implements store.Store.
func (s *Store) PutRuntimeFacts(ctx context.Context, f store.RuntimeFacts) error {
	if f.Runtime == "" {
		return errors.New("put runtime facts: runtime is required")
	}
	if f.ObservedAt.IsZero() {
		f.ObservedAt = now()
	}
	args, err := sqlcore.FactsArgs(dialect{}, f)
	if err != nil {
		return fmt.Errorf("put runtime facts: %w", err)
	}
	_, err = s.pool.Exec(ctx, bound(sqlcore.PutFacts), args...)
	if err := s.health.wrote(err); err != nil {
		return fmt.Errorf("put facts of runtime %s: %w", f.Runtime, err)
	}
	return nil
}

// ListRuntimeFacts implements store.Store.
func (s *Store) ListRuntimeFacts(ctx context.Context) ([]store.RuntimeFacts, error) {
	return sqlcore.ListRuntimeFacts(ctx, dialect{}, pgReader{s.pool})
}
