package sqlcore

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/drover-dev/drover/internal/state"
	"github.com/drover-dev/drover/internal/store"
)

// Notifications (tables notify_targets and notify_deliveries): the targets
// notifications go to and the outbox of deliveries. A target's filter is
// kept as one column a list, ",a,b," ("" matches everything), so that the
// statement appending an event fans it out to the matching targets in SQL,
// in its own transaction, with no read of the targets first.

// NotifyTargetColumns are the columns of a target's row, in the order of
// NotifyTargetArgs and ScanNotifyTarget.
const NotifyTargetColumns = "name, kind, f_types, f_applications, f_services, f_channels, f_statuses, spec, source, created_by, created_at"

// DeliveryColumns are the columns of a delivery's row (as d), in the order
// of ScanDelivery, followed there by the event's (as e).
const DeliveryColumns = "d.id, d.target, d.type, d.event_seq, d.state, d.attempts, d.next_at, d.last_error, d.owner, d.claimed_until, d.created_at, d.delivered_at"

// Queries of notifications, with ? placeholders (Bind).
const (
	// UpsertNotifyTarget creates or replaces a target: NotifyTargetArgs.
	UpsertNotifyTarget = "INSERT INTO notify_targets (" + NotifyTargetColumns + ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)" +
		" ON CONFLICT (name) DO UPDATE SET kind = excluded.kind, f_types = excluded.f_types, f_applications = excluded.f_applications," +
		" f_services = excluded.f_services, f_channels = excluded.f_channels, f_statuses = excluded.f_statuses," +
		" spec = excluded.spec, source = excluded.source"
	// SelectNotifyTargets selects every target, by name.
	SelectNotifyTargets = "SELECT " + NotifyTargetColumns + " FROM notify_targets ORDER BY name"
	// SelectNotifyTarget selects target ?.
	SelectNotifyTarget = "SELECT " + NotifyTargetColumns + " FROM notify_targets WHERE name = ?"
	// DeleteNotifyTarget deletes target ?.
	DeleteNotifyTarget = "DELETE FROM notify_targets WHERE name = ?"
	// DeleteUndelivered deletes the deliveries of target ? not delivered.
	DeleteUndelivered = "DELETE FROM notify_deliveries WHERE target = ? AND state <> 'delivered'"

	// FinishDelivery records an attempt's outcome, fenced by the owner:
	// state, last_error (NULL: kept), next_at, delivered_at, attempts not
	// counted; id, owner.
	FinishDelivery = "UPDATE notify_deliveries SET state = ?, last_error = COALESCE(?, last_error), next_at = ?, delivered_at = ?," +
		" attempts = attempts - ?, owner = '', claimed_until = NULL" +
		" WHERE id = ? AND owner = ? AND state = 'pending'"

	// PruneDeliveries deletes the deliveries delivered before ?.
	PruneDeliveries = "DELETE FROM notify_deliveries WHERE state = 'delivered' AND delivered_at < ?"

	// CountDeliveries counts deliveries by target and state.
	CountDeliveries = "SELECT target, state, COUNT(*) FROM notify_deliveries GROUP BY target, state ORDER BY target, state"

	// ClaimableDeliveries selects the ids of deliveries due at ?1 and not
	// claimed at ?1, each the oldest pending one of its target and key,
	// oldest first, at most ?2.
	ClaimableDeliveries = "SELECT d.id FROM notify_deliveries d WHERE d.state = 'pending' AND d.next_at <= ?1" +
		" AND (d.claimed_until IS NULL OR d.claimed_until <= ?1)" +
		" AND NOT EXISTS (SELECT 1 FROM notify_deliveries p WHERE p.state = 'pending' AND p.target = d.target AND p.key = d.key AND p.id < d.id)" +
		" ORDER BY d.id LIMIT ?2"
)

// FilterList is the column value of a filter's list: "" or ",a,b,".
func FilterList(vals []string) string {
	if len(vals) == 0 {
		return ""
	}
	return "," + strings.Join(vals, ",") + ","
}

// splitFilter reads a FilterList back.
func splitFilter(col string) []string {
	col = strings.Trim(col, ",")
	if col == "" {
		return nil
	}
	return strings.Split(col, ",")
}

// NotifyTargetArgs are t's values for NotifyTargetColumns, with spec as
// given (sealed by the caller).
func NotifyTargetArgs(d Dialect, t store.NotifyTarget, spec []byte) []any {
	f := t.Filter
	return []any{t.Name, t.Kind, FilterList(f.Types), FilterList(f.Applications), FilterList(f.Services),
		FilterList(f.Channels), FilterList(f.Statuses), spec, t.Source, d.Text(t.CreatedBy), d.Time(t.CreatedAt)}
}

// ScanNotifyTarget scans a row of NotifyTargetColumns (Spec as stored).
func ScanNotifyTarget(d Dialect, row Scanner) (store.NotifyTarget, error) {
	var t store.NotifyTarget
	var types, apps, svcs, chans, statuses string
	err := row.Scan(&t.Name, &t.Kind, &types, &apps, &svcs, &chans, &statuses, &t.Spec, &t.Source, &t.CreatedBy, d.ScanTime(&t.CreatedAt))
	t.Filter = store.NotifyFilter{Types: splitFilter(types), Applications: splitFilter(apps), Services: splitFilter(svcs),
		Channels: splitFilter(chans), Statuses: splitFilter(statuses)}
	return t, err
}

// ListNotifyTargets is every target over r, Spec as stored.
func ListNotifyTargets(ctx context.Context, d Dialect, r Reader) ([]store.NotifyTarget, error) {
	out, err := queryAll(ctx, r, Bind(d, SelectNotifyTargets), nil, func(row Scanner) (store.NotifyTarget, error) {
		return ScanNotifyTarget(d, row)
	})
	if err != nil {
		return nil, fmt.Errorf("list notification targets: %w", err)
	}
	return out, nil
}

// ScanDelivery scans a row of DeliveryColumns followed by the event's
// columns, which scanEvent scans from the targets it is given.
func ScanDelivery(d Dialect, row Scanner, event ...any) (store.Delivery, error) {
	var x store.Delivery
	dest := []any{&x.ID, &x.Target, &x.Type, &x.EventSeq, &x.State, &x.Attempts, d.ScanTime(&x.NextAt), &x.LastError,
		&x.Owner, d.ScanTime(&x.ClaimedUntil), d.ScanTime(&x.CreatedAt), d.ScanTime(&x.DeliveredAt)}
	err := row.Scan(append(dest, event...)...)
	return x, err
}

// FanOut is the statement that makes, for one event, a delivery to each
// target whose filter matches it, and its arguments: the event's seq, key,
// application, service, channel and notification n, due at t. contains is
// how the backend writes "list column col holds the value of placeholder
// ?" (instr or strpos). The statement's placeholders are numbered ?1...
func FanOut(contains func(col, arg string) string, e store.Event, n state.Notify, t time.Time, d Dialect) (string, []any) {
	match := func(col, arg string) string {
		return "(t." + col + " = '' OR " + contains("t."+col, "',' || "+arg+" || ','") + ")"
	}
	q := "INSERT INTO notify_deliveries (target, key, type, event_seq, state, attempts, next_at, last_error, owner, created_at)" +
		" SELECT t.name, ?2, ?3, ?1, 'pending', 0, ?4, '', '', ?4 FROM notify_targets t WHERE " +
		match("f_types", "?3") + " AND " + match("f_applications", "?5") + " AND " + match("f_services", "?6") +
		" AND " + match("f_channels", "?7") + " AND " + match("f_statuses", "?8")
	return q, []any{e.Seq, DeliveryKey(e), n.Type, d.Time(t), e.Application, e.Service, e.ReleaseChannel, string(n.Status)}
}

// DeliveryKey is the key deliveries of e are ordered by: its service (an
// application's event without a service, the application).
func DeliveryKey(e store.Event) string {
	return e.Application + "/" + e.Service
}

// ClipError bounds a delivery error for its column, as valid UTF-8
// without NUL (PostgreSQL's TEXT takes neither; a receiver's reply may
// hold both).
func ClipError(s string) string {
	s = strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
	if len(s) <= store.MaxDeliveryError {
		return s
	}
	cut := store.MaxDeliveryError
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + "…"
}

// FinishArgs are the arguments of FinishDelivery for r by owner.
func FinishArgs(d Dialect, owner string, r store.DeliveryResult) []any {
	st, next, delivered := store.DeliveryPending, r.RetryAt, time.Time{}
	switch {
	case r.Delivered:
		st, next, delivered = store.DeliveryDelivered, time.Time{}, r.At
	case r.Dead:
		st, next = store.DeliveryDead, time.Time{}
	}
	if next.IsZero() {
		next = r.At
	}
	var lastErr any = ClipError(r.Error)
	uncounted := 0
	if r.Deferred {
		lastErr, uncounted = nil, 1
	}
	return []any{string(st), lastErr, d.Time(next), d.Time(delivered), uncounted, r.ID, owner}
}

// ListDeliveriesQuery is the query of f over deliveries joined with their
// events (eventCols, as e), newest first, and its arguments.
func ListDeliveriesQuery(d Dialect, eventCols string, f store.DeliveryFilter) (string, []any) {
	q := "SELECT " + DeliveryColumns + ", " + eventCols + " FROM notify_deliveries d JOIN events e ON e.seq = d.event_seq WHERE 1 = 1"
	var args []any
	if f.Target != "" {
		q += " AND d.target = ?"
		args = append(args, f.Target)
	}
	if len(f.States) > 0 {
		q += " AND d.state IN (?" + strings.Repeat(", ?", len(f.States)-1) + ")"
		for _, st := range f.States {
			args = append(args, string(st))
		}
	}
	if f.BeforeID > 0 {
		q += " AND d.id < ?"
		args = append(args, f.BeforeID)
	}
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	q += " ORDER BY d.id DESC LIMIT ?"
	return Bind(d, q), append(args, limit)
}

// RetryQuery is the statement that makes the dead deliveries of target
// (all: "") among ids (all: none given) pending and due at t, and its
// arguments.
func RetryQuery(d Dialect, target string, ids []int64, t time.Time) (string, []any) {
	q := "UPDATE notify_deliveries SET state = 'pending', attempts = 0, next_at = ?, owner = '', claimed_until = NULL WHERE state = 'dead'"
	args := []any{d.Time(t)}
	if target != "" {
		q += " AND target = ?"
		args = append(args, target)
	}
	if len(ids) > 0 {
		q += " AND id IN (?" + strings.Repeat(", ?", len(ids)-1) + ")"
		for _, id := range ids {
			args = append(args, id)
		}
	}
	return Bind(d, q), args
}

// CountDeliveriesOver counts deliveries by target and state over r.
func CountDeliveriesOver(ctx context.Context, d Dialect, r Reader) ([]store.DeliveryCount, error) {
	out, err := queryAll(ctx, r, Bind(d, CountDeliveries), nil, func(row Scanner) (store.DeliveryCount, error) {
		var c store.DeliveryCount
		err := row.Scan(&c.Target, &c.State, &c.Count)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("count deliveries: %w", err)
	}
	return out, nil
}

// numberedRE finds the numbered placeholders ?1, ?2...
var numberedRE = regexp.MustCompile(`\?(\d+)`)

// BindNumbered writes q, whose placeholders are numbered ?1, ?2..., as d
// writes them ($1, $2... where d numbers them).
func BindNumbered(d Dialect, q string) string {
	if !d.Numbered() {
		return q
	}
	return numberedRE.ReplaceAllString(q, "$$$1")
}

// What export and import carry of notifications: targets with their spec
// as stored (sealed), and deliveries with their ids and keys.
const (
	// InsertNotifyTarget inserts NotifyTargetArgs (an import: a target
	// already there is an error).
	InsertNotifyTarget = "INSERT INTO notify_targets (" + NotifyTargetColumns + ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"

	// DeliveryRowColumns are the columns of a delivery's row, its key
	// included, in the order of DeliveryRowArgs and ScanDeliveryRow.
	DeliveryRowColumns = "id, target, key, type, event_seq, state, attempts, next_at, last_error, owner, claimed_until, created_at, delivered_at"
	// InsertDeliveryRow is the start of the statement that inserts a
	// delivery with its id, followed by DeliveryRowValues (PostgreSQL
	// puts OVERRIDING SYSTEM VALUE between them).
	InsertDeliveryRow = "INSERT INTO notify_deliveries (" + DeliveryRowColumns + ")"
	// DeliveryRowValues are the values of InsertDeliveryRow:
	// DeliveryRowArgs.
	DeliveryRowValues = " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
	// SelectDeliveryRows selects every delivery's row, by id.
	SelectDeliveryRows = "SELECT " + DeliveryRowColumns + " FROM notify_deliveries ORDER BY id"
)

// DeliveryRow is a delivery's row: a delivery without its event, and the
// key its target's deliveries are ordered by (DeliveryKey).
type DeliveryRow struct {
	store.Delivery
	Key string
}

// DeliveryRowArgs are r's values for DeliveryRowColumns, in order.
func DeliveryRowArgs(d Dialect, r DeliveryRow) []any {
	return []any{r.ID, r.Target, r.Key, r.Type, r.EventSeq, string(r.State), r.Attempts, d.Time(r.NextAt), d.Text(r.LastError),
		r.Owner, d.Time(r.ClaimedUntil), d.Time(r.CreatedAt), d.Time(r.DeliveredAt)}
}

// ScanDeliveryRow scans a row of DeliveryRowColumns.
func ScanDeliveryRow(d Dialect, row Scanner) (DeliveryRow, error) {
	var r DeliveryRow
	err := row.Scan(&r.ID, &r.Target, &r.Key, &r.Type, &r.EventSeq, &r.State, &r.Attempts, d.ScanTime(&r.NextAt), &r.LastError,
		&r.Owner, d.ScanTime(&r.ClaimedUntil), d.ScanTime(&r.CreatedAt), d.ScanTime(&r.DeliveredAt))
	return r, err
}
