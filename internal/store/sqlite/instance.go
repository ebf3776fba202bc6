package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"strings"
	"sync"
	"time"

	ds "github.com/drover-dev/drover/internal/desiredstate"
	"github.com/drover-dev/drover/internal/store"
)

const instanceColumns = "application, service, release_channel, desired_state_id, target_state_id, target_version, " +
	"current_state_id, current_version, status, reason, message, paused, apply_attempts, last_apply_at, converged_at, " +
	"updated_at, previous_state_id, previous_version, desired_version, satisfied, rollback_from, rollback_reason, " +
	"failed_version, healed, action_seq, action_pending, applied_at, checks, runtime_memo, revision"

func scanInstance(row interface{ Scan(...any) error }) (store.Instance, error) {
	var i store.Instance
	err := row.Scan(&i.Application, &i.Service, &i.ReleaseChannel, &i.DesiredStateID, &i.TargetStateID, &i.TargetVersion,
		&i.CurrentStateID, &i.CurrentVersion, &i.Status, &i.Reason, &i.Message, &i.Paused, &i.ApplyAttempts,
		scanTime{&i.LastApplyAt}, scanTime{&i.ConvergedAt}, scanTime{&i.UpdatedAt}, &i.PreviousStateID, &i.PreviousVersion,
		&i.DesiredVersion, scanJSON{V: &i.Satisfied}, &i.RollbackFrom, &i.RollbackReason, &i.FailedVersion, &i.Healed,
		&i.ActionSeq, &i.ActionPending, scanTime{&i.AppliedAt}, scanJSON{V: &i.Checks}, &i.RuntimeMemo, &i.Revision)
	return i, err
}

// GetInstance implements store.Store.
func (s *Store) GetInstance(ctx context.Context, application, service, releaseChannel string) (store.Instance, error) {
	if i, found, known := s.instances.get(application, service, releaseChannel); found {
		return i, nil
	} else if known {
		return store.Instance{}, fmt.Errorf("get instance %s/%s/%s: %w", application, service, releaseChannel, store.ErrNotFound)
	}
	i, err := scanInstance(s.reads.QueryRowContext(ctx,
		"SELECT "+instanceColumns+" FROM instances WHERE application = ? AND service = ? AND release_channel = ?",
		application, service, releaseChannel))
	if err != nil {
		return store.Instance{}, fmt.Errorf("get instance %s/%s/%s: %w", application, service, releaseChannel, notFound(err))
	}
	return i, nil
}

// ListInstances implements store.Store. Each non-empty argument filters; the
// result is ordered by application, service and release channel.
func (s *Store) ListInstances(ctx context.Context, application, service string) ([]store.Instance, error) {
	var gen uint64
	if application != "" && service != "" {
		list, g, ok := s.instances.list(application, service)
		if ok {
			return list, nil
		}
		gen = g
	}
	q, args := byService("SELECT "+instanceColumns+" FROM instances", application, service)
	out, err := queryAll(ctx, s.reads, q, args, scanInstance)
	if err != nil {
		return nil, fmt.Errorf("list instances of %s/%s: %w", application, service, err)
	}
	if application != "" && service != "" {
		s.instances.fill(application, service, gen, out)
	}
	return out, nil
}

// ListInstancesIn implements store.Store.
func (s *Store) ListInstancesIn(ctx context.Context, span store.ServiceSpan) ([]store.Instance, error) {
	out, err := queryAll(ctx, s.reads, "SELECT "+instanceColumns+" FROM instances"+inSpan, spanArgs(span), scanInstance)
	if err != nil {
		return nil, fmt.Errorf("list instances of %s: %w", span, err)
	}
	return out, nil
}

// ListInstanceBriefs implements store.Store.
func (s *Store) ListInstanceBriefs(ctx context.Context, span store.ServiceSpan) ([]store.InstanceBrief, error) {
	out, err := queryAll(ctx, s.reads, "SELECT "+briefColumns+" FROM instances"+inSpan, spanArgs(span),
		func(row interface{ Scan(...any) error }) (b store.InstanceBrief, err error) {
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
const inSpan = " WHERE (application, service) >= (?1, ?2) AND (application, service) <= (?3, ?4)" +
	" ORDER BY application, service, release_channel"

func spanArgs(span store.ServiceSpan) []any {
	return []any{span.First.Application, span.First.Service, span.Last.Application, span.Last.Service}
}

// Write implements store.Store. Instances are written in order, so the same
// instance may appear twice with consecutive revisions. An instance given with
// Revision > 0 that does not exist is a conflict too. On success a zero
// UpdatedAt of an instance and the Seq and zero Time of the events are set
// in b as well.
func (s *Store) Write(ctx context.Context, b *store.Batch) error {
	if err := validateBatch(b); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	t := now()
	rows, err := s.prepareBatch(b, t)
	if err != nil {
		return fmt.Errorf("write: %w", err)
	}
	var seqs, ids []int64
	err = s.writeTxRerun(ctx, crashSafe, func(tx *wtx) error {
		var err error
		seqs, ids, err = s.applyBatch(ctx, tx, b, rows, t)
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
	for _, d := range b.Complete {
		if err := d.Check(); err != nil {
			return err
		}
	}
	return nil
}

// batchRows is a batch encoded for its transaction (prepareBatch).
type batchRows struct {
	instances    []instanceRow
	events       eventRows
	observations []observationRow
}

// instanceRow is an instance to write, with its UpdatedAt set, and as the
// file will hold it once written.
type instanceRow struct {
	in, stored store.Instance
	// changed and args, when args is set, are the columns that differ from
	// the cached row at in.Revision and the arguments of their UPDATE
	// (changedUpdate), the revision last. That row is the file's as long as
	// the file holds the revision, which the UPDATE checks, and no import
	// replaced the rows since imports was read.
	changed uint64
	args    []any
	imports uint64
}

// prepareBatch encodes b's rows, written at t, before its transaction: the
// caller's goroutine does it beside the others' rather than the single
// writer in its turn (group.go).
func (s *Store) prepareBatch(b *store.Batch, t time.Time) (*batchRows, error) {
	rows := &batchRows{instances: make([]instanceRow, len(b.Instances)), events: encodeEvents(b.Events, t)}
	for i, in := range b.Instances {
		if in.UpdatedAt.IsZero() {
			in.UpdatedAt = t
		}
		stored, err := storedInstance(in, in.UpdatedAt)
		if err != nil {
			return nil, fmt.Errorf("instance %s/%s/%s: %w", in.Application, in.Service, in.ReleaseChannel, err)
		}
		row := &rows.instances[i]
		*row = instanceRow{in: in, stored: stored}
		s.changedColumns(row)
	}
	var err error
	if rows.observations, err = encodeObservations(b.Observations, t); err != nil {
		return nil, err
	}
	return rows, nil
}

// applyBatch writes b inside tx: fence, completed tasks, instances, events,
// tasks. It returns the events' sequence numbers and the tasks' ids.
func (s *Store) applyBatch(ctx context.Context, tx *wtx, b *store.Batch, rows *batchRows, t time.Time) (seqs, ids []int64, err error) {
	if err := checkFence(ctx, tx, b.Fence); err != nil {
		return nil, nil, err
	}
	for _, d := range b.Complete {
		if err := finishTask(ctx, tx, d, t); err != nil {
			return nil, nil, err
		}
	}
	for i := range rows.instances {
		if err := s.putInstance(ctx, tx, &rows.instances[i]); err != nil {
			return nil, nil, err
		}
	}
	if seqs, err = s.insertEvents(ctx, tx, rows.events); err != nil {
		return nil, nil, err
	}
	if ids, err = insertTasks(ctx, tx, b.Tasks, b.Claim, t); err != nil {
		return nil, nil, err
	}
	if err := putObservations(ctx, tx, rows.observations); err != nil {
		return nil, nil, err
	}
	return seqs, ids, nil
}

var (
	// insertInstance creates an instance unless it exists: ?1... are the
	// instanceColumns.
	insertInstance = "INSERT INTO instances (" + instanceColumns + ") VALUES (" +
		strings.TrimSuffix(strings.Repeat("?, ", strings.Count(instanceColumns, ",")+1), ", ") + ") ON CONFLICT DO NOTHING"
	// updateInstance updates an instance whose revision is the extra last
	// argument: ?1, ?2, ?3 are the key, the other columns follow in order.
	updateInstance = func() string {
		cols := strings.Split(instanceColumns, ", ")
		var set []string
		for i, c := range cols[3:] {
			set = append(set, fmt.Sprintf("%s = ?%d", c, i+4))
		}
		return fmt.Sprintf("UPDATE instances SET %s WHERE application = ?1 AND service = ?2 AND release_channel = ?3 AND revision = ?%d",
			strings.Join(set, ", "), len(cols)+1)
	}()
)

// instanceArgs are in's instanceColumns values, with UpdatedAt and
// Revision as given.
func instanceArgs(in store.Instance, updatedAt time.Time, revision int64) []any {
	in.UpdatedAt, in.Revision = updatedAt, revision
	args := make([]any, 0, 3+len(updatedColumns))
	args = append(args, in.Application, in.Service, in.ReleaseChannel)
	for _, c := range updatedColumns {
		args = append(args, c.arg(&in))
	}
	return args
}

// instanceColumn is one of instanceColumns after the key: its value in an
// instance, encoded for the column, and whether two instances as stored
// hold the same in it.
type instanceColumn struct {
	name string
	arg  func(in *store.Instance) any
	same func(a, b *store.Instance) bool
}

func column[T comparable](name string, field func(*store.Instance) *T, enc func(T) any) instanceColumn {
	return instanceColumn{name: name,
		arg:  func(in *store.Instance) any { return enc(*field(in)) },
		same: func(a, b *store.Instance) bool { return *field(a) == *field(b) }}
}

func plain[T any](v T) any { return v }

func text[T ~string](v T) any { return string(v) }

// updatedColumns are instanceColumns after the key, in order (a test checks
// them against instanceColumns).
var updatedColumns = []instanceColumn{
	column("desired_state_id", func(i *store.Instance) *string { return &i.DesiredStateID }, plain),
	column("target_state_id", func(i *store.Instance) *string { return &i.TargetStateID }, plain),
	column("target_version", func(i *store.Instance) *string { return &i.TargetVersion }, plain),
	column("current_state_id", func(i *store.Instance) *string { return &i.CurrentStateID }, plain),
	column("current_version", func(i *store.Instance) *string { return &i.CurrentVersion }, plain),
	column("status", func(i *store.Instance) *ds.Status { return &i.Status }, text),
	column("reason", func(i *store.Instance) *ds.Reason { return &i.Reason }, text),
	column("message", func(i *store.Instance) *string { return &i.Message }, plain),
	column("paused", func(i *store.Instance) *bool { return &i.Paused }, plain),
	column("apply_attempts", func(i *store.Instance) *int { return &i.ApplyAttempts }, plain),
	column("last_apply_at", func(i *store.Instance) *time.Time { return &i.LastApplyAt }, dbTime),
	column("converged_at", func(i *store.Instance) *time.Time { return &i.ConvergedAt }, dbTime),
	column("updated_at", func(i *store.Instance) *time.Time { return &i.UpdatedAt }, dbTime),
	column("previous_state_id", func(i *store.Instance) *string { return &i.PreviousStateID }, plain),
	column("previous_version", func(i *store.Instance) *string { return &i.PreviousVersion }, plain),
	column("desired_version", func(i *store.Instance) *string { return &i.DesiredVersion }, plain),
	{name: "satisfied", arg: func(i *store.Instance) any { return dbStrings(i.Satisfied) },
		same: func(a, b *store.Instance) bool { return slices.Equal(a.Satisfied, b.Satisfied) }},
	column("rollback_from", func(i *store.Instance) *string { return &i.RollbackFrom }, plain),
	column("rollback_reason", func(i *store.Instance) *string { return &i.RollbackReason }, plain),
	column("failed_version", func(i *store.Instance) *string { return &i.FailedVersion }, plain),
	column("healed", func(i *store.Instance) *int { return &i.Healed }, plain),
	column("action_seq", func(i *store.Instance) *int { return &i.ActionSeq }, plain),
	column("action_pending", func(i *store.Instance) *bool { return &i.ActionPending }, plain),
	column("applied_at", func(i *store.Instance) *time.Time { return &i.AppliedAt }, dbTime),
	{name: "checks", arg: func(i *store.Instance) any { return dbChecks(i.Checks) },
		same: func(a, b *store.Instance) bool { return slices.Equal(a.Checks, b.Checks) }},
	column("runtime_memo", func(i *store.Instance) *string { return &i.RuntimeMemo }, plain),
	column("revision", func(i *store.Instance) *int64 { return &i.Revision }, plain),
}

// changedUpdate returns the set of columns in which old and stored (both
// as stored) differ, and the arguments of their UPDATE (changedQuery), taken
// from in: a write usually changes a few of the 26 columns, and binding all
// of them costs more than the rest of the statement.
func changedUpdate(old, stored, in *store.Instance, revision int64) (uint64, []any) {
	// in carries the new revision; the WHERE clause takes the one given.
	var mask uint64
	for i, c := range updatedColumns {
		if !c.same(old, stored) {
			mask |= 1 << i
		}
	}
	args := make([]any, 0, 4+bits.OnesCount64(mask))
	args = append(args, in.Application, in.Service, in.ReleaseChannel)
	for i, c := range updatedColumns {
		if mask&(1<<i) != 0 {
			args = append(args, c.arg(in))
		}
	}
	return mask, append(args, revision)
}

// changedQuery is the UPDATE of the columns of mask (see changedUpdate).
// Statements are kept per set of columns (a few dozen occur).
func changedQuery(mask uint64) string {
	if q, ok := changedUpdates.Load(mask); ok {
		return q.(string)
	}
	var set []string
	n := 3
	for i, c := range updatedColumns {
		if mask&(1<<i) != 0 {
			n++
			set = append(set, fmt.Sprintf("%s = ?%d", c.name, n))
		}
	}
	q, _ := changedUpdates.LoadOrStore(mask, fmt.Sprintf("UPDATE instances SET %s WHERE application = ?1 AND service = ?2 AND release_channel = ?3 AND revision = ?%d",
		strings.Join(set, ", "), n+1))
	return q.(string)
}

var changedUpdates sync.Map // column mask -> UPDATE statement

// changedColumns sets row's changed columns and the arguments of their
// UPDATE when the cache holds the row it updates, and clears them when not.
func (s *Store) changedColumns(row *instanceRow) {
	in := &row.in
	row.changed, row.args, row.imports = 0, nil, s.instances.imports.Load()
	if in.Revision == 0 {
		return
	}
	if old, ok := s.instances.at(in.Application, in.Service, in.ReleaseChannel, in.Revision); ok {
		next := *in
		next.Revision = in.Revision + 1
		row.changed, row.args = changedUpdate(&old, &row.stored, &next, in.Revision)
	}
}

// putInstance creates (Revision 0) or updates (Revision = the stored one)
// the instance of row.
func (s *Store) putInstance(ctx context.Context, tx *wtx, row *instanceRow) error {
	in, stored, updatedAt := &row.in, &row.stored, row.in.UpdatedAt
	var (
		res sql.Result
		err error
	)
	tx.inst.touched = append(tx.inst.touched, svcKey{in.Application, in.Service})
	if row.args == nil || row.imports != s.instances.imports.Load() {
		s.changedColumns(row)
	}
	switch {
	case in.Revision == 0:
		res, err = tx.ExecContext(ctx, insertInstance, instanceArgs(*in, updatedAt, 1)...)
	case row.args != nil:
		// The row as stored (the cache is the file's): set what changed.
		// If the file moved on meanwhile, the revision check refuses it
		// as any update.
		res, err = tx.ExecContext(ctx, changedQuery(row.changed), row.args...)
	default:
		res, err = tx.ExecContext(ctx, updateInstance, append(instanceArgs(*in, updatedAt, in.Revision+1), in.Revision)...)
	}
	if err != nil {
		return fmt.Errorf("instance %s/%s/%s: %w", in.Application, in.Service, in.ReleaseChannel, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 1 {
		tx.inst.written = append(tx.inst.written, *stored)
		return nil
	}
	var storedRev int64
	err = tx.QueryRowContext(ctx, "SELECT revision FROM instances WHERE application = ? AND service = ? AND release_channel = ?",
		in.Application, in.Service, in.ReleaseChannel).Scan(&storedRev)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("instance %s/%s/%s: revision %d given but the instance does not exist: %w",
			in.Application, in.Service, in.ReleaseChannel, in.Revision, store.ErrConflict)
	case err != nil:
		return err
	}
	return fmt.Errorf("instance %s/%s/%s: revision %d given, stored %d: %w",
		in.Application, in.Service, in.ReleaseChannel, in.Revision, storedRev, store.ErrConflict)
}

// byService completes query, a SELECT of a table keyed by application,
// service and release channel, with the filters of the non-empty arguments
// and that order.
func byService(query, application, service string) (string, []any) {
	query += " WHERE 1 = 1"
	var args []any
	if application != "" {
		query += " AND application = ?"
		args = append(args, application)
	}
	if service != "" {
		query += " AND service = ?"
		args = append(args, service)
	}
	return query + " ORDER BY application, service, release_channel", args
}
