package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/drover-dev/drover/internal/store"
)

// runsKept is how many task runs RecordRun keeps per instance and kind.
const runsKept = 200

const runColumns = "id, application, service, release_channel, runtime, kind, version, command, exit_code, error, " +
	"started_at, finished_at, stdout, stderr, truncated"

func scanRun(row scanner) (store.TaskRun, error) {
	var (
		r              store.TaskRun
		stdout, stderr []byte
	)
	err := row.Scan(&r.ID, &r.Application, &r.Service, &r.ReleaseChannel, &r.Runtime, &r.Kind, &r.Version,
		&r.Command, &r.ExitCode, &r.Error, at(&r.StartedAt), at(&r.FinishedAt), &stdout, &stderr, &r.Truncated)
	r.Stdout, r.Stderr = string(stdout), string(stderr)
	return r, err
}

const (
	insertRun = "INSERT INTO task_runs (application, service, release_channel, runtime, kind, version, command, exit_code, error," +
		" started_at, finished_at, stdout, stderr, truncated) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)" +
		" RETURNING id"
	// pruneRuns deletes the runs of an instance and kind ($1-$4) older than
	// the newest $5; the subquery is NULL, deleting nothing, while there are
	// fewer.
	pruneRuns = "DELETE FROM task_runs WHERE application = $1 AND service = $2 AND release_channel = $3 AND kind = $4" +
		" AND id <= (SELECT id FROM task_runs WHERE application = $1 AND service = $2 AND release_channel = $3 AND kind = $4" +
		" ORDER BY id DESC LIMIT 1 OFFSET $5)"
)

// RecordRun implements store.Store. r.ID is ignored; application, service,
// release channel and kind are required. A zero StartedAt or FinishedAt is
// set to the current time. Runs of one instance and kind are recorded one
// after another (an advisory lock on them, taken before the id is drawn), so
// their ids follow their commits and the runs beyond the newest 200, deleted
// in the same transaction, are exactly the oldest. Stdout and Stderr are kept
// byte for byte; the command's strings and the error are text, where NUL
// bytes and invalid UTF-8 become U+FFFD.
func (s *Store) RecordRun(ctx context.Context, r store.TaskRun) (int64, error) {
	if r.Application == "" || r.Service == "" || r.ReleaseChannel == "" || r.Kind == "" {
		return 0, fmt.Errorf("record %s run of %s/%s/%s: application, service, release channel and kind are required",
			r.Kind, r.Application, r.Service, r.ReleaseChannel)
	}
	t := now()
	if r.StartedAt.IsZero() {
		r.StartedAt = t
	}
	if r.FinishedAt.IsZero() {
		r.FinishedAt = t
	}
	var id int64
	err := s.tx(ctx, func(tx pgx.Tx) error {
		if err := lockName(ctx, tx, "runs", r.Application, r.Service, r.ReleaseChannel, r.Kind); err != nil {
			return err
		}
		err := tx.QueryRow(ctx, insertRun,
			r.Application, r.Service, r.ReleaseChannel, r.Runtime, r.Kind, r.Version, texts(r.Command), r.ExitCode, text(r.Error),
			nanos(r.StartedAt), nanos(r.FinishedAt), raw(r.Stdout), raw(r.Stderr), r.Truncated).Scan(&id)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, pruneRuns, r.Application, r.Service, r.ReleaseChannel, r.Kind, runsKept); err != nil {
			return fmt.Errorf("prune: %w", err)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("record %s run of %s/%s/%s: %w", r.Kind, r.Application, r.Service, r.ReleaseChannel, err)
	}
	return id, nil
}

// ListRuns implements store.Store. Each non-empty field of f filters; runs
// come newest (highest id) first, whatever their times.
func (s *Store) ListRuns(ctx context.Context, f store.RunFilter) ([]store.TaskRun, error) {
	q := "SELECT " + runColumns + " FROM task_runs WHERE true"
	var args []any
	for _, c := range []struct{ col, val string }{
		{"application", f.Application},
		{"service", f.Service},
		{"release_channel", f.ReleaseChannel},
		{"kind", f.Kind},
	} {
		if c.val != "" {
			args = append(args, c.val)
			q += fmt.Sprintf(" AND %s = $%d", c.col, len(args))
		}
	}
	args = append(args, limitArg(f.Limit))
	q += fmt.Sprintf(" ORDER BY id DESC LIMIT $%d", len(args))
	out, err := queryAll(ctx, s.pool, q, args, scanRun)
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	return out, nil
}

// GetRun implements store.Store; an unknown id fails with store.ErrNotFound.
func (s *Store) GetRun(ctx context.Context, id int64) (store.TaskRun, error) {
	r, err := scanRun(s.pool.QueryRow(ctx, "SELECT "+runColumns+" FROM task_runs WHERE id = $1", id))
	if err != nil {
		return store.TaskRun{}, fmt.Errorf("get run %d: %w", id, notFound(err))
	}
	return r, nil
}
