package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/drover-dev/drover/internal/store"
)

// dbNow is the database's clock in the store's time encoding (nanoseconds
// since the Unix epoch), as of the start of the current statement. Lease and
// claim expiry are decided by it, so that processes on several hosts sharing
// the database agree on them whatever their own clocks say.
const dbNow = `(EXTRACT(EPOCH FROM statement_timestamp()) * 1000000000)::bigint`

// claimLease upserts the lease of $1 for owner $2 for $3 nanoseconds when
// nobody holds it, it expired or $2 holds it already; it returns no row when
// another owner's unexpired lease stands. PostgreSQL locks the row it
// updates (or waits for a concurrent insert of the key) and evaluates the
// condition on the committed row, so concurrent claims have one winner.
const claimLease = `INSERT INTO leases AS l (key, owner, token, expires) VALUES ($1, $2, 1, ` + dbNow + ` + $3)
	ON CONFLICT (key) DO UPDATE SET owner = excluded.owner,
		token = CASE WHEN l.owner = excluded.owner THEN l.token ELSE l.token + 1 END,
		expires = excluded.expires
	WHERE l.owner = excluded.owner OR l.expires <= ` + dbNow + `
	RETURNING token, expires`

// ClaimLease implements store.Store.
func (s *Store) ClaimLease(ctx context.Context, key, owner string, ttl time.Duration) (store.Lease, error) {
	if key == "" || owner == "" || ttl <= 0 {
		return store.Lease{}, errors.New("claim lease: key, owner and a positive ttl are required")
	}
	out := store.Lease{Key: key, Owner: owner}
	err := s.pool.QueryRow(ctx, claimLease, key, owner, ttl.Nanoseconds()).Scan(&out.Token, at(&out.Expires))
	switch err = s.health.wrote(err); {
	case err == nil:
		return out, nil
	case !errors.Is(err, pgx.ErrNoRows):
		return store.Lease{}, fmt.Errorf("claim lease %s: %w", key, err)
	}
	held, err := scanLease(s.pool.QueryRow(ctx, "SELECT key, owner, token, expires FROM leases WHERE key = $1", key))
	if err != nil {
		return store.Lease{}, fmt.Errorf("claim lease %s: read its holder: %w", key, err)
	}
	return held, fmt.Errorf("claim lease %s: held by %s until %s: %w", key, held.Owner, held.Expires.Format(time.RFC3339Nano), store.ErrLeaseHeld)
}

// RenewLease implements store.Store.
func (s *Store) RenewLease(ctx context.Context, l store.Lease, ttl time.Duration) (store.Lease, error) {
	if ttl <= 0 {
		return store.Lease{}, fmt.Errorf("renew lease %s: a positive ttl is required", l.Key)
	}
	out := l
	err := s.pool.QueryRow(ctx, "UPDATE leases SET expires = "+dbNow+" + $4 WHERE key = $1 AND owner = $2 AND token = $3 RETURNING expires",
		l.Key, l.Owner, l.Token, ttl.Nanoseconds()).Scan(at(&out.Expires))
	err = s.health.wrote(err)
	if errors.Is(err, pgx.ErrNoRows) {
		err = fmt.Errorf("lease %s of %s (token %d) is no longer held: %w", l.Key, l.Owner, l.Token, store.ErrFenced)
	}
	if err != nil {
		return store.Lease{}, fmt.Errorf("renew lease: %w", err)
	}
	return out, nil
}

// ReleaseLease implements store.Store. The row stays with its token,
// expired, so later claims get higher tokens.
func (s *Store) ReleaseLease(ctx context.Context, l store.Lease) error {
	_, err := s.pool.Exec(ctx, "UPDATE leases SET expires = "+dbNow+" - 1 WHERE key = $1 AND owner = $2 AND token = $3",
		l.Key, l.Owner, l.Token)
	if err := s.health.wrote(err); err != nil {
		return fmt.Errorf("release lease %s: %w", l.Key, err)
	}
	return nil
}

// ListLeases implements store.Store.
func (s *Store) ListLeases(ctx context.Context) ([]store.Lease, error) {
	out, err := queryAll(ctx, s.pool, "SELECT key, owner, token, expires FROM leases ORDER BY key", nil, scanLease)
	if err != nil {
		return nil, fmt.Errorf("list leases: %w", err)
	}
	return out, nil
}

func scanLease(row scanner) (store.Lease, error) {
	var l store.Lease
	err := row.Scan(&l.Key, &l.Owner, &l.Token, at(&l.Expires))
	return l, err
}

// checkFence fails with store.ErrFenced unless f's key is held with f's
// token. It locks the lease row FOR SHARE until tx ends: a claim that would
// give the key a new token waits for this write to commit, so no write
// fenced by a token commits after a higher token was handed out.
func checkFence(ctx context.Context, tx pgx.Tx, f *store.Fence) error {
	if f == nil {
		return nil
	}
	var token int64
	err := tx.QueryRow(ctx, "SELECT token FROM leases WHERE key = $1 FOR SHARE", f.Key).Scan(&token)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && token != f.Token) {
		return fmt.Errorf("lease %s with token %d is no longer held: %w", f.Key, f.Token, store.ErrFenced)
	}
	if err != nil {
		return fmt.Errorf("check lease %s: %w", f.Key, err)
	}
	return nil
}

const taskColumns = "id, key, instance, kind, payload, status, owner, token, attempts, expires, created_at, claimed_at, finished_at, message"

func scanTask(row scanner) (store.Task, error) {
	var t store.Task
	err := row.Scan(&t.ID, &t.Key, &t.Instance, &t.Kind, &t.Payload, &t.Status, &t.Owner, &t.Token, &t.Attempts,
		at(&t.Expires), at(&t.CreatedAt), at(&t.ClaimedAt), at(&t.FinishedAt), &t.Message)
	return t, err
}

// insertTask enqueues a pending task unless its key and instance have an
// open one (the partial unique index tasks_open_instance decides, waiting for
// a concurrent insert to commit or roll back).
const insertTask = `INSERT INTO tasks (key, instance, kind, payload, status, created_at) VALUES ($1, $2, $3, $4, 'pending', $5)
	ON CONFLICT (key, instance) WHERE status IN ('pending', 'running') DO NOTHING RETURNING id`

// insertClaimedTask is insertTask for a task claimed as it is enqueued, by
// owner $6 for $7 nanoseconds from the database's clock (as ClaimTasks).
const insertClaimedTask = `INSERT INTO tasks (key, instance, kind, payload, status, created_at, owner, token, attempts, expires, claimed_at)
	VALUES ($1, $2, $3, $4, 'running', $5, $6, 1, 1, ` + dbNow + ` + $7, ` + dbNow + `)
	ON CONFLICT (key, instance) WHERE status IN ('pending', 'running') DO NOTHING RETURNING id`

// insertTasks enqueues tasks as pending, or claimed by claim (may be nil),
// refusing a second open task for one key and instance with
// store.ErrConflict; ids are set in tasks after the commit by the caller.
func insertTasks(ctx context.Context, tx pgx.Tx, tasks []store.Task, claim *store.TaskClaim, t time.Time) ([]int64, error) {
	ids := make([]int64, 0, len(tasks))
	for _, task := range tasks {
		var id int64
		var err error
		if claim == nil {
			err = tx.QueryRow(ctx, insertTask, task.Key, task.Instance, task.Kind, task.Payload, nanos(t)).Scan(&id)
		} else {
			err = tx.QueryRow(ctx, insertClaimedTask, task.Key, task.Instance, task.Kind, task.Payload, nanos(t),
				claim.Owner, claim.TTL.Nanoseconds()).Scan(&id)
		}
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, openTaskConflict(ctx, tx, task)
		}
		if err != nil {
			return nil, fmt.Errorf("task %s %s/%s: %w", task.Kind, task.Key, task.Instance, err)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// openTaskConflict explains why task was not enqueued: store.ErrConflict,
// naming the open task.
func openTaskConflict(ctx context.Context, tx pgx.Tx, task store.Task) error {
	var open int64
	err := tx.QueryRow(ctx, "SELECT id FROM tasks WHERE key = $1 AND instance = $2 AND status IN ('pending', 'running')",
		task.Key, task.Instance).Scan(&open)
	if err != nil {
		return fmt.Errorf("task %s %s/%s: an open task exists: %w", task.Kind, task.Key, task.Instance, store.ErrConflict)
	}
	return fmt.Errorf("task %s %s/%s: task %d is still open: %w", task.Kind, task.Key, task.Instance, open, store.ErrConflict)
}

// claimTasks gives owner $1 up to $3 claimable tasks for $2 nanoseconds,
// oldest first. SKIP LOCKED passes over tasks another claim (or a completion)
// holds, so concurrent claimers never wait for, nor get, the same task.
const claimTasks = `UPDATE tasks SET status = 'running', owner = $1, token = token + 1, attempts = attempts + 1,
		expires = ` + dbNow + ` + $2, claimed_at = ` + dbNow + `
	WHERE id IN (SELECT id FROM tasks
		WHERE status IN ('pending', 'running') AND (status = 'pending' OR expires <= ` + dbNow + `)
		ORDER BY id LIMIT $3 FOR UPDATE SKIP LOCKED)
	RETURNING ` + taskColumns

// ClaimTasks implements store.Store.
func (s *Store) ClaimTasks(ctx context.Context, owner string, ttl time.Duration, limit int) ([]store.Task, error) {
	if owner == "" || ttl <= 0 || limit < 1 {
		return nil, errors.New("claim tasks: owner, a positive ttl and a limit of at least 1 are required")
	}
	out, err := queryAll(ctx, s.pool, claimTasks, []any{owner, ttl.Nanoseconds(), limit}, scanTask)
	if err := s.health.wrote(err); err != nil {
		return nil, fmt.Errorf("claim tasks: %w", err)
	}
	// RETURNING keeps no order.
	slices.SortFunc(out, func(a, b store.Task) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

// HeartbeatTask implements store.Store.
func (s *Store) HeartbeatTask(ctx context.Context, task store.Task, ttl time.Duration) (store.Task, error) {
	if ttl <= 0 {
		return store.Task{}, fmt.Errorf("heartbeat task %d: a positive ttl is required", task.ID)
	}
	out := task
	err := s.pool.QueryRow(ctx, "UPDATE tasks SET expires = "+dbNow+" + $4"+
		" WHERE id = $1 AND status = 'running' AND owner = $2 AND token = $3 RETURNING expires",
		task.ID, task.Owner, task.Token, ttl.Nanoseconds()).Scan(at(&out.Expires))
	err = s.health.wrote(err)
	if errors.Is(err, pgx.ErrNoRows) {
		err = lostClaim(task)
	}
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
	return s.endClaim(ctx, "complete", task, b, func(tx pgx.Tx, t time.Time) error {
		return finishTask(ctx, tx, done, t)
	})
}

// finishTask ends the claim d.Task with d's outcome (store.ErrFenced when
// it is no longer held) and deletes the instance's finished tasks beyond
// the newest ones kept.
func finishTask(ctx context.Context, tx pgx.Tx, d store.TaskDone, t time.Time) error {
	task := d.Task
	tag, err := tx.Exec(ctx, `UPDATE tasks SET status = $1, message = $2, finished_at = $3, expires = NULL
		WHERE id = $4 AND status = 'running' AND owner = $5 AND token = $6`,
		d.Status, text(d.Message), nanos(t), task.ID, task.Owner, task.Token)
	if err := claimHeld(tag, err, task); err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `DELETE FROM tasks WHERE key = $1 AND instance = $2 AND status IN ('succeeded', 'failed')
		AND id NOT IN (SELECT id FROM tasks WHERE key = $1 AND instance = $2 AND status IN ('succeeded', 'failed')
			ORDER BY id DESC LIMIT $3)`,
		task.Key, task.Instance, store.KeepFinishedTasks)
	if err != nil {
		return fmt.Errorf("delete old tasks of %s/%s: %w", task.Key, task.Instance, err)
	}
	return nil
}

// ReleaseTask implements store.Store.
func (s *Store) ReleaseTask(ctx context.Context, task store.Task, message string, b *store.Batch) error {
	return s.endClaim(ctx, "release", task, b, func(tx pgx.Tx, _ time.Time) error {
		tag, err := tx.Exec(ctx, `UPDATE tasks SET status = 'pending', owner = '', expires = NULL, message = $1
			WHERE id = $2 AND status = 'running' AND owner = $3 AND token = $4`,
			text(message), task.ID, task.Owner, task.Token)
		if err := claimHeld(tag, err, task); err != nil {
			return err
		}
		return notify(ctx, tx, "t") // pending again: for any runner
	})
}

// endClaim runs end (which ends the claim task, failing with claimHeld's
// error when it is no longer held) and applies b (may be nil) in one
// transaction, as CompleteTask and ReleaseTask do. end's UPDATE locks the
// task's row, so a concurrent claim skips it and a concurrent end waits and
// then finds the claim gone.
func (s *Store) endClaim(ctx context.Context, verb string, task store.Task, b *store.Batch, end func(tx pgx.Tx, t time.Time) error) error {
	if b == nil {
		b = &store.Batch{}
	}
	if err := validateBatch(b); err != nil {
		return fmt.Errorf("%s task %d: %w", verb, task.ID, err)
	}
	t := now()
	var seqs, ids []int64
	err := s.tx(ctx, func(tx pgx.Tx) error {
		if err := end(tx, t); err != nil {
			return err
		}
		var err error
		seqs, ids, err = applyBatch(ctx, tx, b, t)
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
func claimHeld(tag pgconn.CommandTag, err error, task store.Task) error {
	if err != nil {
		return fmt.Errorf("task %d: %w", task.ID, err)
	}
	if tag.RowsAffected() != 1 {
		return lostClaim(task)
	}
	return nil
}

// lostClaim is the store.ErrFenced of a task claim no longer held.
func lostClaim(task store.Task) error {
	return fmt.Errorf("task %d is no longer claimed by %s (token %d): %w", task.ID, task.Owner, task.Token, store.ErrFenced)
}

// ResetClaims implements store.Store.
func (s *Store) ResetClaims(ctx context.Context, events ...store.Event) error {
	t := now()
	var seqs []int64
	err := s.tx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "UPDATE leases SET expires = "+dbNow+" - 1 WHERE expires > "+dbNow+" - 1"); err != nil {
			return fmt.Errorf("end leases: %w", err)
		}
		if _, err := tx.Exec(ctx, "UPDATE tasks SET status = 'pending', owner = '', expires = NULL WHERE status = 'running'"); err != nil {
			return fmt.Errorf("end task claims: %w", err)
		}
		var err error
		seqs, err = insertEvents(ctx, tx, events, t)
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
	t, err := scanTask(s.pool.QueryRow(ctx, "SELECT "+taskColumns+" FROM tasks WHERE id = $1", id))
	if err != nil {
		return store.Task{}, fmt.Errorf("get task %d: %w", id, notFound(err))
	}
	return t, nil
}

// ListTasks implements store.Store.
// OpenTaskInstances implements store.Store (tasks_open_instance covers it).
func (s *Store) OpenTaskInstances(ctx context.Context, key string) ([]string, error) {
	out, err := queryAll(ctx, s.pool, "SELECT instance FROM tasks WHERE key = $1 AND status IN ('pending', 'running')", []any{key},
		func(r scanner) (string, error) {
			var inst string
			return inst, r.Scan(&inst)
		})
	if err != nil {
		return nil, fmt.Errorf("list open tasks of %s: %w", key, err)
	}
	return out, nil
}

func (s *Store) ListTasks(ctx context.Context, f store.TaskFilter) ([]store.Task, error) {
	q := "SELECT " + taskColumns + " FROM tasks WHERE true"
	var args []any
	if f.Key != "" {
		args = append(args, f.Key)
		q += " AND key = $1"
	}
	if f.Open {
		q += " AND status IN ('pending', 'running')"
	}
	args = append(args, limitArg(f.Limit))
	q += fmt.Sprintf(" ORDER BY id LIMIT $%d", len(args))
	out, err := queryAll(ctx, s.pool, q, args, scanTask)
	if err != nil {
		return nil, fmt.Errorf("list tasks: %w", err)
	}
	return out, nil
}
