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
