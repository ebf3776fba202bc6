package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/drover-dev/drover/internal/gates"
	"github.com/drover-dev/drover/internal/runtimes"
	"github.com/drover-dev/drover/internal/store"
)

// RuntimeSource gives the engine the runtime named in a release channel.
type RuntimeSource interface {
	Runtime(ctx context.Context, name string) (runtimes.Runtime, error)
}

// QueueLen is how many services wait for a pass now (not those due later).
func (l *Loop) QueueLen() int { return l.queue.Len() }

// Loop runs the convergence engine: workers take service keys from a queue
// and, under a lease on the key, observe, plan, and write the plan with the
// tasks it decides; the task runner (runner.go) claims tasks and carries
// them out through the executor. Several loops may share one store.
type Loop struct {
	observer Observer
	store    Store
	// dependants maps each service to those waiting for it (services.go).
	dependants dependants
	runtimes   RuntimeSource
	settings   Settings
	now        func() time.Time
	log        *slog.Logger
	workers    int
	queue      *queue

	// owner names this loop in leases and task claims.
	owner    string
	leaseTTL time.Duration
	taskTTL  time.Duration
	taskPoll time.Duration
	// exclusive: no other process uses the store (claims left in it are a
	// dead process's, ended at start).
	exclusive bool
	// resync is how often to look for services nothing is scheduled for (0 = never).
	resync  time.Duration
	leaseMu sync.Mutex
	leases  map[string]store.Lease
	// leaseUntil is when each held lease lapses by this host's clock.
	leaseUntil map[string]time.Time
	// observed remembers what was last written of each instance's
	// observation (see observe.go).
	observed observed

	// tasks counts the tasks being carried out; slots bounds them; wake
	// tells the dispatcher that tasks were enqueued.
	mu    sync.Mutex
	tasks sync.WaitGroup
	slots chan struct{}
	// idle hands a task to a runner goroutine waiting for one (runner).
	idle chan claimedTask
	wake chan struct{}
	// shutdownGrace is how long Run lets applies in flight finish once its
	// context ends; applyCtx is what they run under (see loop_shutdown.go).
	shutdownGrace time.Duration
	applyCtx      context.Context
	// quit is closed once Run's context ends (nil before Run).
	quit chan struct{}
	// outcomes wait for the next pass over their service (outcomes.go).
	outcomes outcomes

	// onWrite, when set, is called after each durable write (tests, SSE).
	onWrite func()

	// exec carries out the actions plans decide.
	exec Executor
	// failures counts the consecutive failed passes per service key, for
	// the backoff of settle; requeues the consecutive requeues, for their
	// rate limit (nextRequeue).
	failMu   sync.Mutex
	failures map[string]int
	requeues map[string]int
	// freezes are the freezes in force, cached (freezes.go).
	freezes freezes
	// states are the decoded desired states (Config.States).
	states *StateCache
}

// Config configures a Loop.
type Config struct {
	Store    Store
	Runtimes RuntimeSource
	Settings Settings
	// Now is the clock (nil = time.Now).
	Now func() time.Time
	Log *slog.Logger
	// Workers is the number of services reconciled in parallel (default
	// DefaultWorkers).
	Workers int
	// MaxApplies bounds the applies running at once (default 64). Applies run
	// beside the workers, so a slow one never holds up other services.
	MaxApplies int
	// OnWrite is called after every durable write of the engine.
	OnWrite func()
	// ShutdownGrace is how long applies in flight may still run once Run's
	// context ends (0 = they are stopped at once); those still running
	// then are stopped and recorded as interrupted.
	ShutdownGrace time.Duration
	// Gates evaluates the checks of gate kinds, by kind (for the
	// LocalExecutor; nil: none).
	Gates *gates.Registry
	// Executor carries out the actions plans decide (nil = a LocalExecutor
	// over Store and Runtimes).
	Executor Executor
	// Owner names this engine in leases and task claims (default: host,
	// process id and a random suffix); it must differ between engines
	// sharing a store.
	Owner string
	// LeaseTTL is how long a lease on a service key lasts without renewal
	// (default 15 s, ExclusiveLeaseTTL with Exclusive): after a crash,
	// another engine takes the service over within it. TaskTTL is the same
	// for a task's claim (default 30 s, twice LeaseTTL with Exclusive;
	// heartbeats every third of it); TaskPoll how often idle runners look
	// for tasks other engines enqueued (default 1 s).
	LeaseTTL time.Duration
	TaskTTL  time.Duration
	TaskPoll time.Duration
	// Exclusive says no other process uses the store (the SQLite data
	// directory's lock): leases and claims found at start belong to a dead
	// process and are ended at once, rather than when they lapse.
	Exclusive bool
	// Resync is how often the loop lists every service with a desired
	// state and queues those it has nothing scheduled for: services pushed
	// through another server sharing the store, whose engine may die. 0 =
	// never (a store of its own hears of every push through Enqueue).
	Resync time.Duration
	// Observer is told of every pass and task, for metrics (nil: none).
	Observer Observer
	// States is the process's cache of decoded desired states, shared
	// with the API (nil: a cache of the loop's own).
	States *StateCache
}

// Observer is told what the engine does, for metrics. Its methods are
// called from the engine's goroutines and must not block.
type Observer interface {
	// Reconciled: a pass over a service took d and ended as result
	// (ResultSuccess, ResultRequeue, ResultRequeueAfter, ResultError,
	// ResultTerminal).
	Reconciled(d time.Duration, result string)
	// TaskDone: a task of kind (apply, runCheck, ...) was carried out in d
	// with outcome succeeded, failed, interrupted or lost.
	TaskDone(kind, outcome string, d time.Duration)
	// RuntimeCall: a call op (fetch, apply) to runtime took d and ended
	// with err.
	RuntimeCall(runtime, op string, d time.Duration, err error)
}

// noObserver observes nothing.
type noObserver struct{}

func (noObserver) Reconciled(time.Duration, string)                 {}
func (noObserver) TaskDone(string, string, time.Duration)           {}
func (noObserver) RuntimeCall(string, string, time.Duration, error) {}

// NewLoop builds a loop; call Run to start it.
func NewLoop(cfg Config) *Loop {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Workers <= 0 {
		cfg.Workers = DefaultWorkers()
	}
	if cfg.Settings.MaxApplyAttempts == 0 {
		cfg.Settings = DefaultSettings()
	}
	if cfg.MaxApplies <= 0 {
		cfg.MaxApplies = 64
	}
	if cfg.Settings.RetryBackoff <= 0 {
		cfg.Settings.RetryBackoff = DefaultSettings().RetryBackoff
	}
	if cfg.Settings.MaxBackoff <= 0 {
		cfg.Settings.MaxBackoff = DefaultSettings().MaxBackoff
	}
	if cfg.States == nil {
		cfg.States = NewStateCache(cfg.Store)
	}
	if cfg.Executor == nil {
		x := NewLocalExecutor(cfg.Store, cfg.Runtimes, cfg.Settings, cfg.Now, cfg.Log)
		x.gates, x.states = cfg.Gates, cfg.States
		if cfg.Observer != nil {
			x.observer = cfg.Observer
		}
		cfg.Executor = x
	}
	if cfg.Owner == "" {
		cfg.Owner = defaultOwner()
	}
	if cfg.LeaseTTL <= 0 && cfg.Exclusive {
		// Nobody else can take a service over: a lease that lasts spares
		// renewing it on most passes (one write each).
		cfg.LeaseTTL = ExclusiveLeaseTTL
	}
	if cfg.TaskTTL <= 0 && cfg.Exclusive {
		cfg.TaskTTL = 2 * cfg.LeaseTTL
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = 15 * time.Second
	}
	if cfg.TaskTTL <= 0 {
		cfg.TaskTTL = 30 * time.Second
	}
	if cfg.TaskPoll <= 0 {
		cfg.TaskPoll = time.Second
	}
	if cfg.Observer == nil {
		cfg.Observer = noObserver{}
	}
	return &Loop{observer: cfg.Observer,
		store: cfg.Store, runtimes: cfg.Runtimes, settings: cfg.Settings, now: cfg.Now,
		log: cfg.Log, workers: cfg.Workers, queue: newQueue(cfg.Now), onWrite: cfg.OnWrite,
		owner: cfg.Owner, leaseTTL: cfg.LeaseTTL, taskTTL: cfg.TaskTTL, taskPoll: cfg.TaskPoll,
		exclusive: cfg.Exclusive, resync: max(cfg.Resync, 0), leases: map[string]store.Lease{}, leaseUntil: map[string]time.Time{}, observed: observed{seen: map[string]fingerprints{}},
		slots: make(chan struct{}, cfg.MaxApplies), idle: make(chan claimedTask), wake: make(chan struct{}, 1),
		shutdownGrace: max(cfg.ShutdownGrace, 0), exec: cfg.Executor, failures: map[string]int{}, requeues: map[string]int{}, states: cfg.States,
	}
}

// defaultOwner names a loop uniquely: host, process id, random suffix.
func defaultOwner() string {
	host, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// DefaultWorkers is the engine's default number of workers: four per CPU
// the process may use, at least 8. A pass waits for its write to commit and
// for runtimes that answer slowly (commands, remote APIs), so there are
// more workers than CPUs; with runtimes that answer from what they watch,
// passes are mostly CPU work, and more workers than that only take CPU from
// the single writer and from the API (measured with drover bench: on 2
// CPUs, 8 workers converged 100,000 instances 8% sooner than 16 and pushed
// 10,000 services 32% sooner; 4 pushed sooner still but converged later).
func DefaultWorkers() int { return max(8, 4*runtime.GOMAXPROCS(0)) }

// Owner is the name this loop claims leases and tasks under.
func (l *Loop) Owner() string { return l.owner }

func serviceKey(app, svc string) string { return app + "/" + svc }

// Enqueue asks for a pass over a service.
func (l *Loop) Enqueue(app, svc string) { l.queue.Add(serviceKey(app, svc)) }

// ExclusiveLeaseTTL is the default lease of an engine that has its store
// to itself (Config.Exclusive): its leases and claims matter only within
// the process, and a restart ends them at once.
const ExclusiveLeaseTTL = 5 * time.Minute

// EnqueueAll asks for a pass over every service with a desired state (an
// agent came back: what runs on its runtime may have changed unseen).
func (l *Loop) EnqueueAll(ctx context.Context) error {
	active, err := l.store.ListActiveDesiredStates(ctx)
	if err != nil {
		return err
	}
	for _, d := range active {
		l.Enqueue(d.Application, d.Service)
	}
	return nil
}

// Run ends the claims a crash left (when it owns the store alone), enqueues every service
// with a desired state and reconciles until ctx ends. Then it takes no new
// work, lets the applies in flight finish within Config.ShutdownGrace, and
// returns once their outcomes are recorded.
func (l *Loop) Run(ctx context.Context) error {
	if l.exclusive {
		if err := l.resetInterrupted(ctx); err != nil {
			if ctx.Err() != nil {
				return nil //nolint:nilerr // stopped before it started: a stop, not a failure
			}
			return fmt.Errorf("engine: %w", err)
		}
	}
	active, err := l.store.ListActiveDesiredStates(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil //nolint:nilerr // stopped before it started: a stop, not a failure
		}
		return fmt.Errorf("engine: list desired states: %w", err)
	}
	stopApplies := l.startApplyContext(ctx)
	quit := make(chan struct{})
	l.mu.Lock()
	l.quit = quit
	l.mu.Unlock()
	for _, d := range active {
		l.Enqueue(d.Application, d.Service)
	}
	var wg sync.WaitGroup
	for range l.workers {
		wg.Go(func() { l.work(ctx) })
	}
	if l.resync > 0 {
		wg.Go(func() { l.resyncLoop(ctx) })
	}
	wg.Go(func() { l.dispatch(ctx) })
	<-ctx.Done()
	close(quit)
	l.queue.Close()
	wg.Wait()
	l.drain(stopApplies)
	l.releaseLeases()
	return nil
}

// resyncLoop queues, every resync, each service with a desired state that
// the loop has nothing scheduled for, until ctx ends.
func (l *Loop) resyncLoop(ctx context.Context) {
	t := time.NewTicker(l.resync)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		active, err := l.store.ListActiveDesiredStates(ctx)
		if err != nil {
			if ctx.Err() == nil {
				l.log.Warn("resync: list desired states", "error", err)
			}
			continue
		}
		for _, d := range active {
			l.queue.AddIfIdle(serviceKey(d.Application, d.Service))
		}
	}
}

func (l *Loop) work(ctx context.Context) {
	for {
		key, ok := l.queue.Get()
		if !ok {
			return
		}
		pctx := withPass(ctx, key)
		began := time.Now()
		res, err := l.safeReconcile(pctx, key)
		l.observer.Reconciled(time.Since(began), passResult(res, err))
		if err != nil {
			l.recordFailure(pctx, key, err)
		}
		l.queue.Done(key)
		if ctx.Err() != nil {
			return
		}
		l.settle(key, "reconcile", res, err)
	}
}

// How a pass ended, as Observer.Reconciled is told: it asked for nothing
// more, for another pass now or later, or failed (terminal: for good).
const (
	ResultSuccess      = "success"
	ResultRequeue      = "requeue"
	ResultRequeueAfter = "requeue_after"
	ResultError        = "error"
	ResultTerminal     = "terminal"
)

// passResult names how a pass ended (see settle for what each means).
func passResult(res Result, err error) string {
	switch {
	case err != nil && IsTerminal(err):
		return ResultTerminal
	case err != nil:
		return ResultError
	case res.RequeueAfter > 0:
		return ResultRequeueAfter
	case res.Requeue:
		return ResultRequeue
	}
	return ResultSuccess
}

// settle applies the retry contract (see Result) to what a pass over a
// service, or an action for it, returned: the one place outcomes become
// queue entries. Errors are logged once here.
func (l *Loop) settle(key, what string, res Result, err error) {
	switch {
	case err != nil && IsTerminal(err):
		l.forgetFailures(key)
		l.log.Error("engine work failed for good", append(keyAttrs(key), "work", what, "error", err)...)
	case err != nil:
		d := l.nextBackoff(key)
		l.log.Error("engine work failed", append(keyAttrs(key), "work", what, "error", err, "retry_in", d)...)
		l.queue.AddAfter(key, d)
	case res.RequeueAfter > 0:
		l.forgetFailures(key)
		l.queue.AddAfter(key, res.RequeueAfter)
	case res.Requeue:
		l.queue.AddAfter(key, l.nextRequeue(key))
	default:
		l.forgetFailures(key)
	}
}

// nextBackoff counts a failure of key and returns how long to wait before
// the next try: RetryBackoff doubled per consecutive failure, capped at
// MaxBackoff.
func (l *Loop) nextBackoff(key string) time.Duration {
	l.failMu.Lock()
	n := l.failures[key]
	l.failures[key] = n + 1
	l.failMu.Unlock()
	return backoff(l.settings.RetryBackoff, l.settings.MaxBackoff, n)
}

// Requeues are rate limited per service: the first requeueBurst in a row
// (a write that conflicted with a request, an outcome to record) are
// immediate; a service that keeps asking for one without ever settling
// then waits requeueBase, doubled per further requeue, up to requeueMax,
// so it cannot spin a worker.
const (
	requeueBurst = 10
	requeueBase  = 5 * time.Millisecond
	requeueMax   = time.Second
)

// nextRequeue counts a requeue of key (a failure streak ends with it) and
// returns how long it waits: 0 within the burst.
func (l *Loop) nextRequeue(key string) time.Duration {
	l.failMu.Lock()
	defer l.failMu.Unlock()
	delete(l.failures, key)
	n := l.requeues[key]
	l.requeues[key] = n + 1
	if n < requeueBurst {
		return 0
	}
	return backoff(requeueBase, requeueMax, n-requeueBurst)
}

// forgetFailures ends key's streaks of failures and requeues.
func (l *Loop) forgetFailures(key string) {
	l.failMu.Lock()
	delete(l.failures, key)
	delete(l.requeues, key)
	l.failMu.Unlock()
}

// backoff is base doubled n times, capped at limit.
func backoff(base, limit time.Duration, n int) time.Duration {
	d := base
	for range n {
		if d >= limit/2 {
			return limit
		}
		d *= 2
	}
	return min(d, limit)
}

// safeReconcile turns a panic into an error so one bad service cannot stop the engine.
func (l *Loop) safeReconcile(ctx context.Context, key string) (res Result, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v\n%s", r, debug.Stack())
		}
	}()
	app, svc, _ := strings.Cut(key, "/")
	return l.Reconcile(ctx, app, svc)
}

// Reconcile makes one pass over a service, in four steps (pass.go): read,
// observe, plan, commit. Its Result says when the service wants another
// pass.
func (l *Loop) Reconcile(ctx context.Context, app, svc string) (Result, error) {
	// Outcomes of actions that ended since are recorded with this pass's
	// write, and planned with (outcomes.go). A pass that writes nothing
	// hands them back to their runners at once.
	p := &pass{key: serviceKey(app, svc), app: app, svc: svc}
	p.waiting = l.outcomes.take(p.key)
	defer func() { settleOutcomes(p.waiting, false) }()
	lease, err := l.lease(ctx, p.key)
	if errors.Is(err, store.ErrLeaseHeld) {
		// Another engine plans this service; take it over if its lease lapses.
		l.forgetObservations(p.key)
		// Expires is by the store's clock: bounded by a ttl, in case the
		// clocks disagree.
		return Result{RequeueAfter: min(max(lease.Expires.Sub(l.now()), 0), l.leaseTTL) + l.leaseTTL/10}, nil
	}
	if err != nil {
		return Result{}, fmt.Errorf("lease: %w", err)
	}
	p.lease = lease
	in, err := l.read(ctx, p)
	if in == nil || err != nil {
		return Result{}, err
	}
	seen := l.observe(ctx, in)
	if seen.elsewhere != nil {
		// Another server reaches this runtime (its agent is connected
		// there): hand the service over rather than plan it blind.
		return l.handOver(ctx, p.key, lease, seen.elsewhere)
	}
	// The freezes are read last, after the fetches (which may be slow), so
	// a freeze set meanwhile holds this plan.
	if in.freezes, err = l.currentFreezes(ctx); err != nil {
		return Result{}, fmt.Errorf("read freezes: %w", err)
	}
	return l.commit(ctx, p, in, seen, l.plan(in, seen))
}

// handOver releases this loop's lease on a service one of whose runtimes
// only another server reaches, so that server's engine (which looks for
// services it has nothing scheduled for) takes it; this loop looks again
// later, in case nobody did.
func (l *Loop) handOver(ctx context.Context, key string, lease store.Lease, why error) (Result, error) {
	l.forgetLease(key)
	l.forgetObservations(key)
	if err := l.store.ReleaseLease(ctx, lease); err != nil {
		return Result{}, fmt.Errorf("hand %s over: %w", key, err)
	}
	l.logOf(ctx).Debug("service handed over to the server its runtime is reached through", "why", why)
	return Result{RequeueAfter: 2*l.leaseTTL + l.resync}, nil
}

// keyAttrs are the log attributes of a service key: app and service, as
// everywhere (docs/architecture.md, "Logs").
func keyAttrs(key string) []any {
	app, svc, _ := strings.Cut(key, "/")
	return []any{"app", app, "service", svc}
}

// leaseKey is the store lease of a service key.
func leaseKey(key string) string { return "service/" + key }

// lease returns this loop's lease on a service key, claiming or renewing it
// when less than half its ttl is left. ErrLeaseHeld comes with the holder's
// lease.
func (l *Loop) lease(ctx context.Context, key string) (store.Lease, error) {
	l.leaseMu.Lock()
	cur, ok := l.leases[key]
	until := l.leaseUntil[key]
	l.leaseMu.Unlock()
	// The lease's Expires is by the store's clock (PostgreSQL's, for a
	// shared store); renewals are timed by this host's, from when the
	// claim was sent, which expires no later than the store's view.
	if ok && time.Until(until) > l.leaseTTL/2 {
		return cur, nil
	}
	sent := time.Now()
	got, err := l.store.ClaimLease(ctx, leaseKey(key), l.owner, l.leaseTTL)
	if err != nil {
		l.forgetLease(key)
		return got, err
	}
	l.leaseMu.Lock()
	l.leases[key] = got
	l.leaseUntil[key] = sent.Add(l.leaseTTL)
	l.leaseMu.Unlock()
	return got, nil
}

func (l *Loop) forgetLease(key string) {
	l.leaseMu.Lock()
	delete(l.leases, key)
	delete(l.leaseUntil, key)
	l.leaseMu.Unlock()
}

// releaseLeases gives up every lease this loop holds (a clean stop), so
// other engines need not wait for them to lapse.
func (l *Loop) releaseLeases() {
	l.leaseMu.Lock()
	held := l.leases
	l.leases, l.leaseUntil = map[string]store.Lease{}, map[string]time.Time{}
	l.leaseMu.Unlock()
	ctx, cancel := recordContext(context.Background())
	defer cancel()
	for _, lease := range held {
		if err := l.store.ReleaseLease(ctx, lease); err != nil {
			l.log.Warn("release lease failed", "lease", lease.Key, "error", err)
		}
	}
}

// targetFor is what to fetch for a channel: the instance's current target
// when it has one (inst may be nil), else the desired channel.
func (l *Loop) targetFor(ctx context.Context, cs *compiledState, ch Channel, inst *store.Instance) (runtimes.Target, error) {
	stateID := ch.StateID
	if inst != nil && inst.TargetStateID != "" {
		stateID = inst.TargetStateID
	}
	t, err := l.target(ctx, cs, stateID, ch.Name)
	t.Memo = memoOf(inst)
	return t, err
}

func (l *Loop) target(ctx context.Context, cs *compiledState, stateID, rc string) (runtimes.Target, error) {
	if stateID != cs.desired.ID {
		var err error
		if cs, err = l.states.get(ctx, store.DesiredState{ID: stateID}); err != nil {
			return runtimes.Target{}, err
		}
	}
	return cs.target(rc)
}

func (l *Loop) written() {
	if l.onWrite != nil {
		l.onWrite()
	}
}

// summarize renders an apply's changes: "Deployment/web configured, Service/web unchanged".
func summarize(res runtimes.ApplyResult) string {
	if len(res.Changes) == 0 {
		return "no changes reported"
	}
	parts := make([]string, 0, len(res.Changes))
	for _, c := range res.Changes {
		parts = append(parts, c.Object+" "+string(c.Action))
	}
	return strings.Join(parts, ", ")
}
