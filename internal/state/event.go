package state

import (
	"time"

	ds "github.com/drover-dev/drover/internal/desiredstate"
)

// Event is one entry of the append-only history.
type Event struct {
	// Seq is assigned by the store, strictly increasing. Store methods that
	// append events also set Seq (and a zero Time) in the caller's slice once the
	// write has committed: AppendEvents(ctx, evs...) makes them visible.
	Seq            int64     `json:"seq"`
	Time           time.Time `json:"time"`
	Application    string    `json:"application,omitempty"`
	Service        string    `json:"service,omitempty"`
	ReleaseChannel string    `json:"releaseChannel,omitempty"`
	DesiredStateID string    `json:"desiredStateId,omitempty"`
	// Type is a short word: configured, pushed, replaced, approved, rejected,
	// applying, applied, converged, failed, drift, rollback, paused, resumed...
	Type    ds.EventType `json:"type"`
	Actor   string       `json:"actor,omitempty"`
	Message string       `json:"message"`
	// Data is optional structured detail as JSON.
	Data []byte `json:"data,omitempty"`
}
