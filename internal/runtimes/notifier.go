package runtimes

import (
	"context"
	"slices"
	"sync"
)

// Notifier fans "this instance may have changed" out to every Watch call of
// a runtime; runtimes implement Watcher with it. Keys are coalesced per
// watcher: a key is queued once until its delivery starts, so a slow consumer
// costs at most one entry per instance and Notify never blocks. A key
// notified while its own delivery is in progress is delivered again
// afterwards, because the consumer may already have read the old state. The
// zero value is ready.
type Notifier struct {
	mu       sync.Mutex
	watchers []*notifyQueue
}

type notifyQueue struct {
	mu      sync.Mutex
	pending []InstanceKey
	queued  map[InstanceKey]struct{}
	wake    chan struct{}
}

// Notify tells every watcher that keys may have changed.
func (n *Notifier) Notify(keys ...InstanceKey) {
	if len(keys) == 0 {
		return
	}
	n.mu.Lock()
	list := n.watchers
	n.mu.Unlock()
	for _, q := range list {
		q.mu.Lock()
		for _, k := range keys {
			if _, ok := q.queued[k]; !ok {
				q.queued[k] = struct{}{}
				q.pending = append(q.pending, k)
			}
		}
		q.mu.Unlock()
		select {
		case q.wake <- struct{}{}:
		default:
		}
	}
}

// Watch delivers notifications to notify, one call at a time on the caller's
// goroutine, until ctx ends or stop is closed (the runtime closed); it then
// returns nil. Several Watch calls each get every notification.
func (n *Notifier) Watch(ctx context.Context, stop <-chan struct{}, notify func(InstanceKey)) error {
	q := &notifyQueue{queued: map[InstanceKey]struct{}{}, wake: make(chan struct{}, 1)}
	n.mu.Lock()
	n.watchers = append(slices.Clone(n.watchers), q)
	n.mu.Unlock()
	defer func() {
		n.mu.Lock()
		n.watchers = slices.DeleteFunc(slices.Clone(n.watchers), func(x *notifyQueue) bool { return x == q })
		n.mu.Unlock()
	}()
	var batch []InstanceKey
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-stop:
			return nil
		case <-q.wake:
		}
		q.mu.Lock()
		batch, q.pending = q.pending, batch[:0]
		q.mu.Unlock()
		for _, k := range batch {
			if ctx.Err() != nil {
				return nil
			}
			// The key stays queued until here, so notifications that arrive
			// between taking the batch and delivering it are coalesced into
			// this delivery; later ones queue it again.
			q.mu.Lock()
			delete(q.queued, k)
			q.mu.Unlock()
			notify(k)
		}
	}
}

// Watchers is the number of Watch calls in progress (tests wait for it).
func (n *Notifier) Watchers() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.watchers)
}
