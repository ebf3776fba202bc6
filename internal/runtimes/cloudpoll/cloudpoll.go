package cloudpoll

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/drover-dev/drover/internal/runtimes"
)

// Default poll intervals, for a Config that names none.
const (
	DefaultPollInterval       = 10 * time.Second
	DefaultSteadyPollInterval = time.Minute
)

// ForgetAfter is how long an instance nobody fetches is still polled (or
// three steady intervals, if that is longer): the engine fetches each
// instance at least every few minutes while it is the target of a desired
// state.
const ForgetAfter = 15 * time.Minute

// minWait is the shortest the poller sleeps between passes.
const minWait = 100 * time.Millisecond

// ErrTargetChanged is Fetch's error when the instance's target changed
// under each of its observations (applies racing it); the runtime says so
// in its own words, and the engine fetches again.
var ErrTargetChanged = errors.New("the target kept changing while it was observed")

// Result is one observation of an instance.
type Result struct {
	State runtimes.State
	// Info is what people read of the instance (Poller.Info). An
	// observation that failed and has none keeps the last one.
	Info []runtimes.InfoOutput
	// Err is an observation that failed; Fetch returns it, and the
	// poller observes the instance again on the next pollInterval beat.
	Err error
}

// Config is what a runtime gives its Poller. S is what the runtime
// observes an instance for: the part of its target that Describe needs.
type Config[S any] struct {
	// Poll and Steady are pollInterval and steadyStatePollInterval
	// (DefaultPollInterval and DefaultSteadyPollInterval when not
	// positive).
	Poll, Steady time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Batch is how many instances one Describe call gets at most (1 when
	// not positive).
	Batch int
	// Same reports whether b, an instance's new spec, describes the same
	// target as a, its spec before (the version aside, which the Poller
	// compares): when it does not, the instance's observation is dropped.
	Same func(a, b S) bool
	// Describe observes a batch of instances: one Result per spec, in
	// order. It is called by the poller, and by Fetch for an instance
	// without an observation, never twice at once by the poller; what
	// it returns once ctx ended is dropped.
	Describe func(ctx context.Context, batch []S) []Result
}

// OneAtATime is a Describe for a backend that observes one instance per
// call: it calls describe for each spec of the batch in turn, and stops
// when ctx ends.
func OneAtATime[S any](describe func(context.Context, S) Result) func(context.Context, []S) []Result {
	return func(ctx context.Context, batch []S) []Result {
		out := make([]Result, 0, len(batch))
		for _, s := range batch {
			if ctx.Err() != nil {
				break
			}
			out = append(out, describe(ctx, s))
		}
		return out
	}
}

// Poller keeps a runtime's instances and observes them (doc.go). Its
// methods are safe for concurrent use.
type Poller[S any] struct {
	cfg      Config[S]
	notifier runtimes.Notifier
	ctx      context.Context
	cancel   context.CancelFunc
	wake     chan struct{}
	wg       sync.WaitGroup

	mu    sync.Mutex
	insts map[runtimes.InstanceKey]*instance[S]
	// polledAt and steadyAt are the last beats (due).
	polledAt, steadyAt time.Time
	// applyMu serializes applies per instance (LockApply); an entry lives
	// while an apply holds it or waits for it.
	applyMu map[runtimes.InstanceKey]*applyLock
}

// instance is what the Poller keeps of one service instance.
type instance[S any] struct {
	key     runtimes.InstanceKey
	version string
	spec    S
	// gen counts the targets the instance had, and its applies: an
	// observation made for an older one is not kept.
	gen    int
	have   bool
	state  runtimes.State
	err    error
	info   []runtimes.InfoOutput
	usedAt time.Time
}

// New starts the poller of cfg; Close stops it.
func New[S any](cfg Config[S]) *Poller[S] {
	p := newPoller(cfg)
	p.wg.Add(1)
	go p.loop()
	return p
}

// newPoller is a Poller whose poller goroutine is not started (tests run
// its passes themselves).
func newPoller[S any](cfg Config[S]) *Poller[S] {
	if cfg.Poll <= 0 {
		cfg.Poll = DefaultPollInterval
	}
	if cfg.Steady <= 0 {
		cfg.Steady = DefaultSteadyPollInterval
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	cfg.Batch = max(cfg.Batch, 1)
	p := &Poller[S]{cfg: cfg, wake: make(chan struct{}, 1), insts: map[runtimes.InstanceKey]*instance[S]{},
		applyMu: map[runtimes.InstanceKey]*applyLock{}}
	p.ctx, p.cancel = context.WithCancel(context.Background()) //nolint:gosec // G118: Close calls p.cancel
	return p
}

// Intervals are the poll and steady intervals in force, defaults filled in.
func (p *Poller[S]) Intervals() (poll, steady time.Duration) { return p.cfg.Poll, p.cfg.Steady }

// Close stops the poller, waiting for an observation under way, and ends
// the Watch calls. It may be called more than once.
func (p *Poller[S]) Close() {
	p.cancel()
	p.wg.Wait()
}

// Watch calls notify with the key of every instance whose observation
// changed, or that Notify names, until ctx ends or the Poller closes.
func (p *Poller[S]) Watch(ctx context.Context, notify func(runtimes.InstanceKey)) error {
	return p.notifier.Watch(ctx, p.ctx.Done(), notify)
}

// Notify tells the watchers that the instance may have changed (an apply).
func (p *Poller[S]) Notify(key runtimes.InstanceKey) { p.notifier.Notify(key) }

// Touch records spec, for target t, as what the instance is observed for,
// and that it is in use; a target not the same as before drops its
// observation.
func (p *Poller[S]) Touch(t runtimes.Target, spec S) {
	p.touch(t, spec)
}

func (p *Poller[S]) touch(t runtimes.Target, spec S) *instance[S] {
	p.mu.Lock()
	defer p.mu.Unlock()
	in := p.insts[t.InstanceKey]
	if in == nil {
		in = &instance[S]{key: t.InstanceKey}
		p.insts[t.InstanceKey] = in
	} else if in.version != t.Version || !p.cfg.Same(in.spec, spec) {
		in.have = false
		in.gen++
	}
	in.version, in.spec, in.usedAt = t.Version, spec, p.cfg.Now()
	return in
}

// Fetch touches the instance and returns its latest observation,
// observing it now when it has none for this target. It returns
// ErrTargetChanged when applies kept changing the target under three
// observations, and ctx's error when ctx ended.
func (p *Poller[S]) Fetch(ctx context.Context, t runtimes.Target, spec S) (runtimes.State, error) {
	in := p.touch(t, spec)
	for i := 0; ; i++ {
		p.mu.Lock()
		if in.have {
			defer p.mu.Unlock()
			return in.state, in.err
		}
		p.mu.Unlock()
		if i == 3 {
			return runtimes.State{}, ErrTargetChanged
		}
		p.describe(ctx, []*instance[S]{in})
		if err := ctx.Err(); err != nil {
			return runtimes.State{}, err
		}
	}
}

// Info returns the latest Info of the instance's observations.
func (p *Poller[S]) Info(key runtimes.InstanceKey) []runtimes.InfoOutput {
	p.mu.Lock()
	defer p.mu.Unlock()
	if in := p.insts[key]; in != nil {
		return in.info
	}
	return nil
}

// LockApply serializes the applies of one instance: it returns once the
// instance's other applies have ended, with the function that ends this
// one's turn.
func (p *Poller[S]) LockApply(key runtimes.InstanceKey) (unlock func()) {
	p.mu.Lock()
	l := p.applyMu[key]
	if l == nil {
		l = &applyLock{}
		p.applyMu[key] = l
	}
	l.users++
	p.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		p.mu.Lock()
		if l.users--; l.users == 0 {
			delete(p.applyMu, key)
		}
		p.mu.Unlock()
	}
}

// applyLock is one instance's apply lock and how many applies hold it or
// wait for it (under Poller.mu).
type applyLock struct {
	mu    sync.Mutex
	users int
}

// Applied records that an apply of the instance ended: the next Fetch
// observes it again, an observation under way is not kept, and the poller
// wakes to observe it. It notifies no watcher (Notify does).
func (p *Poller[S]) Applied(key runtimes.InstanceKey) {
	p.mu.Lock()
	if in := p.insts[key]; in != nil {
		in.have = false
		in.gen++
	}
	p.mu.Unlock()
	p.Wake()
}

// Wake makes the poller look for instances due now.
func (p *Poller[S]) Wake() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// loop is the poller: a pass when the next beat is due or when woken.
func (p *Poller[S]) loop() {
	defer p.wg.Done()
	timer := time.NewTimer(time.Second)
	defer timer.Stop()
	for {
		select {
		case <-p.ctx.Done():
			return
		case <-timer.C:
		case <-p.wake:
		}
		next := p.pass()
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(next)
	}
}

// pass observes the instances that are due and returns how long until the
// next beat.
func (p *Poller[S]) pass() time.Duration {
	due, next := p.due()
	if len(due) > 0 {
		p.describe(p.ctx, due)
	}
	return next
}

// due returns the instances to observe now, and how long until the next
// beat: every pollInterval those not converged, every
// steadyStatePollInterval all of them, at once those not observed yet. It
// forgets the instances nobody touched for a while.
func (p *Poller[S]) due() ([]*instance[S], time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.cfg.Now()
	poll, steady := p.cfg.Poll, p.cfg.Steady
	pollBeat := now.Sub(p.polledAt) >= poll
	steadyBeat := now.Sub(p.steadyAt) >= steady
	if pollBeat {
		p.polledAt = now
	}
	if steadyBeat {
		p.steadyAt, p.polledAt = now, now
	}
	var out []*instance[S]
	for k, in := range p.insts {
		if now.Sub(in.usedAt) > max(3*steady, ForgetAfter) {
			delete(p.insts, k)
			continue
		}
		converged := in.have && in.err == nil && in.state.Converged
		if !in.have || steadyBeat || pollBeat && !converged {
			out = append(out, in)
		}
	}
	next := min(poll-now.Sub(p.polledAt), steady-now.Sub(p.steadyAt))
	return out, max(next, minWait)
}

// describe observes ins, Batch at a time in the order of their keys, and
// records each observation that is still for the instance's target.
func (p *Poller[S]) describe(ctx context.Context, ins []*instance[S]) {
	slices.SortFunc(ins, func(a, b *instance[S]) int {
		return cmp.Or(strings.Compare(a.key.Application, b.key.Application), strings.Compare(a.key.Service, b.key.Service),
			strings.Compare(a.key.ReleaseChannel, b.key.ReleaseChannel))
	})
	for start := 0; start < len(ins); start += p.cfg.Batch {
		batch := ins[start:min(start+p.cfg.Batch, len(ins))]
		gens := make([]int, len(batch))
		specs := make([]S, len(batch))
		p.mu.Lock()
		for i, in := range batch {
			gens[i], specs[i] = in.gen, in.spec
		}
		p.mu.Unlock()
		results := p.cfg.Describe(ctx, specs)
		if ctx.Err() != nil {
			return // canceled: what the call saw is no observation
		}
		for i, res := range results[:min(len(results), len(batch))] {
			p.record(batch[i], gens[i], res)
		}
	}
}

// record stores an observation made for generation gen, and notifies the
// watchers when it differs from the one before.
func (p *Poller[S]) record(in *instance[S], gen int, res Result) {
	p.mu.Lock()
	if in.gen != gen {
		p.mu.Unlock()
		return // the target changed meanwhile: observed again for it
	}
	changed := !in.have || errText(res.Err) != errText(in.err) || !sameState(res.State, in.state)
	in.have, in.state, in.err = true, res.State, res.Err
	if res.Info != nil || res.Err == nil {
		in.info = res.Info
	}
	key := in.key
	p.mu.Unlock()
	if changed {
		p.notifier.Notify(key)
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func sameState(a, b runtimes.State) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}
