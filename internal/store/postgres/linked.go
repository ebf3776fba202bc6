package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/drover-dev/drover/internal/store"
)

// Linked runtimes (table linked_runtimes, migration 0002). Each method is
// one statement: the primary key and the unique token_hash decide
// conflicts (store.ErrConflict), so concurrent links of one name or one
// token have one winner.

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

// dbLabels encodes labels for the BYTEA column labels: a JSON object, NULL
// when there are none (they read back as nil).
func dbLabels(labels map[string]string) ([]byte, error) {
	if len(labels) == 0 {
		return nil, nil
	}
	return json.Marshal(labels)
}

// scanLinked scans a row of linkedColumns.
func scanLinked(row scanner) (store.LinkedRuntime, error) {
	var (
		r             store.LinkedRuntime
		labels, agent []byte
	)
	if err := row.Scan(&r.Name, &labels, &r.TokenHash, at(&r.CreatedAt), &agent); err != nil {
		return r, err
	}
	if labels != nil {
		if err := json.Unmarshal(labels, &r.Labels); err != nil {
			return r, fmt.Errorf("labels of linked runtime %s: %w", r.Name, err)
		}
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
	return []any{r.Name, labels, r.TokenHash, nanos(r.CreatedAt), agent}, nil
}

const insertLinked = "INSERT INTO linked_runtimes (" + linkedColumns + ") VALUES ($1, $2, $3, $4, $5)"

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
	args, err := linkedArgs(r)
	if err != nil {
		return fmt.Errorf("link runtime %s: %w", r.Name, err)
	}
	_, err = s.pool.Exec(ctx, insertLinked, args...)
	if err := s.health.wrote(err); err != nil {
		return fmt.Errorf("link runtime %s: %w", r.Name, linkConflict(err))
	}
	s.notifyRuntimes(ctx)
	return nil
}

// GetLinkedRuntime implements store.Store.
func (s *Store) GetLinkedRuntime(ctx context.Context, name string) (store.LinkedRuntime, error) {
	r, err := scanLinked(s.pool.QueryRow(ctx, "SELECT "+linkedColumns+" FROM linked_runtimes WHERE name = $1", name))
	if err != nil {
		return store.LinkedRuntime{}, fmt.Errorf("get linked runtime %s: %w", name, notFound(err))
	}
	return r, nil
}

// LinkedRuntimeByToken implements store.Store.
func (s *Store) LinkedRuntimeByToken(ctx context.Context, tokenHash string) (store.LinkedRuntime, error) {
	r, err := scanLinked(s.pool.QueryRow(ctx, "SELECT "+linkedColumns+" FROM linked_runtimes WHERE token_hash = $1", tokenHash))
	if err != nil {
		// The hash is a credential's: it is not repeated in the error.
		return store.LinkedRuntime{}, fmt.Errorf("linked runtime by token: %w", notFound(err))
	}
	return r, nil
}

// ListLinkedRuntimes implements store.Store: ordered by name.
func (s *Store) ListLinkedRuntimes(ctx context.Context) ([]store.LinkedRuntime, error) {
	out, err := queryAll(ctx, s.pool, "SELECT "+linkedColumns+" FROM linked_runtimes ORDER BY name", nil, scanLinked)
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
	tag, err := s.pool.Exec(ctx, "UPDATE linked_runtimes SET token_hash = $2 WHERE name = $1", name, tokenHash)
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
	agent, err := encodeAgent(st)
	if err != nil {
		return fmt.Errorf("put the agent state of linked runtime %s: %w", name, err)
	}
	tag, err := s.pool.Exec(ctx, "UPDATE linked_runtimes SET agent = $2 WHERE name = $1", name, agent)
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
	tag, err := s.pool.Exec(ctx, "DELETE FROM linked_runtimes WHERE name = $1", name)
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
