package engine

import (
	"slices"
	"time"

	ds "github.com/drover-dev/drover/internal/desiredstate"
	"github.com/drover-dev/drover/internal/store"
)

// Patch is what an action's outcome changes on its instance, as data (like
// an Action): it can be carried from the runner to the pass that records
// it, stored or logged, and compared in tests. Zero fields change nothing.
// It is applied only while the instance still targets what the action was
// for (Action.changes).
type Patch struct {
	// AppliedAt records that an apply returned then: the plan waits for
	// the runtime to show the version (its grace period) from it.
	AppliedAt time.Time `json:"appliedAt,omitzero"`
	// RuntimeMemo replaces what the runtime asked to remember of the
	// instance.
	RuntimeMemo string `json:"runtimeMemo,omitempty"`
	// Reason and Message replace the instance's (when Reason is set).
	Reason  ds.Reason `json:"reason,omitempty"`
	Message string    `json:"message,omitempty"`
	// ApplyAttempts sets the instance's apply attempts (a permanent
	// failure sets them to the limit: no more tries).
	ApplyAttempts int `json:"applyAttempts,omitempty"`
	// RefundAttempt takes the last apply attempt back, keeping one (an
	// apply whose runtime could not be reached was no attempt, and the
	// plan still waits its backoff before the next).
	RefundAttempt bool `json:"refundAttempt,omitempty"`
	// Check replaces the instance's result of the same check (by Key).
	Check *store.CheckResult `json:"check,omitempty"`
}

// Apply changes inst as p says (a nil p changes nothing).
func (p *Patch) Apply(inst *store.Instance) {
	if p == nil {
		return
	}
	if !p.AppliedAt.IsZero() {
		inst.AppliedAt = p.AppliedAt
	}
	if p.RuntimeMemo != "" {
		inst.RuntimeMemo = p.RuntimeMemo
	}
	if p.Reason != "" {
		inst.Reason, inst.Message = p.Reason, p.Message
	}
	switch {
	case p.ApplyAttempts > 0:
		inst.ApplyAttempts = p.ApplyAttempts
	case p.RefundAttempt && inst.ApplyAttempts > 1:
		inst.ApplyAttempts--
	}
	if p.Check != nil {
		checks := slices.DeleteFunc(slices.Clone(inst.Checks), func(r store.CheckResult) bool { return r.Key == p.Check.Key })
		inst.Checks = append(checks, *p.Check)
	}
}
