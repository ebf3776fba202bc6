package kubernetes

import (
	"context"
	"fmt"

	"github.com/drover-dev/drover/internal/runtimes"
)

// CheckRunnerCloser runs protection commands and is closed with the runtime.
type CheckRunnerCloser interface {
	runtimes.CheckRunner
	Close() error
}

// SetCheckRunner gives the runtime what runs the protection and extension
// commands of its release channels on its cluster (as Jobs: drover's
// composition root passes a custom runtime whose commands run as Jobs
// there). It is closed with the runtime.
func (r *Runtime) SetCheckRunner(c CheckRunnerCloser) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.checks = c
}

// RunCheck implements runtimes.CheckRunner through the runner given to
// SetCheckRunner.
func (r *Runtime) RunCheck(ctx context.Context, t runtimes.Target, chk runtimes.CheckCommand) (runtimes.CheckOutcome, error) {
	if err := r.closed(); err != nil {
		return runtimes.CheckOutcome{}, err
	}
	r.mu.Lock()
	c := r.checks
	r.mu.Unlock()
	if c == nil {
		return runtimes.CheckOutcome{}, fmt.Errorf("kubernetes runtime %s cannot run protection commands here", r.name)
	}
	return c.RunCheck(ctx, t, chk)
}
