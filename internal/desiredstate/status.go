package desiredstate

// Status is where an entity stands, as in Prodvana's convergence engine.
type Status string

// Statuses. WAITING_MANUAL_APPROVAL is used only when an approval is the only
// thing missing; other gates report WAITING_PRECONDITIONS.
const (
	StatusPending               Status = "PENDING"
	StatusConverging            Status = "CONVERGING"
	StatusConverged             Status = "CONVERGED"
	StatusFailed                Status = "FAILED"
	StatusWaitingPreconditions  Status = "WAITING_PRECONDITIONS"
	StatusWaitingManualApproval Status = "WAITING_MANUAL_APPROVAL"
	StatusPaused                Status = "PAUSED"
	StatusReplaced              Status = "REPLACED"
	StatusRollingBack           Status = "ROLLING_BACK"
	StatusRolledBack            Status = "ROLLED_BACK"
	StatusFailedRollback        Status = "FAILED_ROLLBACK"
	StatusBlocked               Status = "BLOCKED"
)

// Statuses lists every status, in the order above.
func Statuses() []Status {
	return []Status{
		StatusPending, StatusConverging, StatusConverged, StatusFailed, StatusWaitingPreconditions,
		StatusWaitingManualApproval, StatusPaused, StatusReplaced, StatusRollingBack, StatusRolledBack,
		StatusFailedRollback, StatusBlocked,
	}
}

// Terminal reports whether no more work is expected without a new push.
func (s Status) Terminal() bool {
	switch s {
	case StatusConverged, StatusFailed, StatusReplaced, StatusRolledBack, StatusFailedRollback:
		return true
	default:
		return false
	}
}

// Reason explains a status; the message beside it is for people.
type Reason string

// Status reasons (Prodvana's StatusExplanation reasons plus a few of drover's).
const (
	ReasonNone                          Reason = ""
	ReasonNoCurrentState                Reason = "NO_CURRENT_STATE"
	ReasonApplyFailed                   Reason = "APPLY_FAILED"
	ReasonUpdatingPods                  Reason = "UPDATING_PODS"
	ReasonUnhealthyPods                 Reason = "UNHEALTHY_PODS"
	ReasonVersionMismatch               Reason = "VERSION_MISMATCH"
	ReasonRuntimeObjectFailed           Reason = "RUNTIME_OBJECT_FAILED"
	ReasonPreconditionsFailed           Reason = "PRECONDITIONS_FAILED"
	ReasonManualApprovalRejected        Reason = "MANUAL_APPROVAL_REJECTED"
	ReasonStuckEntity                   Reason = "STUCK_ENTITY"
	ReasonVersionDirty                  Reason = "VERSION_DIRTY"
	ReasonRuntimeObjectApplyNeeded      Reason = "RUNTIME_OBJECT_APPLY_NEEDED"
	ReasonLifecycleCheckFailed          Reason = "LIFECYCLE_CHECK_FAILED"
	ReasonLifecycleCheckPending         Reason = "LIFECYCLE_CHECK_PENDING"
	ReasonConcurrencyLimitExceeded      Reason = "CONCURRENCY_LIMIT_EXCEEDED"
	ReasonReleaseChannelDependencyUnmet Reason = "RELEASE_CHANNEL_DEPENDENCY_UNMET"
	ReasonManualApprovalPending         Reason = "MANUAL_APPROVAL_PENDING"
	// ReasonServiceDependencyUnmet (drover's): the channel waits for
	// another service of the application (service.dependsOn); the
	// message names it, its channel and what it is doing.
	ReasonServiceDependencyUnmet   Reason = "SERVICE_DEPENDENCY_UNMET"
	ReasonProgressDeadlineExceeded Reason = "PROGRESS_DEADLINE_EXCEEDED"
	ReasonPaused                   Reason = "PAUSED"
	ReasonFetchFailed              Reason = "FETCH_FAILED"
	// ReasonFrozen (drover's): a freeze holds the channel (drover freeze).
	ReasonFrozen Reason = "FROZEN"
	// ReasonEngineError (drover's): the engine's last pass over the
	// service failed (its desired state no longer decodes, the store
	// could not be read); the message says why, and the status beside it
	// is the last one the engine planned.
	ReasonEngineError Reason = "ENGINE_ERROR"
)
