package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/drover-dev/drover/internal/store"
)

// factsBody is the stored JSON of runtime facts.
type factsBody struct {
	KubeVersion string   `json:"kubeVersion,omitempty"`
	APIVersions []string `json:"apiVersions,omitempty"`
}

// PutRuntimeFacts implements store.Store.
func (s *Store) PutRuntimeFacts(ctx context.Context, f store.RuntimeFacts) error {
	if f.Runtime == "" {
		return errors.New("put runtime facts: runtime is required")
	}
	if f.ObservedAt.IsZero() {
		f.ObservedAt = now()
	}
	body, err := json.Marshal(factsBody{KubeVersion: f.KubeVersion, APIVersions: f.APIVersions})
	if err != nil {
		return fmt.Errorf("put facts of runtime %s: %w", f.Runtime, err)
	}
	_, err = s.pool.Exec(ctx, `INSERT INTO runtime_facts (runtime, body, observed_at) VALUES ($1, $2, $3)
		ON CONFLICT (runtime) DO UPDATE SET body = excluded.body, observed_at = excluded.observed_at`,
		f.Runtime, body, nanos(f.ObservedAt))
	if err := s.health.wrote(err); err != nil {
		return fmt.Errorf("put facts of runtime %s: %w", f.Runtime, err)
	}
	return nil
}

// ListRuntimeFacts implements store.Store.
func (s *Store) ListRuntimeFacts(ctx context.Context) ([]store.RuntimeFacts, error) {
	out, err := queryAll(ctx, s.pool, "SELECT runtime, body, observed_at FROM runtime_facts ORDER BY runtime", nil, scanFacts)
	if err != nil {
		return nil, fmt.Errorf("list runtime facts: %w", err)
	}
	return out, nil
}

func scanFacts(row scanner) (store.RuntimeFacts, error) {
	var (
		f    store.RuntimeFacts
		body []byte
		b    factsBody
	)
	if err := row.Scan(&f.Runtime, &body, at(&f.ObservedAt)); err != nil {
		return f, err
	}
	if err := json.Unmarshal(body, &b); err != nil {
		return f, fmt.Errorf("facts of runtime %s: %w", f.Runtime, err)
	}
	f.KubeVersion, f.APIVersions = b.KubeVersion, b.APIVersions
	return f, nil
}
