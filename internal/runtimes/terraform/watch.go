package terraform

import (
	"context"
	"slices"
	"sync"
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
		r.watchers.notify(key)
	}
}

// watchers are the Watch calls in progress.
type watchers struct {
	mu   sync.Mutex
	list []*watcher
}

// watcher queues the keys to report to one Watch call, each key once until
// delivered, so a slow consumer never blocks the runtime.
type watcher struct {
	mu      sync.Mutex
	pending []runtimes.InstanceKey
	queued  map[runtimes.InstanceKey]bool
	wake    chan struct{}
}

func (ws *watchers) notify(key runtimes.InstanceKey) {
	ws.mu.Lock()
	list := ws.list
	ws.mu.Unlock()
	for _, w := range list {
		w.mu.Lock()
		if !w.queued[key] {
			w.queued[key] = true
			w.pending = append(w.pending, key)
		}
		w.mu.Unlock()
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}

// Watch calls notify with the key of each instance whose state may have
// changed: after every apply, and when a background poll finds a different
// state. It returns nil when ctx ends or the runtime is closed.
func (r *Runtime) Watch(ctx context.Context, notify func(runtimes.InstanceKey)) error {
	w := &watcher{queued: map[runtimes.InstanceKey]bool{}, wake: make(chan struct{}, 1)}
	r.watchers.mu.Lock()
	r.watchers.list = append(slices.Clone(r.watchers.list), w)
	r.watchers.mu.Unlock()
	defer func() {
		r.watchers.mu.Lock()
		r.watchers.list = slices.DeleteFunc(slices.Clone(r.watchers.list), func(x *watcher) bool { return x == w })
		r.watchers.mu.Unlock()
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-r.done:
			return nil
		case <-w.wake:
		}
		w.mu.Lock()
		batch := w.pending
		w.pending = nil
		clear(w.queued)
		w.mu.Unlock()
		for _, k := range batch {
			if ctx.Err() != nil {
				return nil
			}
			notify(k)
		}
	}
}
