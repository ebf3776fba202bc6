package sqlcore

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/drover-dev/drover/internal/store"
)

// Runtime facts (table runtime_facts): what a runtime last reported about
// its backend, one row a runtime, its facts as a JSON document.

// FactsColumns are the columns of runtime facts, in the order of FactsArgs
// and ScanFacts.
const FactsColumns = "runtime, body, observed_at"

// Queries of runtime facts, with ? placeholders (Bind).
//
//nolint:gosec // queries, not credentials
const (
	// InsertFacts inserts FactsArgs (an import).
	InsertFacts = "INSERT INTO runtime_facts (" + FactsColumns + ") VALUES (?, ?, ?)"
	// PutFacts inserts FactsArgs or replaces the runtime's row.
	PutFacts = InsertFacts + " ON CONFLICT (runtime) DO UPDATE SET body = excluded.body, observed_at = excluded.observed_at"
	// SelectFacts selects every runtime's facts, by runtime.
	SelectFacts = "SELECT " + FactsColumns + " FROM runtime_facts ORDER BY runtime"
)

// factsBody is the stored JSON of runtime facts.
type factsBody struct {
	KubeVersion string   `json:"kubeVersion,omitempty"`
	APIVersions []string `json:"apiVersions,omitempty"`
}

// FactsArgs are f's values for FactsColumns, in order.
func FactsArgs(d Dialect, f store.RuntimeFacts) ([]any, error) {
	body, err := json.Marshal(factsBody{KubeVersion: f.KubeVersion, APIVersions: f.APIVersions})
	if err != nil {
		return nil, fmt.Errorf("facts of runtime %s: %w", f.Runtime, err)
	}
	return []any{f.Runtime, body, d.Time(f.ObservedAt)}, nil
}

// ScanFacts scans a row of FactsColumns.
func ScanFacts(d Dialect, row Scanner) (store.RuntimeFacts, error) {
	var (
		f    store.RuntimeFacts
		body []byte
		b    factsBody
	)
	if err := row.Scan(&f.Runtime, &body, d.ScanTime(&f.ObservedAt)); err != nil {
		return f, err
	}
	if err := json.Unmarshal(body, &b); err != nil {
		return f, fmt.Errorf("facts of runtime %s: %w", f.Runtime, err)
	}
	f.KubeVersion, f.APIVersions = b.KubeVersion, b.APIVersions
	return f, nil
}

// ListRuntimeFacts implements store.Facts over r.
func ListRuntimeFacts(ctx context.Context, d Dialect, r Reader) ([]store.RuntimeFacts, error) {
	out, err := queryAll(ctx, r, Bind(d, SelectFacts), nil, func(row Scanner) (store.RuntimeFacts, error) { return ScanFacts(d, row) })
	if err != nil {
		return nil, fmt.Errorf("list runtime facts: %w", err)
	}
	return out, nil
}
