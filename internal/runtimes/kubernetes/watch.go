package kubernetes

import (
	"context"

	"github.com/drover-dev/drover/internal/runtimes"
)

// notify tells every watcher that keys may have changed.
func (r *Runtime) notify(keys ...runtimes.InstanceKey) { r.notifier.Notify(keys...) }

// Watch calls notify with the key of every instance one of whose objects
// changed in the cluster (created, updated, including its status, or
// deleted, by drover or anyone else), a short while (Settings.Debounce) after
// the change, until ctx ends or the runtime is closed (it then returns nil).
// Only the resource types of instances this runtime applied or fetched are
// watched. notify runs on Watch's goroutine, one call at a time; several
// Watch calls each get every notification.
func (r *Runtime) Watch(ctx context.Context, notify func(runtimes.InstanceKey)) error {
	return r.notifier.Watch(ctx, r.ctx.Done(), notify)
}
