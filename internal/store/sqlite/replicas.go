package sqlite

import (
	"context"
	"fmt"
	"time"

	"github.com/drover-dev/drover/internal/store"
)

// Replicas (table replicas, migration 0012): the servers' own bookkeeping,
// rewritten as each announces itself, so writes are crash safe only. Times
// are this process's clock; seen_at compares as text, which sorts
// chronologically (timeLayout).

// PutReplica implements store.Store: it upserts r with SeenAt now and, in
// the same transaction, deletes the replicas not seen for
// store.ReplicaForgetAfter.
func (s *Store) PutReplica(ctx context.Context, r store.Replica) error {
	if r.Name == "" || r.AgentURL == "" {
		return fmt.Errorf("put replica %q: name and agent URL are required", r.Name)
	}
	t := now()
	err := s.writeTxMode(ctx, crashSafe, func(tx *wtx) error {
		if _, err := tx.ExecContext(ctx, "DELETE FROM replicas WHERE seen_at < ?", dbTime(t.Add(-store.ReplicaForgetAfter))); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO replicas (name, agent_url, seen_at) VALUES (?, ?, ?)
			ON CONFLICT (name) DO UPDATE SET agent_url = excluded.agent_url, seen_at = excluded.seen_at`,
			r.Name, r.AgentURL, dbTime(t))
		return err
	})
	if err != nil {
		return fmt.Errorf("put replica %s: %w", r.Name, err)
	}
	return nil
}

// ListReplicas implements store.Store: the replicas seen within maxAge,
// ordered by name.
func (s *Store) ListReplicas(ctx context.Context, maxAge time.Duration) ([]store.Replica, error) {
	out, err := queryAll(ctx, s.reads, "SELECT name, agent_url, seen_at FROM replicas WHERE seen_at >= ? ORDER BY name",
		[]any{dbTime(now().Add(-maxAge))},
		func(row interface{ Scan(...any) error }) (store.Replica, error) {
			var r store.Replica
			err := row.Scan(&r.Name, &r.AgentURL, scanTime{&r.SeenAt})
			return r, err
		})
	if err != nil {
		return nil, fmt.Errorf("list replicas: %w", err)
	}
	return out, nil
}

// RemoveReplica implements store.Store: removing an unknown replica is no
// error.
func (s *Store) RemoveReplica(ctx context.Context, name string) error {
	err := s.writeTxMode(ctx, crashSafe, func(tx *wtx) error {
		_, err := tx.ExecContext(ctx, "DELETE FROM replicas WHERE name = ?", name)
		return err
	})
	if err != nil {
		return fmt.Errorf("remove replica %s: %w", name, err)
	}
	return nil
}
