// Package store is drover's persistence: the Store interface, the union of
// the roles its consumers take (roles.go), that every backend implements:
// the embedded SQLite store (the default, pure Go) and PostgreSQL. The
// conformance suite in storetest is the contract: every implementation must
// pass it. The engine's records (instances, approvals, events,
// observations) are declared in package state; this package keeps aliases.
//
// The engine writes everything it depends on here before it acts (principle 2
// of docs/architecture.md): desired states, approvals, instance states, apply
// attempts and an append-only event history.
package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	ds "github.com/drover-dev/drover/internal/desiredstate"
	"github.com/drover-dev/drover/internal/state"
)

// Sealer encrypts at rest what may hold secrets: config bodies, desired
// states' parameters and compiled forms (sealing.Keyring). Open returns a
// value that was never sealed as it is. Stores take one as an option; dumps
// carry the values sealed.
type Sealer interface {
	Seal(plain []byte) ([]byte, error)
	Open(sealed []byte) ([]byte, error)
}

// ErrNotFound is returned when a requested record does not exist.
var ErrNotFound = errors.New("not found")

// ErrConflict is returned when a write loses an optimistic-concurrency race
// (Write of an instance with a stale Revision) or would duplicate a unique
// record (CreateDesiredState with an existing ID).
var ErrConflict = errors.New("conflict: the record was changed concurrently")

// ErrDuplicate is returned by AddApproval when the user already approved (or
// rejected) the same topic of the desired state: the first record is kept.
var ErrDuplicate = errors.New("already recorded")

// DecideApproval chooses, inside AddApproval's transaction, the approval to
// record given the desired state and the approvals recorded before it, or
// refuses with an error.
type DecideApproval func(ds DesiredState, recorded []Approval) (Approval, []Event, error)

// ConfigObject is one stored version of a config (application, service,
// runtime, protection, deliveryExtension, releaseChannel).
type ConfigObject struct {
	Kind string `json:"kind"`
	// Name is unique per kind; services and standalone release channels are
	// named "<application>/<name>".
	Name    string `json:"name"`
	Version int64  `json:"version"`
	// Body is the config (a config.File as JSON, local files resolved).
	Body []byte `json:"body"`
	// Hash identifies the content; a new version is created only when it changes.
	Hash string `json:"hash"`
	// Source is the file the config came from, as the client named it.
	Source    string    `json:"source,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
}

// CheckPuts is CheckPut of each of objs, the first error.
func CheckPuts(objs []ConfigObject) error {
	for _, o := range objs {
		if err := o.CheckPut(); err != nil {
			return err
		}
	}
	return nil
}

// CheckPut says what a config to put lacks: its kind, name and hash are
// required.
func (o ConfigObject) CheckPut() error {
	if o.Kind == "" || o.Name == "" || o.Hash == "" {
		return fmt.Errorf("put config %s/%s: kind, name and hash are required", o.Kind, o.Name)
	}
	return nil
}

// DesiredState is one push: the compiled service and the version every release
// channel converges to. It is immutable once created, except for ReplacedBy.
type DesiredState struct {
	ID          string `json:"id"`
	Application string `json:"application"`
	Service     string `json:"service"`
	// Version is the bundle version.
	Version string `json:"version"`
	// ConfigVersion is the service config version it was compiled from.
	ConfigVersion int64 `json:"configVersion"`
	// Compiled is the compiler result as JSON (server-side only; may hold secrets).
	Compiled []byte `json:"compiled"`
	// Params are the push's parameter values as JSON.
	Params []byte `json:"params,omitempty"`
	// Rollback marks a desired state created by a rollback.
	Rollback bool `json:"rollback,omitempty"`
	// ReleaseChannels limits the push to these channels (empty = all).
	ReleaseChannels []string  `json:"releaseChannels,omitempty"`
	CreatedBy       string    `json:"createdBy,omitempty"`
	CreatedAt       time.Time `json:"createdAt"`
	// ReplacedBy is the id of the desired state that replaced this one, or "".
	ReplacedBy string `json:"replacedBy,omitempty"`
	// PrunedAt is when retention dropped Compiled (now nil) of this
	// superseded desired state; zero while it is kept. Its record,
	// approvals and events stay.
	PrunedAt time.Time `json:"prunedAt,omitzero"`
}

// CheckKinds refuses an empty kind among the kinds ListConfigs is given
// (every kind is asked for with none).
func CheckKinds(kinds []string) error {
	if slices.Contains(kinds, "") {
		return errors.New("list configs: an empty kind (to list every kind, give none)")
	}
	return nil
}

// Check reports a desired state CreateDesiredState refuses: one without an
// ID, Application or Service.
func (ds DesiredState) Check() error {
	if ds.ID == "" || ds.Application == "" || ds.Service == "" {
		return fmt.Errorf("create desired state %q of %s/%s: id, application and service are required", ds.ID, ds.Application, ds.Service)
	}
	return nil
}

// DefaultKeepSuperseded is how many superseded desired states per service
// keep their compiled copy by default, besides those instances reference
// (see CreateDesiredState).
const DefaultKeepSuperseded = 50

// Approval is state.Approval, kept here under its old name for the code that
// still uses it.
type Approval = state.Approval

// Instance is state.Instance, kept here under its old name for the code that
// still uses it.
type Instance = state.Instance

// CheckResult is state.CheckResult, kept here under its old name for the code that
// still uses it.
type CheckResult = state.CheckResult

// Process is a command a runtime started on this host that has not been
// seen to end: recorded when it starts and removed once it and its process
// group are gone, so that a server started after a crash can end what the
// crashed one left running before it applies again.
type Process struct {
	// ID is assigned by the store.
	ID             int64    `json:"id"`
	Application    string   `json:"application"`
	Service        string   `json:"service"`
	ReleaseChannel string   `json:"releaseChannel"`
	Runtime        string   `json:"runtime"`
	Kind           string   `json:"kind"`
	Version        string   `json:"version,omitempty"`
	Command        []string `json:"command,omitempty"`
	// Handle is what the runner needs to find the process again (for local
	// commands, a localexec.Group as JSON); the store keeps it opaque.
	Handle    []byte    `json:"handle"`
	StartedAt time.Time `json:"startedAt"`
}

// Event is state.Event, kept here under its old name for the code that
// still uses it.
type Event = state.Event

// TaskRun is one command a runtime ran for an instance, with its output.
type TaskRun struct {
	// ID is assigned by the store.
	ID             int64    `json:"id"`
	Application    string   `json:"application"`
	Service        string   `json:"service"`
	ReleaseChannel string   `json:"releaseChannel"`
	Runtime        string   `json:"runtime"`
	Kind           string   `json:"kind"`
	Version        string   `json:"version,omitempty"`
	Command        []string `json:"command,omitempty"`
	// ExitCode is -1 when the command did not start, was killed or timed out.
	ExitCode   int       `json:"exitCode"`
	Error      string    `json:"error,omitempty"`
	StartedAt  time.Time `json:"startedAt"`
	FinishedAt time.Time `json:"finishedAt"`
	Stdout     string    `json:"stdout,omitempty"`
	Stderr     string    `json:"stderr,omitempty"`
	Truncated  bool      `json:"truncated,omitempty"`
}

// RunFilter selects task runs; zero fields match everything.
type RunFilter struct {
	Application    string
	Service        string
	ReleaseChannel string
	Kind           string
	// Limit caps the number returned (0 = no limit); newest first.
	Limit int
}

// EventFilter selects events; zero fields match everything, and Application
// and Service filter independently.
type EventFilter struct {
	Application string
	Service     string
	AfterSeq    int64
	// Types keeps only events of these types (none: every type).
	Types []ds.EventType
	// Limit caps the number returned (0 = no limit); events come oldest first.
	Limit int
}

// Batch is a set of writes applied atomically.
type Batch struct {
	// Fence, when set, makes the whole batch conditional on the lease: a
	// stale token fails the batch with ErrFenced.
	Fence     *Fence
	Instances []Instance
	Events    []Event
	// Tasks are enqueued (pending; ID, Status, CreatedAt are assigned and
	// set in b). A task for a Key and Instance that has an open task fails
	// the batch with ErrConflict.
	Tasks []Task
	// Claim, when set, enqueues Tasks already claimed: running, owned by
	// Claim.Owner for Claim.TTL, with Token and Attempts 1, as if
	// ClaimTasks had given them to that owner in the same transaction (an
	// engine that has room carries out what it decides at once, without a
	// claim of its own). Nil enqueues them pending.
	Claim *TaskClaim
	// Observations replace the stored observation of their instance.
	Observations []Observation
	// Complete ends claimed tasks as CompleteTask does, in the batch's
	// transaction, before its other writes: a claim no longer held fails
	// the batch with ErrFenced (an engine records the outcome of an
	// action it carried out with the pass that follows it, one write).
	Complete []TaskDone
}

// TaskDone is the outcome of a claimed task, for Batch.Complete.
type TaskDone struct {
	// Task is the claim as held: ID, Key, Instance, Owner and Token.
	Task Task
	// Status is TaskSucceeded or TaskFailed.
	Status  TaskStatus
	Message string
}

// Check says whether d's status is an outcome (for implementations of
// Store).
func (d TaskDone) Check() error {
	if d.Status != TaskSucceeded && d.Status != TaskFailed {
		return fmt.Errorf("complete task %d: status must be %s or %s, not %q", d.Task.ID, TaskSucceeded, TaskFailed, d.Status)
	}
	return nil
}

// TaskClaim is who claims a Batch's tasks as they are enqueued, and for how
// long.
type TaskClaim struct {
	Owner string
	TTL   time.Duration
}

// Change is what a Feed reports: something was committed to the store.
// Changes may be coalesced and repeated; a listener acts on each as a hint
// and reads the store for what it needs.
type Change struct {
	// Events says events were appended (event streams read on).
	Events bool
	// Tasks says tasks were enqueued (task runners look for work).
	Tasks bool
	// Application and Service name a service that a request (a push, an
	// approval, a pause) changed outside any engine's lease: the engine
	// planning it should plan again.
	Application, Service string
	// Runtimes says runtime configs or linked runtimes changed (runtime
	// hosts build them again; agents' links are checked).
	Runtimes bool
	// Freezes says a freeze was made or lifted (engines read them again).
	Freezes bool
	// Lost says the listener lost its connection and is back: changes may
	// have been missed meanwhile, so everything may be stale.
	Lost bool
}

// Feed is implemented by stores that several servers share: each server
// hears what any of them committed, without polling.
type Feed interface {
	// Listen calls fn with each change committed to the store (by this
	// server too) until ctx ends, reconnecting when the connection is lost
	// (then fn gets a Change with Lost set). It returns ctx's error.
	Listen(ctx context.Context, fn func(Change)) error
}

// RuntimeFacts is what a runtime reported about its backend: for a
// Kubernetes cluster, its version and the API versions it serves. The
// compiler renders Helm charts against them at push (.Capabilities).
type RuntimeFacts struct {
	Runtime string `json:"runtime"`
	// KubeVersion is the cluster's version ("v1.34.1").
	KubeVersion string `json:"kubeVersion,omitempty"`
	// APIVersions lists "group/version" and "group/version/Kind" entries,
	// as Helm's .Capabilities.APIVersions holds them, sorted.
	APIVersions []string `json:"apiVersions,omitempty"`
	// ObservedAt is when the runtime last reported them.
	ObservedAt time.Time `json:"observedAt"`
}

// APIToken is a credential of a person or a robot (drover tokens create).
// The store keeps the token's hash, never the token.
type APIToken struct {
	// ID is assigned by the store; ids increase.
	ID int64 `json:"id"`
	// Name is the identity the token acts as; unique among the tokens not
	// revoked (a revoked token's name may be given again).
	Name string `json:"name"`
	// Hash is the hex SHA-256 of the token; unique among all tokens.
	Hash string `json:"hash"`
	// Roles are its role bindings: ROLE, ROLE@APP or ROLE@APP/CHANNEL.
	Roles     []string  `json:"roles"`
	CreatedBy string    `json:"createdBy,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
	// ExpiresAt ends it by itself (zero: never).
	ExpiresAt time.Time `json:"expiresAt,omitzero"`
	// RevokedAt is when it was revoked (zero: it was not), by RevokedBy.
	RevokedAt time.Time `json:"revokedAt,omitzero"`
	RevokedBy string    `json:"revokedBy,omitempty"`
	// LastUsedAt is when a request last authenticated with it (kept to
	// the minute or so: see TouchAPIToken).
	LastUsedAt time.Time `json:"lastUsedAt,omitzero"`
}

// Session is a person signed in through the OpenID provider (drover login
// --sso, the browser sign-in): drover's own credential, issued once the
// provider vouched for the person, and ending at ExpiresAt, at sign-out, or
// when revoked. Its roles are those the person's groups mapped to when they
// signed in; signing in again picks up changed groups.
type Session struct {
	// ID is assigned by the store; ids increase.
	ID int64 `json:"id"`
	// Hash is the hex SHA-256 of the session's secret; unique among all
	// sessions.
	Hash string `json:"hash"`
	// Identity is the person's name (from the provider's claims); several
	// sessions may share it (a laptop and a browser).
	Identity string `json:"identity"`
	// Subject is the provider's issuer and the person's subject there,
	// ISSUER#SUB: what stays the same when a name or address changes.
	Subject string `json:"subject,omitempty"`
	// Roles are its role bindings: ROLE, ROLE@APP or ROLE@APP/CHANNEL.
	Roles []string `json:"roles"`
	// Groups are the person's groups as the provider named them.
	Groups []string `json:"groups,omitempty"`
	// Via is how the person signed in: "device" (the CLI) or "browser".
	Via string `json:"via"`
	// Source is the address the sign-in came from.
	Source    string    `json:"source,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
	// ExpiresAt ends it by itself; required.
	ExpiresAt time.Time `json:"expiresAt"`
	// RevokedAt is when it was ended early (signed out or revoked; zero:
	// it was not), by RevokedBy.
	RevokedAt time.Time `json:"revokedAt,omitzero"`
	RevokedBy string    `json:"revokedBy,omitempty"`
	// LastUsedAt is when a request last authenticated with it (kept to
	// the minute or so, as a token's).
	LastUsedAt time.Time `json:"lastUsedAt,omitzero"`
}

// AuditRecord is one request that changed something, or tried to: who, from
// where, what, and how it ended. The audit log is kept whole (no
// retention).
type AuditRecord struct {
	// Seq is assigned by the store; it increases.
	Seq  int64     `json:"seq"`
	Time time.Time `json:"time"`
	// Identity is who sent the request; IdentityKind how it authenticated
	// (local, token, oidc).
	Identity     string `json:"identity"`
	IdentityKind string `json:"identityKind,omitempty"`
	// Source is the address the request came from.
	Source string `json:"source,omitempty"`
	// Action is the API route, as the route table names it
	// ("POST /v1/apps/{app}/services/{svc}:push").
	Action string `json:"action"`
	// Application, Service and ReleaseChannel are what it acted on, when
	// it names them; Target names anything else (a runtime, a token, a
	// freeze).
	Application    string `json:"application,omitempty"`
	Service        string `json:"service,omitempty"`
	ReleaseChannel string `json:"releaseChannel,omitempty"`
	Target         string `json:"target,omitempty"`
	// Status is the HTTP status of the answer; Outcome is "ok" or the
	// error's code (permission_denied, invalid_argument, ...), Message
	// what the answer said of a refusal or failure.
	Status  int    `json:"status"`
	Outcome string `json:"outcome"`
	Message string `json:"message,omitempty"`
}

// Check reports a record AppendAudit refuses: one without an Action,
// Identity or Outcome.
func (r AuditRecord) Check() error {
	if r.Action == "" || r.Identity == "" || r.Outcome == "" {
		return errors.New("append audit record: action, identity and outcome are required")
	}
	return nil
}

// AuditFilter selects audit records: every one matching all the fields
// set, oldest first.
type AuditFilter struct {
	Application string
	Identity    string
	// Since keeps the records at or after it; AfterSeq those after it.
	Since    time.Time
	AfterSeq int64
	// Limit bounds the records returned (0 = no limit).
	Limit int
}

// LinkedRuntime is a runtime served by an agent (drover runtimes link): the
// server keeps its name, its labels and the hash of its agent's join token,
// and what the agent last said of itself; never a credential of the backend
// (the agent holds those, inside the user's network).
type LinkedRuntime struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels,omitempty"`
	// TokenHash is the hex SHA-256 of the agent's join token; it is unique
	// among linked runtimes.
	TokenHash string    `json:"tokenHash"`
	CreatedAt time.Time `json:"createdAt"`
	// Agent is what the server holding the agent's connection recorded.
	Agent AgentState `json:"agent"`
}

// Replica is a server that accepts agents, as it last announced itself
// (drover server --agent-advertise-url). Each agent connects to every live
// replica, so that every server reaches every agent. Replicas are not kept
// in dumps: they announce themselves again.
type Replica struct {
	// Name is the server's replica name, as in leases and task claims.
	Name string `json:"name"`
	// AgentURL is where agents reach this server directly, https://HOST:PORT.
	AgentURL string `json:"agentUrl"`
	// SeenAt is when it last announced itself, by the store's clock.
	SeenAt time.Time `json:"seenAt"`
}

// ReplicaForgetAfter is how long a replica that stopped announcing itself
// is kept before PutReplica removes its record.
const ReplicaForgetAfter = time.Hour

// AgentState is the connection state of a linked runtime's agent, as the
// server holding (or last holding) its connection recorded it.
type AgentState struct {
	Connected bool `json:"connected"`
	// Replica is the server the agent is (or was last) connected to.
	Replica string `json:"replica,omitempty"`
	// Version is the agent's drover version; Mode what it serves
	// ("kubernetes" or "commands"); Host the host name it reported.
	Version string `json:"version,omitempty"`
	Mode    string `json:"mode,omitempty"`
	Host    string `json:"host,omitempty"`
	// ConnectedAt is when the current (or last) connection opened,
	// HeartbeatAt when the agent last answered, DisconnectedAt when the
	// last connection ended (zero while connected), and Error why.
	ConnectedAt    time.Time `json:"connectedAt,omitzero"`
	HeartbeatAt    time.Time `json:"heartbeatAt,omitzero"`
	DisconnectedAt time.Time `json:"disconnectedAt,omitzero"`
	Error          string    `json:"error,omitempty"`
}

// Observation is state.Observation, kept here under its old name for the code that
// still uses it.
type Observation = state.Observation

// ObservedObject is state.ObservedObject, kept here under its old name for the code that
// still uses it.
type ObservedObject = state.ObservedObject

// ObservedInfo is state.ObservedInfo, kept here under its old name for the code that
// still uses it.
type ObservedInfo = state.ObservedInfo

// Committed sets in b what a store assigned when it committed b at time t:
// instance revisions and zero UpdatedAt, event Seq and zero Time, task ID,
// Status and CreatedAt, observations' zero Since. For implementations of
// Store.
func (b *Batch) Committed(seqs, taskIDs []int64, t time.Time) {
	for i := range b.Observations {
		if b.Observations[i].Since.IsZero() {
			b.Observations[i].Since = t
		}
	}
	for i := range b.Instances {
		in := &b.Instances[i]
		in.Revision++
		if in.UpdatedAt.IsZero() {
			in.UpdatedAt = t
		}
	}
	for i := range seqs {
		b.Events[i].Seq = seqs[i]
		if b.Events[i].Time.IsZero() {
			b.Events[i].Time = t
		}
	}
	for i := range taskIDs {
		task := &b.Tasks[i]
		task.ID, task.Status, task.CreatedAt = taskIDs[i], TaskPending, t
		task.Owner, task.Token, task.Attempts = "", 0, 0
		if c := b.Claim; c != nil {
			// Expires is by this host's clock (a shared store times the
			// claim by its own).
			task.Status, task.Owner, task.Token, task.Attempts = TaskRunning, c.Owner, 1, 1
			task.ClaimedAt, task.Expires = t, t.Add(c.TTL)
		}
	}
}

// ServiceSpan is the services from First to Last, both included, in the order
// of application, then service.
type ServiceSpan struct {
	First, Last ServiceRef
}

// String names the span for errors: "app/first to app/last".
func (s ServiceSpan) String() string {
	return s.First.Application + "/" + s.First.Service + " to " + s.Last.Application + "/" + s.Last.Service
}

// PutConfigResult is what PutConfigs did with one config: the stored
// object (its latest version) and whether a new version was made.
type PutConfigResult struct {
	Config  ConfigObject
	Created bool
}

// ServiceRef names a service.
type ServiceRef struct {
	Application, Service string
}

// InstanceBrief is the part of an instance a list of services in brief
// shows (the web UI's list): reading only these columns keeps that list
// quick at tens of thousands of services.
type InstanceBrief struct {
	Application, Service, ReleaseChannel string
	// DesiredStateID is the desired state the instance converges toward.
	DesiredStateID string
	Status         ds.Status
	// CurrentVersion is the last version seen converged.
	CurrentVersion string
}
