package store

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	ds "github.com/drover-dev/drover/internal/desiredstate"
	"github.com/drover-dev/drover/internal/state"
)

// Notifications keeps where notifications go (targets) and the outbox of
// what is still to be delivered to them (deliveries).
//
// A delivery is written in the transaction that appends the event it
// tells of: every method of any role that appends events fans each event
// that notifies (state.NotifyOf) out to the targets whose filter matches
// it, so an event is never committed without its deliveries nor the other
// way round. A sender claims the deliveries due, delivers them and records
// the outcome; a claim expires, so a sender that died is replaced by the
// next claim and a delivery is made at least once. Deliveries of one
// target about one service are claimed one at a time in the order of
// their events: the next is claimable once the one before was delivered
// or gave up (dead).
type Notifications interface {
	// PutNotifyTarget creates or replaces the target t.Name (a zero
	// CreatedAt is set to the current time). Its Spec is sealed at rest.
	// A target that CheckPut refuses is an error.
	PutNotifyTarget(ctx context.Context, t NotifyTarget) error

	// GetNotifyTarget returns target name with its Spec opened, or
	// ErrNotFound.
	GetNotifyTarget(ctx context.Context, name string) (NotifyTarget, error)

	// ListNotifyTargets returns every target, by name, with its Spec
	// opened.
	ListNotifyTargets(ctx context.Context) ([]NotifyTarget, error)

	// DeleteNotifyTarget removes target name and its deliveries not yet
	// delivered, or returns ErrNotFound. Delivered ones are kept until
	// PruneDeliveries.
	DeleteNotifyTarget(ctx context.Context, name string) error

	// ClaimDeliveries gives owner up to limit deliveries that are due at
	// now and not claimed by another owner (or whose claim expired), each
	// the oldest of its target and key still pending, oldest first,
	// claimed until now+ttl. Each comes with its event.
	ClaimDeliveries(ctx context.Context, owner string, now time.Time, ttl time.Duration, limit int) ([]Delivery, error)

	// FinishDelivery records the outcome of an attempt of a delivery owner
	// claimed. It is ErrConflict when owner no longer holds the claim (it
	// expired and another owner claimed it): the outcome is not recorded.
	FinishDelivery(ctx context.Context, owner string, r DeliveryResult) error

	// ListDeliveries returns the deliveries matching f, newest first, with
	// their events.
	ListDeliveries(ctx context.Context, f DeliveryFilter) ([]Delivery, error)

	// RetryDeliveries makes the dead deliveries of target (every target:
	// "") pending and due at now again, their attempts counted from zero,
	// and returns how many. ids, when given, limits it to those.
	RetryDeliveries(ctx context.Context, target string, ids []int64, now time.Time) (int, error)

	// CountDeliveries counts deliveries by target and state.
	CountDeliveries(ctx context.Context) ([]DeliveryCount, error)

	// PruneDeliveries deletes the deliveries delivered before before and
	// returns how many.
	PruneDeliveries(ctx context.Context, before time.Time) (int, error)
}

// Notification target kinds.
const (
	NotifyWebhook = "webhook"
	NotifySlack   = "slack"
)

// NotifyTarget is a place notifications are delivered to: a webhook, or a
// Slack channel of an application.
type NotifyTarget struct {
	Name string `json:"name"`
	// Kind is NotifyWebhook or NotifySlack.
	Kind   string       `json:"kind"`
	Filter NotifyFilter `json:"filter,omitzero"`
	// Spec is the kind's settings as JSON (a webhook's URL and secret),
	// sealed at rest.
	Spec []byte `json:"spec,omitempty"`
	// Source says what manages the target: "" for the API (drover
	// notifications add), "config" for an application's config (its
	// notifications.slack), which replaces or removes it when the
	// application is applied again.
	Source    string    `json:"source,omitempty"`
	CreatedBy string    `json:"createdBy,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
}

// NotifyFilter selects the events a target is told of: an empty list
// matches everything, a list matches an event with one of its values.
type NotifyFilter struct {
	// Types are notification types (state.NotifyTypes).
	Types        []string `json:"types,omitempty"`
	Applications []string `json:"applications,omitempty"`
	Services     []string `json:"services,omitempty"`
	Channels     []string `json:"channels,omitempty"`
	// Statuses are instance statuses (ds.Status) the notification tells
	// of (state.NotifyOf).
	Statuses []string `json:"statuses,omitempty"`
}

// notifyNameRE is what a target's name may be.
var notifyNameRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9._-]{0,125}[a-z0-9])?$`)

// filterValueRE is what a filter value may be: names never hold a comma
// (the stores keep a list as ",a,b,").
var filterValueRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.@-]{0,127}$`)

// CheckNotifyName says what is wrong with a target's name, or nil.
func CheckNotifyName(name string) error {
	if !notifyNameRE.MatchString(name) {
		return fmt.Errorf("notification target %q: use 1 to 127 lowercase letters, digits and . _ - (starting and ending with a letter or digit)", name)
	}
	return nil
}

// CheckPut says what is wrong with t as a target to store, or nil.
func (t NotifyTarget) CheckPut() error {
	if err := CheckNotifyName(t.Name); err != nil {
		return err
	}
	if t.Kind != NotifyWebhook && t.Kind != NotifySlack {
		return fmt.Errorf("notification target %s: kind %q is neither %s nor %s", t.Name, t.Kind, NotifyWebhook, NotifySlack)
	}
	return t.Filter.Check()
}

// Check says what is wrong with f, or nil.
func (f NotifyFilter) Check() error {
	for _, l := range []struct {
		name string
		vals []string
	}{{"types", f.Types}, {"applications", f.Applications}, {"services", f.Services}, {"channels", f.Channels}, {"statuses", f.Statuses}} {
		for _, v := range l.vals {
			if !filterValueRE.MatchString(v) {
				return fmt.Errorf("filter %s: %q is not a name (letters, digits and _ . @ -)", l.name, v)
			}
		}
	}
	for _, t := range f.Types {
		if !slices.Contains(state.NotifyTypes(), t) {
			return fmt.Errorf("filter types: %q is not a notification type (%s)", t, strings.Join(state.NotifyTypes(), ", "))
		}
	}
	for _, st := range f.Statuses {
		if !slices.Contains(ds.Statuses(), ds.Status(st)) {
			return fmt.Errorf("filter statuses: %q is not a status", st)
		}
	}
	return nil
}

// Matches reports whether f selects a notification n of event e.
func (f NotifyFilter) Matches(e Event, n state.Notify) bool {
	in := func(list []string, v string) bool { return len(list) == 0 || slices.Contains(list, v) }
	return in(f.Types, n.Type) && in(f.Applications, e.Application) && in(f.Services, e.Service) &&
		in(f.Channels, e.ReleaseChannel) && in(f.Statuses, string(n.Status))
}

// DeliveryState is where a delivery stands.
type DeliveryState string

// Delivery states.
const (
	// DeliveryPending: not delivered yet; retried until it is, or until
	// it gave up.
	DeliveryPending DeliveryState = "pending"
	// DeliveryDelivered: the target accepted it.
	DeliveryDelivered DeliveryState = "delivered"
	// DeliveryDead: it gave up after the most attempts allowed; an admin
	// may retry it (RetryDeliveries).
	DeliveryDead DeliveryState = "dead"
)

// Delivery is one notification of one event to one target: a row of the
// outbox.
type Delivery struct {
	ID     int64  `json:"id"`
	Target string `json:"target"`
	// Type is the notification type (state.NotifyOf of Event).
	Type     string        `json:"type"`
	EventSeq int64         `json:"eventSeq"`
	State    DeliveryState `json:"state"`
	Attempts int           `json:"attempts"`
	// NextAt is when the delivery is due (pending ones).
	NextAt    time.Time `json:"nextAt,omitzero"`
	LastError string    `json:"lastError,omitempty"`
	// Owner holds the claim until ClaimedUntil.
	Owner        string    `json:"owner,omitempty"`
	ClaimedUntil time.Time `json:"claimedUntil,omitzero"`
	CreatedAt    time.Time `json:"createdAt"`
	DeliveredAt  time.Time `json:"deliveredAt,omitzero"`
	// Event is the event the delivery tells of.
	Event Event `json:"event"`
}

// DeliveryResult is the outcome of one attempt of delivery ID.
type DeliveryResult struct {
	ID int64
	// Delivered: the target accepted it. Otherwise Error says why not,
	// and the delivery is due again at RetryAt, or is dead (Dead).
	Delivered bool
	Error     string
	RetryAt   time.Time
	Dead      bool
	// Deferred: no attempt was made (the target's rate was reached); the
	// delivery is due again at RetryAt, its claim's attempt not counted.
	Deferred bool
	At       time.Time
}

// DeliveryFilter selects deliveries; zero fields match all.
type DeliveryFilter struct {
	Target string
	States []DeliveryState
	// BeforeID pages back: only deliveries with a smaller id.
	BeforeID int64
	// Limit bounds the deliveries returned (0: 100).
	Limit int
}

// DeliveryCount is how many deliveries of Target are in State.
type DeliveryCount struct {
	Target string
	State  DeliveryState
	Count  int
}

// MaxDeliveryError bounds a delivery's LastError.
const MaxDeliveryError = 1000

// ErrNotifyUnsupported is what a store that keeps no notifications returns.
var ErrNotifyUnsupported = errors.New("this store keeps no notifications")
