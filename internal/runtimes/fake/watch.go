package fake

import (
	"context"

	"github.com/drover-dev/drover/internal/runtimes"
)

// notify tells every watcher that keys may have changed.
func (r *Runtime) notify(keys ...runtimes.InstanceKey) { r.notifier.Notify(keys...) }

// Watch calls notify with the key of every instance that was applied,
// drifted or finished its rollout, until ctx ends or the runtime is closed
// (it then returns nil). notify runs on Watch's goroutine, one call at a
// time; several Watch calls each get every notification.
func (r *Runtime) Watch(ctx context.Context, notify func(runtimes.InstanceKey)) error {
	return r.notifier.Watch(ctx, r.done, notify)
}
