package engine

import (
	"time"

	ds "github.com/drover-dev/drover/internal/desiredstate"
	"github.com/drover-dev/drover/internal/engine/requests"
	"github.com/drover-dev/drover/internal/runtimes"
	"github.com/drover-dev/drover/internal/store"
)

// Desired is the engine's view of a service's active desired state.
type Desired struct {
	ID          string
	Application string
	Service     string
	Version     string
	// DisplayName names Version for people ("" when it has none).
	DisplayName string
	// Channels are the release channels in declaration order.
	Channels []Channel
	// Release is the release the desired state was pushed in (nil: a
	// push of its own).
	Release *ds.Release
	// Graces are the convergence graces the channels' runtimes report,
	// by channel index (nil: none). PlanService uses them for channels
	// that set none themselves. They are kept beside Channels, not in a
	// copy of them, so a cached desired state is held once.
	Graces []time.Duration
}

// Channel is what one release channel must converge to, and under which
// conditions: the compiled channel, with the version and the desired state
// that holds it (StateID).
type Channel struct {
	ds.Channel
	Version string
	StateID string
	// DisplayName names Version for people ("" when it has none).
	DisplayName string
}

// The gates a channel declares that this engine does not evaluate yet
// (convergence extensions, commitDenylist with ranges) hold the channel
// unless bypassed, so nothing is deployed past a check nobody ran
// (planner.unenforced).

// enforced reports whether the engine evaluates chk: a builtin protection
// (alwaysPassing, alwaysFailing, allowedTimes), a command protection or a
// gate (evaluated by its kind's evaluator, which says "could not run" when
// this engine has none), in any lifecycle phase.
func enforced(chk ds.Check) bool {
	switch chk.Kind {
	case ds.CheckProtection:
		if chk.Builtin == nil && len(chk.Command) == 0 && chk.Gate == nil {
			return false
		}
	case ds.CheckConvergenceExtension:
		if len(chk.Command) == 0 {
			return false
		}
	default:
		return false
	}
	return phaseOf(chk) != ""
}

// phaseApproval is the phase of convergence extensions that run while the
// channel waits for its approvals (APPROVAL); protections have none.
const phaseApproval = "approval"

// phaseOf is the lifecycle phase chk belongs to, by the protections' names
// (an extension's PRE_APPROVAL is preApproval, ...; APPROVAL is
// phaseApproval), or "" for one the engine does not know.
func phaseOf(chk ds.Check) string {
	if chk.Kind == ds.CheckConvergenceExtension {
		switch chk.Lifecycle {
		case ds.ExtPreApproval:
			return ds.PhasePreApproval
		case ds.ExtApproval:
			return phaseApproval
		case ds.ExtPostApproval:
			return ds.PhasePostApproval
		case ds.ExtDeployment:
			return ds.PhaseDeployment
		case ds.ExtPostDeployment:
			return ds.PhasePostDeployment
		}
		return ""
	}
	switch chk.Lifecycle {
	case ds.PhasePreApproval, ds.PhasePostApproval, ds.PhaseDeployment, ds.PhasePostDeployment:
		return chk.Lifecycle
	}
	return ""
}

// isExtension reports whether chk is a convergence extension: it runs until
// it succeeds once per desired state, and never fails a channel.
func isExtension(chk ds.Check) bool { return chk.Kind == ds.CheckConvergenceExtension }

// CheckTaskInstance is the task instance of the runs of a command check of
// release channel rc: its own, so a check runs beside an apply of the
// channel, and one run of each check is open at a time.
func CheckTaskInstance(rc string, chk ds.Check) string {
	if chk.Shared != "" {
		return "shared#" + chk.RunKey() // one run for every channel sharing it
	}
	return rc + "#" + chk.RunKey()
}

// Gate is a manual approval precondition.
type Gate = ds.Approval

// Observation is the last fetch of one instance.
type Observation struct {
	State runtimes.State
	// Err is set when the fetch failed; State is then meaningless.
	Err string
	// Applying is set while the instance has an open task (an apply
	// enqueued or running, here or in another engine sharing the store).
	Applying bool
}

// Settings are the engine's timing and retry knobs.
type Settings struct {
	// MaxApplyAttempts is how many times an apply is tried (and re-tried
	// when the runtime does not show the version) before the instance fails.
	MaxApplyAttempts int
	// ApplyBackoff is the base of the exponential backoff between attempts.
	ApplyBackoff time.Duration
	// MaxBackoff caps the backoff.
	MaxBackoff time.Duration
	// RetryBackoff is the base of the exponential backoff before a service
	// whose pass or action failed (store trouble, say) is tried again.
	RetryBackoff time.Duration
	// ConvergenceGrace is how long after an apply a runtime may still show
	// the old version before the engine applies again.
	ConvergenceGrace time.Duration
	// ProgressDeadline fails a rollout that has not converged by then.
	ProgressDeadline time.Duration
	// PollInterval is the fetch interval while converging; SteadyPollInterval
	// once converged (to catch drift). Runtimes that push changes are
	// observed sooner.
	PollInterval       time.Duration
	SteadyPollInterval time.Duration
	// CheckInterval is how often a command check runs again when its
	// protection sets no pollInterval.
	CheckInterval time.Duration
}

// DefaultSettings are the defaults of reference.md §4.7.
func DefaultSettings() Settings {
	return Settings{
		MaxApplyAttempts:   5,
		ApplyBackoff:       time.Second,
		MaxBackoff:         time.Minute,
		RetryBackoff:       500 * time.Millisecond,
		ConvergenceGrace:   10 * time.Minute,
		ProgressDeadline:   10 * time.Minute,
		PollInterval:       30 * time.Second,
		SteadyPollInterval: 5 * time.Minute,
		CheckInterval:      30 * time.Second,
	}
}

// PlanInput is everything the planner decides from.
type PlanInput struct {
	Now     time.Time
	Desired *Desired
	// Instances are the stored instances by release channel; the planner
	// does not change them.
	Instances map[string]*store.Instance
	Observed  map[string]Observation
	Approvals []store.Approval
	// Freezes are the freezes in force (drover freeze); the planner
	// applies those whose scope covers a channel.
	Freezes []ds.Freeze
	// Running holds the task instances of open tasks: a command check
	// whose CheckTaskInstance is there is running.
	Running map[string]bool
	// Services are the instances of the services the channels wait for
	// (service.dependsOn).
	Services ServiceDependencies
	// ActiveStates are the active desired states of the services the
	// channels wait for that are in the desired state's release.
	ActiveStates ActiveStates
	Settings     Settings
}

// Plan is the planner's decision for one service.
type Plan struct {
	// Instances are the instance records to write (only changed ones).
	Instances []store.Instance
	// Events to append with them.
	Events []store.Event
	// Actions to carry out once the writes are durable.
	Actions []Action
	// RequeueAfter asks for another pass after this long (0 = only on a trigger).
	RequeueAfter time.Duration
}

// ActionTopic is the approval topic of the n-th apply of a channel that needs
// its own approval (everyAction): requests.ActionTopic.
func ActionTopic(rc string, n int) string { return requests.ActionTopic(rc, n) }

// BypassTopic is the approval topic that records a bypass of the checks of
// one protection attachment (or extension): requests.BypassTopic.
func BypassTopic(attachment string) string { return requests.BypassTopic(attachment) }

// checkAttachment names what a bypass of chk names (requests.Attachment).
func checkAttachment(chk ds.Check) string { return requests.Attachment(chk) }
