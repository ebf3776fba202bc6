package state

import (
	"encoding/json"

	ds "github.com/drover-dev/drover/internal/desiredstate"
)

// Notification types: what a notification tells of. The service ones are
// CDEvents' (cdevents.dev: a service deployed for the first time in an
// environment, upgraded to another version, rolled back); the others are
// drover's own.
const (
	NotifyServiceDeployed   = "service.deployed"
	NotifyServiceUpgraded   = "service.upgraded"
	NotifyServiceRolledBack = "service.rolledback"
	NotifyApprovalRequested = "approval.requested"
	NotifyChannelBlocked    = "channel.blocked"
	NotifyChannelFailed     = "channel.failed"
	NotifyFreezeStarted     = "freeze.started"
)

// NotifyTypes lists every notification type.
func NotifyTypes() []string {
	return []string{
		NotifyServiceDeployed, NotifyServiceUpgraded, NotifyServiceRolledBack,
		NotifyApprovalRequested, NotifyChannelBlocked, NotifyChannelFailed, NotifyFreezeStarted,
	}
}

// Notify is the notification an event causes.
type Notify struct {
	Type string
	// Status is the status of the channel the notification tells of (a
	// freeze: none).
	Status ds.Status
}

// ConvergedData is the Data of a converged event: the version the channel
// now runs, the one it ran before (none: the service's first deployment
// there), and whether it came back to it by a rollback.
type ConvergedData struct {
	Version         string `json:"version"`
	PreviousVersion string `json:"previousVersion,omitempty"`
	Rollback        bool   `json:"rollback,omitempty"`
}

// NotifyOf is the notification e causes, if any: a channel converged
// (service deployed, upgraded or rolled back), began waiting for an
// approval, became blocked or failed, or a freeze began.
func NotifyOf(e Event) (Notify, bool) {
	switch e.Type {
	case ds.EventConverged:
		var d ConvergedData
		if len(e.Data) > 0 {
			_ = json.Unmarshal(e.Data, &d) // an older event without data is a deployment
		}
		switch {
		case d.Rollback:
			return Notify{NotifyServiceRolledBack, ds.StatusConverged}, true
		case d.PreviousVersion != "":
			return Notify{NotifyServiceUpgraded, ds.StatusConverged}, true
		default:
			return Notify{NotifyServiceDeployed, ds.StatusConverged}, true
		}
	case ds.EventApprovalRequested:
		return Notify{NotifyApprovalRequested, ds.StatusWaitingManualApproval}, true
	case ds.EventBlocked:
		return Notify{NotifyChannelBlocked, ds.StatusBlocked}, true
	case ds.EventFailed:
		return Notify{NotifyChannelFailed, ds.StatusFailed}, true
	case ds.EventFrozen:
		// The freeze's own event, not those of the services it holds.
		if e.Service != "" {
			return Notify{}, false
		}
		return Notify{NotifyFreezeStarted, ""}, true
	default:
	}
	return Notify{}, false
}

// MayNotify reports whether events of type typ may cause a notification
// (NotifyOf decides): the stores skip the others without decoding them.
func MayNotify(typ ds.EventType) bool {
	switch typ {
	case ds.EventConverged, ds.EventApprovalRequested, ds.EventBlocked, ds.EventFailed, ds.EventFrozen:
		return true
	default:
		return false
	}
}
