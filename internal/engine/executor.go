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

// Executor carries out the actions plans decide; the engine's task runner
// calls it for each task it claims. Execute returns once the action is over,
// with what to record (Outcome) and what the work queue should do for the
// service (Outcome.Result, following the contract written on Result). It must
// be safe for concurrent use: the runner carries out tasks of different
// instances at once, never two of one instance.
type Executor interface {
	Execute(ctx context.Context, app, svc string, a Action) (Outcome, error)
}

// Outcome is what carrying out an action came to. The runner records it
// when it completes the action's task, in one transaction fenced by its
// claim: the task's status and message, Change applied to the instance (when
// the instance still targets what the action was for), and Events.
type Outcome struct {
	Result
	// Failed and Message are the task's outcome.
	Failed  bool
	Message string
	// Change updates the instance (nil = no change).
	Change func(*store.Instance)
	Events []store.Event
	// Interrupted means the action did not finish (the server shut down):
	// the runner releases the task with Message and Events, and it is
	// carried out again (by another runner, or at the next start).
	Interrupted bool
}

// LocalExecutor carries out actions in this process through the runtimes.
type LocalExecutor struct {
	store    store.Store
	runtimes RuntimeSource
	settings Settings
	now      func() time.Time
	log      *slog.Logger
}

// NewLocalExecutor builds the executor a Loop uses unless given another. It
// writes nothing itself: the runner records each outcome with its task.
func NewLocalExecutor(st store.Store, rs RuntimeSource, settings Settings, now func() time.Time, log *slog.Logger) *LocalExecutor {
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &LocalExecutor{store: st, runtimes: rs, settings: settings, now: now, log: log}
}

// Execute implements Executor. An apply's own failure is not an error here:
// it is an outcome recorded on the instance, whose plan retries it with
// backoff. Checks and deletes are not carried out by this version of drover
// (the planner does not decide them yet): they fail as Terminal.
func (x *LocalExecutor) Execute(ctx context.Context, app, svc string, a Action) (Outcome, error) {
	switch a.Kind {
	case ActionApply:
		return x.apply(ctx, app, svc, a), nil
	case ActionRunCheck, ActionDelete:
		return Outcome{}, Terminal(fmt.Errorf("%s/%s/%s: %s actions are not carried out by this drover yet", app, svc, a.ReleaseChannel, a.Kind))
	}
	return Outcome{}, Terminal(fmt.Errorf("%s/%s/%s: unknown action kind %q", app, svc, a.ReleaseChannel, a.Kind))
}

// target is the runtime target of release channel rc in desired state stateID.
func (x *LocalExecutor) target(ctx context.Context, stateID, rc string) (runtimes.Target, error) {
	return TargetOf(ctx, x.store, store.DesiredState{ID: stateID}, rc)
}

// apply performs one apply. Its record is the task that carries it (claimed
// before, completed or released after) and the events of its outcome.
func (x *LocalExecutor) apply(ctx context.Context, app, svc string, a Action) Outcome {
	log := x.log.With("app", app, "service", svc, "release_channel", a.ReleaseChannel, "version", a.Version)
	target, err := x.target(ctx, a.StateID, a.ReleaseChannel)
	var rt runtimes.Runtime
	if err == nil {
		rt, err = x.runtimes.Runtime(ctx, a.Runtime)
	}
	var res runtimes.ApplyResult
	if err == nil {
		res, err = rt.Apply(ctx, target)
	}
	stopped := shutdownCause(ctx)
	ev := store.Event{
		Time: x.now(), Application: app, Service: svc, ReleaseChannel: a.ReleaseChannel,
		DesiredStateID: a.StateID, Actor: "engine",
	}
	if err != nil && stopped != nil {
		// Not a failure of the apply: the runner hands the task back, and
		// it is carried out again (by the next server, or another runner).
		log.Warn("apply interrupted by shutdown", "error", err)
		ev.Type = ds.EventApplyInterrupted
		ev.Message = fmt.Sprintf("%s: apply of %s interrupted: %v; it will be applied again", a.ReleaseChannel, a.Version, stopped)
		return Outcome{Interrupted: true, Message: stopped.Error(), Events: []store.Event{ev}}
	}
	if err == nil {
		ev.Type, ev.Message = ds.EventApplied, fmt.Sprintf("%s: applied %s: %s", a.ReleaseChannel, a.Version, summarize(res))
		at := x.now()
		return Outcome{
			Result: Result{Requeue: true}, Message: summarize(res), Events: []store.Event{ev},
			// Record that the apply returned, so the plan waits for the
			// runtime to show the version (its grace period).
			Change: func(i *store.Instance) { i.AppliedAt = at },
		}
	}
	log.Warn("apply failed", "error", err)
	ev.Type, ev.Message = ds.EventApplyFailed, fmt.Sprintf("%s: apply of %s failed: %v", a.ReleaseChannel, a.Version, err)
	permanent := runtimes.IsPermanent(err)
	// A runtime that cannot be reached now (its agent is away) says
	// nothing about the apply: it is retried, never given up on for that.
	unavailable := errors.Is(err, runtimes.ErrUnavailable)
	msg := err.Error()
	return Outcome{
		Result: Result{Requeue: true}, Failed: true, Message: msg, Events: []store.Event{ev},
		Change: func(i *store.Instance) {
			i.Reason = ds.ReasonApplyFailed
			i.Message = msg
			switch {
			case permanent:
				i.ApplyAttempts = x.settings.MaxApplyAttempts
			case unavailable && i.ApplyAttempts > 1:
				// Not an attempt: take it back (keeping one, so the plan
				// still waits its backoff before the next).
				i.ApplyAttempts--
			}
		},
	}
}
