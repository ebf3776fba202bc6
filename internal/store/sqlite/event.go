package sqlite

import (
	"context"
	"fmt"
	"time"

	"github.com/drover-dev/drover/internal/store"
)

const eventColumns = "seq, time, application, service, release_channel, desired_state_id, type, actor, message, data"

func scanEvent(row interface{ Scan(...any) error }) (store.Event, error) {
	var e store.Event
	err := row.Scan(&e.Seq, scanTime{&e.Time}, &e.Application, &e.Service, &e.ReleaseChannel, &e.DesiredStateID,
		&e.Type, &e.Actor, &e.Message, &e.Data)
	return e, err
}

const insertEvent = "INSERT INTO events (time, application, service, release_channel, desired_state_id, type, actor, message, data)" +
	" VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"

// insertEvents appends events in tx and returns their sequence numbers. A
// zero Time is stored as t.
func (s *Store) insertEvents(ctx context.Context, tx *wtx, events []store.Event, t time.Time) ([]int64, error) {
	if len(events) == 0 {
		return nil, nil
	}
	seqs := make([]int64, len(events))
	for i, e := range events {
		at := e.Time
		if at.IsZero() {
			at = t
		}
		res, err := tx.ExecContext(ctx, insertEvent, dbTime(at), e.Application, e.Service, e.ReleaseChannel, e.DesiredStateID,
			e.Type, e.Actor, e.Message, dbBytes(e.Data))
		if err != nil {
			return nil, fmt.Errorf("event %d (%s): %w", i, e.Type, err)
		}
		if seqs[i], err = res.LastInsertId(); err != nil {
			return nil, fmt.Errorf("event %d (%s): %w", i, e.Type, err)
		}
	}
	return seqs, nil
}

// setSeqs copies the assigned sequence numbers (and t for zero times) into
// events once their transaction has committed.
func setSeqs(events []store.Event, seqs []int64, t time.Time) {
	for i := range seqs {
		events[i].Seq = seqs[i]
		if events[i].Time.IsZero() {
			events[i].Time = t
		}
	}
}

// AppendEvents implements store.Store. The assigned Seq and Time are also set
// in events, so a caller passing a slice (AppendEvents(ctx, evs...)) sees them.
func (s *Store) AppendEvents(ctx context.Context, events ...store.Event) error {
	if len(events) == 0 {
		return nil
	}
	t := now()
	var seqs []int64
	err := s.writeTxMode(ctx, crashSafe, func(tx *wtx) error {
		var err error
		seqs, err = s.insertEvents(ctx, tx, events, t)
		return err
	})
	if err != nil {
		return fmt.Errorf("append %d events: %w", len(events), err)
	}
	setSeqs(events, seqs, t)
	return nil
}

// ListEvents implements store.Store.
func (s *Store) ListEvents(ctx context.Context, f store.EventFilter) ([]store.Event, error) {
	q := "SELECT " + eventColumns + " FROM events WHERE seq > ?"
	args := []any{f.AfterSeq}
	if f.Application != "" {
		q += " AND application = ?"
		args = append(args, f.Application)
	}
	if f.Service != "" {
		q += " AND service = ?"
		args = append(args, f.Service)
	}
	q += " ORDER BY seq" + limitClause(f.Limit)
	out, err := queryAll(ctx, s.reads, q, args, scanEvent)
	if err != nil {
		return nil, fmt.Errorf("list events: %w", err)
	}
	return out, nil
}

const applyColumns = "id, application, service, release_channel, desired_state_id, version, started_at, finished_at, outcome, message"

func scanApply(row interface{ Scan(...any) error }) (store.ApplyAttempt, error) {
	var a store.ApplyAttempt
	err := row.Scan(&a.ID, &a.Application, &a.Service, &a.ReleaseChannel, &a.DesiredStateID, &a.Version,
		scanTime{&a.StartedAt}, scanTime{&a.FinishedAt}, &a.Outcome, &a.Message)
	return a, err
}

// StartApply implements store.Store. a.ID, FinishedAt and Outcome are
// ignored; a zero StartedAt is set to the current time. An unknown desired
// state fails with store.ErrNotFound.
func (s *Store) StartApply(ctx context.Context, a store.ApplyAttempt) (int64, error) {
	if a.Application == "" || a.Service == "" || a.DesiredStateID == "" {
		return 0, fmt.Errorf("start apply of %s/%s: application, service and desired state are required", a.Application, a.Service)
	}
	if a.StartedAt.IsZero() {
		a.StartedAt = now()
	}
	var id int64
	err := s.writeTxMode(ctx, crashSafe, func(tx *wtx) error {
		var exists int
		err := tx.QueryRowContext(ctx, "SELECT 1 FROM desired_states WHERE id = ?", a.DesiredStateID).Scan(&exists)
		if err != nil {
			return fmt.Errorf("desired state %s: %w", a.DesiredStateID, notFound(err))
		}
		res, err := tx.ExecContext(ctx, "INSERT INTO apply_attempts (application, service, release_channel, desired_state_id, version, started_at)"+
			" VALUES (?, ?, ?, ?, ?, ?)",
			a.Application, a.Service, a.ReleaseChannel, a.DesiredStateID, a.Version, dbTime(a.StartedAt))
		if err != nil {
			return err
		}
		id, err = res.LastInsertId()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("start apply of %s/%s/%s: %w", a.Application, a.Service, a.ReleaseChannel, err)
	}
	return id, nil
}

// FinishApply implements store.Store. A zero at is set to the current time;
// an unknown id fails with store.ErrNotFound. The events are appended in the
// same transaction.
func (s *Store) FinishApply(ctx context.Context, id int64, outcome, message string, at time.Time, events ...store.Event) error {
	t := now()
	if at.IsZero() {
		at = t
	}
	var seqs []int64
	err := s.writeTxMode(ctx, crashSafe, func(tx *wtx) error {
		res, err := tx.ExecContext(ctx, "UPDATE apply_attempts SET finished_at = ?, outcome = ?, message = ? WHERE id = ?",
			dbTime(at), outcome, message, id)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err == nil && n == 0 {
			err = store.ErrNotFound
		}
		if err != nil {
			return err
		}
		seqs, err = s.insertEvents(ctx, tx, events, t)
		return err
	})
	if err != nil {
		return fmt.Errorf("finish apply %d: %w", id, err)
	}
	setSeqs(events, seqs, t)
	return nil
}

// ListApplies implements store.Store; limit <= 0 means no limit.
func (s *Store) ListApplies(ctx context.Context, application, service string, limit int) ([]store.ApplyAttempt, error) {
	out, err := queryAll(ctx, s.reads,
		"SELECT "+applyColumns+" FROM apply_attempts WHERE application = ? AND service = ? ORDER BY id DESC"+limitClause(limit),
		[]any{application, service}, scanApply)
	if err != nil {
		return nil, fmt.Errorf("list applies of %s/%s: %w", application, service, err)
	}
	return out, nil
}
