package state

import (
	"time"

	ds "github.com/drover-dev/drover/internal/desiredstate"
)

// Instance is the engine's durable state of a service in one release channel.
type Instance struct {
	Application    string `json:"application"`
	Service        string `json:"service"`
	ReleaseChannel string `json:"releaseChannel"`
	// DesiredStateID is the desired state the instance is converging toward.
	DesiredStateID string `json:"desiredStateId"`
	// TargetStateID and TargetVersion are what was last applied (the target):
	// the desired state once its preconditions held, an older one while
	// waiting, or the rollback version.
	TargetStateID string `json:"targetStateId,omitempty"`
	TargetVersion string `json:"targetVersion,omitempty"`
	// CurrentStateID and CurrentVersion are the last version seen converged.
	CurrentStateID string    `json:"currentStateId,omitempty"`
	CurrentVersion string    `json:"currentVersion,omitempty"`
	Status         ds.Status `json:"status"`
	Reason         ds.Reason `json:"reason,omitempty"`
	Message        string    `json:"message,omitempty"`
	Paused         bool      `json:"paused,omitempty"`
	// ApplyAttempts counts applies of the target since it last changed or progressed.
	ApplyAttempts int       `json:"applyAttempts,omitempty"`
	LastApplyAt   time.Time `json:"lastApplyAt,omitzero"`
	ConvergedAt   time.Time `json:"convergedAt,omitzero"`
	UpdatedAt     time.Time `json:"updatedAt,omitzero"`
	// PreviousStateID and PreviousVersion were converged before the current
	// version: the rollback target when the current version is the bad one.
	PreviousStateID string `json:"previousStateId,omitempty"`
	PreviousVersion string `json:"previousVersion,omitempty"`
	// DesiredVersion is the version of the desired state the bookkeeping
	// below belongs to.
	DesiredVersion string `json:"desiredVersion,omitempty"`
	// Satisfied lists release channel conditions already met, as
	// "<channel>@<version>"; they carry over when a push of the same version
	// replaces the desired state.
	Satisfied []string `json:"satisfied,omitempty"`
	// RollbackFrom is the version being rolled back from, and
	// RollbackReason why, for people.
	RollbackFrom   string `json:"rollbackFrom,omitempty"`
	RollbackReason string `json:"rollbackReason,omitempty"`
	// FailedVersion is the version that failed (not retried until a new push).
	FailedVersion string `json:"failedVersion,omitempty"`
	// Healed counts drift corrections since the last push.
	Healed int `json:"healed,omitempty"`
	// ActionSeq numbers the applies that needed their own approval
	// (everyAction); ActionPending is set while one waits for it.
	ActionSeq     int  `json:"actionSeq,omitempty"`
	ActionPending bool `json:"actionPending,omitempty"`
	// AppliedAt is when the last apply call returned successfully; an apply
	// started (LastApplyAt) but never finished was interrupted (a restart).
	AppliedAt time.Time `json:"appliedAt,omitzero"`
	// Checks are the last results of the channel's command checks, one per
	// check run key, for the desired state they ran for.
	Checks []CheckResult `json:"checks,omitempty"`
	// RuntimeMemo is what the channel's runtime asked to remember of its
	// last successful apply (runtimes.ApplyResult.Memo), handed back in
	// every target (runtimes.Target.Memo): kept here, in the shared store,
	// so that every server and agent sees the same ("" = none).
	RuntimeMemo string `json:"runtimeMemo,omitempty"`
	// Revision increases with every write; a store's Write with a Revision
	// that does not match the stored one fails with store.ErrConflict (0 =
	// create).
	Revision int64 `json:"revision"`
}

// CheckResult is the outcome of the last run of a command check (a
// protection's taskConfig or kubernetesConfig) for an instance.
type CheckResult struct {
	// Key is the check's run key (desiredstate.Check.RunKey).
	Key string `json:"key"`
	// DesiredStateID is the desired state the check ran for.
	DesiredStateID string `json:"desiredStateId"`
	// Passed says it exited 0. Error says why it could not run at all
	// (then Passed is false and the run says nothing about the check).
	Passed  bool   `json:"passed,omitempty"`
	Error   string `json:"error,omitempty"`
	Message string `json:"message,omitempty"`
	// At is when the run finished.
	At time.Time `json:"at"`
	// Runs counts the runs for this desired state.
	Runs int `json:"runs,omitempty"`
}
