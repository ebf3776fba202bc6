package engine

import (
	"slices"
	"time"

	ds "github.com/drover-dev/drover/internal/desiredstate"
	"github.com/drover-dev/drover/internal/store"
)

// Check states in a CheckReport.
const (
	CheckPassed       = "passed"       // a once-phase check passed for this version
	CheckPassing      = "passing"      // it passes now
	CheckFailing      = "failing"      // it fails now: it holds the channel in its phase
	CheckPending      = "pending"      // a command check has no outcome yet (running, or could not run)
	CheckBypassed     = "bypassed"     // someone bypassed it for this desired state
	CheckNotEvaluated = "notEvaluated" // drover does not evaluate it yet: it holds the channel
)

// CheckReport is what people are told of one check of a channel: its
// state, why, and when its outcome can change next.
type CheckReport struct {
	Check      ds.Check
	State      string
	Message    string
	NextChange time.Time
	BypassedBy string
	// LastRun and Runs: a command check's last run for the desired
	// state, and how many ran.
	LastRun time.Time
	Runs    int
}

// CheckReports reports on the checks of ch at now, for the instance inst
// and the approvals of its desired state (which hold the bypasses); it
// evaluates what the planner evaluates, the same way.
//
// others are the service's other instances: a shared extension run's
// result may be recorded on any of them.
func CheckReports(ch Channel, inst store.Instance, others []store.Instance, approvals []store.Approval, now time.Time) []CheckReport {
	out := make([]CheckReport, 0, len(ch.Checks))
	for _, chk := range ch.Checks {
		r := CheckReport{Check: chk}
		topic := BypassTopic(checkAttachment(chk))
		for _, a := range approvals {
			if a.DesiredStateID == ch.StateID && a.ReleaseChannel == ch.Name && a.Topic == topic && !a.Reject {
				r.State, r.BypassedBy = CheckBypassed, a.User
			}
		}
		switch {
		case r.State == CheckBypassed:
			r.Message = "bypassed by " + r.BypassedBy
		case !enforced(chk):
			r.State, r.Message = CheckNotEvaluated, "drover does not evaluate this check yet: it holds the channel unless bypassed"
		case chk.Lifecycle != ds.PhaseDeployment && inst.DesiredVersion == ch.Version && slices.Contains(inst.Satisfied, chk.Key()+"@"+ch.Version):
			r.State, r.Message = CheckPassed, "passed for "+ch.Version
		case chk.Lifecycle == ds.PhaseDeployment && inst.TargetStateID == ch.StateID && inst.TargetVersion == ch.Version &&
			(chk.FailureBehavior != ds.FailureFail || inst.Status == ds.StatusConverged):
			// Its deployment started (and, for FAIL, ended): it held.
			r.State, r.Message = CheckPassed, "passed when the deployment of "+ch.Version+" started"
		case chk.Lifecycle == ds.PhasePostDeployment && inst.Status == ds.StatusConverged && inst.CurrentVersion == ch.Version && inst.DesiredStateID == ch.StateID:
			r.State, r.Message = CheckPassed, "held for its duration after the deployment of "+ch.Version
		case chk.Builtin != nil:
			res := chk.Builtin.Evaluate(now)
			r.State, r.Message, r.NextChange = CheckFailing, res.Message, res.Until
			if res.Pass {
				r.State = CheckPassing
			}
		default:
			res := lastResult(inst, ch, chk)
			for _, o := range others {
				if r := lastResult(o, ch, chk); chk.Shared != "" && r != nil && (res == nil || r.At.After(res.At)) {
					res = r
				}
			}
			switch {
			case res == nil:
				r.State, r.Message = CheckPending, "not run yet for this desired state"
			case res.Error != "":
				r.State, r.Message = CheckPending, "could not run: "+res.Error
			case res.Passed:
				r.State, r.Message = CheckPassing, res.Message
			default:
				r.State, r.Message = CheckFailing, res.Message
			}
			if res != nil {
				r.LastRun, r.Runs = res.At, res.Runs
				if !isExtension(chk) || !res.Passed {
					r.NextChange = res.At.Add(rerunAfter(chk, res, DefaultSettings()))
				}
			}
		}
		out = append(out, r)
	}
	return out
}
