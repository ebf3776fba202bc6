package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	ds "github.com/drover-dev/drover/internal/desiredstate"
	"github.com/drover-dev/drover/internal/runtimes"
	"github.com/drover-dev/drover/internal/store"
)

// Executor carries out the actions plans decide. Execute returns once the
// action is over (or handed to whoever carries it out); its Result and error
// follow the contract written on Result. It must be safe for concurrent use:
// the loop runs actions of different instances at once, never two of one
// instance.
type Executor interface {
	Execute(ctx context.Context, app, svc string, a Action) (Result, error)
}

// LocalExecutor carries out actions in this process through the runtimes:
// an apply is recorded as an attempt before the runtime is called and its
// outcome (event, instance) after.
type LocalExecutor struct {
	store    store.Store
	runtimes RuntimeSource
	settings Settings
	now      func() time.Time
	log      *slog.Logger
	onWrite  func()
}

// NewLocalExecutor builds the executor a Loop uses unless given another.
func NewLocalExecutor(st store.Store, rs RuntimeSource, settings Settings, now func() time.Time, log *slog.Logger, onWrite func()) *LocalExecutor {
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &LocalExecutor{store: st, runtimes: rs, settings: settings, now: now, log: log, onWrite: onWrite}
}

// Execute implements Executor. An apply's own failure is not an error here:
// it is recorded on the instance, whose plan retries it with backoff; the
// error is for what kept the apply from being recorded at all. Checks and
// deletes are not carried out by this version of drover (the planner does
// not decide them yet): they fail as Terminal.
func (x *LocalExecutor) Execute(ctx context.Context, app, svc string, a Action) (Result, error) {
	switch a.Kind {
	case ActionApply:
		inst, err := x.store.GetInstance(ctx, app, svc, a.ReleaseChannel)
		if err != nil {
			return Result{}, fmt.Errorf("apply %s/%s/%s: %w", app, svc, a.ReleaseChannel, err)
		}
		x.apply(ctx, a, inst)
		return Result{Requeue: true}, nil
	case ActionRunCheck, ActionDelete:
		return Result{}, Terminal(fmt.Errorf("%s/%s/%s: %s actions are not carried out by this drover yet", app, svc, a.ReleaseChannel, a.Kind))
	}
	return Result{}, Terminal(fmt.Errorf("%s/%s/%s: unknown action kind %q", app, svc, a.ReleaseChannel, a.Kind))
}

// target is the runtime target of release channel rc in desired state stateID.
func (x *LocalExecutor) target(ctx context.Context, stateID, rc string) (runtimes.Target, error) {
	if cs := sharedStates.peek(stateID); cs != nil {
		if t, ok := cs.targets[rc]; ok {
			return t, nil
		}
	}
	rec, err := x.store.GetDesiredState(ctx, stateID)
	if err != nil {
		return runtimes.Target{}, fmt.Errorf("load desired state %s: %w", stateID, err)
	}
	return TargetOf(rec, rc)
}

func (x *LocalExecutor) written() {
	if x.onWrite != nil {
		x.onWrite()
	}
}

// apply performs one planned apply: the attempt is recorded before the
// runtime is called, and its outcome after. The outcome is recorded even
// when ctx ended meanwhile (the server shut down past its grace): the
// attempt must not stay open.
func (x *LocalExecutor) apply(ctx context.Context, a Action, inst store.Instance) {
	log := x.log.With("app", inst.Application, "service", inst.Service, "release_channel", a.ReleaseChannel, "version", a.Version)
	target, err := x.target(ctx, a.StateID, a.ReleaseChannel)
	var rt runtimes.Runtime
	if err == nil {
		rt, err = x.runtimes.Runtime(ctx, a.Runtime)
	}
	var id int64
	if err == nil {
		id, err = x.store.StartApply(ctx, store.ApplyAttempt{
			Application: inst.Application, Service: inst.Service, ReleaseChannel: a.ReleaseChannel,
			DesiredStateID: a.StateID, Version: a.Version, StartedAt: x.now(),
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
		Time: x.now(), Application: inst.Application, Service: inst.Service, ReleaseChannel: a.ReleaseChannel,
		DesiredStateID: inst.DesiredStateID, Actor: "engine",
	}
	if err != nil && stopped != nil {
		// Not a failure of the apply: leave the instance as it is, so the
		// next server sees an apply that never returned and applies again.
		log.Warn("apply interrupted by shutdown", "error", err)
		ev.Type = ds.EventApplyInterrupted
		ev.Message = fmt.Sprintf("%s: apply of %s interrupted: %v; it will be applied again", a.ReleaseChannel, a.Version, stopped)
		if started {
			err = x.store.FinishApply(rctx, id, store.OutcomeInterrupted, stopped.Error(), x.now(), ev)
		} else {
			err = x.store.AppendEvents(rctx, ev)
		}
		if err != nil {
			log.Error("record apply outcome failed", "error", err)
		}
		x.written()
		return
	}
	if started {
		outcome, msg := "succeeded", summarize(res)
		if err != nil {
			outcome, msg = "failed", err.Error()
		}
		if ferr := x.store.FinishApply(rctx, id, outcome, msg, x.now()); ferr != nil {
			log.Error("record apply outcome failed", "error", ferr)
		}
	}
	if err == nil {
		ev.Type, ev.Message = ds.EventApplied, fmt.Sprintf("%s: applied %s: %s", a.ReleaseChannel, a.Version, summarize(res))
		// Record that the apply returned, so a later pass can tell a finished
		// apply (wait for the runtime) from an interrupted one (apply again).
		if werr := x.recordOutcome(rctx, inst, ev, func(i *store.Instance) {
			i.AppliedAt = x.now()
		}); werr != nil {
			log.Error("record apply failed", "error", werr)
		}
		return
	}
	log.Warn("apply failed", "error", err)
	ev.Type, ev.Message = ds.EventApplyFailed, fmt.Sprintf("%s: apply of %s failed: %v", a.ReleaseChannel, a.Version, err)
	if werr := x.recordOutcome(rctx, inst, ev, func(i *store.Instance) {
		i.Reason = ds.ReasonApplyFailed
		i.Message = err.Error()
		if runtimes.IsPermanent(err) {
			i.ApplyAttempts = x.settings.MaxApplyAttempts
		}
	}); werr != nil {
		log.Error("record apply failure failed", "error", werr)
	}
}

// recordOutcome writes an apply's outcome onto the instance with its event.
// Passes may have rewritten the instance while the apply ran, so on a
// revision conflict it re-reads the instance and tries again; the outcome is
// dropped only if the instance moved on to another target meanwhile.
func (x *LocalExecutor) recordOutcome(ctx context.Context, inst store.Instance, ev store.Event, change func(*store.Instance)) error {
	target := inst.TargetStateID + "/" + inst.TargetVersion
	for attempt := 0; ; attempt++ {
		change(&inst)
		inst.UpdatedAt = x.now()
		err := x.store.Write(ctx, &store.Batch{Instances: []store.Instance{inst}, Events: []store.Event{ev}})
		if !errors.Is(err, store.ErrConflict) || attempt == 10 {
			x.written()
			return err
		}
		fresh, gerr := x.store.GetInstance(ctx, inst.Application, inst.Service, inst.ReleaseChannel)
		if gerr != nil {
			return gerr
		}
		if fresh.TargetStateID+"/"+fresh.TargetVersion != target {
			err := x.store.AppendEvents(ctx, ev)
			x.written()
			return err
		}
		inst = fresh
	}
}
