package postgres

import (
	"context"
	"fmt"

	"github.com/drover-dev/drover/internal/store"
)

const processColumns = "id, application, service, release_channel, runtime, kind, version, command, handle, started_at"

func scanProcess(row scanner) (store.Process, error) {
	var p store.Process
	err := row.Scan(&p.ID, &p.Application, &p.Service, &p.ReleaseChannel, &p.Runtime, &p.Kind, &p.Version,
		&p.Command, &p.Handle, at(&p.StartedAt))
	return p, err
}

// AddProcess implements store.Store. Kind and Handle are required; a zero
// StartedAt is set to the current time.
func (s *Store) AddProcess(ctx context.Context, p store.Process) (int64, error) {
	if p.Kind == "" || len(p.Handle) == 0 {
		return 0, fmt.Errorf("add %s process of %s/%s/%s: kind and handle are required", p.Kind, p.Application, p.Service, p.ReleaseChannel)
	}
	if p.StartedAt.IsZero() {
		p.StartedAt = now()
	}
	var id int64
	err := s.pool.QueryRow(ctx, "INSERT INTO processes (application, service, release_channel, runtime, kind, version, command, handle, started_at)"+
		" VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING id",
		p.Application, p.Service, p.ReleaseChannel, p.Runtime, p.Kind, p.Version, texts(p.Command), p.Handle, nanos(p.StartedAt)).Scan(&id)
	if err := s.health.wrote(err); err != nil {
		return 0, fmt.Errorf("add %s process of %s/%s/%s: %w", p.Kind, p.Application, p.Service, p.ReleaseChannel, err)
	}
	return id, nil
}

// RemoveProcess implements store.Store; an unknown id fails with store.ErrNotFound.
func (s *Store) RemoveProcess(ctx context.Context, id int64) error {
	tag, err := s.pool.Exec(ctx, "DELETE FROM processes WHERE id = $1", id)
	err = s.health.wrote(err)
	if err == nil && tag.RowsAffected() == 0 {
		err = store.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("remove process %d: %w", id, err)
	}
	return nil
}

// ListProcesses implements store.Store: every record, oldest first.
func (s *Store) ListProcesses(ctx context.Context) ([]store.Process, error) {
	out, err := queryAll(ctx, s.pool, "SELECT "+processColumns+" FROM processes ORDER BY id", nil, scanProcess)
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	return out, nil
}
