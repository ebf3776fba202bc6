package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/drover-dev/drover/internal/state"
	"github.com/drover-dev/drover/internal/store"
	"github.com/drover-dev/drover/internal/store/sqlcore"
)

// Notifications (tables notify_targets and notify_deliveries, migration
// 0009): the targets and the outbox. insertEvents appends an event that
// notifies with insertNotifyingEvent: one statement that appends it and
// fans it out to the matching targets, in the same round trip as the other
// events. Claims lock the rows they take (FOR UPDATE SKIP LOCKED), so
// servers sharing the database never claim one delivery together.

// match is "list column col is empty or holds the value of arg".
func match(col, arg string) string {
	return "(t." + col + " = '' OR strpos(t." + col + ", ',' || " + arg + "::text || ',') > 0)"
}

// insertNotifyingEvent appends an event ($1...$9 as insertEvent) and makes
// its deliveries: $10 the key, $11 the notification type, $12 the time,
// $13 the status.
var insertNotifyingEvent = "WITH e AS (" + insertEvent + "), d AS (" +
	"INSERT INTO notify_deliveries (target, key, type, event_seq, state, attempts, next_at, last_error, owner, created_at)" +
	" SELECT t.name, $10, $11, e.seq, 'pending', 0, $12, '', '', $12 FROM e, notify_targets t WHERE " +
	match("f_types", "$11") + " AND " + match("f_applications", "$2") + " AND " + match("f_services", "$3") +
	" AND " + match("f_channels", "$4") + " AND " + match("f_statuses", "$13") + ") SELECT seq FROM e"

// queueEvent queues the statement appending e (a zero time: when) in batch.
func queueEvent(batch *pgx.Batch, e store.Event, when time.Time) {
	args := []any{nanos(when), e.Application, e.Service, e.ReleaseChannel, e.DesiredStateID,
		e.Type, text(e.Actor), text(e.Message), e.Data}
	if state.MayNotify(e.Type) {
		if n, ok := state.NotifyOf(e); ok {
			batch.Queue(insertNotifyingEvent, append(args, sqlcore.DeliveryKey(e), n.Type, nanos(when), string(n.Status))...)
			return
		}
	}
	batch.Queue(insertEvent, args...)
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
	_, err = s.pool.Exec(ctx, bound(sqlcore.UpsertNotifyTarget), sqlcore.NotifyTargetArgs(dialect{}, t, spec)...)
	if err := s.health.wrote(err); err != nil {
		return fmt.Errorf("put notification target %s: %w", t.Name, err)
	}
	return nil
}

// GetNotifyTarget implements store.Store.
func (s *Store) GetNotifyTarget(ctx context.Context, name string) (store.NotifyTarget, error) {
	t, err := sqlcore.ScanNotifyTarget(dialect{}, pgReader{s.pool}.QueryRow(ctx, bound(sqlcore.SelectNotifyTarget), name))
	if err != nil {
		return store.NotifyTarget{}, fmt.Errorf("get notification target %s: %w", name, err)
	}
	return store.UnsealNotifyTarget(s.sealer, t)
}

// ListNotifyTargets implements store.Store.
func (s *Store) ListNotifyTargets(ctx context.Context) ([]store.NotifyTarget, error) {
	list, err := sqlcore.ListNotifyTargets(ctx, dialect{}, pgReader{s.pool})
	if err != nil {
		return nil, err
	}
	return store.UnsealAll(list, func(t store.NotifyTarget) (store.NotifyTarget, error) { return store.UnsealNotifyTarget(s.sealer, t) })
}

// DeleteNotifyTarget implements store.Store.
func (s *Store) DeleteNotifyTarget(ctx context.Context, name string) error {
	err := s.tx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, bound(sqlcore.DeleteNotifyTarget), name)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return store.ErrNotFound
		}
		_, err = tx.Exec(ctx, bound(sqlcore.DeleteUndelivered), name)
		return err
	})
	if err != nil {
		return fmt.Errorf("delete notification target %s: %w", name, err)
	}
	return nil
}

// deliveryQuery selects deliveries with their events.
const deliveryEventColumns = "e.seq, e.time, e.application, e.service, e.release_channel, e.desired_state_id, e.type, e.actor, e.message, e.data"

func scanDelivery(row scanner) (store.Delivery, error) {
	var e store.Event
	d, err := sqlcore.ScanDelivery(dialect{}, row, &e.Seq, at(&e.Time), &e.Application, &e.Service, &e.ReleaseChannel,
		&e.DesiredStateID, &e.Type, &e.Actor, &e.Message, &e.Data)
	d.Event = e
	return d, err
}

// claimDeliveries claims for $3 until $4 up to $2 deliveries due at $1.
var claimDeliveries = "WITH c AS (UPDATE notify_deliveries SET owner = $3, claimed_until = $4, attempts = attempts + 1 WHERE id IN (" +
	sqlcore.BindNumbered(dialect{}, sqlcore.ClaimableDeliveries) + " FOR UPDATE SKIP LOCKED) RETURNING *)" +
	" SELECT " + sqlcore.DeliveryColumns + ", " + deliveryEventColumns + " FROM c d JOIN events e ON e.seq = d.event_seq ORDER BY d.id"

// ClaimDeliveries implements store.Store.
func (s *Store) ClaimDeliveries(ctx context.Context, owner string, now time.Time, ttl time.Duration, limit int) ([]store.Delivery, error) {
	if owner == "" || ttl <= 0 || limit < 1 {
		return nil, errors.New("claim deliveries: owner, a positive ttl and a limit of at least 1 are required")
	}
	out, err := queryAll(ctx, s.pool, claimDeliveries, []any{nanos(now), limit, owner, nanos(now.Add(ttl))}, scanDelivery)
	if err := s.health.wrote(err); err != nil {
		return nil, fmt.Errorf("claim deliveries: %w", err)
	}
	return out, nil
}

// FinishDelivery implements store.Store.
func (s *Store) FinishDelivery(ctx context.Context, owner string, r store.DeliveryResult) error {
	if r.At.IsZero() {
		r.At = now()
	}
	tag, err := s.pool.Exec(ctx, bound(sqlcore.FinishDelivery), sqlcore.FinishArgs(dialect{}, owner, r)...)
	if err := s.health.wrote(err); err != nil {
		return fmt.Errorf("finish delivery %d: %w", r.ID, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("finish delivery %d: %s no longer holds it: %w", r.ID, owner, store.ErrConflict)
	}
	return nil
}

// ListDeliveries implements store.Store.
func (s *Store) ListDeliveries(ctx context.Context, f store.DeliveryFilter) ([]store.Delivery, error) {
	q, args := sqlcore.ListDeliveriesQuery(dialect{}, deliveryEventColumns, f)
	out, err := queryAll(ctx, s.pool, q, args, scanDelivery)
	if err != nil {
		return nil, fmt.Errorf("list deliveries: %w", err)
	}
	return out, nil
}

// RetryDeliveries implements store.Store.
func (s *Store) RetryDeliveries(ctx context.Context, target string, ids []int64, at time.Time) (int, error) {
	q, args := sqlcore.RetryQuery(dialect{}, target, ids, at)
	tag, err := s.pool.Exec(ctx, q, args...)
	if err := s.health.wrote(err); err != nil {
		return 0, fmt.Errorf("retry deliveries: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

// CountDeliveries implements store.Store.
func (s *Store) CountDeliveries(ctx context.Context) ([]store.DeliveryCount, error) {
	return sqlcore.CountDeliveriesOver(ctx, dialect{}, pgReader{s.pool})
}

// PruneDeliveries implements store.Store.
func (s *Store) PruneDeliveries(ctx context.Context, before time.Time) (int, error) {
	tag, err := s.pool.Exec(ctx, bound(sqlcore.PruneDeliveries), nanos(before))
	if err := s.health.wrote(err); err != nil {
		return 0, fmt.Errorf("prune deliveries: %w", err)
	}
	return int(tag.RowsAffected()), nil
}
