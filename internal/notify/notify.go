// Package notify delivers notifications: it claims the deliveries of the
// store's outbox (store.Notifications), hands each to the sender of its
// target's kind (a signed CloudEvents webhook, a Slack message) and records
// the outcome, retrying with backoff until the target takes it or the most
// attempts were made (then the delivery is dead, for an admin to retry).
//
// The outbox is written in the transaction of the event it tells of, so a
// server killed at any instant loses none: what it claimed and did not
// finish is claimed again once its claim expires (a delivery may then be
// made twice; receivers tell by the CloudEvent id, which stays the same).
// Deliveries of one target about one service are claimed one at a time, in
// the order of their events. Several servers sharing a database each run a
// dispatcher; a claim is held by one at a time.
package notify

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/drover-dev/drover/internal/store"
)

// Store is what the dispatcher reads and writes.
type Store interface {
	GetNotifyTarget(ctx context.Context, name string) (store.NotifyTarget, error)
	ClaimDeliveries(ctx context.Context, owner string, now time.Time, ttl time.Duration, limit int) ([]store.Delivery, error)
	FinishDelivery(ctx context.Context, owner string, r store.DeliveryResult) error
}

// Sender delivers a notification to a target of its kind. An error means
// the target did not take it; a Retry error says when to try again.
type Sender interface {
	Send(ctx context.Context, t store.NotifyTarget, n Notification) error
}

// RetryAfterError is a failure the target asked to be retried no sooner
// than After (HTTP 429 with Retry-After).
type RetryAfterError struct {
	Err   error
	After time.Duration
}

func (e *RetryAfterError) Error() string { return e.Err.Error() }
func (e *RetryAfterError) Unwrap() error { return e.Err }

// PermanentError is a failure that no retry mends (a target's settings
// are wrong): the delivery is dead at once.
type PermanentError struct{ Err error }

func (e *PermanentError) Error() string { return e.Err.Error() }
func (e *PermanentError) Unwrap() error { return e.Err }

// Details is what the server adds to an event for people: the version a
// channel moves to, who pushed it, what an approval would roll out.
type Details struct {
	// Version is the version label of the desired state the event is of.
	Version string `json:"version,omitempty"`
	// PushedBy is who pushed the desired state.
	PushedBy string `json:"pushedBy,omitempty"`
	// Release is the release the desired state belongs to, if any.
	Release string `json:"release,omitempty"`
	// Preview summarizes what an approval would roll out (approval
	// requests).
	Preview string `json:"preview,omitempty"`
	// ApproveCommand is the command that approves (approval requests).
	ApproveCommand string `json:"approveCommand,omitempty"`
}

// Observer is told of each attempt (metrics).
type Observer interface {
	// Delivered: target took a notification of typ, latency after its
	// event was committed.
	Delivered(target, typ string, latency time.Duration)
	// Failed: an attempt failed; dead when it was the last.
	Failed(target, typ string, dead bool)
}

// Config configures a Dispatcher.
type Config struct {
	Store Store
	// Owner names this server in claims.
	Owner string
	// Senders are the senders by target kind.
	Senders map[string]Sender
	// Describe adds the server's details to a notification (optional).
	Describe func(ctx context.Context, e store.Event) Details
	// UIURL is the web UI's address for links (optional).
	UIURL string
	// MaxAttempts is how many attempts a delivery gets before it is dead
	// (default 20).
	MaxAttempts int
	// MaxBackoff bounds the wait between attempts (default 30s); the
	// first retry comes after a second, each next one after twice as long.
	MaxBackoff time.Duration
	// RatePerMinute bounds the notifications sent to one target (default
	// 120, with bursts of 20); more wait their turn.
	RatePerMinute int
	// Poll is how often the dispatcher looks for due deliveries when
	// nothing woke it (default 1s).
	Poll time.Duration
	// ClaimTTL is how long a claim holds (default 30s): a server killed
	// while delivering is replaced after it.
	ClaimTTL time.Duration
	// Workers is how many deliveries go out at once (default 8).
	Workers  int
	Observer Observer
	Log      *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Dispatcher delivers the outbox.
type Dispatcher struct {
	cfg      Config
	mu       sync.Mutex
	limiters map[string]*rate.Limiter
}

// New returns a dispatcher with cfg's defaults filled in.
func New(cfg Config) *Dispatcher {
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = 20
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = 30 * time.Second
	}
	if cfg.RatePerMinute <= 0 {
		cfg.RatePerMinute = 120
	}
	if cfg.Poll <= 0 {
		cfg.Poll = time.Second
	}
	if cfg.ClaimTTL <= 0 {
		cfg.ClaimTTL = 30 * time.Second
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 8
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Dispatcher{cfg: cfg, limiters: map[string]*rate.Limiter{}}
}

// Run delivers until ctx ends. wake returns a channel closed at the next
// change of the store (nil: poll only); the dispatcher looks for due
// deliveries then, and every Poll.
func (d *Dispatcher) Run(ctx context.Context, wake func() <-chan struct{}) {
	for ctx.Err() == nil {
		var woken <-chan struct{}
		if wake != nil {
			woken = wake() // before the claim: a change during it wakes the next wait
		}
		n, err := d.Once(ctx)
		if err != nil && ctx.Err() == nil {
			d.cfg.Log.Warn("notifications: claim failed", "error", err)
		}
		if n > 0 && err == nil {
			continue // more may be due
		}
		t := time.NewTimer(d.cfg.Poll)
		select {
		case <-ctx.Done():
		case <-woken:
		case <-t.C:
		}
		t.Stop()
	}
}

// Once claims the deliveries due and delivers them; it returns how many it
// claimed.
func (d *Dispatcher) Once(ctx context.Context) (int, error) {
	// No more than the workers send at once: each claimed delivery is
	// sent at once, well within its claim (a send is bounded to half the
	// claim), so no other server claims it again meanwhile.
	got, err := d.cfg.Store.ClaimDeliveries(ctx, d.cfg.Owner, d.cfg.Now(), d.cfg.ClaimTTL, d.cfg.Workers)
	if err != nil || len(got) == 0 {
		return 0, err
	}
	sem := make(chan struct{}, d.cfg.Workers)
	var wg sync.WaitGroup
	for _, del := range got {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			d.deliver(ctx, del)
		}()
	}
	wg.Wait()
	return len(got), nil
}

// deliver makes one attempt of del and records its outcome.
func (d *Dispatcher) deliver(ctx context.Context, del store.Delivery) {
	res := store.DeliveryResult{ID: del.ID}
	target, err := d.cfg.Store.GetNotifyTarget(ctx, del.Target)
	if err == nil {
		if wait := d.reserve(target.Name); wait > 0 {
			// Over the target's rate: due again when its turn comes, the
			// attempt not counted.
			res.Deferred, res.RetryAt, res.At = true, d.cfg.Now().Add(wait), d.cfg.Now()
			d.finish(ctx, del, res)
			return
		}
		err = d.send(ctx, target, del)
	}
	res.At = d.cfg.Now()
	if err == nil {
		res.Delivered = true
		if d.cfg.Observer != nil {
			d.cfg.Observer.Delivered(del.Target, del.Type, res.At.Sub(del.Event.Time))
		}
		d.finish(ctx, del, res)
		return
	}
	if ctx.Err() != nil {
		return // shutting down: the claim expires and the next claim retries
	}
	var ra *RetryAfterError
	if errors.As(err, &ra) {
		// The target asked to wait: not an attempt that failed.
		res.Deferred, res.RetryAt = true, res.At.Add(d.backoff(del.Attempts, err))
		d.finish(ctx, del, res)
		return
	}
	res.Error = err.Error()
	var perm *PermanentError
	res.Dead = del.Attempts >= d.cfg.MaxAttempts || errors.As(err, &perm) || errors.Is(err, store.ErrNotFound)
	res.RetryAt = res.At.Add(d.backoff(del.Attempts, err))
	if d.cfg.Observer != nil {
		d.cfg.Observer.Failed(del.Target, del.Type, res.Dead)
	}
	level := slog.LevelInfo
	if res.Dead {
		level = slog.LevelWarn
	}
	d.cfg.Log.Log(ctx, level, "notification not delivered", "target", del.Target, "type", del.Type, "delivery", del.ID,
		"attempt", del.Attempts, "dead", res.Dead, "error", res.Error)
	d.finish(ctx, del, res)
}

func (d *Dispatcher) finish(ctx context.Context, del store.Delivery, res store.DeliveryResult) {
	if err := d.cfg.Store.FinishDelivery(ctx, d.cfg.Owner, res); err != nil && ctx.Err() == nil {
		// Lost the claim (it expired and another server took it): that
		// server's outcome stands.
		d.cfg.Log.Warn("notifications: outcome not recorded", "delivery", del.ID, "error", err)
	}
}

// send builds the notification of del and hands it to its target's sender.
func (d *Dispatcher) send(ctx context.Context, t store.NotifyTarget, del store.Delivery) error {
	sender, ok := d.cfg.Senders[t.Kind]
	if !ok {
		return &PermanentError{fmt.Errorf("no sender for targets of kind %s on this server", t.Kind)}
	}
	n := d.build(ctx, del)
	sctx, cancel := context.WithTimeout(ctx, min(15*time.Second, d.cfg.ClaimTTL/2))
	defer cancel()
	return sender.Send(sctx, t, n)
}

// build is the notification of del, with the server's details.
func (d *Dispatcher) build(ctx context.Context, del store.Delivery) Notification {
	n := Notification{Type: del.Type, Delivery: del.ID, Attempt: del.Attempts, Event: del.Event, Link: Link(d.cfg.UIURL, del.Event)}
	if d.cfg.Describe != nil {
		n.Details = d.cfg.Describe(ctx, del.Event)
	}
	return n
}

// backoff is the wait after attempt n failed with err: 1s, 2s, 4s... up to
// MaxBackoff, with a tenth of jitter; a target's Retry-After if longer.
func (d *Dispatcher) backoff(n int, err error) time.Duration {
	wait := d.cfg.MaxBackoff
	if n >= 1 && n < 30 {
		wait = min(time.Second<<(n-1), d.cfg.MaxBackoff)
	}
	wait += time.Duration(rand.Int64N(int64(wait)/10 + 1)) //nolint:gosec // G404: jitter, not a secret
	var ra *RetryAfterError
	if errors.As(err, &ra) && ra.After > wait {
		wait = min(ra.After, 10*time.Minute)
	}
	return wait
}

// reserve takes a turn of target's rate; it returns how long to wait when
// there is none now.
func (d *Dispatcher) reserve(target string) time.Duration {
	d.mu.Lock()
	l, ok := d.limiters[target]
	if !ok {
		l = rate.NewLimiter(rate.Limit(float64(d.cfg.RatePerMinute)/60), 20)
		d.limiters[target] = l
	}
	d.mu.Unlock()
	r := l.ReserveN(d.cfg.Now(), 1)
	if wait := r.DelayFrom(d.cfg.Now()); wait > 0 {
		r.CancelAt(d.cfg.Now())
		return wait
	}
	return 0
}
