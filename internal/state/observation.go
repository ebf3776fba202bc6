package state

import "time"

// Observation is what the engine last saw of one instance: what its
// runtime's fetch (or watch) reported for the instance's target, and the
// runtime's display-only information. People read instances through it:
// status never asks a runtime.
type Observation struct {
	Application    string `json:"-"`
	Service        string `json:"-"`
	ReleaseChannel string `json:"-"`
	// DesiredStateID and TargetVersion name the target the fetch was for.
	DesiredStateID string `json:"desiredStateId,omitempty"`
	TargetVersion  string `json:"targetVersion,omitempty"`
	// Version is the version running ("" = none).
	Version   string           `json:"version,omitempty"`
	Converged bool             `json:"converged,omitempty"`
	Failed    bool             `json:"failed,omitempty"`
	Drifted   bool             `json:"drifted,omitempty"`
	Message   string           `json:"message,omitempty"`
	Objects   []ObservedObject `json:"objects,omitempty"`
	Info      []ObservedInfo   `json:"info,omitempty"`
	// Error says why the fetch failed ("" = it answered).
	Error string `json:"error,omitempty"`
	// Since is when the engine first saw what this records (it writes an
	// observation again only when what it sees changes).
	Since time.Time `json:"-"`
}

// ObservedObject is one runtime object of an observation.
type ObservedObject struct {
	ObjectType        string `json:"objectType"`
	Namespace         string `json:"namespace,omitempty"`
	Name              string `json:"name"`
	Version           string `json:"version,omitempty"`
	Replicas          int32  `json:"replicas,omitempty"`
	AvailableReplicas int32  `json:"availableReplicas,omitempty"`
	TargetReplicas    int32  `json:"targetReplicas,omitempty"`
	Status            string `json:"status,omitempty"`
	Message           string `json:"message,omitempty"`
}

// ObservedInfo is one display-only output of a runtime (getInfo).
type ObservedInfo struct {
	Name string `json:"name"`
	Text string `json:"text"`
}
