package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	ds "github.com/drover-dev/drover/internal/desiredstate"
	"github.com/drover-dev/drover/internal/state"
	"github.com/drover-dev/drover/internal/store"
	"github.com/drover-dev/drover/internal/store/sqlcore"
)

// Notifications (tables notify_targets and notify_deliveries, migration
// 0018): the targets and the outbox. insertEvents fans each event that
// notifies out to the matching targets in its own transaction (fanOut).

// contains is SQLite's "list column col holds the value arg".
func contains(col, arg string) string { return "instr(" + col + ", " + arg + ") > 0" }

// fanOut makes the deliveries of the events of rows (eventArgs each), now
// appended with seqs, in tx.
func fanOut(ctx context.Context, tx *wtx, rows eventRows, seqs []int64) error {
	var t time.Time
	for i, seq := range seqs {
		r := rows[i*eventArgs : (i+1)*eventArgs]
		typ, _ := r[5].(ds.EventType)
		if !state.MayNotify(typ) {
			continue
		}
		e := store.Event{Seq: seq, Application: r[1].(string), Service: r[2].(string), ReleaseChannel: r[3].(string), Type: typ}
		e.Data, _ = r[8].([]byte)
		n, ok := state.NotifyOf(e)
		if !ok {
			continue
		}
		if t.IsZero() {
			t = now()
		}
		q, args := sqlcore.FanOut(contains, e, n, t, dialect{})
		if _, err := tx.ExecContext(ctx, q, args...); err != nil {
			return fmt.Errorf("notifications of event %d (%s): %w", seq, typ, err)
		}
	}
	return nil
}

// PutNotifyTarget implements store.Store.
func (s *Store) PutNotifyTarget(ctx context.Context, t store.NotifyTarget) error {
	if err := t.CheckPut(); err != nil {
		return err
	}
	if t.CreatedAt.IsZero() {
		t.CreatedAt = now()
	}
	spec, err := s.seal(t.Spec)
	if err != nil {
		return fmt.Errorf("put notification target %s: %w", t.Name, err)
	}
	err = s.writeTx(ctx, func(tx *wtx) error {
		_, err := tx.ExecContext(ctx, sqlcore.UpsertNotifyTarget, sqlcore.NotifyTargetArgs(dialect{}, t, spec)...)
		return err
	})
	if err != nil {
		return fmt.Errorf("put notification target %s: %w", t.Name, err)
	}
	return nil
}

// GetNotifyTarget implements store.Store.
func (s *Store) GetNotifyTarget(ctx context.Context, name string) (store.NotifyTarget, error) {
	t, err := sqlcore.ScanNotifyTarget(dialect{}, sqlReader{s.reads}.QueryRow(ctx, sqlcore.SelectNotifyTarget, name))
	if err != nil {
		return store.NotifyTarget{}, fmt.Errorf("get notification target %s: %w", name, err)
	}
	return store.UnsealNotifyTarget(s.sealer, t)
}

// ListNotifyTargets implements store.Store.
func (s *Store) ListNotifyTargets(ctx context.Context) ([]store.NotifyTarget, error) {
	list, err := sqlcore.ListNotifyTargets(ctx, dialect{}, sqlReader{s.reads})
	if err != nil {
		return nil, err
	}
	return store.UnsealAll(list, func(t store.NotifyTarget) (store.NotifyTarget, error) { return store.UnsealNotifyTarget(s.sealer, t) })
}

// DeleteNotifyTarget implements store.Store.
func (s *Store) DeleteNotifyTarget(ctx context.Context, name string) error {
	err := s.writeTx(ctx, func(tx *wtx) error {
		res, err := tx.ExecContext(ctx, sqlcore.DeleteNotifyTarget, name)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return errors.Join(err, store.ErrNotFound)
		}
		_, err = tx.ExecContext(ctx, sqlcore.DeleteUndelivered, name)
		return err
	})
	if err != nil {
		return fmt.Errorf("delete notification target %s: %w", name, err)
	}
	return nil
}

// deliveryQuery selects deliveries with their events.
const deliveryQuery = "SELECT " + sqlcore.DeliveryColumns + ", e.seq, e.time, e.application, e.service, e.release_channel, e.desired_state_id, e.type, e.actor, e.message, e.data" +
	" FROM notify_deliveries d JOIN events e ON e.seq = d.event_seq"

func scanDelivery(row interface{ Scan(...any) error }) (store.Delivery, error) {
	var e store.Event
	d, err := sqlcore.ScanDelivery(dialect{}, row, &e.Seq, scanTime{&e.Time}, &e.Application, &e.Service, &e.ReleaseChannel,
		&e.DesiredStateID, &e.Type, &e.Actor, &e.Message, &e.Data)
	d.Event = e
	return d, err
}

// ClaimDeliveries implements store.Store.
func (s *Store) ClaimDeliveries(ctx context.Context, owner string, at time.Time, ttl time.Duration, limit int) ([]store.Delivery, error) {
	if owner == "" || ttl <= 0 || limit < 1 {
		return nil, errors.New("claim deliveries: owner, a positive ttl and a limit of at least 1 are required")
	}
	// Most looks find nothing due: a read says so without a turn of the
	// single writer.
	var due int64
	if err := s.reads.QueryRowContext(ctx, sqlcore.ClaimableDeliveries, dbTime(at), 1).Scan(&due); errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	var out []store.Delivery
	err := s.writeTx(ctx, func(tx *wtx) error {
		out = out[:0]
		rows, err := tx.QueryContext(ctx, sqlcore.ClaimableDeliveries, dbTime(at), limit)
		if err != nil {
			return err
		}
		var ids []any
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				_ = rows.Close()
				return err
			}
			ids = append(ids, id)
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil || len(ids) == 0 {
			return err
		}
		in := "?" + strings.Repeat(", ?", len(ids)-1)
		args := append([]any{owner, dbTime(at.Add(ttl))}, ids...)
		if _, err := tx.ExecContext(ctx, "UPDATE notify_deliveries SET owner = ?, claimed_until = ?, attempts = attempts + 1 WHERE id IN ("+in+")", args...); err != nil {
			return err
		}
		rows, err = tx.QueryContext(ctx, deliveryQuery+" WHERE d.id IN ("+in+") ORDER BY d.id", ids...)
		if err != nil {
			return err
		}
		defer func() { _ = rows.Close() }()
		for rows.Next() {
			d, err := scanDelivery(rows)
			if err != nil {
				return err
			}
			out = append(out, d)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("claim deliveries: %w", err)
	}
	return out, nil
}

// FinishDelivery implements store.Store.
func (s *Store) FinishDelivery(ctx context.Context, owner string, r store.DeliveryResult) error {
	if r.At.IsZero() {
		r.At = now()
	}
	err := s.writeTx(ctx, func(tx *wtx) error {
		res, err := tx.ExecContext(ctx, sqlcore.FinishDelivery, sqlcore.FinishArgs(dialect{}, owner, r)...)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return errors.Join(err, fmt.Errorf("%s no longer holds it: %w", owner, store.ErrConflict))
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("finish delivery %d: %w", r.ID, err)
	}
	return nil
}

// ListDeliveries implements store.Store.
func (s *Store) ListDeliveries(ctx context.Context, f store.DeliveryFilter) ([]store.Delivery, error) {
	q, args := sqlcore.ListDeliveriesQuery(dialect{}, "e.seq, e.time, e.application, e.service, e.release_channel, e.desired_state_id, e.type, e.actor, e.message, e.data", f)
	out, err := queryAll(ctx, s.reads, q, args, scanDelivery)
	if err != nil {
		return nil, fmt.Errorf("list deliveries: %w", err)
	}
	return out, nil
}

// RetryDeliveries implements store.Store.
func (s *Store) RetryDeliveries(ctx context.Context, target string, ids []int64, at time.Time) (int, error) {
	q, args := sqlcore.RetryQuery(dialect{}, target, ids, at)
	var n int64
	err := s.writeTx(ctx, func(tx *wtx) error {
		res, err := tx.ExecContext(ctx, q, args...)
		if err == nil {
			n, err = res.RowsAffected()
		}
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("retry deliveries: %w", err)
	}
	return int(n), nil
}

// CountDeliveries implements store.Store.
func (s *Store) CountDeliveries(ctx context.Context) ([]store.DeliveryCount, error) {
	return sqlcore.CountDeliveriesOver(ctx, dialect{}, sqlReader{s.reads})
}

// PruneDeliveries implements store.Store.
func (s *Store) PruneDeliveries(ctx context.Context, before time.Time) (int, error) {
	var n int64
	err := s.writeTx(ctx, func(tx *wtx) error {
		res, err := tx.ExecContext(ctx, sqlcore.PruneDeliveries, dbTime(before))
		if err == nil {
			n, err = res.RowsAffected()
		}
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("prune deliveries: %w", err)
	}
	return int(n), nil
}
