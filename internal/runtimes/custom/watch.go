package custom

import (
	"context"

	"github.com/drover-dev/drover/internal/runtimes"
)

// notify tells every watcher that key may have changed.
func (r *Runtime) notify(key runtimes.InstanceKey) { r.notifier.Notify(key) }

// Watch calls notify with the key of every instance whose fetch result
// changed (seen by its poller), whose getInfo outputs changed, or that was
// applied successfully, until ctx ends or the runtime is closed (it then
// returns nil). notify runs on Watch's goroutine, one call at a time;
// several Watch calls each get every notification.
func (r *Runtime) Watch(ctx context.Context, notify func(runtimes.InstanceKey)) error {
	return r.notifier.Watch(ctx, r.ctx.Done(), notify)
}
