package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/drover-dev/drover/internal/store"
	"github.com/drover-dev/drover/internal/store/sqlcore"
)

const instanceColumns = "application, service, release_channel, desired_state_id, target_state_id, target_version, " +
	"current_state_id, current_version, status, reason, message, paused, apply_attempts, last_apply_at, converged_at, " +
	"updated_at, previous_state_id, previous_version, desired_version, satisfied, rollback_from, rollback_reason, " +
	"failed_version, healed, action_seq, action_pending, applied_at, checks, runtime_memo, revision"

func scanInstance(row scanner) (store.Instance, error) {
	var i store.Instance
	err := row.Scan(&i.Application, &i.Service, &i.ReleaseChannel, &i.DesiredStateID, &i.TargetStateID, &i.TargetVersion,
		&i.CurrentStateID, &i.CurrentVersion, &i.Status, &i.Reason, &i.Message, &i.Paused, &i.ApplyAttempts,
		at(&i.LastApplyAt), at(&i.ConvergedAt), at(&i.UpdatedAt), &i.PreviousStateID, &i.PreviousVersion,
		&i.DesiredVersion, &i.Satisfied, &i.RollbackFrom, &i.RollbackReason, &i.FailedVersion, &i.Healed,
		&i.ActionSeq, &i.ActionPending, at(&i.AppliedAt), sqlcore.JSONColumn{V: &i.Checks}, &i.RuntimeMemo, &i.Revision)
	return i, err
}

// GetInstance implements store.Store.
func (s *Store) GetInstance(ctx context.Context, application, service, releaseChannel string) (store.Instance, error) {
	i, err := scanInstance(s.pool.QueryRow(ctx,
		"SELECT "+instanceColumns+" FROM instances WHERE application = $1 AND service = $2 AND release_channel = $3",
		application, service, releaseChannel))
	if err != nil {
		return store.Instance{}, fmt.Errorf("get instance %s/%s/%s: %w", application, service, releaseChannel, notFound(err))
	}
	return i, nil
}

// ListInstances implements store.Store. Each non-empty argument filters; the
// result is ordered by application, service and release channel.
func (s *Store) ListInstances(ctx context.Context, application, service string) ([]store.Instance, error) {
	q, args := byService("SELECT "+instanceColumns+" FROM instances", application, service)
	out, err := queryAll(ctx, s.pool, q, args, scanInstance)
	if err != nil {
		return nil, fmt.Errorf("list instances of %s/%s: %w", application, service, err)
	}
	return out, nil
}

// ListInstancesIn implements store.Store.
func (s *Store) ListInstancesIn(ctx context.Context, span store.ServiceSpan) ([]store.Instance, error) {
	out, err := queryAll(ctx, s.pool, "SELECT "+instanceColumns+" FROM instances"+inSpan, spanArgs(span), scanInstance)
	if err != nil {
		return nil, fmt.Errorf("list instances of %s: %w", span, err)
	}
	return out, nil
}

// ListInstanceBriefs implements store.Store.
func (s *Store) ListInstanceBriefs(ctx context.Context, span store.ServiceSpan) ([]store.InstanceBrief, error) {
	out, err := queryAll(ctx, s.pool, "SELECT "+briefColumns+" FROM instances"+inSpan, spanArgs(span),
		func(row scanner) (b store.InstanceBrief, err error) {
			err = row.Scan(&b.Application, &b.Service, &b.ReleaseChannel, &b.DesiredStateID, &b.Status, &b.CurrentVersion)
			return b, err
		})
	if err != nil {
		return nil, fmt.Errorf("list instances of %s: %w", span, err)
	}
	return out, nil
}

// briefColumns are the columns of a store.InstanceBrief.
const briefColumns = "application, service, release_channel, desired_state_id, status, current_version"

// inSpan completes a SELECT of a table keyed by application, service and
// release channel with the filter of a store.ServiceSpan (spanArgs) and
// that order.
const inSpan = " WHERE (application, service) >= ($1, $2) AND (application, service) <= ($3, $4)" +
	" ORDER BY application, service, release_channel"

func spanArgs(span store.ServiceSpan) []any {
	return []any{span.First.Application, span.First.Service, span.Last.Application, span.Last.Service}
}

// Write implements store.Store. Instances are written in order, so the same
// instance may appear twice with consecutive revisions. An instance given
// with Revision > 0 that does not exist is a conflict too. On success a zero
// UpdatedAt of an instance and the Seq and zero Time of the events are set
// in b as well.
func (s *Store) Write(ctx context.Context, b *store.Batch) error {
	if err := validateBatch(b); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	t := now()
	var seqs, ids []int64
	err := s.tx(ctx, func(tx pgx.Tx) error {
		var err error
		seqs, ids, err = applyBatch(ctx, tx, b, t)
		return err
	})
	if err != nil {
		return fmt.Errorf("write: %w", err)
	}
	b.Committed(seqs, ids, t)
	return nil
}

// validateBatch checks what can be checked before a transaction.
func validateBatch(b *store.Batch) error {
	if c := b.Claim; c != nil && len(b.Tasks) > 0 && (c.Owner == "" || c.TTL <= 0) {
		return errors.New("claim of the tasks: an owner and a positive ttl are required")
	}
	for _, in := range b.Instances {
		if in.Application == "" || in.Service == "" || in.ReleaseChannel == "" {
			return fmt.Errorf("instance %s/%s/%s: application, service and release channel are required",
				in.Application, in.Service, in.ReleaseChannel)
		}
		if in.Revision < 0 {
			return fmt.Errorf("instance %s/%s/%s: negative revision %d", in.Application, in.Service, in.ReleaseChannel, in.Revision)
		}
	}
	for _, o := range b.Observations {
		if o.Application == "" || o.Service == "" || o.ReleaseChannel == "" {
			return fmt.Errorf("observation %s/%s/%s: application, service and release channel are required",
				o.Application, o.Service, o.ReleaseChannel)
		}
	}
	for _, task := range b.Tasks {
		if task.Key == "" || task.Kind == "" {
			return fmt.Errorf("task %s of %q: key and kind are required", task.Kind, task.Key)
		}
	}
	for _, d := range b.Complete {
		if err := d.Check(); err != nil {
			return err
		}
	}
	return nil
}

// applyBatch writes b inside tx: fence, completed tasks, instances, tasks,
// observations and, last, events (whose lock is then held the shortest
// time). It returns the events' sequence numbers and the tasks' ids.
func applyBatch(ctx context.Context, tx pgx.Tx, b *store.Batch, t time.Time) (seqs, ids []int64, err error) {
	if err := checkFence(ctx, tx, b.Fence); err != nil {
		return nil, nil, err
	}
	for _, d := range b.Complete {
		if err := finishTask(ctx, tx, d, t); err != nil {
			return nil, nil, err
		}
	}
	for _, in := range b.Instances {
		if err := putInstance(ctx, tx, in, t); err != nil {
			return nil, nil, err
		}
	}
	if ids, err = insertTasks(ctx, tx, b.Tasks, b.Claim, t); err != nil {
		return nil, nil, err
	}
	if err := putObservations(ctx, tx, b.Observations, t); err != nil {
		return nil, nil, err
	}
	if err := notifyBatch(ctx, tx, b); err != nil {
		return nil, nil, err
	}
	if seqs, err = insertEvents(ctx, tx, b.Events, t); err != nil {
		return nil, nil, err
	}
	return seqs, ids, nil
}

// notifyBatch tells the change feed's listeners what b changes: tasks to
// run, and, when b is written outside a lease (no Fence: a person's request,
// or a runner ending an apply), the services of its instances, which their
// engines should plan again. An engine's own pass (fenced) tells nobody.
func notifyBatch(ctx context.Context, tx pgx.Tx, b *store.Batch) error {
	if len(b.Tasks) > 0 {
		if err := notify(ctx, tx, "t"); err != nil {
			return err
		}
	}
	if b.Fence != nil {
		return nil
	}
	seen := map[[2]string]bool{}
	for _, in := range b.Instances {
		k := [2]string{in.Application, in.Service}
		if seen[k] {
			continue
		}
		seen[k] = true
		if err := notifyService(ctx, tx, in.Application, in.Service); err != nil {
			return err
		}
	}
	return nil
}

// instanceParams lists "$1, $2, ..." for the instanceColumns.
var instanceParams = func() string {
	n := strings.Count(instanceColumns, ",") + 1
	ps := make([]string, n)
	for i := range ps {
		ps[i] = fmt.Sprintf("$%d", i+1)
	}
	return strings.Join(ps, ", ")
}()

var (
	// insertInstance creates an instance unless it exists: $1... are the
	// instanceColumns.
	insertInstance = "INSERT INTO instances (" + instanceColumns + ") VALUES (" + instanceParams + ") ON CONFLICT DO NOTHING"
	// updateInstance updates an instance whose revision is the extra last
	// argument: $1, $2, $3 are the key, the other columns follow in order.
	// A concurrent update of the row makes it wait, then re-check the
	// revision against the committed row (READ COMMITTED).
	updateInstance = func() string {
		cols := strings.Split(instanceColumns, ", ")
		set := make([]string, 0, len(cols)-3)
		for i, c := range cols[3:] {
			set = append(set, fmt.Sprintf("%s = $%d", c, i+4))
		}
		return fmt.Sprintf("UPDATE instances SET %s WHERE application = $1 AND service = $2 AND release_channel = $3 AND revision = $%d",
			strings.Join(set, ", "), len(cols)+1)
	}()
)

// putInstance creates (Revision 0) or updates (Revision = the stored one) in.
func putInstance(ctx context.Context, tx pgx.Tx, in store.Instance, t time.Time) error {
	updatedAt := in.UpdatedAt
	if updatedAt.IsZero() {
		updatedAt = t
	}
	args := []any{in.Application, in.Service, in.ReleaseChannel, in.DesiredStateID, in.TargetStateID, in.TargetVersion,
		in.CurrentStateID, in.CurrentVersion, in.Status, in.Reason, text(in.Message), in.Paused, in.ApplyAttempts,
		nanos(in.LastApplyAt), nanos(in.ConvergedAt), nanos(updatedAt), in.PreviousStateID, in.PreviousVersion,
		in.DesiredVersion, texts(in.Satisfied), in.RollbackFrom, text(in.RollbackReason), in.FailedVersion, in.Healed,
		in.ActionSeq, in.ActionPending, nanos(in.AppliedAt), checksJSON(in.Checks), text(in.RuntimeMemo), in.Revision + 1}
	q := insertInstance
	if in.Revision > 0 {
		q, args = updateInstance, append(args, in.Revision)
	}
	tag, err := tx.Exec(ctx, q, args...)
	if err != nil {
		return fmt.Errorf("instance %s/%s/%s: %w", in.Application, in.Service, in.ReleaseChannel, err)
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	return revisionConflict(ctx, tx, in)
}

// revisionConflict explains why in was not written: store.ErrConflict,
// naming the stored revision.
func revisionConflict(ctx context.Context, tx pgx.Tx, in store.Instance) error {
	var stored int64
	err := tx.QueryRow(ctx, "SELECT revision FROM instances WHERE application = $1 AND service = $2 AND release_channel = $3",
		in.Application, in.Service, in.ReleaseChannel).Scan(&stored)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("instance %s/%s/%s: revision %d given but the instance does not exist: %w",
			in.Application, in.Service, in.ReleaseChannel, in.Revision, store.ErrConflict)
	case err != nil:
		return fmt.Errorf("instance %s/%s/%s: read the stored revision: %w", in.Application, in.Service, in.ReleaseChannel, err)
	}
	return fmt.Errorf("instance %s/%s/%s: revision %d given, stored %d: %w",
		in.Application, in.Service, in.ReleaseChannel, in.Revision, stored, store.ErrConflict)
}

// byService completes query, a SELECT of a table keyed by application,
// service and release channel, with the filters of the non-empty arguments
// and that order.
func byService(query, application, service string) (string, []any) {
	var (
		where []string
		args  []any
	)
	if application != "" {
		args = append(args, application)
		where = append(where, fmt.Sprintf("application = $%d", len(args)))
	}
	if service != "" {
		args = append(args, service)
		where = append(where, fmt.Sprintf("service = $%d", len(args)))
	}
	if len(where) > 0 {
		query += " WHERE " + strings.Join(where, " AND ")
	}
	return query + " ORDER BY application, service, release_channel", args
}
