package sqlite

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/drover-dev/drover/internal/store"
)

// runsKept is how many task runs RecordRun keeps per instance and kind.
const runsKept = 200

const runColumns = "id, application, service, release_channel, runtime, kind, version, command, exit_code, error, " +
	"started_at, finished_at, stdout, stderr, truncated"

func scanRun(row interface{ Scan(...any) error }) (store.TaskRun, error) {
	var r store.TaskRun
	err := row.Scan(&r.ID, &r.Application, &r.Service, &r.ReleaseChannel, &r.Runtime, &r.Kind, &r.Version,
		scanCommand{&r.Command}, &r.ExitCode, &r.Error, scanTime{&r.StartedAt}, scanTime{&r.FinishedAt},
		&r.Stdout, &r.Stderr, &r.Truncated)
	return r, err
}

// dbCommand encodes a command as a JSON array of strings; an empty one is NULL.
func dbCommand(cmd []string) (any, error) {
	if len(cmd) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(cmd)
	if err != nil {
		return nil, err
	}
	return string(b), nil
}

// scanCommand decodes a JSON command column (NULL = nil) into *c.
type scanCommand struct{ c *[]string }

func (s scanCommand) Scan(src any) error {
	var b []byte
	switch v := src.(type) {
	case nil:
		*s.c = nil
		return nil
	case string:
		b = []byte(v)
	case []byte:
		b = v
	default:
		return fmt.Errorf("command column: unexpected %T", src)
	}
	var c []string
	if err := json.Unmarshal(b, &c); err != nil {
		return fmt.Errorf("command column: %w", err)
	}
	*s.c = c
	return nil
}

const (
	insertRun = "INSERT INTO task_runs (application, service, release_channel, runtime, kind, version, command, exit_code, error," +
		" started_at, finished_at, stdout, stderr, truncated) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
	// pruneRuns deletes the runs of an instance and kind (?1-?4) older than
	// the newest runsKept; the subquery is NULL, deleting nothing, while
	// there are fewer.
	pruneRuns = "DELETE FROM task_runs WHERE application = ?1 AND service = ?2 AND release_channel = ?3 AND kind = ?4" +
		" AND id <= (SELECT id FROM task_runs WHERE application = ?1 AND service = ?2 AND release_channel = ?3 AND kind = ?4" +
		" ORDER BY id DESC LIMIT 1 OFFSET ?5)"
)

// RecordRun implements store.Store. r.ID is ignored; application, service,
// release channel and kind are required. A zero StartedAt or FinishedAt is
// set to the current time. In the same transaction, the runs of the instance
// and kind beyond the newest 200 are deleted. The command is stored as JSON,
// so its strings should be valid UTF-8 (invalid bytes become U+FFFD); Stdout
// and Stderr are kept byte for byte.
func (s *Store) RecordRun(ctx context.Context, r store.TaskRun) (int64, error) {
	if r.Application == "" || r.Service == "" || r.ReleaseChannel == "" || r.Kind == "" {
		return 0, fmt.Errorf("record %s run of %s/%s/%s: application, service, release channel and kind are required",
			r.Kind, r.Application, r.Service, r.ReleaseChannel)
	}
	cmd, err := dbCommand(r.Command)
	if err != nil {
		return 0, fmt.Errorf("record %s run of %s/%s/%s: command: %w", r.Kind, r.Application, r.Service, r.ReleaseChannel, err)
	}
	t := now()
	if r.StartedAt.IsZero() {
		r.StartedAt = t
	}
	if r.FinishedAt.IsZero() {
		r.FinishedAt = t
	}
	var id int64
	err = s.writeTxMode(ctx, crashSafe, func(tx *wtx) error {
		res, err := tx.ExecContext(ctx, insertRun,
			r.Application, r.Service, r.ReleaseChannel, r.Runtime, r.Kind, r.Version, cmd, r.ExitCode, r.Error,
			dbTime(r.StartedAt), dbTime(r.FinishedAt), r.Stdout, r.Stderr, r.Truncated)
		if err != nil {
			return err
		}
		if id, err = res.LastInsertId(); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, pruneRuns,
			r.Application, r.Service, r.ReleaseChannel, r.Kind, runsKept)
		if err != nil {
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
	q := "SELECT " + runColumns + " FROM task_runs WHERE 1 = 1"
	var args []any
	for _, c := range []struct{ col, val string }{
		{"application", f.Application},
		{"service", f.Service},
		{"release_channel", f.ReleaseChannel},
		{"kind", f.Kind},
	} {
		if c.val != "" {
			q += " AND " + c.col + " = ?"
			args = append(args, c.val)
		}
	}
	q += " ORDER BY id DESC" + limitClause(f.Limit)
	out, err := queryAll(ctx, s.reads, q, args, scanRun)
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	return out, nil
}

// GetRun implements store.Store; an unknown id fails with store.ErrNotFound.
func (s *Store) GetRun(ctx context.Context, id int64) (store.TaskRun, error) {
	r, err := scanRun(s.reads.QueryRowContext(ctx, "SELECT "+runColumns+" FROM task_runs WHERE id = ?", id))
	if err != nil {
		return store.TaskRun{}, fmt.Errorf("get run %d: %w", id, notFound(err))
	}
	return r, nil
}
