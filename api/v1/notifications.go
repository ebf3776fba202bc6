package v1

import "time"

// NotificationFilter selects the events a notification target is told of:
// an empty list matches everything.
type NotificationFilter struct {
	// Types are notification types: service.deployed, service.upgraded,
	// service.rolledback, approval.requested, channel.blocked,
	// channel.failed, freeze.started.
	Types           []string `json:"types,omitempty"`
	Applications    []string `json:"applications,omitempty"`
	Services        []string `json:"services,omitempty"`
	ReleaseChannels []string `json:"releaseChannels,omitempty"`
	// Statuses are the statuses of the channel the notification tells of
	// (CONVERGED, FAILED, WAITING_MANUAL_APPROVAL, BLOCKED).
	Statuses []string `json:"statuses,omitempty"`
}

// PutNotificationTargetRequest creates or replaces a webhook target (PUT
// /v1/notifications/{name}). The secret keys the X-Drover-Signature of
// every delivery; it is sealed at rest and never shown again. Omit it to
// keep the target's secret when replacing it.
type PutNotificationTargetRequest struct {
	URL    string             `json:"url"`
	Secret string             `json:"secret,omitempty"`
	Filter NotificationFilter `json:"filter,omitzero"`
}

// NotificationTarget is where notifications go: a webhook (its URL; never
// its secret) or an application's Slack channels, with what it is told of
// and how its deliveries stand.
type NotificationTarget struct {
	Name string `json:"name"`
	// Kind is webhook or slack.
	Kind string `json:"kind"`
	// URL is a webhook's address with its path (its query is hidden:
	// it may hold a token).
	URL string `json:"url,omitempty"`
	// Channel and ErrorChannel are a Slack target's channels.
	Channel      string             `json:"channel,omitempty"`
	ErrorChannel string             `json:"errorChannel,omitempty"`
	Filter       NotificationFilter `json:"filter,omitzero"`
	// Source is "api" (drover notifications add) or "config" (an
	// application's notifications.slack, managed by drover apply).
	Source    string    `json:"source"`
	CreatedBy string    `json:"createdBy,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
	// Pending, Delivered and Dead count the target's deliveries.
	Pending   int `json:"pending"`
	Delivered int `json:"delivered"`
	Dead      int `json:"dead"`
}

// NotificationTargetList lists the targets, by name.
type NotificationTargetList struct {
	Targets []NotificationTarget `json:"targets"`
}

// Delivery is one notification of one event to one target.
type Delivery struct {
	ID     int64  `json:"id"`
	Target string `json:"target"`
	// Type is the notification type, CloudEventType the type of its
	// CloudEvent.
	Type           string `json:"type"`
	CloudEventType string `json:"cloudEventType,omitempty"`
	// State is pending, delivered or dead.
	State    string `json:"state"`
	Attempts int    `json:"attempts"`
	// NextAttemptAt is when a pending delivery is tried next.
	NextAttemptAt time.Time `json:"nextAttemptAt,omitzero"`
	LastError     string    `json:"lastError,omitempty"`
	CreatedAt     time.Time `json:"createdAt"`
	DeliveredAt   time.Time `json:"deliveredAt,omitzero"`
	// The event the delivery tells of.
	EventSeq       int64  `json:"eventSeq"`
	Application    string `json:"application,omitempty"`
	Service        string `json:"service,omitempty"`
	ReleaseChannel string `json:"releaseChannel,omitempty"`
	Message        string `json:"message"`
}

// DeliveryList lists deliveries, newest first; Next pages on (?before=).
type DeliveryList struct {
	Deliveries []Delivery `json:"deliveries"`
	Next       int64      `json:"next,omitempty"`
}

// RetryDeliveriesRequest makes dead deliveries pending again (POST
// /v1/notifications:retry): those of Target (every target: none), or only
// IDs.
type RetryDeliveriesRequest struct {
	Target string  `json:"target,omitempty"`
	IDs    []int64 `json:"ids,omitempty"`
}

// RetryDeliveriesResponse says how many deliveries are pending again.
type RetryDeliveriesResponse struct {
	Retried int `json:"retried"`
}

// DeleteNotificationTargetRequest removes a target (POST
// /v1/notifications/{name}:delete); it has no fields.
type DeleteNotificationTargetRequest struct{}

// DeleteNotificationTargetResponse names the target removed.
type DeleteNotificationTargetResponse struct {
	Name string `json:"name"`
}
