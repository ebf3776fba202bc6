package engine

import (
	"errors"
	"time"

	ds "github.com/drover-dev/drover/internal/desiredstate"
)

// ActionKind says what an action does.
type ActionKind string

// Action kinds.
const (
	// ActionApply drives a release channel to a version through its runtime.
	ActionApply ActionKind = "apply"
	// ActionRunCheck runs a protection or convergence extension for a
	// release channel in one lifecycle phase (see Action.Check).
	ActionRunCheck ActionKind = "runCheck"
	// ActionDelete removes what a release channel runs from its runtime.
	ActionDelete ActionKind = "delete"
)

// Action is one thing a plan decides for one release channel of a service.
// The planner returns them; an Executor carries them out. An action is
// plain data, so that it can be stored and carried out elsewhere.
type Action struct {
	Kind           ActionKind `json:"kind"`
	ReleaseChannel string     `json:"releaseChannel"`
	// StateID and Version are the desired state and version the action is
	// for: what to apply, what a check guards, what to delete.
	StateID string `json:"stateId"`
	Version string `json:"version"`
	// Runtime is the runtime of the release channel.
	Runtime string `json:"runtime"`
	// Rollback marks an apply that returns to an earlier version.
	Rollback bool `json:"rollback,omitempty"`
	// Check is the check to run (ActionRunCheck only).
	Check *ds.Check `json:"check,omitempty"`
}

// taskInstance is the task instance of a: its release channel, or for a
// check its own (CheckTaskInstance).
func (a Action) taskInstance() string {
	if a.Kind == ActionRunCheck && a.Check != nil {
		return CheckTaskInstance(a.ReleaseChannel, *a.Check)
	}
	return a.ReleaseChannel
}

// Result is what carrying out an action (or reconciling a service) asks of
// the work queue, when it returns no error:
//
//   - Result{}: nothing; the service is planned again on its next trigger
//     (a push, an approval, a runtime's change notice, a durable write).
//   - Result{Requeue: true}: plan the service again now (an apply ended:
//     observe its effect).
//   - Result{RequeueAfter: d}: plan the service again after d; RequeueAfter
//     wins over Requeue.
//
// With an error the result is ignored: the service is planned again after
// an exponential backoff per service (doubling from Settings.RetryBackoff up
// to Settings.MaxBackoff, reset by the next success), unless the error is
// Terminal: then it is logged and the service waits for its next trigger.
type Result struct {
	Requeue      bool
	RequeueAfter time.Duration
}

// Terminal marks err as one that retrying cannot fix (a malformed action, an
// unsupported kind): the work queue does not retry it.
func Terminal(err error) error {
	if err == nil {
		return nil
	}
	return &terminalError{err}
}

type terminalError struct{ err error }

func (e *terminalError) Error() string { return e.err.Error() }
func (e *terminalError) Unwrap() error { return e.err }

// IsTerminal reports whether err, or an error it wraps, was marked Terminal.
func IsTerminal(err error) bool {
	var t *terminalError
	return errors.As(err, &t)
}
