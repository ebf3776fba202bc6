package sqlite

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/drover-dev/drover/internal/store"
)

// PutRuntimeFacts implements store.Store.
func (s *Store) PutRuntimeFacts(ctx context.Context, f store.RuntimeFacts) error {
	if f.Runtime == "" {
		return fmt.Errorf("put runtime facts: runtime is required")
	}
	if f.ObservedAt.IsZero() {
		f.ObservedAt = now()
	}
	body, err := json.Marshal(factsBody{KubeVersion: f.KubeVersion, APIVersions: f.APIVersions})
	if err != nil {
		return fmt.Errorf("put facts of runtime %s: %w", f.Runtime, err)
	}
	err = s.writeTxMode(ctx, crashSafe, func(tx *wtx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO runtime_facts (runtime, body, observed_at) VALUES (?, ?, ?)
			ON CONFLICT (runtime) DO UPDATE SET body = excluded.body, observed_at = excluded.observed_at`,
			f.Runtime, body, dbTime(f.ObservedAt))
		return err
	})
	if err != nil {
		return fmt.Errorf("put facts of runtime %s: %w", f.Runtime, err)
	}
	return nil
}

// factsBody is the stored JSON of runtime facts.
type factsBody struct {
	KubeVersion string   `json:"kubeVersion,omitempty"`
	APIVersions []string `json:"apiVersions,omitempty"`
}

// ListRuntimeFacts implements store.Store.
func (s *Store) ListRuntimeFacts(ctx context.Context) ([]store.RuntimeFacts, error) {
	out, err := queryAll(ctx, s.reads, "SELECT runtime, body, observed_at FROM runtime_facts ORDER BY runtime", nil,
		func(row interface{ Scan(...any) error }) (store.RuntimeFacts, error) {
			var (
				f    store.RuntimeFacts
				body []byte
				b    factsBody
			)
			if err := row.Scan(&f.Runtime, &body, scanTime{&f.ObservedAt}); err != nil {
				return f, err
			}
			if err := json.Unmarshal(body, &b); err != nil {
				return f, fmt.Errorf("facts of runtime %s: %w", f.Runtime, err)
			}
			f.KubeVersion, f.APIVersions = b.KubeVersion, b.APIVersions
			return f, nil
		})
	if err != nil {
		return nil, fmt.Errorf("list runtime facts: %w", err)
	}
	return out, nil
}
