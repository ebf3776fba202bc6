package kubernetes

import (
	"context"
	"slices"
	"sync"

	"github.com/drover-dev/drover/internal/runtimes"
)

// watcher queues the keys to report to one Watch call. Keys are coalesced
// (a key is queued once until delivered), so a slow consumer costs at most
// one entry per instance and never blocks the watches.
type watcher struct {
	mu      sync.Mutex
	pending []runtimes.InstanceKey
	queued  map[runtimes.InstanceKey]struct{}
	wake    chan struct{}
}

func (w *watcher) push(keys []runtimes.InstanceKey) {
	w.mu.Lock()
	for _, k := range keys {
		if _, ok := w.queued[k]; !ok {
			w.queued[k] = struct{}{}
			w.pending = append(w.pending, k)
		}
	}
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// notify tells every watcher that keys may have changed.
func (r *Runtime) notify(keys ...runtimes.InstanceKey) {
	ws := r.watchers.Load()
	if ws == nil || len(keys) == 0 {
		return
	}
	for _, w := range *ws {
		w.push(keys)
	}
}

// Watch calls notify with the key of every instance one of whose objects
// changed in the cluster (created, updated, including its status, or
// deleted, by drover or anyone else), a short while (Settings.Debounce) after
// the change, until ctx ends or the runtime is closed (it then returns nil).
// Only the resource types of instances this runtime applied or fetched are
// watched. notify runs on Watch's goroutine, one call at a time; several
// Watch calls each get every notification.
func (r *Runtime) Watch(ctx context.Context, notify func(runtimes.InstanceKey)) error {
	w := &watcher{queued: map[runtimes.InstanceKey]struct{}{}, wake: make(chan struct{}, 1)}
	r.wmu.Lock()
	var ws []*watcher
	if old := r.watchers.Load(); old != nil {
		ws = slices.Clone(*old)
	}
	ws = append(ws, w)
	r.watchers.Store(&ws)
	r.wmu.Unlock()
	defer func() {
		r.wmu.Lock()
		ws := slices.DeleteFunc(slices.Clone(*r.watchers.Load()), func(x *watcher) bool { return x == w })
		r.watchers.Store(&ws)
		r.wmu.Unlock()
	}()

	var batch []runtimes.InstanceKey
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-r.ctx.Done():
			return nil
		case <-w.wake:
		}
		w.mu.Lock()
		batch, w.pending = w.pending, batch[:0]
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
