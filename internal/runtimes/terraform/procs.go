package terraform

import (
	"context"

	"github.com/drover-dev/drover/internal/runtimes"
	"github.com/drover-dev/drover/internal/runtimes/localexec"
)

// tracker records the process group of a preRun command with the runtime's
// ProcessRecorder while it runs, so that a server restarted after a crash
// ends what the command left running before applying again (nil without a
// recorder), as custom runtimes do.
//
// terraform itself runs through terraform-exec, which starts it in its own
// process group (and kills it with drover: Pdeathsig) but does not let its
// caller see the process: its group is not recorded (B3, see the package
// documentation).
func (r *Runtime) tracker(key runtimes.InstanceKey, kind, version string, argv []string) localexec.Tracker {
	if r.procs == nil {
		return nil
	}
	p := runtimes.Process{InstanceKey: key, Runtime: r.name, Kind: kind, Version: version, Command: argv}
	return localexec.RecordFunc(func(ctx context.Context, handle []byte) (func(), error) {
		p.Handle = handle
		return r.procs.AddProcess(ctx, p)
	})
}
