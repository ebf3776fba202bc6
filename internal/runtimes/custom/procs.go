package custom

import (
	"context"
	"encoding/json"
	"fmt"

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
	return processTracker{rec: r.procs, p: runtimes.Process{
		InstanceKey: key, Runtime: r.name, Kind: c.kind, Version: version, Command: c.rd.All(c.argv),
	}}
}

type processTracker struct {
	rec runtimes.ProcessRecorder
	p   runtimes.Process
}

func (t processTracker) Started(ctx context.Context, g localexec.Group) (func(), error) {
	h, err := json.Marshal(g)
	if err != nil {
		return nil, fmt.Errorf("encode process group: %w", err)
	}
	p := t.p
	p.Handle = h
	return t.rec.AddProcess(ctx, p)
}
