package engine

import (
	"sync"
	"time"

	"github.com/drover-dev/drover/internal/store"
)

// An action's outcome is recorded with the pass that follows it, in one
// write: the runner that carried the action out hands the outcome to the
// next pass over its service (which it asks for anyway) and waits, still
// heartbeating the claim, for that pass to write it with its plan
// (store.Batch.Complete). That is one write per step of a rollout instead
// of two, and the pass plans with the outcome already applied to the
// instance, as it would have read it from the store.
//
// The runner records the outcome itself, as before, when this loop does
// not hold the service's lease (another engine plans it), when the pass
// does not write (it failed, or lost the lease), when no pass took it
// within a third of the claim's ttl (or the pass that took it did not
// answer within another third), or once the loop is stopping.

// pending is an outcome waiting for a pass.
type pending struct {
	task store.Task
	a    Action
	out  Outcome
	// recorded gets, once, whether the pass that took the outcome wrote it.
	recorded chan bool
}

// outcomes are the outcomes waiting for a pass, by service key.
type outcomes struct {
	mu    sync.Mutex
	byKey map[string][]*pending
}

func (o *outcomes) put(key string, p *pending) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.byKey == nil {
		o.byKey = map[string][]*pending{}
	}
	o.byKey[key] = append(o.byKey[key], p)
}

// take removes and returns the outcomes waiting for a pass over key.
func (o *outcomes) take(key string) []*pending {
	o.mu.Lock()
	defer o.mu.Unlock()
	ps := o.byKey[key]
	delete(o.byKey, key)
	return ps
}

// withdraw removes p unless a pass took it, and says whether it did.
func (o *outcomes) withdraw(key string, p *pending) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	ps := o.byKey[key]
	for i, q := range ps {
		if q == p {
			ps = append(ps[:i:i], ps[i+1:]...)
			if len(ps) == 0 {
				delete(o.byKey, key)
			} else {
				o.byKey[key] = ps
			}
			return true
		}
	}
	return false
}

// recordInPass hands out, the outcome of task, to the next pass over its
// service and reports whether that pass wrote it; when it did not, the
// caller records it. It asks for that pass, ahead of other services: the
// task holds its slot until then.
func (l *Loop) recordInPass(task store.Task, a Action, out Outcome) bool {
	quit := l.quitting()
	if quit == nil || !l.holdsLease(task.Key) {
		return false
	}
	select {
	case <-quit:
		return false
	default:
	}
	p := &pending{task: task, a: a, out: out, recorded: make(chan bool, 1)}
	l.outcomes.put(task.Key, p)
	l.queue.AddFirst(task.Key)
	wait := time.NewTimer(l.taskTTL / 3)
	defer wait.Stop()
	select {
	case ok := <-p.recorded:
		return ok
	case <-wait.C:
	case <-quit:
	}
	if l.outcomes.withdraw(task.Key, p) {
		return false
	}
	// A pass has it: its answer comes, unless the pass is held up (a
	// runtime slow to answer its fetch). Then the runner records the
	// outcome itself: whichever of the two writes second finds the claim
	// ended and is refused (store.ErrFenced), so it is recorded once.
	wait.Reset(l.taskTTL / 3)
	select {
	case ok := <-p.recorded:
		return ok
	case <-wait.C:
		return false
	}
}

// holdsLease says whether this loop holds the lease on a service key, by
// its own clock.
func (l *Loop) holdsLease(key string) bool {
	l.leaseMu.Lock()
	defer l.leaseMu.Unlock()
	_, ok := l.leases[key]
	return ok && time.Until(l.leaseUntil[key]) > 0
}

// quitting is closed once Run's context ends; nil when Run is not running.
func (l *Loop) quitting() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.quit
}

// settleOutcomes tells the runners of ps whether the pass that took them
// wrote them.
func settleOutcomes(ps []*pending, recorded bool) {
	for _, p := range ps {
		p.recorded <- recorded
	}
}

// complete is the one way an outcome completes its task, whoever writes
// it (the pass that follows the action, with its plan, or the runner on
// its own, completeTask): the store's record of the task's end, and inst
// changed as the outcome says (Outcome.Change) when it still targets what
// the action was for; inst may be nil (no instance). It reports whether it
// changed inst. The outcome's events are written with it.
func complete(task store.Task, a Action, out Outcome, inst *store.Instance, now time.Time) (store.TaskDone, bool) {
	done := store.TaskDone{Task: task, Status: out.taskStatus(), Message: out.Message}
	if out.Change == nil || inst == nil || !a.changes(*inst) {
		return done, false
	}
	out.Change.Apply(inst)
	inst.UpdatedAt = now
	return done, true
}

// applyOutcomes completes the outcomes a pass took (complete) on what it
// read: each one's task is no longer running. It returns the store's
// record of them, their events, and the release channels whose instance
// they changed.
func applyOutcomes(ps []*pending, now time.Time, instances map[string]*store.Instance, running map[string]bool) (done []store.TaskDone, events []store.Event, changed map[string]bool) {
	for _, p := range ps {
		rc := p.a.ReleaseChannel
		d, ok := complete(p.task, p.a, p.out, instances[rc], now)
		done = append(done, d)
		events = append(events, p.out.Events...)
		delete(running, p.task.Instance)
		if !ok {
			continue
		}
		if changed == nil {
			changed = map[string]bool{}
		}
		changed[rc] = true
	}
	return done, events, changed
}
