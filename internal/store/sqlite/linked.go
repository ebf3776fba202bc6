package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/drover-dev/drover/internal/store"
	"github.com/drover-dev/drover/internal/store/sqlcore"
)

// Linked runtimes (table linked_runtimes, migration 0011): linking, unlinking
// and token changes are durable writes, as everything people send is (a lost
// unlink would bring a revoked token back after a power loss); an agent's
// state is the servers' own bookkeeping, rewritten at each connection and
// heartbeat, and is crash safe only.

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
	err = s.writeTx(ctx, func(tx *wtx) error {
		var held string
		err := tx.QueryRowContext(ctx, "SELECT name FROM linked_runtimes WHERE name = ? OR token_hash = ? LIMIT 1",
			r.Name, r.TokenHash).Scan(&held)
		switch {
		case err == nil && held == r.Name:
			return fmt.Errorf("it is linked already: %w", store.ErrConflict)
		case err == nil:
			return fmt.Errorf("linked runtime %s has the same token hash: %w", held, store.ErrConflict)
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
		_, err = tx.ExecContext(ctx, sqlcore.InsertLinked, args...)
		return err
	})
	if err != nil {
		return fmt.Errorf("link runtime %s: %w", r.Name, err)
	}
	return nil
}

// GetLinkedRuntime implements store.Store.
func (s *Store) GetLinkedRuntime(ctx context.Context, name string) (store.LinkedRuntime, error) {
	return sqlcore.GetLinkedRuntime(ctx, dialect{}, sqlReader{s.reads}, name)
}

// LinkedRuntimeByToken implements store.Store.
func (s *Store) LinkedRuntimeByToken(ctx context.Context, tokenHash string) (store.LinkedRuntime, error) {
	return sqlcore.LinkedRuntimeByToken(ctx, dialect{}, sqlReader{s.reads}, tokenHash)
}

// ListLinkedRuntimes implements store.Store: ordered by name.
func (s *Store) ListLinkedRuntimes(ctx context.Context) ([]store.LinkedRuntime, error) {
	return sqlcore.ListLinkedRuntimes(ctx, dialect{}, sqlReader{s.reads})
}

// SetLinkToken implements store.Store. tokenHash is required; setting the
// hash a runtime has already changes nothing.
func (s *Store) SetLinkToken(ctx context.Context, name, tokenHash string) error {
	if tokenHash == "" {
		return fmt.Errorf("set the token of linked runtime %s: the token hash is required", name)
	}
	err := s.writeTx(ctx, func(tx *wtx) error {
		var current string
		if err := tx.QueryRowContext(ctx, "SELECT token_hash FROM linked_runtimes WHERE name = ?", name).Scan(&current); err != nil {
			return notFound(err)
		}
		if current == tokenHash {
			return nil
		}
		var held string
		err := tx.QueryRowContext(ctx, "SELECT name FROM linked_runtimes WHERE token_hash = ?", tokenHash).Scan(&held)
		switch {
		case err == nil:
			return fmt.Errorf("linked runtime %s has the same token hash: %w", held, store.ErrConflict)
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
		_, err = tx.ExecContext(ctx, sqlcore.SetLinkToken, tokenHash, name)
		return err
	})
	if err != nil {
		return fmt.Errorf("set the token of linked runtime %s: %w", name, err)
	}
	return nil
}

// PutAgentState implements store.Store, in a crash-safe (not durable)
// transaction: servers rewrite it as agents connect and answer.
func (s *Store) PutAgentState(ctx context.Context, name string, st store.AgentState) error {
	agent, err := sqlcore.EncodeAgent(st)
	if err != nil {
		return fmt.Errorf("put the agent state of linked runtime %s: %w", name, err)
	}
	err = s.writeTxMode(ctx, crashSafe, func(tx *wtx) error {
		return affectedOne(tx.ExecContext(ctx, sqlcore.SetAgent, agent, name))
	})
	if err != nil {
		return fmt.Errorf("put the agent state of linked runtime %s: %w", name, err)
	}
	return nil
}

// UnlinkRuntime implements store.Store.
func (s *Store) UnlinkRuntime(ctx context.Context, name string) error {
	err := s.writeTx(ctx, func(tx *wtx) error {
		return affectedOne(tx.ExecContext(ctx, sqlcore.DeleteLinked, name))
	})
	if err != nil {
		return fmt.Errorf("unlink runtime %s: %w", name, err)
	}
	return nil
}

// affectedOne is the error of a statement that must change a row:
// store.ErrNotFound when it changed none.
func affectedOne(res sql.Result, err error) error {
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err == nil && n == 0 {
		err = store.ErrNotFound
	}
	return err
}
