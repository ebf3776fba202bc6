package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"time"

	ds "github.com/drover-dev/drover/internal/desiredstate"
	"github.com/drover-dev/drover/internal/store"
)

// The task runner: applies are durable tasks, enqueued with the plan that
// decides them. The runner claims them from the store (this engine's, or
// any other's sharing the store), heartbeats the claim while the executor
// carries the action out, and completes the task with the outcome in one
// transaction fenced by the claim. A runner that dies stops heartbeating;
// its task is claimed again once the claim lapses.

// taskKind is the store's task kind of an action.
func taskKind(a Action) string { return "engine." + string(a.Kind) }

// WakeRunner tells the task runner that tasks were enqueued (by another
// engine sharing the store): it looks for work now, not at its next poll.
func (l *Loop) WakeRunner() { l.kick() }

// kick wakes the dispatcher: tasks were enqueued.
func (l *Loop) kick() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// dispatch claims tasks while slots are free, as many at once as there are
// free slots (one claim is one write transaction), until ctx ends. Between
// claims that find nothing it waits for a kick or the task poll interval
// (tasks enqueued by other engines sharing the store).
func (l *Loop) dispatch(ctx context.Context) {
	poll := time.NewTicker(l.taskPoll)
	defer poll.Stop()
	failures := 0
	for {
		select {
		case l.slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		free := 1
	more:
		for {
			select {
			case l.slots <- struct{}{}:
				free++
			default:
				break more
			}
		}
		// The claims hold for a ttl from when the store made them, which is
		// after now: timing them from now errs on the safe side.
		claimed := time.Now()
		tasks, err := l.store.ClaimTasks(ctx, l.owner, l.taskTTL, free)
		for range free - len(tasks) {
			<-l.slots
		}
		if err != nil || len(tasks) == 0 {
			wait := l.taskPoll
			switch {
			case ctx.Err() != nil:
				return
			case err == nil:
				failures = 0
			default:
				wait = backoff(l.settings.RetryBackoff, l.settings.MaxBackoff, failures)
				failures++
				l.log.Error("claim task failed", "error", err, "retry_in", wait)
			}
			t := time.NewTimer(wait)
			select {
			case <-l.wake:
			case <-poll.C:
			case <-t.C:
			case <-ctx.Done():
			}
			t.Stop()
			continue
		}
		failures = 0
		for _, task := range tasks {
			l.start(task, claimed)
		}
	}
}

// start carries out a claimed task, for which a slot is taken, on an idle
// runner goroutine, or a new one if none waits; the slot is freed when the
// task ends.
func (l *Loop) start(task store.Task, claimed time.Time) {
	l.tasks.Add(1)
	job := claimedTask{task: task, claimed: claimed}
	select {
	case l.idle <- job:
	default:
		go l.runner(job)
	}
}

// claimedTask is a task handed to a runner goroutine, with when its claim
// was asked for.
type claimedTask struct {
	task    store.Task
	claimed time.Time
}

// runnerIdle is how long a runner goroutine waits for its next task before
// it ends.
const runnerIdle = 5 * time.Second

// runner carries out job, then the tasks handed to it while it waits, idle,
// for at most runnerIdle between two. Runners are kept rather than started
// anew for each task: a new goroutine's stack is too small for decoding an
// action and carrying it out, and growing it again for every task cost more
// than the task's own bookkeeping. There are at most as many as slots.
func (l *Loop) runner(job claimedTask) {
	idle := time.NewTimer(runnerIdle)
	defer idle.Stop()
	for {
		l.carryOut(job)
		idle.Reset(runnerIdle)
		select {
		case job = <-l.idle:
		case <-idle.C:
			return
		}
	}
}

// carryOut runs one claimed task, then frees its slot.
func (l *Loop) carryOut(job claimedTask) {
	defer l.tasks.Done()
	defer func() { <-l.slots }()
	l.runTask(job.task, job.claimed)
}

// startClaimed starts tasks a pass enqueued claimed by this loop, one slot
// taken for each. If the loop began to stop meanwhile (its write commits
// regardless), it starts none: each is handed back, pending for the next
// runner, and its slot freed.
func (l *Loop) startClaimed(ctx context.Context, tasks []store.Task, claimed time.Time) {
	if ctx.Err() == nil {
		for _, task := range tasks {
			l.start(task, claimed)
		}
		return
	}
	rctx, cancel := recordContext(context.Background())
	defer cancel()
	for _, task := range tasks {
		if err := l.store.ReleaseTask(rctx, task, "not started: the engine was stopping", nil); err != nil && !errors.Is(err, store.ErrFenced) {
			l.log.Error("hand back a task enqueued while stopping", "task", task.ID, "error", err)
		}
		<-l.slots
	}
}

// reserveSlots takes a slot for each of n tasks a pass is about to enqueue,
// if that many are free now, and returns how many it took: n or 0. The
// pass then enqueues them claimed and starts them itself (start frees each
// slot); when its write fails, releaseSlots gives them back.
func (l *Loop) reserveSlots(n int) int {
	for i := range n {
		select {
		case l.slots <- struct{}{}:
		default:
			l.releaseSlots(i)
			return 0
		}
	}
	return n
}

func (l *Loop) releaseSlots(n int) {
	for range n {
		<-l.slots
	}
}

// runTask carries out one claimed task and completes it. claimed is when
// the claim was asked for, by this host's clock. The task keeps its slot
// until its outcome is recorded: the slots bound the actions carried out
// and not yet recorded, which a crash would have done again.
func (l *Loop) runTask(task store.Task, claimed time.Time) {
	app, svc, _ := strings.Cut(task.Key, "/")
	log := l.log.With(append(keyAttrs(task.Key), "task", task.ID, "release_channel", task.Instance, "attempt", task.Attempts)...)
	var a Action
	if err := json.Unmarshal(task.Payload, &a); err != nil || taskKind(a) != task.Kind {
		err = Terminal(fmt.Errorf("task %d: undecodable action %q: %w", task.ID, task.Payload, err))
		l.completeTask(task, a, Outcome{Failed: true, Message: err.Error()}, log)
		l.settle(task.Key, "task", Result{}, err)
		return
	}
	actx, cancel := context.WithCancelCause(l.applyContext(context.Background()))
	defer cancel(nil)
	stopBeats := l.heartbeat(actx, task, claimed, cancel, log)
	if task.Attempts > 1 {
		log.Warn("task claimed again: its earlier runner stopped before completing it")
		if a.Kind == ActionApply {
			ev := store.Event{
				Time: l.now(), Application: app, Service: svc, ReleaseChannel: a.ReleaseChannel, DesiredStateID: a.StateID,
				Type: ds.EventApplying, Actor: "engine",
				Message: fmt.Sprintf("%s: applying %s again: its earlier run stopped before it ended (task %d, run %d)", a.ReleaseChannel, a.Version, task.ID, task.Attempts),
			}
			rctx, stop := recordContext(actx)
			if err := l.store.AppendEvents(rctx, ev); err != nil {
				log.Error("record event failed", "error", err)
			}
			stop()
			l.written()
		}
	}
	began := time.Now()
	out, err := l.safeExecute(actx, app, svc, a)
	// The claim is renewed until the outcome is recorded: recording may
	// take a while, and a claim lapsing meanwhile would drop it.
	defer stopBeats()
	switch cause := context.Cause(actx); {
	case errors.Is(cause, store.ErrFenced) || errors.Is(cause, errClaimLapsed):
		// Another runner has the task now; whatever happened here is its
		// to redo. Nothing is recorded by this claim.
		log.Warn("task claim lost while it ran; its outcome is dropped")
		l.observer.TaskDone(string(a.Kind), "lost", time.Since(began))
		return
	case out.Interrupted:
		l.releaseTask(task, out, log)
		l.observer.TaskDone(string(a.Kind), "interrupted", time.Since(began))
		return
	case err != nil:
		out = Outcome{Failed: true, Message: err.Error()}
		if a.Kind == ActionApply {
			out.Change = &Patch{Reason: ds.ReasonApplyFailed, Message: err.Error()}
		}
	}
	recorded := l.recordInPass(task, a, out)
	if !recorded {
		l.completeTask(task, a, out, log)
	}
	outcome := "succeeded"
	if out.Failed {
		outcome = "failed"
	}
	l.observer.TaskDone(string(a.Kind), outcome, time.Since(began))
	if recorded && err == nil && out.RequeueAfter <= 0 {
		// The pass asked for has run, and recorded it.
		l.forgetFailures(task.Key)
		return
	}
	l.settle(task.Key, string(a.Kind), out.Result, err)
}

// safeExecute turns a panic of the executor into an error.
func (l *Loop) safeExecute(ctx context.Context, app, svc string, a Action) (out Outcome, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%s panicked: %v\n%s", a.Kind, r, debug.Stack())
		}
	}()
	return l.exec.Execute(ctx, app, svc, a)
}

// errClaimLapsed stops an action whose claim this runner could not renew
// for as long as a claim lasts: the store may have given it to another
// runner (a partition between this server and its database).
var errClaimLapsed = errors.New("the task's claim lapsed: the store could not be reached to renew it, so another runner may have it")

// heartbeat renews the task's claim every third of its ttl until the
// returned function is called; that function reports whether the claim was
// lost meanwhile (the action's context is then canceled: another runner may
// be carrying it out). A claim not renewed for its ttl (the store cannot be
// reached) counts as lost as well.
func (l *Loop) heartbeat(ctx context.Context, task store.Task, claimed time.Time, cancel context.CancelCauseFunc, log interface {
	Warn(string, ...any)
}) func() bool {
	done := make(chan struct{})
	lost := make(chan bool, 1)
	go func() {
		t := time.NewTicker(l.taskTTL / 3)
		defer t.Stop()
		// The claim holds for a ttl from when it was asked for, by this
		// host's clock, which is what it has to go by; each renewal, for a
		// ttl from when it was sent. The runner gives up a fifth of a ttl
		// before that, to stop the action before another runner may start.
		margin := l.taskTTL / 5
		until := claimed.Add(l.taskTTL - margin)
		lapse := time.NewTimer(time.Until(until))
		defer lapse.Stop()
		for {
			select {
			case <-done:
				lost <- false
				return
			case <-lapse.C:
				log.Warn("task claim lapsed unrenewed; stopping the action")
				cancel(errClaimLapsed)
				<-done
				lost <- true
				return
			case <-t.C:
			}
			sent := time.Now()
			// A renewal that hangs (an unreachable database) gives up when
			// the claim lapses, so that the lapse is acted on in time.
			hctx, stop := recordContext(ctx)
			hctx, stopAt := context.WithDeadline(hctx, until)
			next, err := l.store.HeartbeatTask(hctx, task, l.taskTTL)
			stopAt()
			stop()
			switch {
			case errors.Is(err, store.ErrFenced):
				cancel(err)
				<-done
				lost <- true
				return
			case err != nil:
				log.Warn("task heartbeat failed", "error", err)
			default:
				task = next
				until = sent.Add(l.taskTTL - margin)
				lapse.Reset(time.Until(until))
			}
		}
	}()
	return func() bool {
		close(done)
		return <-lost
	}
}

// taskStatus is the status of the task whose outcome out is.
func (out Outcome) taskStatus() store.TaskStatus {
	if out.Failed {
		return store.TaskFailed
	}
	return store.TaskSucceeded
}

// changes says whether the action's instance change (Outcome.Change)
// applies to inst as it is now: a check's result names the desired state it
// ran for; an apply's holds while the instance targets what it applied.
func (a Action) changes(inst store.Instance) bool {
	return a.Kind == ActionRunCheck || inst.TargetStateID == a.StateID && inst.TargetVersion == a.Version
}

// releaseTask hands an interrupted task back (pending again, for any
// runner) with the events of its interruption.
func (l *Loop) releaseTask(task store.Task, out Outcome, log interface{ Error(string, ...any) }) {
	ctx, cancel := recordContext(context.Background())
	defer cancel()
	b := &store.Batch{Events: out.Events}
	if err := l.store.ReleaseTask(ctx, task, out.Message, b); err != nil && !errors.Is(err, store.ErrFenced) {
		log.Error("release interrupted task failed", "error", err)
	}
	l.written()
}

// completeTask records out for the claim task on its own, when no pass
// does (recordInPass): the task's end and the instance change, as complete
// makes them, and the events, in one transaction fenced by the claim.
// Passes may have rewritten the instance meanwhile, so a revision conflict
// re-reads it and tries again.
func (l *Loop) completeTask(task store.Task, a Action, out Outcome, log interface {
	Error(string, ...any)
	Warn(string, ...any)
}) {
	ctx, cancel := recordContext(context.Background())
	defer cancel()
	app, svc, _ := strings.Cut(task.Key, "/")
	for attempt := 0; ; attempt++ {
		b := &store.Batch{Events: append([]store.Event(nil), out.Events...)}
		var inst *store.Instance
		if out.Change != nil {
			got, err := l.store.GetInstance(ctx, app, svc, a.ReleaseChannel)
			switch {
			case err != nil && !errors.Is(err, store.ErrNotFound):
				log.Error("record task outcome failed", "error", err)
				return
			case err == nil:
				inst = &got
			}
		}
		done, changed := complete(task, a, out, inst, l.now())
		if changed {
			b.Instances = []store.Instance{*inst}
		}
		err := l.store.CompleteTask(ctx, done.Task, done.Status, done.Message, b)
		switch {
		case errors.Is(err, store.ErrConflict) && attempt < 10:
			continue
		case err != nil && !errors.Is(err, store.ErrFenced) && ctx.Err() == nil && attempt < 10:
			// The store may be briefly unreachable; the claim is still
			// renewed meanwhile. (A retry after a commit whose answer was
			// lost finds the claim ended: fenced, below.)
			log.Warn("record task outcome failed; trying again", "error", err)
			time.Sleep(backoff(50*time.Millisecond, time.Second, attempt))
			continue
		case errors.Is(err, store.ErrFenced):
			log.Warn("task claim lost before its outcome was recorded; another runner carries it out", "error", err)
		case err != nil:
			log.Error("record task outcome failed", "error", err)
		}
		l.written()
		return
	}
}
