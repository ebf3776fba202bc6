package v1

import "time"

// RollbackRequest rolls a release channel (or every one) back: to the
// version it last ran converged, or, with To, to an earlier version of the
// service that was pushed.
type RollbackRequest struct {
	ReleaseChannel string `json:"releaseChannel,omitempty"`
	User           string `json:"user,omitempty"`
	// To is the version to roll ReleaseChannel back to: its id (v-...),
	// its display name (1.27), or the id of a desired state that holds it
	// (ds-...). It needs ReleaseChannel. The rollback is a new desired
	// state, gated like any push (approvals, protections, freezes).
	To string `json:"to,omitempty"`
}

// RollbackResponse is the service's status after a rollback, and where
// each release channel it moved goes back to.
type RollbackResponse struct {
	ServiceStatus
	Rollbacks []RollbackTarget `json:"rollbacks"`
}

// RollbackTarget is the version a release channel rolls back to.
type RollbackTarget struct {
	ReleaseChannel string `json:"releaseChannel"`
	// DesiredStateID is the desired state whose copy of the version the
	// channel gets (with To: the one To named or found; the service's new
	// active desired state is ServiceStatus.DesiredStateID).
	DesiredStateID string `json:"desiredStateId"`
	Version        string `json:"version"`
	DisplayName    string `json:"displayName,omitempty"`
}

// VersionList is a service's pushed versions, newest first
// (GET /v1/apps/{app}/services/{svc}/versions).
type VersionList struct {
	Versions []ServiceVersion `json:"versions"`
}

// ServiceVersion is one push of a service (or one rollback, which is a
// desired state too) and where its versions ran.
type ServiceVersion struct {
	DesiredStateID string    `json:"desiredStateId"`
	Version        string    `json:"version"`
	DisplayName    string    `json:"displayName,omitempty"`
	CreatedAt      time.Time `json:"createdAt"`
	CreatedBy      string    `json:"createdBy,omitempty"`
	// Active: the service's active desired state.
	Active bool `json:"active,omitempty"`
	// Rollback: a desired state a rollback created.
	Rollback bool `json:"rollback,omitempty"`
	// Pruned: retention dropped its compiled config; it cannot be rolled
	// back to, and its channels are not known.
	Pruned bool `json:"pruned,omitempty"`
	// ReleaseChannels are the channels the desired state has.
	ReleaseChannels []VersionChannel `json:"releaseChannels,omitempty"`
}

// VersionChannel is what a desired state holds for one release channel.
type VersionChannel struct {
	Name string `json:"name"`
	// Version and DisplayName are the channel's (a rollback's channels
	// keep versions of other desired states).
	Version     string `json:"version"`
	DisplayName string `json:"displayName,omitempty"`
	// Running: the channel runs this version converged now. Ran: it was
	// seen converged there (by the events kept).
	Running bool `json:"running,omitempty"`
	Ran     bool `json:"ran,omitempty"`
}
