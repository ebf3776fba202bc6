package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	sqlite3 "modernc.org/sqlite"
	sqlitelib "modernc.org/sqlite/lib"

	"github.com/drover-dev/drover/internal/store"
)

// ClaimLease implements store.Store.
func (s *Store) ClaimLease(ctx context.Context, key, owner string, ttl time.Duration) (store.Lease, error) {
	if key == "" || owner == "" || ttl <= 0 {
		return store.Lease{}, fmt.Errorf("claim lease: key, owner and a positive ttl are required")
	}
	var out store.Lease
	err := s.writeTxRerun(ctx, crashSafe, func(tx *wtx) error {
		t := now()
		cur, err := scanLease(tx.QueryRowContext(ctx, "SELECT key, owner, token, expires FROM leases WHERE key = ?", key))
		switch {
		case errors.Is(err, sql.ErrNoRows):
			out = store.Lease{Key: key, Owner: owner, Token: 1, Expires: t.Add(ttl)}
		case err != nil:
			return err
		case cur.Owner == owner:
			out = store.Lease{Key: key, Owner: owner, Token: cur.Token, Expires: t.Add(ttl)}
		case cur.Expires.After(t):
			out = cur
			return fmt.Errorf("claim lease %s: held by %s until %s: %w", key, cur.Owner, cur.Expires.Format(time.RFC3339Nano), store.ErrLeaseHeld)
		default:
			out = store.Lease{Key: key, Owner: owner, Token: cur.Token + 1, Expires: t.Add(ttl)}
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO leases (key, owner, token, expires) VALUES (?, ?, ?, ?)
			ON CONFLICT (key) DO UPDATE SET owner = excluded.owner, token = excluded.token, expires = excluded.expires`,
			out.Key, out.Owner, out.Token, dbTime(out.Expires))
		if err == nil {
			tx.noteLease(out.Key, out.Token)
		}
		return err
	})
	if err != nil {
		if errors.Is(err, store.ErrLeaseHeld) {
			return out, err
		}
		return store.Lease{}, fmt.Errorf("claim lease %s: %w", key, err)
	}
	return out, nil
}

// RenewLease implements store.Store.
func (s *Store) RenewLease(ctx context.Context, l store.Lease, ttl time.Duration) (store.Lease, error) {
	if ttl <= 0 {
		return store.Lease{}, fmt.Errorf("renew lease %s: a positive ttl is required", l.Key)
	}
	out := l
	err := s.writeTxRerun(ctx, crashSafe, func(tx *wtx) error {
		out.Expires = now().Add(ttl)
		res, err := tx.ExecContext(ctx, "UPDATE leases SET expires = ? WHERE key = ? AND owner = ? AND token = ?",
			dbTime(out.Expires), l.Key, l.Owner, l.Token)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return fmt.Errorf("lease %s of %s (token %d) is no longer held: %w", l.Key, l.Owner, l.Token, store.ErrFenced)
		}
		return nil
	})
	if err != nil {
		return store.Lease{}, fmt.Errorf("renew lease: %w", err)
	}
	return out, nil
}

// ReleaseLease implements store.Store.
func (s *Store) ReleaseLease(ctx context.Context, l store.Lease) error {
	err := s.writeTxRerun(ctx, crashSafe, func(tx *wtx) error {
		// The row stays with its token, expired, so later claims get higher tokens.
		_, err := tx.ExecContext(ctx, "UPDATE leases SET expires = ? WHERE key = ? AND owner = ? AND token = ?",
			dbTime(now().Add(-time.Nanosecond)), l.Key, l.Owner, l.Token)
		return err
	})
	if err != nil {
		return fmt.Errorf("release lease %s: %w", l.Key, err)
	}
	return nil
}

// ListLeases implements store.Store.
func (s *Store) ListLeases(ctx context.Context) ([]store.Lease, error) {
	out, err := queryAll(ctx, s.reads, "SELECT key, owner, token, expires FROM leases ORDER BY key", nil, scanLease)
	if err != nil {
		return nil, fmt.Errorf("list leases: %w", err)
	}
	return out, nil
}

func scanLease(row interface{ Scan(...any) error }) (store.Lease, error) {
	var l store.Lease
	err := row.Scan(&l.Key, &l.Owner, &l.Token, scanTime{&l.Expires})
	return l, err
}

// checkFence fails with store.ErrFenced unless f's key is held with f's token.
func checkFence(ctx context.Context, tx *wtx, f *store.Fence) error {
	if f == nil {
		return nil
	}
	token, ok := tx.leaseToken(f.Key)
	if !ok {
		err := tx.QueryRowContext(ctx, "SELECT token FROM leases WHERE key = ?", f.Key).Scan(&token)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("lease %s with token %d is no longer held: %w", f.Key, f.Token, store.ErrFenced)
		case err != nil:
			return err
		}
		tx.noteLease(f.Key, token)
	}
	if token != f.Token {
		return fmt.Errorf("lease %s with token %d is no longer held: %w", f.Key, f.Token, store.ErrFenced)
	}
	return nil
}

const taskColumns = "id, key, instance, kind, payload, status, owner, token, attempts, expires, created_at, claimed_at, finished_at, message"

func scanTask(row interface{ Scan(...any) error }) (store.Task, error) {
	var t store.Task
	err := row.Scan(&t.ID, &t.Key, &t.Instance, &t.Kind, &t.Payload, &t.Status, &t.Owner, &t.Token, &t.Attempts,
		scanTime{&t.Expires}, scanTime{&t.CreatedAt}, scanTime{&t.ClaimedAt}, scanTime{&t.FinishedAt}, &t.Message)
	return t, err
}

// insertTasks enqueues tasks as pending, or claimed by claim (may be nil),
// refusing a second open task for one key and instance; ids are set in tasks
// after the commit by the caller.
func insertTasks(ctx context.Context, tx *wtx, tasks []store.Task, claim *store.TaskClaim, t time.Time) ([]int64, error) {
	ids := make([]int64, 0, len(tasks))
	for _, task := range tasks {
		if task.Key == "" || task.Kind == "" {
			return nil, fmt.Errorf("task: key and kind are required")
		}
		// The unique index of open tasks refuses a second one for the
		// instance; only then is the open one looked up, to name it.
		var (
			res sql.Result
			err error
		)
		if claim == nil {
			res, err = tx.ExecContext(ctx, "INSERT INTO tasks (key, instance, kind, payload, status, created_at) VALUES (?, ?, ?, ?, ?, ?)",
				task.Key, task.Instance, task.Kind, dbBytes(task.Payload), store.TaskPending, dbTime(t))
		} else {
			res, err = tx.ExecContext(ctx, `INSERT INTO tasks (key, instance, kind, payload, status, owner, token, attempts, expires, created_at, claimed_at)
				VALUES (?1, ?2, ?3, ?4, 'running', ?5, 1, 1, ?6, ?7, ?7)`,
				task.Key, task.Instance, task.Kind, dbBytes(task.Payload), claim.Owner, dbTime(t.Add(claim.TTL)), dbTime(t))
		}
		var se *sqlite3.Error
		if errors.As(err, &se) && se.Code() == sqlitelib.SQLITE_CONSTRAINT_UNIQUE {
			var open int64
			if qerr := tx.QueryRowContext(ctx, "SELECT id FROM tasks WHERE key = ? AND instance = ? AND status IN ('pending', 'running')",
				task.Key, task.Instance).Scan(&open); qerr != nil {
				return nil, errors.Join(err, qerr)
			}
			return nil, fmt.Errorf("task %s %s/%s: task %d is still open: %w", task.Kind, task.Key, task.Instance, open, store.ErrConflict)
		}
		if err != nil {
			return nil, err
		}
		id, err := res.LastInsertId()
		if err != nil {
			return nil, err
		}
		tx.noteTask(task.Key, task.Instance, id, true)
		ids = append(ids, id)
	}
	return ids, nil
}

// ClaimTasks implements store.Store.
func (s *Store) ClaimTasks(ctx context.Context, owner string, ttl time.Duration, limit int) ([]store.Task, error) {
	if owner == "" || ttl <= 0 || limit < 1 {
		return nil, fmt.Errorf("claim tasks: owner, a positive ttl and a limit of at least 1 are required")
	}
	var out []store.Task
	err := s.writeTxRerun(ctx, crashSafe, func(tx *wtx) error {
		out = out[:0]
		t := now()
		// The IN term lets SQLite use the partial index of open tasks
		// instead of scanning every task ever finished.
		rows, err := tx.QueryContext(ctx, "SELECT "+taskColumns+` FROM tasks
			WHERE status IN ('pending', 'running') AND (status = 'pending' OR expires <= ?) ORDER BY id LIMIT ?`, dbTime(t), limit)
		if err != nil {
			return err
		}
		for rows.Next() {
			task, err := scanTask(rows)
			if err != nil {
				_ = rows.Close()
				return err
			}
			out = append(out, task)
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return err
		}
		for i := range out {
			task := &out[i]
			task.Status, task.Owner, task.Attempts = store.TaskRunning, owner, task.Attempts+1
			task.Token, task.Expires, task.ClaimedAt = task.Token+1, t.Add(ttl), t
			_, err = tx.ExecContext(ctx, "UPDATE tasks SET status = ?, owner = ?, token = ?, attempts = ?, expires = ?, claimed_at = ? WHERE id = ?",
				task.Status, task.Owner, task.Token, task.Attempts, dbTime(task.Expires), dbTime(task.ClaimedAt), task.ID)
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("claim tasks: %w", err)
	}
	return out, nil
}

// HeartbeatTask implements store.Store.
func (s *Store) HeartbeatTask(ctx context.Context, task store.Task, ttl time.Duration) (store.Task, error) {
	if ttl <= 0 {
		return store.Task{}, fmt.Errorf("heartbeat task %d: a positive ttl is required", task.ID)
	}
	out := task
	err := s.writeTxRerun(ctx, crashSafe, func(tx *wtx) error {
		out.Expires = now().Add(ttl)
		res, err := tx.ExecContext(ctx, "UPDATE tasks SET expires = ? WHERE id = ? AND status = 'running' AND owner = ? AND token = ?",
			dbTime(out.Expires), task.ID, task.Owner, task.Token)
		return claimHeld(res, err, task)
	})
	if err != nil {
		return store.Task{}, fmt.Errorf("heartbeat task: %w", err)
	}
	return out, nil
}

// CompleteTask implements store.Store.
func (s *Store) CompleteTask(ctx context.Context, task store.Task, status store.TaskStatus, message string, b *store.Batch) error {
	done := store.TaskDone{Task: task, Status: status, Message: message}
	if err := done.Check(); err != nil {
		return err
	}
	return s.endClaim(ctx, "complete", task, b, func(tx *wtx, t time.Time) error {
		return finishTask(ctx, tx, done, t)
	})
}

// finishTask ends the claim d.Task with d's outcome (store.ErrFenced when
// it is no longer held) and deletes the instance's finished tasks older
// than the newest ones kept.
func finishTask(ctx context.Context, tx *wtx, d store.TaskDone, t time.Time) error {
	task := d.Task
	res, err := tx.ExecContext(ctx, `UPDATE tasks SET status = ?, message = ?, finished_at = ?, expires = NULL
		WHERE id = ? AND status = 'running' AND owner = ? AND token = ?`,
		d.Status, d.Message, dbTime(t), task.ID, task.Owner, task.Token)
	if err := claimHeld(res, err, task); err != nil {
		return err
	}
	// The cache finds the task by its id, whatever key the caller's copy
	// names.
	tx.noteTask(task.Key, task.Instance, task.ID, false)
	// Older than the newest ones kept: one step down the index of the
	// instance's tasks (nothing when fewer are kept so far), rather than
	// the list of those kept to compare every task with.
	_, err = tx.ExecContext(ctx, `DELETE FROM tasks WHERE key = ?1 AND instance = ?2 AND status IN ('succeeded', 'failed')
		AND id < (SELECT id FROM tasks WHERE key = ?1 AND instance = ?2 AND status IN ('succeeded', 'failed') ORDER BY id DESC LIMIT 1 OFFSET ?3)`,
		task.Key, task.Instance, store.KeepFinishedTasks-1)
	return err
}

// ReleaseTask implements store.Store.
func (s *Store) ReleaseTask(ctx context.Context, task store.Task, message string, b *store.Batch) error {
	return s.endClaim(ctx, "release", task, b, func(tx *wtx, _ time.Time) error {
		res, err := tx.ExecContext(ctx, `UPDATE tasks SET status = 'pending', owner = '', expires = NULL, message = ?
			WHERE id = ? AND status = 'running' AND owner = ? AND token = ?`,
			message, task.ID, task.Owner, task.Token)
		return claimHeld(res, err, task)
	})
}

// endClaim runs end (which ends the claim task, failing with claimHeld's
// error when it is no longer held) and applies b (may be nil) in one
// transaction, as CompleteTask and ReleaseTask do.
func (s *Store) endClaim(ctx context.Context, verb string, task store.Task, b *store.Batch, end func(tx *wtx, t time.Time) error) error {
	if b == nil {
		b = &store.Batch{}
	}
	if err := validateBatch(b); err != nil {
		return fmt.Errorf("%s task %d: %w", verb, task.ID, err)
	}
	t := now()
	rows, err := s.prepareBatch(b, t)
	if err != nil {
		return fmt.Errorf("%s task %d: %w", verb, task.ID, err)
	}
	var seqs, ids []int64
	err = s.writeTxRerun(ctx, crashSafe, func(tx *wtx) error {
		if err := end(tx, t); err != nil {
			return err
		}
		var err error
		seqs, ids, err = s.applyBatch(ctx, tx, b, rows, t)
		return err
	})
	if err != nil {
		return fmt.Errorf("%s task %d: %w", verb, task.ID, err)
	}
	b.Committed(seqs, ids, t)
	return nil
}

// claimHeld turns the outcome of an UPDATE guarded by task's claim (status
// running, owner and token) into store.ErrFenced when it changed no row.
func claimHeld(res sql.Result, err error, task store.Task) error {
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return fmt.Errorf("task %d is no longer claimed by %s (token %d): %w", task.ID, task.Owner, task.Token, store.ErrFenced)
	}
	return nil
}

// ResetClaims implements store.Store.
func (s *Store) ResetClaims(ctx context.Context, events ...store.Event) error {
	t := now()
	rows := encodeEvents(events, t)
	var seqs []int64
	err := s.writeTx(ctx, func(tx *wtx) error {
		past := dbTime(t.Add(-time.Nanosecond))
		if _, err := tx.ExecContext(ctx, "UPDATE leases SET expires = ? WHERE expires > ?", past, past); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, "UPDATE tasks SET status = 'pending', owner = '', expires = NULL WHERE status = 'running'"); err != nil {
			return err
		}
		var err error
		seqs, err = s.insertEvents(ctx, tx, rows)
		return err
	})
	if err != nil {
		return fmt.Errorf("reset claims: %w", err)
	}
	setSeqs(events, seqs, t)
	return nil
}

// GetTask implements store.Store.
func (s *Store) GetTask(ctx context.Context, id int64) (store.Task, error) {
	t, err := scanTask(s.reads.QueryRowContext(ctx, "SELECT "+taskColumns+" FROM tasks WHERE id = ?", id))
	if err != nil {
		return store.Task{}, fmt.Errorf("get task %d: %w", id, notFound(err))
	}
	return t, nil
}

// OpenTaskInstances implements store.Store: from the writer's cache of open
// tasks (opentasks.go), or while it is invalid from tasks_open_instance.
func (s *Store) OpenTaskInstances(ctx context.Context, key string) ([]string, error) {
	if out, ok := s.openTasks.instances(key); ok {
		return out, nil
	}
	out, err := queryAll(ctx, s.reads, "SELECT instance FROM tasks WHERE key = ? AND status IN ('pending', 'running')", []any{key},
		func(r interface{ Scan(...any) error }) (string, error) {
			var inst string
			return inst, r.Scan(&inst)
		})
	if err != nil {
		return nil, fmt.Errorf("list open tasks of %s: %w", key, err)
	}
	return out, nil
}

// ListTasks implements store.Store.
func (s *Store) ListTasks(ctx context.Context, f store.TaskFilter) ([]store.Task, error) {
	q := "SELECT " + taskColumns + " FROM tasks WHERE 1 = 1"
	var args []any
	if f.Key != "" {
		q += " AND key = ?"
		args = append(args, f.Key)
	}
	if f.Open {
		q += " AND status IN ('pending', 'running')"
	}
	q += " ORDER BY id"
	if f.Limit > 0 {
		q += " LIMIT ?"
		args = append(args, f.Limit)
	}
	out, err := queryAll(ctx, s.reads, q, args, scanTask)
	if err != nil {
		return nil, fmt.Errorf("list tasks: %w", err)
	}
	return out, nil
}
