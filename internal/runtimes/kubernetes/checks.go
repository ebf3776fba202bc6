package kubernetes

import (
	"context"

	"github.com/drover-dev/drover/internal/runtimes"
)

// RunCheck implements runtimes.CheckRunner: the release channels'
// protection and extension commands run through the runner given to
// SetCheckRunner (drover's composition root gives a custom runtime whose
// commands run as Jobs on this cluster).
func (r *Runtime) RunCheck(ctx context.Context, t runtimes.Target, chk runtimes.CheckCommand) (runtimes.CheckOutcome, error) {
	if err := r.closed(); err != nil {
		return runtimes.CheckOutcome{}, err
	}
	return r.CheckDelegate.RunCheck(ctx, t, chk)
}
