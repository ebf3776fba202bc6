package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/drover-dev/drover/internal/store"
)

// Linked runtimes (table linked_runtimes, migration 0011): linking, unlinking
// and token changes are durable writes, as everything people send is (a lost
// unlink would bring a revoked token back after a power loss); an agent's
// state is the servers' own bookkeeping, rewritten at each connection and
// heartbeat, and is crash safe only.

const linkedColumns = "name, labels, token_hash, created_at, agent"

// agentBody is the stored JSON of an agent's state: the fields of
// store.AgentState (it converts directly, so a field added there fails to
// compile here until it is stored), under names of the store's own.
type agentBody struct {
	Connected      bool      `json:"connected,omitempty"`
	Replica        string    `json:"replica,omitempty"`
	Version        string    `json:"version,omitempty"`
	Mode           string    `json:"mode,omitempty"`
	Host           string    `json:"host,omitempty"`
	ConnectedAt    time.Time `json:"connectedAt,omitzero"`
	HeartbeatAt    time.Time `json:"heartbeatAt,omitzero"`
	DisconnectedAt time.Time `json:"disconnectedAt,omitzero"`
	Error          string    `json:"error,omitempty"`
}

// encodeAgent is st as stored, its times in UTC.
func encodeAgent(st store.AgentState) ([]byte, error) {
	b := agentBody(st)
	b.ConnectedAt, b.HeartbeatAt, b.DisconnectedAt = b.ConnectedAt.UTC(), b.HeartbeatAt.UTC(), b.DisconnectedAt.UTC()
	return json.Marshal(b)
}

// decodeAgent decodes a stored agent state.
func decodeAgent(body []byte) (store.AgentState, error) {
	var b agentBody
	if err := json.Unmarshal(body, &b); err != nil {
		return store.AgentState{}, err
	}
	b.ConnectedAt, b.HeartbeatAt, b.DisconnectedAt = b.ConnectedAt.UTC(), b.HeartbeatAt.UTC(), b.DisconnectedAt.UTC()
	return store.AgentState(b), nil
}

// dbLabels encodes labels for the TEXT column labels: a JSON object, NULL
// when there are none (they read back as nil).
func dbLabels(labels map[string]string) (any, error) {
	if len(labels) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(labels)
	if err != nil {
		return nil, err
	}
	return string(b), nil
}

// scanLinked scans a row of linkedColumns.
func scanLinked(row interface{ Scan(...any) error }) (store.LinkedRuntime, error) {
	var (
		r     store.LinkedRuntime
		agent []byte
	)
	if err := row.Scan(&r.Name, scanJSON{&r.Labels}, &r.TokenHash, scanTime{&r.CreatedAt}, &agent); err != nil {
		return r, err
	}
	st, err := decodeAgent(agent)
	if err != nil {
		return r, fmt.Errorf("agent of linked runtime %s: %w", r.Name, err)
	}
	r.Agent = st
	return r, nil
}

// linkedArgs are r's values for the columns of linkedColumns, in order.
func linkedArgs(r store.LinkedRuntime) ([]any, error) {
	labels, err := dbLabels(r.Labels)
	if err != nil {
		return nil, fmt.Errorf("labels: %w", err)
	}
	agent, err := encodeAgent(r.Agent)
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	return []any{r.Name, labels, r.TokenHash, dbTime(r.CreatedAt), agent}, nil
}

const insertLinked = "INSERT INTO linked_runtimes (" + linkedColumns + ") VALUES (?, ?, ?, ?, ?)"

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
	args, err := linkedArgs(r)
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
		_, err = tx.ExecContext(ctx, insertLinked, args...)
		return err
	})
	if err != nil {
		return fmt.Errorf("link runtime %s: %w", r.Name, err)
	}
	return nil
}

// GetLinkedRuntime implements store.Store.
func (s *Store) GetLinkedRuntime(ctx context.Context, name string) (store.LinkedRuntime, error) {
	r, err := scanLinked(s.reads.QueryRowContext(ctx, "SELECT "+linkedColumns+" FROM linked_runtimes WHERE name = ?", name))
	if err != nil {
		return store.LinkedRuntime{}, fmt.Errorf("get linked runtime %s: %w", name, notFound(err))
	}
	return r, nil
}

// LinkedRuntimeByToken implements store.Store.
func (s *Store) LinkedRuntimeByToken(ctx context.Context, tokenHash string) (store.LinkedRuntime, error) {
	r, err := scanLinked(s.reads.QueryRowContext(ctx, "SELECT "+linkedColumns+" FROM linked_runtimes WHERE token_hash = ?", tokenHash))
	if err != nil {
		// The hash is a credential's: it is not repeated in the error.
		return store.LinkedRuntime{}, fmt.Errorf("linked runtime by token: %w", notFound(err))
	}
	return r, nil
}

// ListLinkedRuntimes implements store.Store: ordered by name.
func (s *Store) ListLinkedRuntimes(ctx context.Context) ([]store.LinkedRuntime, error) {
	out, err := queryAll(ctx, s.reads, "SELECT "+linkedColumns+" FROM linked_runtimes ORDER BY name", nil, scanLinked)
	if err != nil {
		return nil, fmt.Errorf("list linked runtimes: %w", err)
	}
	return out, nil
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
		_, err = tx.ExecContext(ctx, "UPDATE linked_runtimes SET token_hash = ? WHERE name = ?", tokenHash, name)
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
	agent, err := encodeAgent(st)
	if err != nil {
		return fmt.Errorf("put the agent state of linked runtime %s: %w", name, err)
	}
	err = s.writeTxMode(ctx, crashSafe, func(tx *wtx) error {
		return affectedOne(tx.ExecContext(ctx, "UPDATE linked_runtimes SET agent = ? WHERE name = ?", agent, name))
	})
	if err != nil {
		return fmt.Errorf("put the agent state of linked runtime %s: %w", name, err)
	}
	return nil
}

// UnlinkRuntime implements store.Store.
func (s *Store) UnlinkRuntime(ctx context.Context, name string) error {
	err := s.writeTx(ctx, func(tx *wtx) error {
		return affectedOne(tx.ExecContext(ctx, "DELETE FROM linked_runtimes WHERE name = ?", name))
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
