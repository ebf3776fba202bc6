package terraform

import (
	"context"
	"time"

	"github.com/drover-dev/drover/internal/runtimes"
)

// minIdle is the least time an instance nobody fetches or applies keeps
// being polled.
const minIdle = time.Hour

// schedulePollLocked (re)arms in's poll to run after d. r.mu is held.
func (r *Runtime) schedulePollLocked(in *instance, d time.Duration) {
	if r.closed {
		return
	}
	r.stopPollLocked(in)
	gen := in.pollGen
	key := in.key
	in.timer = time.AfterFunc(d, func() { r.poll(key, gen) })
}

// stopPollLocked cancels in's pending poll. r.mu is held.
func (r *Runtime) stopPollLocked(in *instance) {
	in.pollGen++
	if in.timer != nil {
		in.timer.Stop()
		in.timer = nil
	}
}

// poll plans key's last target again, in the background, and notifies
// watchers when its state changed. gen tells whether this poll is still
// the one scheduled: any plan in between reschedules.
func (r *Runtime) poll(key runtimes.InstanceKey, gen uint64) {
	r.mu.Lock()
	in := r.insts[key]
	if r.closed || in == nil || in.pollGen != gen || in.spec == nil {
		r.mu.Unlock()
		return
	}
	idle := max(3*in.spec.runner.SteadyStatePollInterval.Or(DefaultSteadyStatePollInterval), minIdle)
	if r.now().Sub(in.lastUsed) > idle {
		// Nobody asks about this instance any more (its service or
		// channel is gone): stop polling; a later Fetch plans afresh.
		in.timer = nil
		in.cached = false
		r.mu.Unlock()
		return
	}
	r.wg.Add(1)
	r.mu.Unlock()
	defer r.wg.Done()

	in.cmd.Lock()
	defer in.cmd.Unlock()
	r.mu.Lock()
	if r.closed || in.pollGen != gen {
		// A fetch or an apply planned meanwhile and scheduled anew.
		r.mu.Unlock()
		return
	}
	t, sp := in.target, in.spec
	r.mu.Unlock()
	_, changed, err := r.refresh(r.ctx, in, t, sp)
	if r.ctx.Err() != nil {
		return
	}
	if err != nil {
		r.log.Warn("terraform runtime: poll failed", "runtime", r.name, "instance", key.String(), "version", t.Version, "error", err)
	}
	if changed {
		r.watchers.Notify(key)
	}
}

// Watch calls notify with the key of each instance whose state may have
// changed: after every apply, and when a background poll finds a different
// state. It returns nil when ctx ends or the runtime is closed.
func (r *Runtime) Watch(ctx context.Context, notify func(runtimes.InstanceKey)) error {
	return r.watchers.Watch(ctx, r.done, notify)
}
