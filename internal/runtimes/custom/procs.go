package custom

import (
	"context"

	"github.com/drover-dev/drover/internal/runtimes"
	"github.com/drover-dev/drover/internal/runtimes/localexec"
)

// tracker records c's process group with the runtime's ProcessRecorder while
// it runs, so that a server restarted after a crash ends what c left running
// before applying again (nil without a recorder).
func (r *Runtime) tracker(key runtimes.InstanceKey, version string, c *command) localexec.Tracker {
	if r.procs == nil {
		return nil
	}
	p := runtimes.Process{InstanceKey: key, Runtime: r.name, Kind: c.kind, Version: version, Command: c.rd.All(c.argv)}
	return localexec.RecordFunc(func(ctx context.Context, handle []byte) (func(), error) {
		p.Handle = handle
		return r.procs.AddProcess(ctx, p)
	})
}
