package postgres

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/drover-dev/drover/internal/store"
)

const eventColumns = "seq, time, application, service, release_channel, desired_state_id, type, actor, message, data"

func scanEvent(row scanner) (store.Event, error) {
	var e store.Event
	err := row.Scan(&e.Seq, at(&e.Time), &e.Application, &e.Service, &e.ReleaseChannel, &e.DesiredStateID,
		&e.Type, &e.Actor, &e.Message, &e.Data)
	return e, err
}

const insertEvent = "INSERT INTO events (time, application, service, release_channel, desired_state_id, type, actor, message, data)" +
	" VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING seq"

// insertEvents appends events in tx and returns their sequence numbers; a
// zero Time is stored as t. It must be the transaction's last statement but
// the commit: it first takes the transaction-level advisory lock eventsLock,
// which the transaction then holds until it ends, so transactions that append
// events draw their seqs and commit one after another. A reader that sees an
// event therefore sees every event with a smaller seq, and paging with
// AfterSeq skips none (see doc.go). The statements go in one round trip.
func insertEvents(ctx context.Context, tx pgx.Tx, events []store.Event, t time.Time) ([]int64, error) {
	if len(events) == 0 {
		return nil, nil
	}
	batch := &pgx.Batch{}
	batch.Queue("SELECT pg_advisory_xact_lock($1)", eventsLock)
	batch.Queue("SELECT pg_notify($1, 'e')", notifyChannel) // delivered at commit
	for _, e := range events {
		when := e.Time
		if when.IsZero() {
			when = t
		}
		queueEvent(batch, e, when)
	}
	res := tx.SendBatch(ctx, batch)
	seqs, err := eventSeqs(res, events)
	if cerr := res.Close(); err == nil && cerr != nil {
		err = cerr
	}
	return seqs, err
}

// eventSeqs reads the results of insertEvents' batch.
func eventSeqs(res pgx.BatchResults, events []store.Event) ([]int64, error) {
	if _, err := res.Exec(); err != nil {
		return nil, fmt.Errorf("lock events: %w", err)
	}
	if _, err := res.Exec(); err != nil {
		return nil, fmt.Errorf("notify events: %w", err)
	}
	seqs := make([]int64, len(events))
	for i, e := range events {
		if err := res.QueryRow().Scan(&seqs[i]); err != nil {
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
	err := s.tx(ctx, func(tx pgx.Tx) error {
		var err error
		seqs, err = insertEvents(ctx, tx, events, t)
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
	where := []string{"seq > $1"}
	args := []any{f.AfterSeq}
	if f.Application != "" {
		args = append(args, f.Application)
		where = append(where, fmt.Sprintf("application = $%d", len(args)))
	}
	if f.Service != "" {
		args = append(args, f.Service)
		where = append(where, fmt.Sprintf("service = $%d", len(args)))
	}
	if len(f.Types) > 0 {
		types := make([]string, len(f.Types))
		for i, t := range f.Types {
			types[i] = string(t)
		}
		args = append(args, types)
		where = append(where, fmt.Sprintf("type = ANY($%d)", len(args)))
	}
	args = append(args, limitArg(f.Limit))
	q := fmt.Sprintf("SELECT %s FROM events WHERE %s ORDER BY seq LIMIT $%d", eventColumns, strings.Join(where, " AND "), len(args))
	out, err := queryAll(ctx, s.pool, q, args, scanEvent)
	if err != nil {
		return nil, fmt.Errorf("list events: %w", err)
	}
	return out, nil
}

// LastEventSeq implements store.Store. Appends take eventsLock before their
// seqs and hold it to their commit: every lower seq is committed.
func (s *Store) LastEventSeq(ctx context.Context) (int64, error) {
	var seq *int64
	if err := s.pool.QueryRow(ctx, "SELECT max(seq) FROM events").Scan(&seq); err != nil {
		return 0, fmt.Errorf("last event: %w", err)
	}
	if seq == nil {
		return 0, nil
	}
	return *seq, nil
}

// PruneEvents implements store.Store.
func (s *Store) PruneEvents(ctx context.Context, throughSeq int64) (int64, error) {
	var n int64
	err := s.tx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, "DELETE FROM events WHERE seq <= $1 AND seq < (SELECT max(seq) FROM events)"+keepUndelivered, throughSeq)
		n = tag.RowsAffected()
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
