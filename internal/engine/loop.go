package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	ds "github.com/drover-dev/drover/internal/desiredstate"
	"github.com/drover-dev/drover/internal/runtimes"
	"github.com/drover-dev/drover/internal/store"
)

// RuntimeSource gives the engine the runtime named in a release channel.
type RuntimeSource interface {
	Runtime(ctx context.Context, name string) (runtimes.Runtime, error)
}

// Loop runs the convergence engine: workers take service keys from a queue,
// observe, plan, write the plan, then apply.
type Loop struct {
	store    store.Store
	runtimes RuntimeSource
	settings Settings
	now      func() time.Time
	log      *slog.Logger
	workers  int
	queue    *queue

	// applying holds the instances whose apply is running, with its start.
	mu       sync.Mutex
	applying map[string]time.Time
	applies  sync.WaitGroup
	// applySlots bounds the applies running at once.
	applySlots chan struct{}
	// shutdownGrace is how long Run lets applies in flight finish once its
	// context ends; applyCtx is what they run under (see loop_shutdown.go).
	shutdownGrace time.Duration
	applyCtx      context.Context

	// onWrite, when set, is called after each durable write (tests, SSE).
	onWrite func()
}

// Config configures a Loop.
type Config struct {
	Store    store.Store
	Runtimes RuntimeSource
	Settings Settings
	// Now is the clock (nil = time.Now).
	Now func() time.Time
	Log *slog.Logger
	// Workers is the number of services reconciled in parallel (default 8).
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
}

// NewLoop builds a loop; call Run to start it.
func NewLoop(cfg Config) *Loop {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 8
	}
	if cfg.Settings.MaxApplyAttempts == 0 {
		cfg.Settings = DefaultSettings()
	}
	if cfg.MaxApplies <= 0 {
		cfg.MaxApplies = 64
	}
	return &Loop{
		store: cfg.Store, runtimes: cfg.Runtimes, settings: cfg.Settings, now: cfg.Now,
		log: cfg.Log, workers: cfg.Workers, queue: newQueue(cfg.Now), onWrite: cfg.OnWrite,
		applying: map[string]time.Time{}, applySlots: make(chan struct{}, cfg.MaxApplies),
		shutdownGrace: max(cfg.ShutdownGrace, 0),
	}
}

func serviceKey(app, svc string) string { return app + "/" + svc }

// Enqueue asks for a pass over a service.
func (l *Loop) Enqueue(app, svc string) { l.queue.Add(serviceKey(app, svc)) }

// Run closes the apply attempts a crash left open, enqueues every service
// with a desired state and reconciles until ctx ends. Then it takes no new
// work, lets the applies in flight finish within Config.ShutdownGrace, and
// returns once their outcomes are recorded.
func (l *Loop) Run(ctx context.Context) error {
	if err := l.closeInterrupted(ctx); err != nil {
		return fmt.Errorf("engine: %w", err)
	}
	stopApplies := l.startApplyContext(ctx)
	active, err := l.store.ListActiveDesiredStates(ctx)
	if err != nil {
		return fmt.Errorf("engine: list desired states: %w", err)
	}
	for _, d := range active {
		l.Enqueue(d.Application, d.Service)
	}
	var wg sync.WaitGroup
	for range l.workers {
		wg.Go(func() { l.work(ctx) })
	}
	<-ctx.Done()
	l.queue.Close()
	wg.Wait()
	l.drain(stopApplies)
	return nil
}

func (l *Loop) work(ctx context.Context) {
	for {
		key, ok := l.queue.Get()
		if !ok {
			return
		}
		after, err := l.safeReconcile(ctx, key)
		l.queue.Done(key)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			// Store or decoding trouble: retry later; the error is logged once here.
			l.log.Error("reconcile failed", "service", key, "error", err)
			l.queue.AddAfter(key, 5*time.Second)
		case after > 0:
			l.queue.AddAfter(key, after)
		}
	}
}

// safeReconcile turns a panic into an error so one bad service cannot stop the engine.
func (l *Loop) safeReconcile(ctx context.Context, key string) (after time.Duration, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v\n%s", r, debug.Stack())
		}
	}()
	app, svc, _ := strings.Cut(key, "/")
	return l.Reconcile(ctx, app, svc)
}

// Reconcile makes one pass over a service: read, observe, plan, write, apply.
// It returns when the service wants another pass.
func (l *Loop) Reconcile(ctx context.Context, app, svc string) (time.Duration, error) {
	rec, err := l.store.ActiveDesiredState(ctx, app, svc)
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	cs, err := sharedStates.get(rec)
	if err != nil {
		return 0, err
	}
	list, err := l.store.ListInstances(ctx, app, svc)
	if err != nil {
		return 0, err
	}
	instances := make(map[string]store.Instance, len(list))
	for _, inst := range list {
		instances[inst.ReleaseChannel] = inst
	}
	approvals, err := l.store.ListApprovals(ctx, rec.ID)
	if err != nil {
		return 0, err
	}
	observed := map[string]Observation{}
	desired := cs.desired
	for i, ch := range cs.desired.Channels {
		if ch.ConvergenceGrace.IsZero() {
			if rt, err := l.runtimes.Runtime(ctx, ch.Runtime); err == nil {
				if gr, ok := rt.(runtimes.GraceReporter); ok {
					if desired == cs.desired { // the cached one is shared: copy before changing
						cp := *cs.desired
						cp.Channels = append([]Channel(nil), cs.desired.Channels...)
						desired = &cp
					}
					desired.Channels[i].ConvergenceGrace.Duration = gr.ConvergenceGrace()
				}
			}
		}
		if l.isApplying(app, svc, ch.Name) {
			observed[ch.Name] = Observation{Applying: true}
			continue
		}
		target, err := l.targetFor(ctx, cs, ch, instances[ch.Name])
		if err != nil {
			observed[ch.Name] = Observation{Err: err.Error()}
			continue
		}
		rt, err := l.runtimes.Runtime(ctx, ch.Runtime)
		if err != nil {
			observed[ch.Name] = Observation{Err: err.Error()}
			continue
		}
		st, err := rt.Fetch(ctx, target)
		if err != nil {
			observed[ch.Name] = Observation{Err: err.Error()}
			continue
		}
		observed[ch.Name] = Observation{State: st}
	}
	now := l.now()
	plan := PlanService(PlanInput{Now: now, Desired: desired, Instances: instances, Observed: observed, Approvals: approvals, Settings: l.settings})
	if len(plan.Instances) > 0 || len(plan.Events) > 0 {
		b := &store.Batch{Instances: plan.Instances, Events: plan.Events}
		if err := l.store.Write(ctx, b); err != nil {
			if errors.Is(err, store.ErrConflict) {
				return time.Millisecond, nil // changed under us (an API call); plan again
			}
			return 0, fmt.Errorf("write plan: %w", err)
		}
		l.written()
		for _, inst := range b.Instances {
			instances[inst.ReleaseChannel] = inst
		}
	}
	for _, a := range plan.Applies {
		l.startApply(ctx, cs, a, instances[a.ReleaseChannel])
	}
	return plan.RequeueAfter, nil
}

func instanceKey(app, svc, rc string) string { return app + "/" + svc + "/" + rc }

func (l *Loop) isApplying(app, svc, rc string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.applying[instanceKey(app, svc, rc)]
	return ok
}

// startApply runs an apply beside the workers; when it returns, the service
// is queued again so its effect is observed.
func (l *Loop) startApply(ctx context.Context, cs *compiledState, a Apply, inst store.Instance) {
	key := instanceKey(inst.Application, inst.Service, a.ReleaseChannel)
	l.mu.Lock()
	if _, busy := l.applying[key]; busy {
		l.mu.Unlock()
		return // the planner saw it running; never two applies of one instance
	}
	l.applying[key] = l.now()
	l.mu.Unlock()
	l.applies.Add(1)
	go func() {
		defer l.applies.Done()
		defer func() {
			if r := recover(); r != nil {
				l.log.Error("apply panicked", "instance", key, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			}
			l.mu.Lock()
			delete(l.applying, key)
			l.mu.Unlock()
			l.Enqueue(inst.Application, inst.Service)
		}()
		select {
		case l.applySlots <- struct{}{}:
			defer func() { <-l.applySlots }()
		case <-ctx.Done():
			return
		}
		if ctx.Err() != nil {
			return // shutting down: start nothing new
		}
		l.apply(l.applyContext(ctx), cs, a, inst)
	}()
}

// targetFor is what to fetch for a channel: the instance's current target
// when it has one, else the desired channel.
func (l *Loop) targetFor(ctx context.Context, cs *compiledState, ch Channel, inst store.Instance) (runtimes.Target, error) {
	stateID := ch.StateID
	if inst.TargetStateID != "" {
		stateID = inst.TargetStateID
	}
	return l.target(ctx, cs, stateID, ch.Name)
}

func (l *Loop) target(ctx context.Context, cs *compiledState, stateID, rc string) (runtimes.Target, error) {
	if stateID != cs.desired.ID {
		rec, err := l.store.GetDesiredState(ctx, stateID)
		if err != nil {
			return runtimes.Target{}, fmt.Errorf("load desired state %s: %w", stateID, err)
		}
		if cs, err = sharedStates.get(rec); err != nil {
			return runtimes.Target{}, err
		}
	}
	t, ok := cs.targets[rc]
	if !ok {
		return runtimes.Target{}, fmt.Errorf("desired state %s has no release channel %s", stateID, rc)
	}
	return t, nil
}

// apply performs one planned apply: the attempt is recorded before the
// runtime is called, and its outcome after. The outcome is recorded even
// when ctx ended meanwhile (the server shut down past its grace): the
// attempt must not stay open.
func (l *Loop) apply(ctx context.Context, cs *compiledState, a Apply, inst store.Instance) {
	log := l.log.With("app", inst.Application, "service", inst.Service, "release_channel", a.ReleaseChannel, "version", a.Version)
	target, err := l.target(ctx, cs, a.StateID, a.ReleaseChannel)
	var rt runtimes.Runtime
	if err == nil {
		rt, err = l.runtimes.Runtime(ctx, a.Runtime)
	}
	var id int64
	if err == nil {
		id, err = l.store.StartApply(ctx, store.ApplyAttempt{
			Application: inst.Application, Service: inst.Service, ReleaseChannel: a.ReleaseChannel,
			DesiredStateID: a.StateID, Version: a.Version, StartedAt: l.now(),
		})
	}
	started := err == nil
	var res runtimes.ApplyResult
	if started {
		res, err = rt.Apply(ctx, target)
	}
	stopped := shutdownCause(ctx)
	rctx, cancel := recordContext(ctx)
	defer cancel()
	ev := store.Event{
		Time: l.now(), Application: inst.Application, Service: inst.Service, ReleaseChannel: a.ReleaseChannel,
		DesiredStateID: inst.DesiredStateID, Actor: "engine",
	}
	if err != nil && stopped != nil {
		// Not a failure of the apply: leave the instance as it is, so the
		// next server sees an apply that never returned and applies again.
		log.Warn("apply interrupted by shutdown", "error", err)
		ev.Type = ds.EventApplyInterrupted
		ev.Message = fmt.Sprintf("%s: apply of %s interrupted: %v; it will be applied again", a.ReleaseChannel, a.Version, stopped)
		if started {
			err = l.store.FinishApply(rctx, id, store.OutcomeInterrupted, stopped.Error(), l.now(), ev)
		} else {
			err = l.store.AppendEvents(rctx, ev)
		}
		if err != nil {
			log.Error("record apply outcome failed", "error", err)
		}
		l.written()
		return
	}
	if started {
		outcome, msg := "succeeded", summarize(res)
		if err != nil {
			outcome, msg = "failed", err.Error()
		}
		if ferr := l.store.FinishApply(rctx, id, outcome, msg, l.now()); ferr != nil {
			log.Error("record apply outcome failed", "error", ferr)
		}
	}
	if err == nil {
		ev.Type, ev.Message = ds.EventApplied, fmt.Sprintf("%s: applied %s: %s", a.ReleaseChannel, a.Version, summarize(res))
		// Record that the apply returned, so a later pass can tell a finished
		// apply (wait for the runtime) from an interrupted one (apply again).
		if werr := l.recordOutcome(rctx, inst, ev, func(i *store.Instance) {
			i.AppliedAt = l.now()
		}); werr != nil {
			log.Error("record apply failed", "error", werr)
		}
		return
	}
	log.Warn("apply failed", "error", err)
	ev.Type, ev.Message = ds.EventApplyFailed, fmt.Sprintf("%s: apply of %s failed: %v", a.ReleaseChannel, a.Version, err)
	if werr := l.recordOutcome(rctx, inst, ev, func(i *store.Instance) {
		i.Reason = ds.ReasonApplyFailed
		i.Message = err.Error()
		if runtimes.IsPermanent(err) {
			i.ApplyAttempts = l.settings.MaxApplyAttempts
		}
	}); werr != nil {
		log.Error("record apply failure failed", "error", werr)
	}
}

// recordOutcome writes an apply's outcome onto the instance with its event.
// Passes may have rewritten the instance while the apply ran, so on a
// revision conflict it re-reads the instance and tries again; the outcome is
// dropped only if the instance moved on to another target meanwhile.
func (l *Loop) recordOutcome(ctx context.Context, inst store.Instance, ev store.Event, change func(*store.Instance)) error {
	target := inst.TargetStateID + "/" + inst.TargetVersion
	for attempt := 0; ; attempt++ {
		change(&inst)
		inst.UpdatedAt = l.now()
		err := l.store.Write(ctx, &store.Batch{Instances: []store.Instance{inst}, Events: []store.Event{ev}})
		if !errors.Is(err, store.ErrConflict) || attempt == 10 {
			l.written()
			return err
		}
		fresh, gerr := l.store.GetInstance(ctx, inst.Application, inst.Service, inst.ReleaseChannel)
		if gerr != nil {
			return gerr
		}
		if fresh.TargetStateID+"/"+fresh.TargetVersion != target {
			err := l.store.AppendEvents(ctx, ev)
			l.written()
			return err
		}
		inst = fresh
	}
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
