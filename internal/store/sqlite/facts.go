package sqlite

import (
	"context"
	"fmt"

	"github.com/drover-dev/drover/internal/store"
	"github.com/drover-dev/drover/internal/store/sqlcore"
)

// PutRuntimeFacts implements store.Store.
func (s *Store) PutRuntimeFacts(ctx context.Context, f store.RuntimeFacts) error {
	if f.Runtime == "" {
		return fmt.Errorf("put runtime facts: runtime is required")
	}
	if f.ObservedAt.IsZero() {
		f.ObservedAt = now()
	}
	args, err := sqlcore.FactsArgs(dialect{}, f)
	if err != nil {
		return fmt.Errorf("put runtime facts: %w", err)
	}
	err = s.writeTxMode(ctx, crashSafe, func(tx *wtx) error {
		_, err := tx.ExecContext(ctx, sqlcore.PutFacts, args...)
		return err
	})
	if err != nil {
		return fmt.Errorf("put facts of runtime %s: %w", f.Runtime, err)
	}
	return nil
}

// ListRuntimeFacts implements store.Store.
func (s *Store) ListRuntimeFacts(ctx context.Context) ([]store.RuntimeFacts, error) {
	return sqlcore.ListRuntimeFacts(ctx, dialect{}, sqlReader{s.reads})
}
