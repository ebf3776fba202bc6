package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	ds "github.com/drover-dev/drover/internal/desiredstate"
	"github.com/drover-dev/drover/internal/runtimes"
	"github.com/drover-dev/drover/internal/store"
)

// A pass over a service is four steps, each a method with its input and
// output (Reconcile runs them, under the service's lease):
//
//	read    (readout)      the desired state, open tasks, instances (with the
//	                       outcomes waiting for the pass applied), approvals,
//	                       stored observations' fingerprints
//	observe (observations) fetch each channel that no task is running on;
//	                       then the freezes in force are read (after the
//	                       fetches, so a freeze set meanwhile holds the plan)
//	plan    (Plan)         PlanService: pure
//	commit  (Result)       one write fenced by the lease: the plan, its tasks
//	                       (claimed by this loop when it has room), the new
//	                       observations and the outcomes; then start the tasks
//
// A pass that fails after it holds the lease records why on the service's
// instances (recordFailure): no failure leaves a stale status on screen.

// pass is one pass over a service: its key and lease, and the outcomes of
// actions it records (outcomes.go).
type pass struct {
	key, app, svc string
	lease         store.Lease
	// waiting are the outcomes this pass took; those it does not write are
	// handed back to their runners when it ends.
	waiting []*pending
}

// readout is what the read step gathers for a pass.
type readout struct {
	rec store.DesiredState
	cs  *compiledState
	// desired is cs's desired state with the runtimes' graces.
	desired *Desired
	// running are the channels (task instances) with an open task.
	running map[string]bool
	// instances are the stored instances by channel, with the outcomes of
	// the pass applied (their pointers are into the list read).
	instances map[string]*store.Instance
	// done, doneEvents and doneChanged are what recording the outcomes
	// writes (applyOutcomes).
	done        []store.TaskDone
	doneEvents  []store.Event
	doneChanged map[string]bool
	approvals   []store.Approval
	// seen are the fingerprints of the stored observations.
	seen    fingerprints
	freezes []ds.Freeze
	// services are the instances of the services the channels wait for.
	services ServiceDependencies
	active   ActiveStates
}

// observations is what the observe step saw: by channel for the plan, and
// the observations to store (those that changed).
type observations struct {
	byChannel map[string]Observation
	changed   []store.Observation
	// elsewhere is set when only another server reaches a channel's
	// runtime: the pass hands the service over instead of planning it.
	elsewhere error
}

// read reads what a pass plans with. A nil readout (and no error) means the
// service has no desired state.
func (l *Loop) read(ctx context.Context, p *pass) (*readout, error) {
	rec, err := l.store.ActiveDesiredState(ctx, p.app, p.svc)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the desired state: %w", err)
	}
	cs, err := l.states.get(ctx, rec)
	if err != nil {
		return nil, err
	}
	r := &readout{rec: rec, cs: cs}
	// Open tasks are read before the instances: a check that ends between
	// the two reads is then seen as running (and its result as well), not
	// as neither, which would run it again.
	open, err := l.store.OpenTaskInstances(ctx, p.key)
	if err != nil {
		return nil, fmt.Errorf("read open tasks: %w", err)
	}
	r.running = make(map[string]bool, len(open))
	for _, inst := range open {
		r.running[inst] = true
	}
	list, err := l.store.ListInstances(ctx, p.app, p.svc)
	if err != nil {
		return nil, fmt.Errorf("read instances: %w", err)
	}
	// The instances are the list's: the outcomes change them there.
	r.instances = make(map[string]*store.Instance, len(list))
	for i := range list {
		r.instances[list[i].ReleaseChannel] = &list[i]
	}
	// The instances the outcomes change are written even if the plan
	// changes nothing more.
	r.done, r.doneEvents, r.doneChanged = applyOutcomes(p.waiting, l.now(), r.instances, r.running)
	if cs.gated {
		if r.approvals, err = l.store.ListApprovals(ctx, rec.ID); err != nil {
			return nil, fmt.Errorf("read approvals: %w", err)
		}
		if cs.shared {
			if r.approvals, err = SharedApprovals(ctx, l.store, cs.desired, r.approvals); err != nil {
				return nil, fmt.Errorf("read shared approvals: %w", err)
			}
		}
	}
	if r.seen, err = l.knownObservations(ctx, p.key, p.app, p.svc); err != nil {
		return nil, fmt.Errorf("read observations: %w", err)
	}
	l.dependants.note(p.key, p.app, cs.services)
	if r.services, r.active, err = l.readDependencies(ctx, p.app, cs); err != nil {
		return nil, err
	}
	r.desired = l.withGraces(ctx, cs)
	return r, nil
}

// observe fetches what runs of each channel no task is running on.
func (l *Loop) observe(ctx context.Context, r *readout) observations {
	o := observations{byChannel: make(map[string]Observation, len(r.cs.desired.Channels))}
	for _, ch := range r.cs.desired.Channels {
		if r.running[ch.Name] {
			o.byChannel[ch.Name] = Observation{Applying: true}
			continue
		}
		target, err := l.targetFor(ctx, r.cs, ch, r.instances[ch.Name])
		if err != nil {
			o.byChannel[ch.Name] = Observation{Err: err.Error()}
			continue
		}
		rt, err := l.runtimes.Runtime(ctx, ch.Runtime)
		if err != nil {
			o.byChannel[ch.Name] = Observation{Err: err.Error()}
			continue
		}
		began := time.Now()
		st, err := rt.Fetch(ctx, target)
		l.observer.RuntimeCall(ch.Runtime, "fetch", time.Since(began), err)
		if errors.Is(err, runtimes.ErrElsewhere) && !l.exclusive {
			o.elsewhere = err
			return o
		}
		if so := observation(ctx, rt, target, st, err); r.seen.of(ch.Name) != fingerprint(so) {
			o.changed = append(o.changed, so)
		}
		if err != nil {
			o.byChannel[ch.Name] = Observation{Err: err.Error()}
			continue
		}
		o.byChannel[ch.Name] = Observation{State: st}
	}
	return o
}

// plan decides, purely, what the pass writes and does.
func (l *Loop) plan(r *readout, o observations) Plan {
	now := l.now()
	plan := PlanService(PlanInput{Now: now, Desired: r.desired, Instances: r.instances, Observed: o.byChannel, Approvals: r.approvals,
		Freezes: r.freezes, Running: r.running, Services: r.services, ActiveStates: r.active, Settings: l.settings})
	clearEngineErrors(&plan, r.instances, now)
	return plan
}

// commit writes the plan, the outcomes and the observations in one batch
// fenced by the lease, and starts the tasks it enqueued claimed.
func (l *Loop) commit(ctx context.Context, p *pass, r *readout, o observations, plan Plan) (Result, error) {
	b := &store.Batch{Fence: &store.Fence{Key: leaseKey(p.key), Token: p.lease.Token}, Instances: plan.Instances, Events: plan.Events, Observations: o.changed}
	if len(r.done) > 0 {
		b.Complete = r.done
		b.Events = append(r.doneEvents, plan.Events...)
		for _, in := range plan.Instances {
			delete(r.doneChanged, in.ReleaseChannel)
		}
		// Sorted (a channel the desired state no longer has included).
		for _, rc := range slices.Sorted(maps.Keys(r.doneChanged)) {
			b.Instances = append(b.Instances, *r.instances[rc])
		}
	}
	for _, a := range plan.Actions {
		payload, err := json.Marshal(a)
		if err != nil {
			return Result{}, fmt.Errorf("encode %s action: %w", a.Kind, err)
		}
		b.Tasks = append(b.Tasks, store.Task{Key: p.key, Instance: a.taskInstance(), Kind: taskKind(a), Payload: payload})
	}
	if len(b.Instances) == 0 && len(b.Events) == 0 && len(b.Tasks) == 0 && len(b.Observations) == 0 && len(b.Complete) == 0 {
		return Result{RequeueAfter: plan.RequeueAfter}, nil
	}
	// With a free slot for each, the tasks are enqueued claimed by this
	// loop and carried out as soon as they are committed: no claim of
	// their own, nor a wait for the dispatcher. (Not once the loop is
	// stopping: it starts no new work then.)
	reserved := 0
	if ctx.Err() == nil {
		reserved = l.reserveSlots(len(b.Tasks))
	}
	if reserved > 0 {
		b.Claim = &store.TaskClaim{Owner: l.owner, TTL: l.taskTTL}
	}
	// Slots neither handed to a task nor released are freed however the
	// pass ends (a panic included).
	defer func() { l.releaseSlots(reserved) }()
	claimed := time.Now()
	err := l.store.Write(ctx, b)
	settleOutcomes(p.waiting, err == nil)
	p.waiting = nil
	if err == nil && reserved > 0 {
		l.startClaimed(ctx, b.Tasks, claimed)
		reserved = 0
	}
	switch {
	case errors.Is(err, store.ErrConflict):
		return Result{Requeue: true}, nil // changed under us (an API call); plan again
	case errors.Is(err, store.ErrFenced) && len(b.Complete) > 0:
		// The lease, or a task's claim, was lost: the runners record their
		// outcomes themselves (their claims, if lost, refuse it), and the
		// next pass finds out which.
		return Result{Requeue: true}, nil
	case errors.Is(err, store.ErrFenced):
		l.forgetLease(p.key) // another engine took the service over
		l.forgetObservations(p.key)
		return Result{Requeue: true}, nil
	case err != nil:
		return Result{}, fmt.Errorf("write plan: %w", err)
	}
	if len(b.Observations) > 0 {
		l.rememberObservations(p.key, r.seen, b.Observations)
	}
	l.written()
	l.wakeDependants(p.key, r.instances, plan.Instances, len(r.doneChanged) > 0)
	if b.Claim == nil && len(b.Tasks) > 0 {
		l.kick()
	}
	return Result{RequeueAfter: plan.RequeueAfter}, nil
}

// engineErrorMax bounds the message of an engine error shown on an
// instance (a panic's first line, a decoder's complaint).
const engineErrorMax = 1000

// engineErrorMessage is what an instance shows of a failed pass: the
// error's first line, bounded.
func engineErrorMessage(err error) string {
	msg, _, _ := strings.Cut(err.Error(), "\n")
	if len(msg) > engineErrorMax {
		msg = msg[:engineErrorMax] + "…"
	}
	return "the engine cannot plan this service: " + msg
}

// recordFailure shows why a pass over a service failed on each of its
// instances (reason ENGINE_ERROR), so that no status the failure keeps from
// changing is shown as if it were current: once per failed pass, that is
// once per backoff cycle, and only where the instance does not say so
// already. It writes under the lease the pass held, fenced by it; without
// one (the lease itself could not be had) nothing is written, since
// another engine may plan the service. The next pass that plans clears it
// (clearEngineErrors).
func (l *Loop) recordFailure(ctx context.Context, key string, cause error) {
	l.leaseMu.Lock()
	lease, ok := l.leases[key]
	l.leaseMu.Unlock()
	if !ok || ctx.Err() != nil {
		return
	}
	log := l.logOf(ctx)
	app, svc, _ := strings.Cut(key, "/")
	list, err := l.store.ListInstances(ctx, app, svc)
	if err != nil {
		log.Warn("record engine error: read instances", "error", err)
		return
	}
	msg := engineErrorMessage(cause)
	now := l.now()
	b := &store.Batch{Fence: &store.Fence{Key: leaseKey(key), Token: lease.Token}}
	for _, inst := range list {
		if inst.Reason == ds.ReasonEngineError && inst.Message == msg {
			continue
		}
		if inst.Status == ds.StatusFailed {
			// A failed instance waits for a person, not for the engine:
			// its reason says why it failed, which no pass changes.
			continue
		}
		inst.Reason, inst.Message, inst.UpdatedAt = ds.ReasonEngineError, msg, now
		b.Instances = append(b.Instances, inst)
	}
	if len(b.Instances) == 0 {
		return
	}
	switch err := l.store.Write(ctx, b); {
	case errors.Is(err, store.ErrFenced):
		l.forgetLease(key)
		l.forgetObservations(key)
	case err != nil:
		// A conflict: an API call changed an instance meanwhile; the
		// next failed pass records it.
		log.Warn("record engine error", "error", err)
	default:
		l.written()
	}
}

// clearEngineErrors takes the engine error off every instance of a plan
// that planned: the planner leaves some statuses as they are (a failed
// instance waits for a person), so what a failed pass wrote is cleared here.
func clearEngineErrors(plan *Plan, instances map[string]*store.Instance, now time.Time) {
	var stale []string
	for rc, inst := range instances {
		if inst.Reason == ds.ReasonEngineError {
			stale = append(stale, rc)
		}
	}
	if len(stale) == 0 {
		return
	}
	for i := range plan.Instances {
		in := &plan.Instances[i]
		if at := slices.Index(stale, in.ReleaseChannel); at >= 0 {
			stale = slices.Delete(stale, at, at+1)
			if in.Reason == ds.ReasonEngineError {
				in.Reason, in.Message = ds.ReasonNone, ""
			}
		}
	}
	slices.Sort(stale)
	for _, rc := range stale {
		inst := *instances[rc]
		inst.Reason, inst.Message, inst.UpdatedAt = ds.ReasonNone, "", now
		plan.Instances = append(plan.Instances, inst)
	}
}

// passKey keys the service a pass is over in its context, for its logger.
type passKey struct{}

// withPass returns ctx for a pass over the service key.
func withPass(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, passKey{}, key)
}

// logOf is the logger of the pass ctx is for (withPass): the loop's, with
// the service's key. It is made when a pass logs, which few do, rather
// than for every pass (a logger with attributes costs allocations).
func (l *Loop) logOf(ctx context.Context) *slog.Logger {
	if key, ok := ctx.Value(passKey{}).(string); ok {
		return l.log.With(keyAttrs(key)...)
	}
	return l.log
}
