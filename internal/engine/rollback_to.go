package engine

import (
	"errors"
	"fmt"
	"slices"

	ds "github.com/drover-dev/drover/internal/desiredstate"
	"github.com/drover-dev/drover/internal/store"
)

// ErrNotAVersionOf is returned when a rollback target is not an earlier
// version of the service's release channel (unknown, never had the channel,
// or the version the channel runs or converges to already).
var ErrNotAVersionOf = errors.New("not a version to roll back to")

// RollbackTo is the compiled form of the desired state that rolls release
// channel rc back to the version target holds for it, pushed over active
// (decoded as compiled and as activeD): rc converges to target's copy of
// the channel (its objects, environment and runtime), gated by the
// channel's current approvals, protections and freezes, without waiting
// for the channels it depends on; every other channel is held where its
// instance is (insts, by channel), so it neither rolls out nor rolls back.
// Once stored as a new desired state, the engine plans it like any push.
func RollbackTo(active *ds.Compiled, activeD, target *Desired, rc string, insts map[string]store.Instance) (*ds.Compiled, error) {
	at := slices.IndexFunc(activeD.Channels, func(c Channel) bool { return c.Name == rc })
	if at < 0 || len(active.Channels) != len(activeD.Channels) {
		return nil, fmt.Errorf("service %s/%s has no release channel %s now: %w", activeD.Application, activeD.Service, rc, ErrNotAVersionOf)
	}
	tat := slices.IndexFunc(target.Channels, func(c Channel) bool { return c.Name == rc })
	if tat < 0 {
		return nil, fmt.Errorf("version %s (desired state %s) never had release channel %s: %w",
			ds.VersionLabel(target.Version, target.DisplayName), target.ID, rc, ErrNotAVersionOf)
	}
	to := target.Channels[tat]
	inst, ok := insts[rc]
	switch {
	case ok && inst.CurrentVersion == to.Version && inst.TargetVersion == to.Version:
		return nil, fmt.Errorf("release channel %s runs %s already: %w", rc, ds.VersionLabel(to.Version, to.DisplayName), ErrNotAVersionOf)
	case ok && inst.TargetVersion == to.Version:
		return nil, fmt.Errorf("release channel %s is rolling out %s already: %w", rc, ds.VersionLabel(to.Version, to.DisplayName), ErrNotAVersionOf)
	case activeD.Channels[at].Version == to.Version:
		return nil, fmt.Errorf("%s is the version release channel %s is to run already: %w", ds.VersionLabel(to.Version, to.DisplayName), rc, ErrNotAVersionOf)
	}
	out := *active
	out.Channels = make([]ds.Channel, len(active.Channels))
	for i, cur := range active.Channels {
		ach := activeD.Channels[i]
		if i == at {
			ch := to.Channel
			// The channel's gates are today's, not those of the version's
			// config: a rollback is gated like any apply.
			ch.Name, ch.Group, ch.Labels, ch.DependsOn = cur.Name, cur.Group, cur.Labels, cur.DependsOn
			ch.Approvals, ch.EveryAction, ch.Checks = cur.Approvals, cur.EveryAction, cur.Checks
			ch.AutoRollback, ch.ProgressDeadline = cur.AutoRollback, cur.ProgressDeadline
			ch.Held = &ds.Held{StateID: to.StateID, Version: to.Version, DisplayName: to.DisplayName, Rollback: true}
			out.Channels[i] = ch
			continue
		}
		held := &ds.Held{StateID: ach.StateID, Version: ach.Version, DisplayName: ach.DisplayName}
		if in, ok := insts[cur.Name]; ok && in.TargetStateID != "" && rolledBack(in.Status) {
			// A channel pinned to an earlier version by a rollback stays
			// pinned; its copy is the version's own.
			held = &ds.Held{StateID: in.TargetStateID, Version: in.TargetVersion, DisplayName: heldName(in, ach)}
		}
		cur.Held = held
		out.Channels[i] = cur
	}
	return &out, nil
}

// rolledBack reports whether an instance in status st is pinned to a
// rollback target.
func rolledBack(st ds.Status) bool {
	return st == ds.StatusRollingBack || st == ds.StatusRolledBack || st == ds.StatusFailedRollback
}

// heldName is the display name of the version inst targets, when known.
func heldName(inst store.Instance, ch Channel) string {
	if inst.TargetVersion == ch.Version {
		return ch.DisplayName
	}
	return ""
}
