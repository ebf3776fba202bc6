package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
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

// eventsPerInsert is the most events one INSERT carries: a batch's events
// go in as few statements as that allows (a statement is most of the cost
// of a row here).
const eventsPerInsert = 8

// insertEventRows[n] inserts n events (insertEventRows[1] is insertEvent).
var insertEventRows = func() [eventsPerInsert + 1]string {
	var qs [eventsPerInsert + 1]string
	for n := 1; n <= eventsPerInsert; n++ {
		qs[n] = insertEvent + strings.Repeat(", (?, ?, ?, ?, ?, ?, ?, ?, ?)", n-1)
	}
	return qs
}()

// eventRows are events encoded for insertEvents (nine arguments each), a
// zero Time as t. They are encoded before the write transaction, by the
// caller's goroutine rather than in the single writer's turn.
type eventRows []any

const eventArgs = 9

func encodeEvents(events []store.Event, t time.Time) eventRows {
	if len(events) == 0 {
		return nil
	}
	args := make(eventRows, 0, eventArgs*len(events))
	for _, e := range events {
		at := e.Time
		if at.IsZero() {
			at = t
		}
		args = append(args, dbTime(at), e.Application, e.Service, e.ReleaseChannel, e.DesiredStateID,
			e.Type, e.Actor, e.Message, dbBytes(e.Data))
	}
	return args
}

// insertEvents appends the events of rows in tx, with the deliveries of
// those that notify (fanOut), and returns their sequence numbers. A statement's rows take consecutive sequence numbers in their
// order, the last one its LastInsertId: seq is AUTOINCREMENT, and the
// writer is alone.
func (s *Store) insertEvents(ctx context.Context, tx *wtx, rows eventRows) ([]int64, error) {
	n := len(rows) / eventArgs
	if n == 0 {
		return nil, nil
	}
	seqs := make([]int64, n)
	for first := 0; first < n; first += eventsPerInsert {
		count := min(eventsPerInsert, n-first)
		res, err := tx.ExecContext(ctx, insertEventRows[count], rows[first*eventArgs:(first+count)*eventArgs]...)
		if err == nil {
			var last int64
			if last, err = res.LastInsertId(); err == nil {
				for i := range count {
					seqs[first+i] = last - int64(count-1-i)
				}
				continue
			}
		}
		if count == 1 {
			return nil, fmt.Errorf("event %d (%s): %w", first, rows[first*eventArgs+5], err)
		}
		return nil, fmt.Errorf("events %d-%d: %w", first, first+count-1, err)
	}
	if err := fanOut(ctx, tx, rows, seqs); err != nil {
		return nil, err
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
	rows := encodeEvents(events, t)
	var seqs []int64
	err := s.writeTxRerun(ctx, crashSafe, func(tx *wtx) error {
		var err error
		seqs, err = s.insertEvents(ctx, tx, rows)
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
	if len(f.Types) > 0 {
		q += " AND type IN (?" + strings.Repeat(", ?", len(f.Types)-1) + ")"
		for _, t := range f.Types {
			args = append(args, string(t))
		}
	}
	q += " ORDER BY seq" + limitClause(f.Limit)
	out, err := queryAll(ctx, s.reads, q, args, scanEvent)
	if err != nil {
		return nil, fmt.Errorf("list events: %w", err)
	}
	return out, nil
}

// LastEventSeq implements store.Store. There is one writer, and a seq is
// taken at insert: every lower seq is committed.
func (s *Store) LastEventSeq(ctx context.Context) (int64, error) {
	var seq sql.NullInt64
	if err := s.reads.QueryRowContext(ctx, "SELECT max(seq) FROM events").Scan(&seq); err != nil {
		return 0, fmt.Errorf("last event: %w", err)
	}
	return seq.Int64, nil
}

// PruneEvents implements store.Store.
func (s *Store) PruneEvents(ctx context.Context, throughSeq int64) (int64, error) {
	var n int64
	err := s.writeTxRerun(ctx, crashSafe, func(tx *wtx) error {
		res, err := tx.ExecContext(ctx, "DELETE FROM events WHERE seq <= ? AND seq < (SELECT max(seq) FROM events)"+keepUndelivered, throughSeq)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("prune events through %d: %w", throughSeq, err)
	}
	return n, nil
}

// keepUndelivered keeps, in PruneEvents, the events of deliveries not yet
// made (pending or dead): their notifications are still to go out.
const keepUndelivered = " AND NOT EXISTS (SELECT 1 FROM notify_deliveries d WHERE d.event_seq = events.seq AND d.state <> 'delivered')"
