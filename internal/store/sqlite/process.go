package sqlite

import (
	"context"
	"fmt"

	"github.com/drover-dev/drover/internal/store"
)

const processColumns = "id, application, service, release_channel, runtime, kind, version, command, handle, started_at"

func scanProcess(row interface{ Scan(...any) error }) (store.Process, error) {
	var p store.Process
	err := row.Scan(&p.ID, &p.Application, &p.Service, &p.ReleaseChannel, &p.Runtime, &p.Kind, &p.Version,
		scanCommand{&p.Command}, &p.Handle, scanTime{&p.StartedAt})
	return p, err
}

// AddProcess implements store.Store. Kind and Handle are required; a zero
// StartedAt is set to the current time.
func (s *Store) AddProcess(ctx context.Context, p store.Process) (int64, error) {
	if p.Kind == "" || len(p.Handle) == 0 {
		return 0, fmt.Errorf("add %s process of %s/%s/%s: kind and handle are required", p.Kind, p.Application, p.Service, p.ReleaseChannel)
	}
	cmd, err := dbCommand(p.Command)
	if err != nil {
		return 0, fmt.Errorf("add %s process of %s/%s/%s: command: %w", p.Kind, p.Application, p.Service, p.ReleaseChannel, err)
	}
	if p.StartedAt.IsZero() {
		p.StartedAt = now()
	}
	var id int64
	err = s.writeTxMode(ctx, crashSafe, func(tx *wtx) error {
		res, err := tx.ExecContext(ctx, "INSERT INTO processes (application, service, release_channel, runtime, kind, version, command, handle, started_at)"+
			" VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
			p.Application, p.Service, p.ReleaseChannel, p.Runtime, p.Kind, p.Version, cmd, p.Handle, dbTime(p.StartedAt))
		if err != nil {
			return err
		}
		id, err = res.LastInsertId()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("add %s process of %s/%s/%s: %w", p.Kind, p.Application, p.Service, p.ReleaseChannel, err)
	}
	return id, nil
}

// RemoveProcess implements store.Store; an unknown id fails with store.ErrNotFound.
func (s *Store) RemoveProcess(ctx context.Context, id int64) error {
	err := s.writeTxMode(ctx, crashSafe, func(tx *wtx) error {
		res, err := tx.ExecContext(ctx, "DELETE FROM processes WHERE id = ?", id)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err == nil && n == 0 {
			err = store.ErrNotFound
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("remove process %d: %w", id, err)
	}
	return nil
}

// ListProcesses implements store.Store: every record, oldest first.
func (s *Store) ListProcesses(ctx context.Context) ([]store.Process, error) {
	out, err := queryAll(ctx, s.reads, "SELECT "+processColumns+" FROM processes ORDER BY id", nil, scanProcess)
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	return out, nil
}
