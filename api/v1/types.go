// Package v1 defines drover's HTTP/JSON API, version 1: the request and
// response types shared by the server and the Go client. Every endpoint is
// under /v1; errors are {"error": {...}} with an HTTP status and one of the
// ErrorCode constants (errors.go) as their code.
//
//	GET  /v1/health                                      Health
//	POST /v1/configs:apply                               ApplyConfigsRequest -> ApplyConfigsResponse
//	GET  /v1/configs?kind=KIND                           ConfigList
//	GET  /v1/services                                    ServiceList
//	POST /v1/apps/{app}/services/{svc}:push              PushRequest -> PushResponse
//	GET  /v1/apps/{app}/services/{svc}                   ServiceStatus
//	POST /v1/apps/{app}/services/{svc}:approve           ApproveRequest -> ServiceStatus
//	POST /v1/apps/{app}/services/{svc}:pause             ChannelRequest -> ServiceStatus
//	POST /v1/apps/{app}/services/{svc}:resume            ChannelRequest -> ServiceStatus
//	POST /v1/apps/{app}/services/{svc}:rollback          RollbackRequest -> RollbackResponse
//	GET  /v1/apps/{app}/services/{svc}/versions          VersionList
//	GET  /v1/apps/{app}/services/{svc}/events?after=N    EventList
//	GET  /v1/apps/{app}/services/{svc}/runs?releaseChannel=RC&kind=K&limit=N   RunList
//	GET  /v1/runs/{id}                                   Run (with output)
//	GET  /v1/runtimes                                    RuntimeList
//	POST /v1/runtimes:link                               LinkRuntimeRequest -> LinkRuntimeResponse
//	POST /v1/runtimes/{name}:rotateToken                 LinkRuntimeRequest -> LinkRuntimeResponse
//	POST /v1/runtimes/{name}:unlink                      {} -> {}
//	GET  /v1/watch?app=APP&service=SVC&after=N           text/event-stream of Event
//	GET  /v1/secrets                                     SecretList (never values)
//	POST /v1/secrets/{key}:set                           SetSecretRequest -> SecretVersion
//	POST /v1/secrets/{key}:delete                        DeleteSecretRequest -> DeleteSecretResponse
package v1

import (
	"encoding/json"
	"time"
)

// Error is the body of every non-2xx response.
type Error struct {
	// Code is machine-readable: one of the ErrorCode constants
	// (errors.go), such as invalid_argument or not_found.
	Code    ErrorCode `json:"code"`
	Message string    `json:"message"`
	// Details lists located config problems, when the error is about configs.
	Details []ConfigError `json:"details,omitempty"`
}

// Identity is who a request acts as (GET /v1/whoami).
type Identity struct {
	// Name is recorded with what it does (events, approvals, audit).
	Name string `json:"name"`
	// Kind is how it authenticated: local (the server's own token), token
	// (an API token) or oidc.
	Kind string `json:"kind"`
	// Roles are its role bindings: ROLE (every application), ROLE@APP or
	// ROLE@APP/RELEASE_CHANNEL.
	Roles []string `json:"roles"`
}

// ErrorResponse wraps Error.
type ErrorResponse struct {
	Error Error `json:"error"`
}

// ConfigError is one config problem. Field is a path in the config of
// Kind/Name; File/Line are set when known (the client fills them from its
// own copy of the files).
type ConfigError struct {
	Kind    string `json:"kind,omitempty"`
	Name    string `json:"name,omitempty"`
	File    string `json:"file,omitempty"`
	Line    int    `json:"line,omitempty"`
	Column  int    `json:"column,omitempty"`
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
}

// Health reports that the server is up and whether its store works. Status
// is "ok" (HTTP 200) or "unhealthy" (HTTP 503).
type Health struct {
	Status string `json:"status"`
	// Version is sent only to a caller with a credential.
	Version string `json:"version,omitempty"`
	// Store is "ok" or "error"; StoreError says what is wrong (sent only to a
	// caller with a credential: it names files).
	Store      string `json:"store,omitempty"`
	StoreError string `json:"storeError,omitempty"`
	// StoreKind is "sqlite" (the embedded default) or "postgres"; Replica
	// names this server among those sharing the store. Both are sent only to
	// a caller with a credential.
	StoreKind string `json:"storeKind,omitempty"`
	Replica   string `json:"replica,omitempty"`
}

// Config is one config file as sent by the client: local references
// resolved, as a config.File in JSON.
type Config struct {
	Source string          `json:"source"`
	Body   json.RawMessage `json:"body"`
}

// ApplyConfigsRequest stores configs. All are validated together with what the
// server already has; if any is invalid, nothing is stored.
type ApplyConfigsRequest struct {
	Configs []Config `json:"configs"`
	// DryRun validates without storing.
	DryRun bool   `json:"dryRun,omitempty"`
	User   string `json:"user,omitempty"`
}

// ApplyConfigsResponse lists what happened to each config, in request order.
type ApplyConfigsResponse struct {
	Results []ConfigResult `json:"results"`
}

// ConfigResult is one config's outcome.
type ConfigResult struct {
	Kind   string `json:"kind"`
	Name   string `json:"name"`
	Source string `json:"source,omitempty"`
	// Action is created, configured or unchanged.
	Action  string `json:"action"`
	Version int64  `json:"version"`
}

// ConfigInfo describes a stored config.
type ConfigInfo struct {
	Kind      string          `json:"kind"`
	Name      string          `json:"name"`
	Version   int64           `json:"version"`
	Source    string          `json:"source,omitempty"`
	CreatedAt time.Time       `json:"createdAt"`
	Body      json.RawMessage `json:"body,omitempty"`
}

// RuntimeInfo is a configured runtime and what it last reported about its
// backend (a Kubernetes cluster's version and API versions), which pushes
// render Helm charts against.
type RuntimeInfo struct {
	Name string `json:"name"`
	// Kind is the runtime's kind: kubernetes, custom, terraformRunner, fake.
	Kind string `json:"kind,omitempty"`
	// KubeVersion and APIVersions are what the cluster reported ("" and
	// none until it did).
	KubeVersion string   `json:"kubeVersion,omitempty"`
	APIVersions []string `json:"apiVersions,omitempty"`
	// ObservedAt is when it last reported them (zero: never).
	ObservedAt time.Time `json:"observedAt,omitzero"`
	// Linked says an agent serves the runtime (drover runtimes link);
	// Configured that a runtime: config of its name is applied.
	Linked     bool `json:"linked,omitempty"`
	Configured bool `json:"configured,omitempty"`
	// Labels are the link's labels and the config's, merged.
	Labels map[string]string `json:"labels,omitempty"`
	// Agent is the connection state of a linked runtime's agent.
	Agent *AgentInfo `json:"agent,omitempty"`
	// Via is the runtime whose agent or cluster runs this runtime's
	// commands or API calls (a custom, terraformRunner or awsEcs runtime's
	// proxyRuntime).
	Via string `json:"via,omitempty"`
}

// AgentInfo is what the server knows of a linked runtime's agent.
type AgentInfo struct {
	// State is "connected", "disconnected" or "never connected".
	State   string `json:"state"`
	Version string `json:"version,omitempty"`
	// Mode is what the agent serves: kubernetes or commands.
	Mode string `json:"mode,omitempty"`
	Host string `json:"host,omitempty"`
	// Server is the server the agent is (or was) connected to.
	Server         string    `json:"server,omitempty"`
	ConnectedAt    time.Time `json:"connectedAt,omitzero"`
	HeartbeatAt    time.Time `json:"heartbeatAt,omitzero"`
	DisconnectedAt time.Time `json:"disconnectedAt,omitzero"`
	// Error is why the last connection ended.
	Error string `json:"error,omitempty"`
	// RemoteAddr is the address the agent connected from, as the server
	// answering saw it ("" when the agent is connected to another server).
	RemoteAddr string `json:"remoteAddr,omitempty"`
	// Refused is the last attempt of another agent with the runtime's token,
	// refused because this one serves the runtime (in the last 15 minutes,
	// on the server answering).
	Refused *AgentAttempt `json:"refused,omitempty"`
}

// AgentAttempt is a refused connection attempt of an agent.
type AgentAttempt struct {
	At         time.Time `json:"at"`
	RemoteAddr string    `json:"remoteAddr"`
	Version    string    `json:"version,omitempty"`
	// Count is how many attempts were refused in a row (an agent retries).
	Count int `json:"count"`
}

// LinkRuntimeRequest links a runtime served by an agent.
type LinkRuntimeRequest struct {
	// Name is required to link; rotating a token names the runtime in its
	// path.
	Name   string            `json:"name,omitempty"`
	Labels map[string]string `json:"labels,omitempty"`
	// Image is the agent's container image in the printed manifests
	// ("" = the server's default).
	Image string `json:"image,omitempty"`
	// Namespace is where the manifests install the agent ("" = drover-agent).
	Namespace string `json:"namespace,omitempty"`
	// TokenFile is the file the printed command reads the token from
	// ("" = NAME.token).
	TokenFile string `json:"tokenFile,omitempty"`
}

// LinkRuntimeResponse is a linked runtime's join token, shown once, and
// how to start its agent. The server keeps only the token's hash.
type LinkRuntimeResponse struct {
	Name  string `json:"name"`
	Token string `json:"token"`
	// AgentURL is the server's agent address (empty when the server
	// accepts no agents), Fingerprint the SHA-256 of its certificate.
	AgentURL    string `json:"agentUrl,omitempty"`
	Fingerprint string `json:"fingerprint,omitempty"`
	// Command runs the agent on a host (for a cluster, with a kubeconfig);
	// it reads the token from TokenFile (write Token there, readable by the
	// agent's user only): arguments are visible to other users.
	Command   string `json:"command"`
	TokenFile string `json:"tokenFile"`
	// Manifests install the agent in a Kubernetes cluster (YAML).
	Manifests string `json:"manifests"`
	// Warning says what must change before an agent can connect.
	Warning string `json:"warning,omitempty"`
}

// RuntimeList lists the configured runtimes, by name.
type RuntimeList struct {
	Runtimes []RuntimeInfo `json:"runtimes"`
}

// ConfigList is a list of configs.
type ConfigList struct {
	Configs []ConfigInfo `json:"configs"`
}

// Param is a parameter value for a push.
type Param struct {
	Name           string `json:"name"`
	Value          string `json:"value"`
	ReleaseChannel string `json:"releaseChannel,omitempty"`
}

// PushRequest compiles the service's latest config with params and makes it
// the desired state.
type PushRequest struct {
	Params []Param `json:"params,omitempty"`
	User   string  `json:"user,omitempty"`
	// Immediate replaces the rollout in flight at once, also for a service
	// whose pushes queue (maestro.strategy RELEASE_TRAIN).
	Immediate bool `json:"immediate,omitempty"`
}

// PushResponse names the new desired state.
type PushResponse struct {
	DesiredStateID string `json:"desiredStateId"`
	BundleVersion  string `json:"bundleVersion"`
	BundleName     string `json:"bundleName,omitempty"`
	// Replaced is the desired state this push replaced, if any.
	Replaced string `json:"replaced,omitempty"`
	// Queued is set when the push waits in the service's release train
	// (maestro.strategy RELEASE_TRAIN) behind the rollout in flight: its
	// desired state becomes active once the ones before it finished.
	Queued bool `json:"queued,omitempty"`
}

// QueuedPush is a push waiting in a service's release train.
type QueuedPush struct {
	DesiredStateID string    `json:"desiredStateId"`
	Version        string    `json:"version"`
	DisplayName    string    `json:"displayName,omitempty"`
	Release        string    `json:"release,omitempty"`
	CreatedBy      string    `json:"createdBy,omitempty"`
	CreatedAt      time.Time `json:"createdAt"`
}

// ServiceStatus is a service's convergence status.
type ServiceStatus struct {
	Application    string `json:"application"`
	Service        string `json:"service"`
	Status         string `json:"status"`
	DesiredStateID string `json:"desiredStateId"`
	// DesiredVersion is the version of the active desired state.
	DesiredVersion  string          `json:"desiredVersion"`
	ReleaseChannels []ChannelStatus `json:"releaseChannels"`
	// DisplayName names DesiredVersion for people (its bundleName or image
	// tags; "" when it has none).
	DisplayName string `json:"displayName,omitempty"`
	// Queued are the pushes waiting in the service's release train, oldest
	// first (maestro.strategy RELEASE_TRAIN; in the status of one service).
	Queued []QueuedPush `json:"queued,omitempty"`
}

// ChannelStatus is a service's status in one release channel.
type ChannelStatus struct {
	Name    string `json:"name"`
	Status  string `json:"status"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// Version is what the channel runs converged now ("" before its first rollout).
	Version string `json:"version"`
	// DesiredVersion is what it converges to or waits to receive.
	DesiredVersion string `json:"desiredVersion"`
	// TargetVersion is what was last applied.
	TargetVersion string `json:"targetVersion,omitempty"`
	Runtime       string `json:"runtime,omitempty"`
	Paused        bool   `json:"paused,omitempty"`
	// Group is the release channel group the channel belongs to.
	Group string `json:"group,omitempty"`
	// DependsOn are the channels that must run the same version converged
	// first (releaseChannelStable preconditions): the pipeline's edges.
	DependsOn []string `json:"dependsOn,omitempty"`
	// ServiceDependsOn are the services of the application the channel
	// waits for (service.dependsOn): the application graph's edges.
	ServiceDependsOn []ServiceDependency `json:"serviceDependsOn,omitempty"`
	// BlockedBy is the chain of services holding the channel while it
	// waits for one (reason SERVICE_DEPENDENCY_UNMET): the service it
	// waits for, then the one that service waits for, and so on (in the
	// status of one service, not in lists).
	BlockedBy []BlockingLink `json:"blockedBy,omitempty"`
	// Approvals lists approval gates and who approved.
	Approvals []ApprovalStatus `json:"approvals,omitempty"`
	// Checks lists the protections (and extensions) of the channel, one per
	// lifecycle phase, with their state.
	Checks []CheckStatus `json:"checks,omitempty"`
	// Objects are the runtime objects of the channel's current target as the
	// runtime last reported them to the engine (replica counts for
	// Kubernetes workloads).
	Objects []ObjectStatus `json:"objects,omitempty"`
	// Info is display-only information from the runtime (a custom runtime's getInfo).
	Info []InfoOutput `json:"info,omitempty"`
	// ObservedAt is since when the engine's last observation of the channel
	// (Objects, Info, ObserveError) has held: status reads what the engine
	// recorded and never asks a runtime.
	ObservedAt time.Time `json:"observedAt,omitzero"`
	// ObserveError says why the engine's last fetch of the channel failed.
	ObserveError string    `json:"observeError,omitempty"`
	UpdatedAt    time.Time `json:"updatedAt,omitzero"`
	// Preview is what the channel would get once approved, while it waits
	// for its approval (drover status -o json): the same as drover preview
	// shows.
	Preview *ChannelPreview `json:"preview,omitempty"`

	// DisplayName, DesiredDisplayName and TargetDisplayName name Version,
	// DesiredVersion and TargetVersion for people, when they have a
	// display name and it is known.
	DisplayName        string `json:"displayName,omitempty"`
	DesiredDisplayName string `json:"desiredDisplayName,omitempty"`
	TargetDisplayName  string `json:"targetDisplayName,omitempty"`
}

// ServiceDependency is a service a release channel waits for, and the
// release channel it must run converged in.
type ServiceDependency struct {
	Service        string `json:"service"`
	ReleaseChannel string `json:"releaseChannel"`
}

// BlockingLink is one service of a chain holding a release channel: where
// it is and what it is doing.
type BlockingLink struct {
	Service        string `json:"service"`
	ReleaseChannel string `json:"releaseChannel"`
	Status         string `json:"status"`
	Reason         string `json:"reason,omitempty"`
	Message        string `json:"message,omitempty"`
}

// ApprovalStatus is one manual approval gate of a channel.
type ApprovalStatus struct {
	Topic string `json:"topic"`
	// Description says what the gate is for: the config's, or "apply
	// after drift" for the approval an everyAction channel asks before
	// it heals drift (its topic "<channel>/apply-<n>").
	Description  string   `json:"description,omitempty"`
	MinApprovers int      `json:"minApprovers"`
	ApprovedBy   []string `json:"approvedBy,omitempty"`
	RejectedBy   string   `json:"rejectedBy,omitempty"`
}

// CheckStatus is one protection (or delivery extension) of a release
// channel in one lifecycle phase.
type CheckStatus struct {
	// Kind is "protection" or "convergenceExtension".
	Kind string `json:"kind"`
	// Name is the protection (or extension); Attachment its attachment.
	Name       string `json:"name"`
	Attachment string `json:"attachment,omitempty"`
	// Phase is preApproval, postApproval, deployment or postDeployment.
	Phase string `json:"phase"`
	// State is passed (a pre/postApproval check passed for this version),
	// passing, failing, pending (a command check not run yet, or that could
	// not run), bypassed, or notEvaluated (drover does not evaluate it yet;
	// it holds the channel unless bypassed).
	State string `json:"state"`
	// Message says why: for a command check, the last line of its last
	// run's output.
	Message string `json:"message,omitempty"`
	// NextChange is when the outcome can change next (a window opening or
	// closing, a command check's next run); zero when only a push or a
	// bypass changes it.
	NextChange time.Time `json:"nextChange,omitzero"`
	BypassedBy string    `json:"bypassedBy,omitempty"`
	// LastRun and Runs: when a command check last ran for the desired
	// state, and how many times (drover runs --kind check shows them).
	LastRun time.Time `json:"lastRun,omitzero"`
	Runs    int       `json:"runs,omitempty"`
}

// ServiceList lists services with a desired state.
type ServiceList struct {
	Services []ServiceStatus `json:"services"`
}

// ApproveRequest approves (or rejects) a release channel's pending approval
// of one desired state: the one the approver saw. DesiredStateID or Version
// (or both) is required; when it no longer names the active desired state
// (another push replaced it) the server answers 409 conflict. An approval may
// be given before the rollout reaches the channel: it binds to that desired
// state only. A second answer by the same user is 409 already_exists.
type ApproveRequest struct {
	ReleaseChannel string `json:"releaseChannel"`
	// DesiredStateID is the desired state approved (ServiceStatus.DesiredStateID).
	DesiredStateID string `json:"desiredStateId,omitempty"`
	// Version is the bundle version approved (ServiceStatus.DesiredVersion).
	Version string `json:"version,omitempty"`
	// Topic defaults to the channel's only pending approval.
	Topic  string `json:"topic,omitempty"`
	Reject bool   `json:"reject,omitempty"`
	// User is normalized (trimmed, NFKC, case-folded); control and format
	// characters are refused.
	User string `json:"user"`
	// Comment may span lines; other control characters are refused.
	Comment string `json:"comment,omitempty"`
}

// BypassRequest lets one protection (or extension) of a release channel
// pass for one desired state, on someone's word: every lifecycle phase of
// that attachment. It is recorded, with who and why, in the event history.
type BypassRequest struct {
	ReleaseChannel string `json:"releaseChannel"`
	// Protection names the attachment (or the protection, or extension).
	Protection string `json:"protection"`
	// DesiredStateID or Version name the desired state, as for approvals.
	DesiredStateID string `json:"desiredStateId,omitempty"`
	Version        string `json:"version,omitempty"`
	User           string `json:"user"`
	Comment        string `json:"comment,omitempty"`
}

// ChannelRequest targets one release channel, or all when empty.
type ChannelRequest struct {
	ReleaseChannel string `json:"releaseChannel,omitempty"`
	User           string `json:"user,omitempty"`
}

// Event is one entry of a service's history.
type Event struct {
	Seq            int64     `json:"seq"`
	Time           time.Time `json:"time"`
	Application    string    `json:"application,omitempty"`
	Service        string    `json:"service,omitempty"`
	ReleaseChannel string    `json:"releaseChannel,omitempty"`
	DesiredStateID string    `json:"desiredStateId,omitempty"`
	Type           string    `json:"type"`
	Actor          string    `json:"actor,omitempty"`
	Message        string    `json:"message"`
}

// EventList is a page of events, oldest first.
type EventList struct {
	Events []Event `json:"events"`
}

// ObjectStatus is one runtime object's version and health.
type ObjectStatus struct {
	ObjectType        string `json:"objectType"`
	Namespace         string `json:"namespace,omitempty"`
	Name              string `json:"name"`
	Version           string `json:"version,omitempty"`
	Replicas          int32  `json:"replicas"`
	AvailableReplicas int32  `json:"availableReplicas"`
	TargetReplicas    int32  `json:"targetReplicas"`
	Status            string `json:"status"`
	Message           string `json:"message,omitempty"`
}

// InfoOutput is one named piece of runtime information.
type InfoOutput struct {
	Name string `json:"name"`
	Text string `json:"text"`
}

// Run is one command a runtime ran (fetch, apply, getInfo, plan).
type Run struct {
	ID             int64     `json:"id"`
	Application    string    `json:"application"`
	Service        string    `json:"service"`
	ReleaseChannel string    `json:"releaseChannel"`
	Runtime        string    `json:"runtime"`
	Kind           string    `json:"kind"`
	Version        string    `json:"version,omitempty"`
	Command        []string  `json:"command,omitempty"`
	ExitCode       int       `json:"exitCode"`
	Error          string    `json:"error,omitempty"`
	StartedAt      time.Time `json:"startedAt"`
	FinishedAt     time.Time `json:"finishedAt"`
	// Stdout and Stderr are returned by GET /v1/runs/{id} only.
	Stdout    string `json:"stdout,omitempty"`
	Stderr    string `json:"stderr,omitempty"`
	Truncated bool   `json:"truncated,omitempty"`
}

// RunList lists runs, newest first, without their output.
type RunList struct {
	Runs []Run `json:"runs"`
}

// FreezeRequest stops the line (drover freeze, drover's own): no release
// channel in its scope starts a new rollout until it is lifted or ends.
type FreezeRequest struct {
	// Application limits the scope to one application ("" = every one).
	Application string `json:"application,omitempty"`
	// ReleaseChannel limits it to a release channel name or a label query
	// over release channel labels ("" = every channel).
	ReleaseChannel string `json:"releaseChannel,omitempty"`
	// Until ends it by itself (zero: only an unfreeze does).
	Until time.Time `json:"until,omitzero"`
	// Reason is required: it is shown on every held channel.
	Reason string `json:"reason"`
	// NoHeal holds drift healing too.
	NoHeal bool   `json:"noHeal,omitempty"`
	User   string `json:"user"`
}

// UnfreezeRequest lifts freezes: the one with ID, or every active one whose
// scope is exactly Application and ReleaseChannel.
type UnfreezeRequest struct {
	ID             string `json:"id,omitempty"`
	Application    string `json:"application,omitempty"`
	ReleaseChannel string `json:"releaseChannel,omitempty"`
	User           string `json:"user"`
	Comment        string `json:"comment,omitempty"`
}

// Freeze is a freeze as drover keeps it.
type Freeze struct {
	ID             string    `json:"id"`
	Application    string    `json:"application,omitempty"`
	ReleaseChannel string    `json:"releaseChannel,omitempty"`
	Reason         string    `json:"reason"`
	NoHeal         bool      `json:"noHeal,omitempty"`
	CreatedBy      string    `json:"createdBy"`
	CreatedAt      time.Time `json:"createdAt"`
	Until          time.Time `json:"until,omitzero"`
	LiftedBy       string    `json:"liftedBy,omitempty"`
	LiftedAt       time.Time `json:"liftedAt,omitzero"`
	Comment        string    `json:"comment,omitempty"`
	// Active says it holds now.
	Active bool `json:"active"`
}

// FreezeList lists freezes, newest first.
type FreezeList struct {
	Freezes []Freeze `json:"freezes"`
}

// PreviewResponse is what a push would do (drover preview), per release
// channel; nothing is applied or stored.
type PreviewResponse struct {
	BundleVersion string `json:"bundleVersion"`
	BundleName    string `json:"bundleName,omitempty"`
	// Channels are the release channels in declaration order.
	Channels []ChannelPreview `json:"channels"`
}

// ChannelPreview is what one release channel would get.
type ChannelPreview struct {
	Name    string `json:"name"`
	Runtime string `json:"runtime"`
	// From is the version last applied to the channel ("" = none yet);
	// To the version it would get.
	From string `json:"from,omitempty"`
	To   string `json:"to"`
	// Unchanged says the channel's objects and environment would stay as
	// they are.
	Unchanged bool `json:"unchanged,omitempty"`
	// Objects are the channel's objects: created, changed, deleted or
	// unchanged, with a unified diff of their YAML (secrets redacted)
	// against what was last applied.
	Objects []ObjectChange `json:"objects,omitempty"`
	// Params are the parameters whose value changes for the channel
	// (secret values are never compared nor shown).
	Params []ParamChange `json:"params,omitempty"`
	// Env lists the environment variables added, changed or removed
	// ("+NAME", "~NAME", "-NAME"); values are not shown.
	Env []string `json:"env,omitempty"`
	// Gates are what stands between the push and the channel's rollout,
	// in order: dependencies, checks, approvals, freezes.
	Gates []string `json:"gates,omitempty"`
	// Plan is the summary of the Terraform plan the runner last made for
	// this version, where one exists ("Plan: 1 to add, 0 to change, 0 to
	// destroy."): a terraformRunner channel whose new version was planned
	// (one waiting for the approval of its apply).
	Plan string `json:"plan,omitempty"`
	// Note says what the preview could not show.
	Note string `json:"note,omitempty"`
}

// ParamChange is a parameter whose value changes: From is what the
// channel last got ("" = the config's default), To what it would get.
type ParamChange struct {
	Name string `json:"name"`
	From string `json:"from"`
	To   string `json:"to"`
}

// ObjectChange is one object of a channel preview.
type ObjectChange struct {
	// Object names it: "ConfigMap web", "Deployment prod-ns/web", or a
	// custom runtime's "custom/<runtime>".
	Object string `json:"object"`
	// Action is created, changed, deleted or unchanged.
	Action string `json:"action"`
	Diff   string `json:"diff,omitempty"`
}

// CreateTokenRequest creates an API token (POST /v1/tokens).
type CreateTokenRequest struct {
	// Name is the identity the token acts as (lower-case letters, digits
	// and . _ @ + -); a token not revoked may not have it already.
	Name string `json:"name"`
	// Roles are its role bindings: ROLE (every application), ROLE@APP or
	// ROLE@APP/RELEASE_CHANNEL; roles are viewer, deployer, approver and
	// admin.
	Roles []string `json:"roles"`
	// ExpiresAt ends it by itself (zero: never).
	ExpiresAt time.Time `json:"expiresAt,omitzero"`
}

// CreateTokenResponse is a new token, shown once: the server keeps only
// its hash.
type CreateTokenResponse struct {
	Token string    `json:"token"`
	Info  TokenInfo `json:"info"`
}

// TokenInfo is what the server tells of an API token (never the token).
type TokenInfo struct {
	Name      string    `json:"name"`
	Roles     []string  `json:"roles"`
	CreatedBy string    `json:"createdBy,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
	ExpiresAt time.Time `json:"expiresAt,omitzero"`
	RevokedAt time.Time `json:"revokedAt,omitzero"`
	RevokedBy string    `json:"revokedBy,omitempty"`
	// LastUsedAt is when a request last came with it (to the minute).
	LastUsedAt time.Time `json:"lastUsedAt,omitzero"`
	// State is active, expired or revoked.
	State string `json:"state"`
}

// TokenList lists API tokens, revoked and expired ones included.
type TokenList struct {
	Tokens []TokenInfo `json:"tokens"`
}

// SignInInfo tells clients how people sign in to this server
// (GET /v1/auth/info, open).
type SignInInfo struct {
	// OIDC is the OpenID provider people sign in with; nil when the
	// server has none (API tokens only).
	OIDC *OIDCInfo `json:"oidc,omitempty"`
}

// OIDCInfo describes the server's OpenID provider.
type OIDCInfo struct {
	Issuer string `json:"issuer"`
	// LoginPath is where a browser starts signing in (GET; ?return=PATH
	// comes back to PATH on this server).
	LoginPath string `json:"loginPath"`
	// DevicePath starts the device sign-in of a CLI (POST).
	DevicePath string `json:"devicePath"`
}

// DeviceSignInRequest starts a device sign-in (POST /v1/auth/device).
type DeviceSignInRequest struct{}

// DeviceSignIn is a device sign-in started at the provider: the person
// opens VerificationURI and types UserCode (or opens
// VerificationURIComplete), while the client polls with DeviceCode.
type DeviceSignIn struct {
	DeviceCode              string    `json:"deviceCode"`
	UserCode                string    `json:"userCode"`
	VerificationURI         string    `json:"verificationURI"`
	VerificationURIComplete string    `json:"verificationURIComplete,omitempty"`
	ExpiresAt               time.Time `json:"expiresAt,omitzero"`
	// Interval is how often to poll, in seconds.
	Interval int64 `json:"interval"`
}

// DeviceTokenRequest polls a device sign-in (POST /v1/auth/device/token):
// the server asks the provider for up to about 20 seconds before it
// answers pending.
type DeviceTokenRequest struct {
	DeviceCode string `json:"deviceCode"`
	Interval   int64  `json:"interval,omitempty"`
}

// SignInResult is the outcome of polling a device sign-in.
type SignInResult struct {
	// Status is "pending" (poll again) or "signed_in". A refused or
	// expired sign-in is an error (403 permission_denied, 410 expired).
	Status string `json:"status"`
	// Token is the session's credential (shown once): send it as
	// Authorization: Bearer TOKEN until ExpiresAt.
	Token     string    `json:"token,omitempty"`
	Identity  *Identity `json:"identity,omitempty"`
	Groups    []string  `json:"groups,omitempty"`
	ExpiresAt time.Time `json:"expiresAt,omitzero"`
}

// ServiceSummary is a service's status in brief, for long lists (GET
// /v1/services:summary): about a tenth of a ServiceStatus's size.
type ServiceSummary struct {
	Application    string `json:"application"`
	Service        string `json:"service"`
	Status         string `json:"status"`
	DesiredVersion string `json:"desiredVersion"`
	// Channels counts its release channels, Converged those converged.
	Channels  int `json:"channels"`
	Converged int `json:"converged"`
	// DisplayName names DesiredVersion, when known at hand (a summary
	// decodes no desired state: it is "" until the engine has read it).
	DisplayName string `json:"displayName,omitempty"`
}

// ServiceSummaryList lists every service in brief.
type ServiceSummaryList struct {
	Services []ServiceSummary `json:"services"`
}

// ParameterInfo is one parameter a service's pushes take, as its config
// declares it (GET /v1/apps/APP/services/SVC/parameters).
type ParameterInfo struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	Required    bool   `json:"required,omitempty"`
	// Type is string, int, dockerImage, secret, commit or blob.
	Type string `json:"type"`
	// Default is the default value (a docker image's default tag); never
	// a secret's.
	Default string `json:"default,omitempty"`
	// Image is a docker image parameter's repository.
	Image string `json:"image,omitempty"`
}

// ParameterList lists a service's parameters.
type ParameterList struct {
	Parameters []ParameterInfo `json:"parameters"`
}

// TokenSignInRequest signs a browser in with an API token, or the
// server's local token (POST /v1/auth/token): the answer sets a session
// cookie, which lasts while the token does.
type TokenSignInRequest struct {
	Token string `json:"token"`
}

// SignOutRequest ends the session a request carries (POST /v1/auth/logout).
type SignOutRequest struct{}

// SignOutResult says whether a session ended (false: the request carried
// an API token or the local token, which sign-out does not end).
type SignOutResult struct {
	SignedOut bool `json:"signedOut"`
}

// SessionInfo is what the server tells of a session (never its secret).
type SessionInfo struct {
	ID         int64     `json:"id"`
	Identity   string    `json:"identity"`
	Subject    string    `json:"subject,omitempty"`
	Roles      []string  `json:"roles"`
	Groups     []string  `json:"groups,omitempty"`
	Via        string    `json:"via"`
	Source     string    `json:"source,omitempty"`
	CreatedAt  time.Time `json:"createdAt"`
	ExpiresAt  time.Time `json:"expiresAt"`
	RevokedAt  time.Time `json:"revokedAt,omitzero"`
	RevokedBy  string    `json:"revokedBy,omitempty"`
	LastUsedAt time.Time `json:"lastUsedAt,omitzero"`
	// State is active, expired or revoked.
	State string `json:"state"`
}

// SessionList lists sessions (ended ones for a day after they end).
type SessionList struct {
	Sessions []SessionInfo `json:"sessions"`
}

// RevokeSessionsRequest ends sessions (POST /v1/sessions:revoke): the one
// numbered ID, or every session of Identity.
type RevokeSessionsRequest struct {
	ID       int64  `json:"id,omitempty"`
	Identity string `json:"identity,omitempty"`
}

// RevokeSessionsResult counts the sessions ended.
type RevokeSessionsResult struct {
	Revoked int `json:"revoked"`
}

// UnlinkRuntimeRequest unlinks a runtime (POST /v1/runtimes/NAME:unlink).
type UnlinkRuntimeRequest struct{}

// RevokeTokenRequest revokes a token (POST /v1/tokens/NAME:revoke).
type RevokeTokenRequest struct{}

// AuditRecord is one request that changed something, or tried to.
type AuditRecord struct {
	Seq            int64     `json:"seq"`
	Time           time.Time `json:"time"`
	Identity       string    `json:"identity"`
	IdentityKind   string    `json:"identityKind,omitempty"`
	Source         string    `json:"source,omitempty"`
	Action         string    `json:"action"`
	Application    string    `json:"application,omitempty"`
	Service        string    `json:"service,omitempty"`
	ReleaseChannel string    `json:"releaseChannel,omitempty"`
	Target         string    `json:"target,omitempty"`
	Status         int       `json:"status"`
	Outcome        string    `json:"outcome"`
	Message        string    `json:"message,omitempty"`
}

// AuditList is a page of the audit log, oldest first; Next is the seq to
// pass as after for the next page (0: this was the last).
type AuditList struct {
	Records []AuditRecord `json:"records"`
	Next    int64         `json:"next,omitempty"`
}

// CompiledService is the compiled config a push stored for a service (GET
// /v1/apps/{app}/services/{svc}/compiled): for each release channel, what
// drover converges it to and under which conditions, with secret values
// redacted. It is what the engine reads, as Prodvana's materialized
// config's compiled service instance configs are.
type CompiledService struct {
	Application    string `json:"application"`
	Service        string `json:"service"`
	DesiredStateID string `json:"desiredStateId"`
	Version        string `json:"version"`
	BundleName     string `json:"bundleName,omitempty"`
	// Active says the desired state is the service's current one.
	Active          bool              `json:"active"`
	ReleaseChannels []CompiledChannel `json:"releaseChannels"`
}

// CompiledChannel is the compiled config of a service in one release
// channel.
type CompiledChannel struct {
	Name        string            `json:"name"`
	Runtime     string            `json:"runtime"`
	RuntimeKind string            `json:"runtimeKind,omitempty"`
	Namespace   string            `json:"namespace,omitempty"`
	Backend     string            `json:"backend"`
	Group       string            `json:"group,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	// DependsOn are the channels that must run the version converged first.
	DependsOn []string `json:"dependsOn,omitempty"`
	// Approvals are its manual approval gates; EveryAction asks for one
	// before each apply that heals drift.
	Approvals   []CompiledApproval `json:"approvals,omitempty"`
	EveryAction bool               `json:"everyAction,omitempty"`
	// Checks are its protections and convergence extensions, one per
	// lifecycle phase.
	Checks           []CompiledCheck `json:"checks,omitempty"`
	AutoRollback     bool            `json:"autoRollback,omitempty"`
	ProgressDeadline string          `json:"progressDeadline,omitempty"`
	ConvergenceGrace string          `json:"convergenceGrace,omitempty"`
	// Env is the service's environment in the channel; raw secrets read
	// "(redacted)".
	Env map[string]string `json:"env,omitempty"`
	// Objects are what the runtime applies, each as YAML with secrets
	// redacted: Kubernetes manifests, or a runtime's one object.
	Objects []CompiledObject `json:"objects"`
}

// CompiledApproval is one manual approval gate of a compiled channel.
type CompiledApproval struct {
	Topic        string `json:"topic"`
	Description  string `json:"description,omitempty"`
	MinApprovers int    `json:"minApprovers"`
}

// CompiledCheck is one protection or convergence extension of a compiled
// channel in one lifecycle phase.
type CompiledCheck struct {
	Kind       string `json:"kind"`
	Name       string `json:"name"`
	Attachment string `json:"attachment,omitempty"`
	Phase      string `json:"phase"`
}

// CompiledObject is one object a runtime applies.
type CompiledObject struct {
	// Object names it as a preview does: "Deployment prod-ns/web", or
	// "custom/<runtime>".
	Object string `json:"object"`
	YAML   string `json:"yaml"`
}

// SetSecretRequest makes a new version of a secret
// (POST /v1/secrets/{key}:set). The value is sealed at rest and never
// shown again.
type SetSecretRequest struct {
	Value string `json:"value"`
}

// SecretVersion is one version of a secret, never its value. Version is
// its name, KEY-N, as references give it: secret{key, version}.
type SecretVersion struct {
	Key       string    `json:"key"`
	Version   string    `json:"version"`
	CreatedBy string    `json:"createdBy,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
}

// SecretInfo is a secret's versions, oldest first; Latest names the
// newest.
type SecretInfo struct {
	Key      string          `json:"key"`
	Latest   string          `json:"latest"`
	Versions []SecretVersion `json:"versions"`
}

// SecretList lists the secrets drover keeps (GET /v1/secrets), by key.
type SecretList struct {
	Secrets []SecretInfo `json:"secrets"`
}

// DeleteSecretRequest deletes a secret (POST /v1/secrets/{key}:delete):
// every version, or only Version (KEY-N).
type DeleteSecretRequest struct {
	Version string `json:"version,omitempty"`
}

// DeleteSecretResponse names the versions deleted.
type DeleteSecretResponse struct {
	Key     string   `json:"key"`
	Deleted []string `json:"deleted"`
}

// ReleaseRequest pushes several services of an application as one
// release (drover release create).
type ReleaseRequest struct {
	Services []ReleaseServiceRequest `json:"services"`
	// DryRun compiles every service and answers the versions and the order
	// the release will take, storing nothing.
	DryRun bool `json:"dryRun,omitempty"`
	// Immediate bypasses the release trains of its services.
	Immediate bool   `json:"immediate,omitempty"`
	User      string `json:"user,omitempty"`
}

// ReleaseServiceRequest is one service of a release and its parameters.
type ReleaseServiceRequest struct {
	Service string  `json:"service"`
	Params  []Param `json:"params,omitempty"`
}

// Release is a release and where it is: its status (PENDING, IN_PROGRESS,
// SUCCEEDED, FAILED, SKIPPED), each release channel's, and each service's.
type Release struct {
	ID          string    `json:"id"`
	Application string    `json:"application"`
	Status      string    `json:"status"`
	CreatedBy   string    `json:"createdBy,omitempty"`
	CreatedAt   time.Time `json:"createdAt,omitzero"`
	// ReleaseChannels is the release's status in each release channel,
	// in the application's order.
	ReleaseChannels []ReleaseChannelState `json:"releaseChannels"`
	Services        []ReleaseService      `json:"services"`
	// Order is the order the release takes: steps of services that may
	// start together, each after the steps before it.
	Order []ReleaseStep `json:"order,omitempty"`
	// Events are the release's history: the events of its desired states
	// (in the release of one id only; not in lists).
	Events []Event `json:"events,omitempty"`
}

// ReleaseChannelState is a release's status in one release channel.
type ReleaseChannelState struct {
	Name   string `json:"name"`
	Status string `json:"status"`
}

// ReleaseService is one service of a release and where it is.
type ReleaseService struct {
	Service        string `json:"service"`
	DesiredStateID string `json:"desiredStateId"`
	Version        string `json:"version"`
	DisplayName    string `json:"displayName,omitempty"`
	// Status is PENDING .. SKIPPED; SKIPPED once a later push of the
	// service replaced the release's.
	Status string `json:"status"`
	// ReleaseChannels are the service's channels as they stand.
	ReleaseChannels []ChannelStatus `json:"releaseChannels,omitempty"`
}

// ReleaseStep is one step of a release's order: services that start in a
// release channel once the steps before them are done.
type ReleaseStep struct {
	ReleaseChannel string   `json:"releaseChannel"`
	Services       []string `json:"services"`
}

// ReleaseList is an application's releases, newest first.
type ReleaseList struct {
	Releases []Release `json:"releases"`
}

// ReleaseApproveRequest answers the manual approvals of every service of a
// release waiting for one in a release channel.
type ReleaseApproveRequest struct {
	ReleaseChannel string `json:"releaseChannel"`
	Reject         bool   `json:"reject,omitempty"`
	User           string `json:"user,omitempty"`
	Comment        string `json:"comment,omitempty"`
}

// ReleaseApproveResponse says, per service, what the answer did.
type ReleaseApproveResponse struct {
	Results []ReleaseApproveResult `json:"results"`
}

// ReleaseApproveResult is one service's answer: approved (the topics
// answered), or why not (another push replaced the release's, it waits
// for nothing, ...).
type ReleaseApproveResult struct {
	Service string   `json:"service"`
	Topics  []string `json:"topics,omitempty"`
	Error   string   `json:"error,omitempty"`
}
