package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/drover-dev/drover/internal/store"
	"github.com/drover-dev/drover/internal/store/sqlcore"
)

// Linked runtimes (table linked_runtimes, migration 0002). Each method is
// one statement: the primary key and the unique token_hash decide
// conflicts (store.ErrConflict), so concurrent links of one name or one
// token have one winner.

// linkConflict is conflict, saying which of a linked runtime's unique keys
// (its name or its token hash) another runtime holds.
func linkConflict(err error) error {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != codeUniqueViolation {
		return err
	}
	if pe.ConstraintName == "linked_runtimes_pkey" {
		return fmt.Errorf("it is linked already: %w", store.ErrConflict)
	}
	return fmt.Errorf("another linked runtime has the same token hash: %w", store.ErrConflict)
}

// LinkRuntime implements store.Store. Name and TokenHash are required; a
// zero CreatedAt is set to the current time. A runtime of the same name, or
// one with the same token hash, fails with store.ErrConflict.
func (s *Store) LinkRuntime(ctx context.Context, r store.LinkedRuntime) error {
	if r.Name == "" || r.TokenHash == "" {
		return fmt.Errorf("link runtime %q: name and token hash are required", r.Name)
	}
	if r.CreatedAt.IsZero() {
		r.CreatedAt = now()
	}
	args, err := sqlcore.LinkedArgs(dialect{}, r)
	if err != nil {
		return fmt.Errorf("link runtime %s: %w", r.Name, err)
	}
	_, err = s.pool.Exec(ctx, bound(sqlcore.InsertLinked), args...)
	if err := s.health.wrote(err); err != nil {
		return fmt.Errorf("link runtime %s: %w", r.Name, linkConflict(err))
	}
	s.notifyRuntimes(ctx)
	return nil
}

// GetLinkedRuntime implements store.Store.
func (s *Store) GetLinkedRuntime(ctx context.Context, name string) (store.LinkedRuntime, error) {
	return sqlcore.GetLinkedRuntime(ctx, dialect{}, pgReader{s.pool}, name)
}

// LinkedRuntimeByToken implements store.Store.
func (s *Store) LinkedRuntimeByToken(ctx context.Context, tokenHash string) (store.LinkedRuntime, error) {
	return sqlcore.LinkedRuntimeByToken(ctx, dialect{}, pgReader{s.pool}, tokenHash)
}

// ListLinkedRuntimes implements store.Store: ordered by name.
func (s *Store) ListLinkedRuntimes(ctx context.Context) ([]store.LinkedRuntime, error) {
	return sqlcore.ListLinkedRuntimes(ctx, dialect{}, pgReader{s.pool})
}

// SetLinkToken implements store.Store. tokenHash is required; setting the
// hash a runtime has already changes nothing.
func (s *Store) SetLinkToken(ctx context.Context, name, tokenHash string) error {
	if tokenHash == "" {
		return fmt.Errorf("set the token of linked runtime %s: the token hash is required", name)
	}
	tag, err := s.pool.Exec(ctx, bound(sqlcore.SetLinkToken), tokenHash, name)
	err = s.health.wrote(err)
	if err == nil && tag.RowsAffected() == 0 {
		err = store.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("set the token of linked runtime %s: %w", name, linkConflict(err))
	}
	s.notifyRuntimes(ctx)
	return nil
}

// PutAgentState implements store.Store.
func (s *Store) PutAgentState(ctx context.Context, name string, st store.AgentState) error {
	agent, err := sqlcore.EncodeAgent(st)
	if err != nil {
		return fmt.Errorf("put the agent state of linked runtime %s: %w", name, err)
	}
	tag, err := s.pool.Exec(ctx, bound(sqlcore.SetAgent), agent, name)
	err = s.health.wrote(err)
	if err == nil && tag.RowsAffected() == 0 {
		err = store.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("put the agent state of linked runtime %s: %w", name, err)
	}
	return nil
}

// UnlinkRuntime implements store.Store.
func (s *Store) UnlinkRuntime(ctx context.Context, name string) error {
	tag, err := s.pool.Exec(ctx, bound(sqlcore.DeleteLinked), name)
	err = s.health.wrote(err)
	if err == nil && tag.RowsAffected() == 0 {
		err = store.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("unlink runtime %s: %w", name, err)
	}
	s.notifyRuntimes(ctx)
	return nil
}
