package fake

import (
	"time"

	"github.com/drover-dev/drover/internal/runtimes"
)

// event is the end of one rollout: gen tells whether the rollout is still the
// current one of key when the event comes due.
type event struct {
	at  time.Time
	key runtimes.InstanceKey
	gen uint64
}

// eventHeap is a min-heap on at (typed, so pushing does not allocate).
type eventHeap []event

func (h *eventHeap) push(e event) {
	*h = append(*h, e)
	s := *h
	for i := len(s) - 1; i > 0; {
		p := (i - 1) / 2
		if !s[i].at.Before(s[p].at) {
			break
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
}

func (h *eventHeap) pop() event {
	s := *h
	top := s[0]
	n := len(s) - 1
	s[0] = s[n]
	s[n] = event{}
	s = s[:n]
	for i := 0; ; {
		l, m := 2*i+1, i
		if l < n && s[l].at.Before(s[m].at) {
			m = l
		}
		if r := l + 1; r < n && s[r].at.Before(s[m].at) {
			m = r
		}
		if m == i {
			break
		}
		s[i], s[m] = s[m], s[i]
		i = m
	}
	*h = s
	return top
}

// scheduleLocked queues e and, on the wall clock, re-arms the timer if e
// is now the earliest event.
func (r *Runtime) scheduleLocked(e event) {
	r.events.push(e)
	if r.events[0] == e {
		r.armLocked(r.now())
	}
}

// armLocked points the real timer at the earliest event. With an injected
// clock there is no real timer: the clock's owner calls Tick.
func (r *Runtime) armLocked(now time.Time) {
	if !r.realClock || r.closed {
		return
	}
	if len(r.events) == 0 {
		if r.timer != nil {
			r.timer.Stop()
			r.timerAt = time.Time{}
		}
		return
	}
	next := r.events[0].at
	if r.timer != nil && r.timerAt.Equal(next) {
		return
	}
	d := max(next.Sub(now), 0)
	r.timerAt = next
	if r.timer == nil {
		r.timer = time.AfterFunc(d, func() { r.Tick() })
		return
	}
	r.timer.Reset(d)
}

// Tick notifies watchers of every rollout that has ended by the clock's
// now, and returns how many did. The wall clock calls it by itself; with an
// injected clock, call it after advancing the clock.
func (r *Runtime) Tick() int {
	r.mu.Lock()
	now := r.now()
	var keys []runtimes.InstanceKey
	for len(r.events) > 0 && !r.events[0].at.After(now) {
		e := r.events.pop()
		if in := r.insts[e.key]; in != nil && in.gen == e.gen {
			keys = append(keys, e.key)
		}
	}
	if r.timer != nil {
		r.timerAt = time.Time{} // fired or superseded: re-arm
	}
	r.armLocked(now)
	r.mu.Unlock()
	r.notify(keys...)
	return len(keys)
}
