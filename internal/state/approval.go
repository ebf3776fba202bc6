package state

import "time"

// Approval is one person's approval (or rejection) of a topic of a desired state.
type Approval struct {
	DesiredStateID string    `json:"desiredStateId"`
	Application    string    `json:"application"`
	Service        string    `json:"service"`
	ReleaseChannel string    `json:"releaseChannel"`
	Topic          string    `json:"topic"`
	User           string    `json:"user"`
	Reject         bool      `json:"reject,omitempty"`
	Comment        string    `json:"comment,omitempty"`
	CreatedAt      time.Time `json:"createdAt"`
}
