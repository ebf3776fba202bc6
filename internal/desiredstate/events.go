package desiredstate

// EventType is the kind of an entry of the event history.
type EventType string

// Event types. Who writes them: the server for what people do (configured,
// pushed, approved, rejected, paused, resumed, rollback), the engine for
// what it decides and observes.
const (
	EventConfigured       EventType = "configured"
	EventPushed           EventType = "pushed"
	EventReplaced         EventType = "replaced"
	EventApproved         EventType = "approved"
	EventRejected         EventType = "rejected"
	EventBypassed         EventType = "bypassed"
	EventCheckPassed      EventType = "check-passed"
	EventCheckFailed      EventType = "check-failed"
	EventStarted          EventType = "started"
	EventApplying         EventType = "applying"
	EventApplied          EventType = "applied"
	EventApplyFailed      EventType = "apply-failed"
	EventApplyInterrupted EventType = "apply-interrupted"
	EventConverged        EventType = "converged"
	EventFailed           EventType = "failed"
	EventDrift            EventType = "drift"
	EventRollback         EventType = "rollback"
	EventPaused           EventType = "paused"
	EventResumed          EventType = "resumed"
	EventFrozen           EventType = "frozen"
	EventUnfrozen         EventType = "unfrozen"
	EventLeftoverEnded    EventType = "leftover-ended"
	// EventApprovalRequested: a channel began waiting for a manual
	// approval (once per wait, not per pass).
	EventApprovalRequested EventType = "approval-requested"
	// EventBlocked: a channel became BLOCKED, or blocked for another
	// reason (once per reason, not per pass).
	EventBlocked EventType = "blocked"
)

// EventTypes lists every event type, in the order above.
func EventTypes() []EventType {
	return []EventType{
		EventConfigured, EventPushed, EventReplaced, EventApproved, EventRejected, EventBypassed,
		EventCheckPassed, EventCheckFailed, EventStarted, EventApplying, EventApplied, EventApplyFailed,
		EventApplyInterrupted, EventConverged, EventFailed, EventDrift, EventRollback, EventPaused,
		EventResumed, EventFrozen, EventUnfrozen, EventLeftoverEnded, EventApprovalRequested, EventBlocked,
	}
}
