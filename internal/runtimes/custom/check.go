package custom

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/drover-dev/drover/internal/customspec"
	"github.com/drover-dev/drover/internal/runtimes"
)

// kindCheck is the kind of a protection command's runs (drover runs).
const kindCheck = "check"

// DefaultCheckTimeout bounds a protection command that sets no timeout.
const DefaultCheckTimeout = 10 * time.Minute

// RunCheck implements runtimes.CheckRunner: it runs a protection's command
// for the instance (on this host, or as a Job when the runtime's commands
// run as Jobs), with the instance's env and the PVN_* and DROVER_*
// variables, and records the run (kind "check"). Exit code 0 passes; any
// other exit, or a timeout, fails. A command that could not start (or was
// canceled) is an error: it says nothing about the check.
func (r *Runtime) RunCheck(ctx context.Context, t runtimes.Target, chk runtimes.CheckCommand) (runtimes.CheckOutcome, error) {
	if err := ctx.Err(); err != nil {
		return runtimes.CheckOutcome{}, err
	}
	var spec customspec.ProtectionCommand
	if err := json.Unmarshal(chk.Spec, &spec); err != nil {
		return runtimes.CheckOutcome{}, r.permanent(&t, "protection %s: undecodable command: %v", chk.Name, err)
	}
	c, err := r.build(kindCheck, &t, spec.TaskConfig, spec.KubernetesConfig, spec.Env, spec.Timeout.Or(DefaultCheckTimeout))
	if err != nil {
		return runtimes.CheckOutcome{}, fmt.Errorf("protection %s: %w", chk.Name, err)
	}
	res := r.run(ctx, t.InstanceKey, t.Version, c)
	switch {
	case res.Canceled || res.NotStarted:
		return runtimes.CheckOutcome{}, fmt.Errorf("protection %s: %s", chk.Name, r.describeFailure(c, res))
	case res.TimedOut:
		return runtimes.CheckOutcome{Message: r.describeFailure(c, res) + excerpt(res)}, nil
	case res.Err != nil:
		return runtimes.CheckOutcome{}, fmt.Errorf("protection %s: %s", chk.Name, r.describeFailure(c, res))
	case res.ExitCode == 0:
		return runtimes.CheckOutcome{Passed: true, Message: lastLine(res.stdout, res.stderr)}, nil
	}
	msg := fmt.Sprintf("exit code %d", res.ExitCode)
	if line := lastLine(res.stderr, res.stdout); line != "" {
		msg += ": " + line
	}
	return runtimes.CheckOutcome{Message: msg}, nil
}

// lastLine is the last non-empty line of the first output that has one,
// at most 300 bytes.
func lastLine(outputs ...string) string {
	for _, out := range outputs {
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if line := strings.TrimSpace(lines[len(lines)-1]); line != "" {
			if len(line) > 300 {
				line, _ = tail(line, 300)
				line = "…" + line
			}
			return line
		}
	}
	return ""
}
