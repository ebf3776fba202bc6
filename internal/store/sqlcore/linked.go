package sqlcore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/drover-dev/drover/internal/store"
)

// Linked runtimes (table linked_runtimes): a runtime served by an agent,
// with the agent's state as a JSON document.

// LinkedColumns are the columns of a linked runtime, in the order of
// LinkedArgs and ScanLinked.
const LinkedColumns = "name, labels, token_hash, created_at, agent"

// Queries of linked runtimes, with ? placeholders (Bind).
//
//nolint:gosec // queries, not credentials
const (
	// InsertLinked inserts LinkedArgs.
	InsertLinked = "INSERT INTO linked_runtimes (" + LinkedColumns + ") VALUES (?, ?, ?, ?, ?)"
	// SelectLinked selects every linked runtime, by name.
	SelectLinked = "SELECT " + LinkedColumns + " FROM linked_runtimes ORDER BY name"
	// SetLinkToken sets the token hash (first) of a name (second).
	SetLinkToken = "UPDATE linked_runtimes SET token_hash = ? WHERE name = ?"
	// SetAgent sets the agent (first, EncodeAgent) of a name (second).
	SetAgent = "UPDATE linked_runtimes SET agent = ? WHERE name = ?"
	// DeleteLinked deletes a name.
	DeleteLinked = "DELETE FROM linked_runtimes WHERE name = ?"

	selectLinkedByName  = "SELECT " + LinkedColumns + " FROM linked_runtimes WHERE name = ?"
	selectLinkedByToken = "SELECT " + LinkedColumns + " FROM linked_runtimes WHERE token_hash = ?"
)

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

// EncodeAgent is st as stored, its times in UTC.
func EncodeAgent(st store.AgentState) ([]byte, error) {
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

// LinkedArgs are r's values for LinkedColumns, in order: labels as a JSON
// object (NULL when there are none: they read back as nil).
func LinkedArgs(d Dialect, r store.LinkedRuntime) ([]any, error) {
	var labels []byte
	if len(r.Labels) > 0 {
		var err error
		if labels, err = json.Marshal(r.Labels); err != nil {
			return nil, fmt.Errorf("labels: %w", err)
		}
	}
	agent, err := EncodeAgent(r.Agent)
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	return []any{r.Name, d.JSON(labels), r.TokenHash, d.Time(r.CreatedAt), agent}, nil
}

// ScanLinked scans a row of LinkedColumns.
func ScanLinked(d Dialect, row Scanner) (store.LinkedRuntime, error) {
	var (
		r     store.LinkedRuntime
		agent []byte
	)
	if err := row.Scan(&r.Name, JSONColumn{V: &r.Labels}, &r.TokenHash, d.ScanTime(&r.CreatedAt), &agent); err != nil {
		return r, err
	}
	st, err := decodeAgent(agent)
	if err != nil {
		return r, fmt.Errorf("agent of linked runtime %s: %w", r.Name, err)
	}
	r.Agent = st
	return r, nil
}

// GetLinkedRuntime implements store.Agents over r.
func GetLinkedRuntime(ctx context.Context, d Dialect, r Reader, name string) (store.LinkedRuntime, error) {
	lr, err := ScanLinked(d, r.QueryRow(ctx, Bind(d, selectLinkedByName), name))
	if err != nil {
		return store.LinkedRuntime{}, fmt.Errorf("get linked runtime %s: %w", name, err)
	}
	return lr, nil
}

// LinkedRuntimeByToken implements store.Agents over r.
func LinkedRuntimeByToken(ctx context.Context, d Dialect, r Reader, tokenHash string) (store.LinkedRuntime, error) {
	lr, err := ScanLinked(d, r.QueryRow(ctx, Bind(d, selectLinkedByToken), tokenHash))
	if err != nil {
		// The hash is a credential's: it is not repeated in the error.
		return store.LinkedRuntime{}, fmt.Errorf("linked runtime by token: %w", err)
	}
	return lr, nil
}

// ListLinkedRuntimes implements store.Agents over r: ordered by name.
func ListLinkedRuntimes(ctx context.Context, d Dialect, r Reader) ([]store.LinkedRuntime, error) {
	out, err := queryAll(ctx, r, Bind(d, SelectLinked), nil, func(row Scanner) (store.LinkedRuntime, error) { return ScanLinked(d, row) })
	if err != nil {
		return nil, fmt.Errorf("list linked runtimes: %w", err)
	}
	return out, nil
}
