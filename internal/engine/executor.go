package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	ds "github.com/drover-dev/drover/internal/desiredstate"
	"github.com/drover-dev/drover/internal/gates"
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
// the instance still targets what the action was for), and Events. It is
// data: the runner hands it to the next pass over the service to record.
type Outcome struct {
	Result
	// Failed and Message are the task's outcome.
	Failed  bool
	Message string
	// Change updates the instance (nil = no change).
	Change *Patch
	Events []store.Event
	// Interrupted means the action did not finish (the server shut down):
	// the runner releases the task with Message and Events, and it is
	// carried out again (by another runner, or at the next start).
	Interrupted bool
}

// LocalExecutor carries out actions in this process through the runtimes.
type LocalExecutor struct {
	store    ExecutorStore
	runtimes RuntimeSource
	// gates evaluates the checks of gate kinds (alert gates,
	// commitDenylist ranges: whatever the composition root registered;
	// nil: none).
	gates    *gates.Registry
	settings Settings
	now      func() time.Time
	log      *slog.Logger
	observer Observer
	// states decodes the desired states actions name (the loop's cache).
	states *StateCache
}

// NewLocalExecutor builds the executor a Loop uses unless given another. It
// writes nothing itself: the runner records each outcome with its task.
func NewLocalExecutor(st ExecutorStore, rs RuntimeSource, settings Settings, now func() time.Time, log *slog.Logger) *LocalExecutor {
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &LocalExecutor{store: st, runtimes: rs, settings: settings, now: now, log: log, observer: noObserver{}, states: NewStateCache(st)}
}

// Execute implements Executor. An apply's own failure is not an error here:
// it is an outcome recorded on the instance, whose plan retries it with
// backoff; nor is a check's. Deletes are not carried out by this version of
// drover (the planner does not decide them yet): they fail as Terminal.
func (x *LocalExecutor) Execute(ctx context.Context, app, svc string, a Action) (Outcome, error) {
	switch a.Kind {
	case ActionApply:
		return x.apply(ctx, app, svc, a), nil
	case ActionRunCheck:
		if a.Check == nil {
			return Outcome{}, Terminal(fmt.Errorf("%s/%s/%s: a runCheck action without its check", app, svc, a.ReleaseChannel))
		}
		return x.runCheck(ctx, app, svc, a), nil
	case ActionDelete:
		return Outcome{}, Terminal(fmt.Errorf("%s/%s/%s: %s actions are not carried out by this drover yet", app, svc, a.ReleaseChannel, a.Kind))
	}
	return Outcome{}, Terminal(fmt.Errorf("%s/%s/%s: unknown action kind %q", app, svc, a.ReleaseChannel, a.Kind))
}

// target is the runtime target of release channel rc in desired state stateID.
func (x *LocalExecutor) target(ctx context.Context, stateID, rc string) (runtimes.Target, error) {
	return x.states.Target(ctx, store.DesiredState{ID: stateID}, rc)
}

// memo is what the store remembers for the runtime of an instance (none
// for an instance not written yet).
func (x *LocalExecutor) memo(ctx context.Context, app, svc, rc string) (json.RawMessage, error) {
	inst, err := x.store.GetInstance(ctx, app, svc, rc)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, err
	}
	return memoOf(&inst), nil
}

// memoOf is inst's runtime memo as a target carries it.
func memoOf(inst *store.Instance) json.RawMessage {
	if inst == nil || inst.RuntimeMemo == "" {
		return nil
	}
	return json.RawMessage(inst.RuntimeMemo)
}

// keptMemo is the memo an apply returned as the store keeps it: "" for
// none; not ok (and "") for one too large or not JSON, which is not kept.
func keptMemo(m json.RawMessage) (string, bool) {
	switch {
	case len(m) == 0:
		return "", true
	case len(m) > runtimes.MaxMemo || !json.Valid(m):
		return "", false
	}
	return string(m), true
}

// apply performs one apply. Its record is the task that carries it (claimed
// before, completed or released after) and the events of its outcome.
func (x *LocalExecutor) apply(ctx context.Context, app, svc string, a Action) Outcome {
	log := x.log.With("app", app, "service", svc, "release_channel", a.ReleaseChannel, "version", a.Version)
	target, err := x.target(ctx, a.StateID, a.ReleaseChannel)
	if err == nil {
		target.Memo, err = x.memo(ctx, app, svc, a.ReleaseChannel)
	}
	var rt runtimes.Runtime
	if err == nil {
		rt, err = x.runtimes.Runtime(ctx, a.Runtime)
	}
	var res runtimes.ApplyResult
	if err == nil {
		began := time.Now()
		res, err = rt.Apply(ctx, target)
		x.observer.RuntimeCall(a.Runtime, "apply", time.Since(began), err)
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
		memo, ok := keptMemo(res.Memo)
		if !ok {
			log.Warn("runtime memo not kept", "runtime", a.Runtime, "bytes", len(res.Memo), "max_bytes", runtimes.MaxMemo)
		}
		return Outcome{
			Result: Result{Requeue: true}, Message: summarize(res), Events: []store.Event{ev},
			// Record that the apply returned, so the plan waits for the
			// runtime to show the version (its grace period), and what the
			// runtime asked to remember of it.
			Change: &Patch{AppliedAt: at, RuntimeMemo: memo},
		}
	}
	log.Warn("apply failed", "error", err)
	ev.Type, ev.Message = ds.EventApplyFailed, fmt.Sprintf("%s: apply of %s failed: %v", a.ReleaseChannel, a.Version, err)
	permanent := runtimes.IsPermanent(err)
	// A runtime that cannot be reached now (its agent is away) says
	// nothing about the apply: it is retried, never given up on for that.
	unavailable := errors.Is(err, runtimes.ErrUnavailable)
	msg := err.Error()
	change := &Patch{Reason: ds.ReasonApplyFailed, Message: msg, RefundAttempt: unavailable && !permanent}
	if permanent {
		change.ApplyAttempts = x.settings.MaxApplyAttempts
	}
	return Outcome{Result: Result{Requeue: true}, Failed: true, Message: msg, Events: []store.Event{ev}, Change: change}
}

// runCheck runs a command check once through the channel's runtime and
// records its result on the instance (the last one per check). An event
// is recorded when the outcome differs from the previous run's for the
// desired state: people see a check turn red or green, not every run.
func (x *LocalExecutor) runCheck(ctx context.Context, app, svc string, a Action) Outcome {
	chk := *a.Check
	log := x.log.With("app", app, "service", svc, "release_channel", a.ReleaseChannel, "check", chk.String())
	var prev *store.CheckResult
	if inst, err := x.store.GetInstance(ctx, app, svc, a.ReleaseChannel); err == nil {
		for _, r := range inst.Checks {
			if r.Key == chk.RunKey() && r.DesiredStateID == a.StateID {
				prev = &r
			}
		}
	}
	var out runtimes.CheckOutcome
	var err error
	if chk.Gate != nil {
		out, err = x.evaluate(ctx, app, svc, a, *chk.Gate)
	} else {
		out, err = x.runCommand(ctx, a, chk)
	}
	if stopped := shutdownCause(ctx); err != nil && stopped != nil {
		return Outcome{Interrupted: true, Message: stopped.Error()}
	}
	res := store.CheckResult{Key: chk.RunKey(), DesiredStateID: a.StateID, Passed: out.Passed, Message: out.Message, At: x.now(), Runs: 1}
	if prev != nil {
		res.Runs = prev.Runs + 1
	}
	msg := "passed"
	if !out.Passed {
		msg = "failed"
	}
	if err != nil {
		log.Warn("check could not run", "error", err)
		res.Error, res.Message, msg = err.Error(), "", "could not run: "+err.Error()
	} else if out.Message != "" {
		msg += ": " + out.Message
	}
	var events []store.Event
	if prev == nil || prev.Passed != res.Passed || (prev.Error == "") != (res.Error == "") {
		typ := ds.EventCheckPassed
		if !res.Passed {
			typ = ds.EventCheckFailed
		}
		events = append(events, store.Event{
			Time: res.At, Application: app, Service: svc, ReleaseChannel: a.ReleaseChannel, DesiredStateID: a.StateID,
			Type: typ, Actor: "engine", Message: fmt.Sprintf("%s: %s %s %s", a.ReleaseChannel, checkWord(chk), checkAttachment(chk), msg),
		})
	}
	return Outcome{
		Result: Result{Requeue: true}, Failed: !res.Passed, Message: msg, Events: events,
		Change: &Patch{Check: &res},
	}
}

// runCommand runs a protection's command through the channel's runtime.
func (x *LocalExecutor) runCommand(ctx context.Context, a Action, chk ds.Check) (runtimes.CheckOutcome, error) {
	target, err := x.target(ctx, a.StateID, a.ReleaseChannel)
	if err != nil {
		return runtimes.CheckOutcome{}, err
	}
	rt, err := x.runtimes.Runtime(ctx, a.Runtime)
	if err != nil {
		return runtimes.CheckOutcome{}, err
	}
	cr, ok := rt.(runtimes.CheckRunner)
	if !ok {
		return runtimes.CheckOutcome{}, fmt.Errorf("runtime %s cannot run protection commands (taskConfig, kubernetesConfig): drover runs them through custom runtimes", a.Runtime)
	}
	return cr.RunCheck(ctx, target, runtimes.CheckCommand{Name: chk.Name, Spec: chk.Command})
}

// evaluate runs a gate through the evaluator registered for its kind.
func (x *LocalExecutor) evaluate(ctx context.Context, app, svc string, a Action, g ds.Gate) (runtimes.CheckOutcome, error) {
	target := gates.Target{Application: app, Service: svc, ReleaseChannel: a.ReleaseChannel, DesiredStateID: a.StateID, Version: a.Version}
	out, err := x.gates.Evaluate(ctx, target, g)
	if err != nil {
		return runtimes.CheckOutcome{}, err
	}
	return runtimes.CheckOutcome{Passed: out.Passed, Message: out.Message}, nil
}

// checkWord is what people call chk: a protection, an extension, drover's
// gate.
func checkWord(chk ds.Check) string {
	switch {
	case isExtension(chk):
		return "extension"
	case chk.Source == ds.SourceDrover:
		return "gate"
	}
	return "protection"
}
