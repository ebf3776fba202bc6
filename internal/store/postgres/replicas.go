package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/drover-dev/drover/internal/store"
)

// Replicas (table replicas, migration 0003). Their times are the database's
// clock (dbNow), as lease expiry is, so servers on several hosts agree on
// which replicas are live whatever their clocks.

// PutReplica implements store.Store: in one transaction it deletes the
// replicas not seen for store.ReplicaForgetAfter and upserts r with SeenAt
// now. Concurrent puts that delete the same stale rows may deadlock; tx runs
// the loser again.
func (s *Store) PutReplica(ctx context.Context, r store.Replica) error {
	if r.Name == "" || r.AgentURL == "" {
		return fmt.Errorf("put replica %q: name and agent URL are required", r.Name)
	}
	err := s.tx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "DELETE FROM replicas WHERE seen_at < "+dbNow+" - $1", store.ReplicaForgetAfter.Nanoseconds()); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO replicas (name, agent_url, seen_at) VALUES ($1, $2, `+dbNow+`)
			ON CONFLICT (name) DO UPDATE SET agent_url = excluded.agent_url, seen_at = excluded.seen_at`,
			r.Name, r.AgentURL)
		return err
	})
	if err != nil {
		return fmt.Errorf("put replica %s: %w", r.Name, err)
	}
	return nil
}

// ListReplicas implements store.Store: the replicas seen within maxAge of
// the database's clock, ordered by name.
func (s *Store) ListReplicas(ctx context.Context, maxAge time.Duration) ([]store.Replica, error) {
	out, err := queryAll(ctx, s.pool, "SELECT name, agent_url, seen_at FROM replicas WHERE seen_at >= "+dbNow+" - $1 ORDER BY name",
		[]any{maxAge.Nanoseconds()}, scanReplica)
	if err != nil {
		return nil, fmt.Errorf("list replicas: %w", err)
	}
	return out, nil
}

func scanReplica(row scanner) (store.Replica, error) {
	var r store.Replica
	err := row.Scan(&r.Name, &r.AgentURL, at(&r.SeenAt))
	return r, err
}

// RemoveReplica implements store.Store: removing an unknown replica is no
// error.
func (s *Store) RemoveReplica(ctx context.Context, name string) error {
	_, err := s.pool.Exec(ctx, "DELETE FROM replicas WHERE name = $1", name)
	if err := s.health.wrote(err); err != nil {
		return fmt.Errorf("remove replica %s: %w", name, err)
	}
	return nil
}
