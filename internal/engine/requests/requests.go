// Package requests holds the engine's rules for the requests people make
// of an instance (pause, resume, rollback, approve, bypass). They are pure:
// no I/O, no clock. The server reads the instance, calls one, and writes
// the result with the instance's revision, so a concurrent engine pass
// cannot overwrite it unnoticed. The planner (internal/engine) names the
// approval topics it reads through this package, so both agree on them.
package requests

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	ds "github.com/drover-dev/drover/internal/desiredstate"
	"github.com/drover-dev/drover/internal/store"
)

// ErrNothingToRollBack is returned when an instance has no earlier converged version.
var ErrNothingToRollBack = errors.New("no earlier converged version to roll back to")

// ErrNotWaitingForApproval is returned when an approval would change nothing.
var ErrNotWaitingForApproval = errors.New("not waiting for an approval")

// ErrAlreadyAnswered is returned when the user already approved or rejected
// the approval: one person counts once.
var ErrAlreadyAnswered = errors.New("already answered")

// ErrNoSuchCheck is wrapped by BypassableChecks when the channel has no
// check of the name given.
var ErrNoSuchCheck = errors.New("no such protection")

// ActionTopic is the approval topic of the n-th apply of a channel that needs
// its own approval (everyAction).
func ActionTopic(rc string, n int) string { return fmt.Sprintf("%s/apply-%d", rc, n) }

// BypassTopic is the approval topic that records a bypass of the checks of
// one protection attachment (or extension) of a channel: an approval with
// it, for the desired state, lets every phase of that attachment pass.
func BypassTopic(attachment string) string { return "bypass:" + attachment }

// Attachment names what a bypass of chk names: its attachment, or the
// extension.
func Attachment(chk ds.Check) string {
	if chk.Attachment != "" {
		return chk.Attachment
	}
	return chk.Name
}

func userEvent(inst store.Instance, typ ds.EventType, user, msg string, now time.Time) store.Event {
	return store.Event{
		Time: now, Application: inst.Application, Service: inst.Service, ReleaseChannel: inst.ReleaseChannel,
		DesiredStateID: inst.DesiredStateID, Type: typ, Actor: user, Message: msg,
	}
}

// Pause stops applies to the instance until Resume.
func Pause(inst store.Instance, user string, now time.Time) (store.Instance, store.Event, bool) {
	if inst.Paused {
		return inst, store.Event{}, false
	}
	inst.Paused = true
	inst.Status, inst.Reason, inst.Message = ds.StatusPaused, ds.ReasonPaused, "paused by "+user
	inst.UpdatedAt = now
	return inst, userEvent(inst, ds.EventPaused, user, inst.ReleaseChannel+": paused by "+user, now), true
}

// Resume lets the engine apply to the instance again; its status is
// recomputed on the next pass.
func Resume(inst store.Instance, user string, now time.Time) (store.Instance, store.Event, bool) {
	if !inst.Paused {
		return inst, store.Event{}, false
	}
	inst.Paused = false
	switch {
	case inst.RollbackFrom != "" && inst.TargetVersion != "" && inst.CurrentVersion == inst.TargetVersion:
		inst.Status = ds.StatusRolledBack
	case inst.RollbackFrom != "" && inst.TargetVersion != "":
		inst.Status = ds.StatusRollingBack
	case inst.TargetVersion != "" && inst.CurrentVersion == inst.TargetVersion && inst.CurrentStateID == inst.TargetStateID:
		// It was converged: keep it so, and drift found now is healed as
		// drift (with its approval, when everyAction asks for one).
		inst.Status = ds.StatusConverged
	case inst.FailedVersion != "" && inst.FailedVersion == inst.TargetVersion:
		inst.Status = ds.StatusFailed
	default:
		inst.Status = ds.StatusPending
	}
	inst.Reason, inst.Message = "", "resumed by "+user
	inst.UpdatedAt = now
	return inst, userEvent(inst, ds.EventResumed, user, inst.ReleaseChannel+": resumed by "+user, now), true
}

// Rollback points the instance back at its last converged version (or the
// one before, when the last converged version is the one to leave). The
// instance stays there until the next push.
func Rollback(inst store.Instance, user string, now time.Time) (store.Instance, store.Event, error) {
	from := inst.TargetVersion
	if from == "" {
		from = inst.CurrentVersion
	}
	toState, toVersion := inst.CurrentStateID, inst.CurrentVersion
	if toVersion == "" || toVersion == from {
		toState, toVersion = inst.PreviousStateID, inst.PreviousVersion
	}
	if toVersion == "" || toVersion == from {
		return inst, store.Event{}, fmt.Errorf("release channel %s: %w", inst.ReleaseChannel, ErrNothingToRollBack)
	}
	inst.RollbackFrom = from
	inst.RollbackReason = "manual rollback by " + user
	inst.ActionPending = false
	inst.TargetStateID, inst.TargetVersion = toState, toVersion
	inst.ApplyAttempts = 0
	inst.LastApplyAt = time.Time{}
	inst.Status, inst.Reason = ds.StatusRollingBack, ""
	inst.Message = fmt.Sprintf("rollback from %s to %s requested by %s", from, toVersion, user)
	inst.UpdatedAt = now
	return inst, userEvent(inst, ds.EventRollback, user, fmt.Sprintf("%s: rollback from %s to %s requested by %s", inst.ReleaseChannel, from, toVersion, user), now), nil
}

// Channel is the release channel an approval is asked of, as the active
// desired state has it: the compiled channel (its gates) and the version it
// converges to, with the desired state that holds that version (StateID).
type Channel struct {
	*ds.Channel
	Version string
	StateID string
}

// PendingApproval returns the gate of ch that an approval by user would count
// toward: the named topic, or the only gate still short of approvers. It
// fails with ErrAlreadyAnswered when user already answered that gate, and
// with ErrNotWaitingForApproval when an approval would change nothing.
// approvals are those of ch's desired state; user is normalized.
func PendingApproval(ch Channel, inst store.Instance, approvals []store.Approval, topic, user string) (ds.Approval, error) {
	if inst.ActionPending && inst.DesiredStateID == ch.StateID {
		action := ActionTopic(ch.Name, inst.ActionSeq)
		if topic == "" || topic == action {
			g := ds.Approval{Topic: action, Description: "apply after drift", MinApprovers: 1}
			return g, answeredBy(ch.Name, g, approvals, user)
		}
	}
	if inst.TargetVersion == ch.Version && inst.TargetStateID == ch.StateID {
		return ds.Approval{}, fmt.Errorf("release channel %s already received %s: %w", ch.Name, ch.Version, ErrNotWaitingForApproval)
	}
	switch inst.Status {
	case ds.StatusFailed, ds.StatusRolledBack, ds.StatusRollingBack, ds.StatusFailedRollback:
		return ds.Approval{}, fmt.Errorf("release channel %s is %s: %w", ch.Name, inst.Status, ErrNotWaitingForApproval)
	default:
		// Any other status may be waiting for an approval.
	}
	var open []ds.Approval
	for _, g := range ch.Approvals {
		n := 0
		seen := map[string]bool{}
		for _, a := range approvals {
			if a.ReleaseChannel == ch.Name && a.Topic == g.Topic && !a.Reject && !seen[a.User] {
				seen[a.User] = true
				n++
			}
		}
		if topic != "" && g.Topic == topic {
			if err := answeredBy(ch.Name, g, approvals, user); err != nil {
				return ds.Approval{}, err
			}
			if n >= g.MinApprovers {
				return ds.Approval{}, fmt.Errorf("approval %q of %s already has %d/%d approvals: %w", topic, ch.Name, n, g.MinApprovers, ErrNotWaitingForApproval)
			}
			return g, nil
		}
		if n < g.MinApprovers {
			open = append(open, g)
		}
	}
	switch {
	case topic != "":
		return ds.Approval{}, fmt.Errorf("release channel %s has no approval %q: %w", ch.Name, topic, ErrNotWaitingForApproval)
	case len(ch.Approvals) == 0:
		return ds.Approval{}, fmt.Errorf("release channel %s has no manual approval precondition: %w", ch.Name, ErrNotWaitingForApproval)
	case len(open) == 0:
		for _, g := range ch.Approvals {
			if err := answeredBy(ch.Name, g, approvals, user); err != nil {
				return ds.Approval{}, err
			}
		}
		return ds.Approval{}, fmt.Errorf("release channel %s has all its approvals: %w", ch.Name, ErrNotWaitingForApproval)
	case len(open) > 1:
		return ds.Approval{}, fmt.Errorf("release channel %s waits for several approvals; name one with --topic", ch.Name)
	}
	return open[0], answeredBy(ch.Name, open[0], approvals, user)
}

// answeredBy fails with ErrAlreadyAnswered if user approved or rejected gate g
// of release channel rc.
func answeredBy(rc string, g ds.Approval, approvals []store.Approval, user string) error {
	for _, a := range approvals {
		if a.ReleaseChannel != rc || a.Topic != g.Topic || a.User != user {
			continue
		}
		verb := "approved"
		if a.Reject {
			verb = "rejected"
		}
		what := rc
		if g.Topic != rc {
			what = fmt.Sprintf("%s (approval %s)", rc, g.Topic)
		}
		return fmt.Errorf("%s already %s %s; each person counts once: %w", user, verb, what, ErrAlreadyAnswered)
	}
	return nil
}

// BypassableChecks returns the attachment a bypass of name (an attachment
// or protection name, or an extension) on ch applies to, with its checks.
func BypassableChecks(ch *ds.Channel, name string) (string, []ds.Check, error) {
	var names []string
	for _, chk := range ch.Checks {
		if a := Attachment(chk); a == name || chk.Name == name {
			var out []ds.Check
			for _, c := range ch.Checks {
				if Attachment(c) == a {
					out = append(out, c)
				}
			}
			return a, out, nil
		}
		if a := Attachment(chk); !slices.Contains(names, a) {
			names = append(names, a)
		}
	}
	if len(names) == 0 {
		return "", nil, fmt.Errorf("release channel %s has no protection or extension: %w", ch.Name, ErrNoSuchCheck)
	}
	return "", nil, fmt.Errorf("release channel %s has no protection %q (it has: %s): %w", ch.Name, name, strings.Join(names, ", "), ErrNoSuchCheck)
}
