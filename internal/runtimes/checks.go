package runtimes

import (
	"context"
	"errors"
	"sync"
)

// CheckRunnerCloser runs protection commands and is closed with the
// runtime that delegates to it.
type CheckRunnerCloser interface {
	CheckRunner
	Close() error
}

// CheckDelegate lets a runtime that does not run commands itself (a
// Kubernetes or fake runtime) run its release channels' protection and
// extension commands through another runner the composition root gives it
// (Jobs on the cluster; processes on the server's host). Embedded, it
// makes the runtime a CheckRunner.
type CheckDelegate struct {
	mu sync.Mutex
	c  CheckRunnerCloser
}

// SetCheckRunner sets the runner; the runtime closes it with CloseChecks.
func (d *CheckDelegate) SetCheckRunner(c CheckRunnerCloser) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.c = c
}

// RunCheck implements CheckRunner through the runner set.
func (d *CheckDelegate) RunCheck(ctx context.Context, t Target, chk CheckCommand) (CheckOutcome, error) {
	d.mu.Lock()
	c := d.c
	d.mu.Unlock()
	if c == nil {
		return CheckOutcome{}, errors.New("this runtime cannot run protection commands here")
	}
	return c.RunCheck(ctx, t, chk)
}

// CloseChecks closes the runner set, if any.
func (d *CheckDelegate) CloseChecks() {
	d.mu.Lock()
	c := d.c
	d.c = nil
	d.mu.Unlock()
	if c != nil {
		_ = c.Close()
	}
}
