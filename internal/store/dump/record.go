package dump

import (
	"time"

	ds "github.com/drover-dev/drover/internal/desiredstate"
	"github.com/drover-dev/drover/internal/store"
)

// Kind names the kind of a record, as a dump line's "kind" says it.
type Kind string

// The kinds of records, in the order a dump holds them.
const (
	KindConfig        Kind = "config"
	KindDesiredState  Kind = "desiredState"
	KindApproval      Kind = "approval"
	KindInstance      Kind = "instance"
	KindObservation   Kind = "observation"
	KindEvent         Kind = "event"
	KindTaskRun       Kind = "taskRun"
	KindTask          Kind = "task"
	KindLease         Kind = "lease"
	KindRuntimeFacts  Kind = "runtimeFacts"
	KindLinkedRuntime Kind = "linkedRuntime"
	KindAPIToken      Kind = "apiToken"
	KindAudit         Kind = "audit"
	KindSecret        Kind = "secret"
	KindNotifyTarget  Kind = "notifyTarget"
	KindDelivery      Kind = "delivery"
	// KindProcess is read but never exported, and importers skip it (see
	// the package documentation).
	KindProcess Kind = "process"
)

// Kinds lists the kinds of records in the order a dump holds them.
var Kinds = []Kind{
	KindConfig, KindDesiredState, KindApproval, KindInstance, KindObservation,
	KindEvent, KindTaskRun, KindTask, KindLease, KindRuntimeFacts, KindLinkedRuntime,
	KindAPIToken, KindAudit, KindSecret, KindNotifyTarget, KindDelivery, KindProcess,
}

// rank is the position of k in Kinds, or -1 for an unknown kind.
func (k Kind) rank() int {
	for i, c := range Kinds {
		if c == k {
			return i
		}
	}
	return -1
}

// plural names records of kind k in counts ("configs", "task runs").
func (k Kind) plural() string {
	switch k {
	case KindConfig:
		return "configs"
	case KindDesiredState:
		return "desired states"
	case KindApproval:
		return "approvals"
	case KindInstance:
		return "instances"
	case KindObservation:
		return "observations"
	case KindEvent:
		return "events"
	case KindTaskRun:
		return "task runs"
	case KindTask:
		return "tasks"
	case KindLease:
		return "leases"
	case KindRuntimeFacts:
		return "runtime facts"
	case KindLinkedRuntime:
		return "linked runtimes"
	case KindAPIToken:
		return "API tokens"
	case KindAudit:
		return "audit records"
	case KindSecret:
		return "secret versions"
	case KindNotifyTarget:
		return "notification targets"
	case KindDelivery:
		return "deliveries"
	case KindProcess:
		return "processes"
	default:
		return string(k) + " records"
	}
}

// Record is one record of a dump: a value of one of this package's record
// types (Config, DesiredState, Approval, Instance, Observation, Event,
// TaskRun, Task, Lease, RuntimeFacts, LinkedRuntime, APIToken, AuditRecord,
// Secret, NotifyTarget, Delivery, Process).
type Record interface {
	// RecordKind says which kind of record it is.
	RecordKind() Kind
	isRecord()
}

// Config is one version of a config (kind "config"): a store.ConfigObject
// as the store keeps it, Version and CreatedAt included.
type Config struct {
	Kind      string    `json:"kind"`
	Name      string    `json:"name"`
	Version   int64     `json:"version"`
	Body      []byte    `json:"body,omitzero"`
	Hash      string    `json:"hash"`
	Source    string    `json:"source,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
}

// DesiredState is one push (kind "desiredState"): a store.DesiredState as
// stored, with how its compiled copy is kept. Compiled is the copy the
// desired state holds itself: nil when retention pruned it (PrunedAt is
// set) or when it shares the copy of an earlier desired state whose
// compiled form is identical, which CompiledFrom then names (that one holds
// its own copy).
type DesiredState struct {
	ID              string    `json:"id"`
	Application     string    `json:"application"`
	Service         string    `json:"service"`
	Version         string    `json:"version,omitempty"`
	ConfigVersion   int64     `json:"configVersion,omitempty"`
	Compiled        []byte    `json:"compiled,omitzero"`
	CompiledFrom    string    `json:"compiledFrom,omitempty"`
	Params          []byte    `json:"params,omitzero"`
	Rollback        bool      `json:"rollback,omitempty"`
	ReleaseChannels []string  `json:"releaseChannels,omitempty"`
	CreatedBy       string    `json:"createdBy,omitempty"`
	CreatedAt       time.Time `json:"createdAt"`
	ReplacedBy      string    `json:"replacedBy,omitempty"`
	PrunedAt        time.Time `json:"prunedAt,omitzero"`
}

// Approval is one approval or rejection (kind "approval"): a store.Approval.
type Approval struct {
	DesiredStateID string    `json:"desiredStateId"`
	Application    string    `json:"application,omitempty"`
	Service        string    `json:"service,omitempty"`
	ReleaseChannel string    `json:"releaseChannel,omitempty"`
	Topic          string    `json:"topic"`
	User           string    `json:"user"`
	Reject         bool      `json:"reject,omitempty"`
	Comment        string    `json:"comment,omitempty"`
	CreatedAt      time.Time `json:"createdAt"`
}

// Instance is the engine's state of a service in a release channel (kind
// "instance"): a store.Instance, Revision included.
type Instance struct {
	Application     string    `json:"application"`
	Service         string    `json:"service"`
	ReleaseChannel  string    `json:"releaseChannel"`
	DesiredStateID  string    `json:"desiredStateId,omitempty"`
	TargetStateID   string    `json:"targetStateId,omitempty"`
	TargetVersion   string    `json:"targetVersion,omitempty"`
	CurrentStateID  string    `json:"currentStateId,omitempty"`
	CurrentVersion  string    `json:"currentVersion,omitempty"`
	Status          ds.Status `json:"status,omitempty"`
	Reason          ds.Reason `json:"reason,omitempty"`
	Message         string    `json:"message,omitempty"`
	Paused          bool      `json:"paused,omitempty"`
	ApplyAttempts   int       `json:"applyAttempts,omitempty"`
	LastApplyAt     time.Time `json:"lastApplyAt,omitzero"`
	ConvergedAt     time.Time `json:"convergedAt,omitzero"`
	UpdatedAt       time.Time `json:"updatedAt,omitzero"`
	PreviousStateID string    `json:"previousStateId,omitempty"`
	PreviousVersion string    `json:"previousVersion,omitempty"`
	DesiredVersion  string    `json:"desiredVersion,omitempty"`
	Satisfied       []string  `json:"satisfied,omitempty"`
	RollbackFrom    string    `json:"rollbackFrom,omitempty"`
	RollbackReason  string    `json:"rollbackReason,omitempty"`
	FailedVersion   string    `json:"failedVersion,omitempty"`
	Healed          int       `json:"healed,omitempty"`
	ActionSeq       int       `json:"actionSeq,omitempty"`
	ActionPending   bool      `json:"actionPending,omitempty"`
	AppliedAt       time.Time `json:"appliedAt,omitzero"`
	// Checks are the last command check results (drover 0.x dumps without
	// them read as none).
	Checks []store.CheckResult `json:"checks,omitempty"`
	// RuntimeMemo is what the runtime remembers of its last apply
	// (dumps made before it read as none).
	RuntimeMemo string `json:"runtimeMemo,omitempty"`
	Revision    int64  `json:"revision"`
}

// Observation is what the engine last saw of an instance (kind
// "observation"): a store.Observation with its key and Since.
type Observation struct {
	Application    string                 `json:"application"`
	Service        string                 `json:"service"`
	ReleaseChannel string                 `json:"releaseChannel"`
	DesiredStateID string                 `json:"desiredStateId,omitempty"`
	TargetVersion  string                 `json:"targetVersion,omitempty"`
	Version        string                 `json:"version,omitempty"`
	Converged      bool                   `json:"converged,omitempty"`
	Failed         bool                   `json:"failed,omitempty"`
	Drifted        bool                   `json:"drifted,omitempty"`
	Message        string                 `json:"message,omitempty"`
	Objects        []store.ObservedObject `json:"objects,omitempty"`
	Info           []store.ObservedInfo   `json:"info,omitempty"`
	Error          string                 `json:"error,omitempty"`
	Since          time.Time              `json:"since"`
}

// Event is one entry of the history (kind "event"): a store.Event with its
// original Seq and Time.
type Event struct {
	Seq            int64        `json:"seq"`
	Time           time.Time    `json:"time"`
	Application    string       `json:"application,omitempty"`
	Service        string       `json:"service,omitempty"`
	ReleaseChannel string       `json:"releaseChannel,omitempty"`
	DesiredStateID string       `json:"desiredStateId,omitempty"`
	Type           ds.EventType `json:"type"`
	Actor          string       `json:"actor,omitempty"`
	Message        string       `json:"message,omitempty"`
	Data           []byte       `json:"data,omitzero"`
}

// TaskRun is a command a runtime ran, with its output (kind "taskRun"): a
// store.TaskRun with its original ID. Stdout and Stderr are the output's
// bytes, which need not be text.
type TaskRun struct {
	ID             int64     `json:"id"`
	Application    string    `json:"application"`
	Service        string    `json:"service"`
	ReleaseChannel string    `json:"releaseChannel"`
	Runtime        string    `json:"runtime,omitempty"`
	Kind           string    `json:"kind"`
	Version        string    `json:"version,omitempty"`
	Command        []string  `json:"command,omitempty"`
	ExitCode       int       `json:"exitCode"`
	Error          string    `json:"error,omitempty"`
	StartedAt      time.Time `json:"startedAt"`
	FinishedAt     time.Time `json:"finishedAt"`
	Stdout         []byte    `json:"stdout,omitempty"`
	Stderr         []byte    `json:"stderr,omitempty"`
	Truncated      bool      `json:"truncated,omitempty"`
}

// Task is a durable task (kind "task"): a store.Task with its ID, status,
// claim (Owner, Token, Expires) and Attempts.
type Task struct {
	ID         int64            `json:"id"`
	Key        string           `json:"key"`
	Instance   string           `json:"instance,omitempty"`
	Kind       string           `json:"kind"`
	Payload    []byte           `json:"payload,omitzero"`
	Status     store.TaskStatus `json:"status"`
	Owner      string           `json:"owner,omitempty"`
	Token      int64            `json:"token,omitempty"`
	Attempts   int              `json:"attempts,omitempty"`
	Expires    time.Time        `json:"expires,omitzero"`
	CreatedAt  time.Time        `json:"createdAt"`
	ClaimedAt  time.Time        `json:"claimedAt,omitzero"`
	FinishedAt time.Time        `json:"finishedAt,omitzero"`
	Message    string           `json:"message,omitempty"`
}

// Lease is a lease key with its last holder and fencing token (kind
// "lease"): a store.Lease.
type Lease struct {
	Key     string    `json:"key"`
	Owner   string    `json:"owner"`
	Token   int64     `json:"token"`
	Expires time.Time `json:"expires"`
}

// RuntimeFacts is what a runtime reported about its backend (kind
// "runtimeFacts"): a store.RuntimeFacts.
type RuntimeFacts struct {
	Runtime     string    `json:"runtime"`
	KubeVersion string    `json:"kubeVersion,omitempty"`
	APIVersions []string  `json:"apiVersions,omitempty"`
	ObservedAt  time.Time `json:"observedAt"`
}

// LinkedRuntime is a runtime served by an agent (kind "linkedRuntime"): a
// store.LinkedRuntime, with the hash of its agent's join token (the token
// itself is never stored) and what its agent last reported.
type LinkedRuntime struct {
	Name      string            `json:"name"`
	Labels    map[string]string `json:"labels,omitempty"`
	TokenHash string            `json:"tokenHash"`
	CreatedAt time.Time         `json:"createdAt"`
	Agent     store.AgentState  `json:"agent"`
}

// APIToken is an API token (kind "apiToken"): a store.APIToken with its
// original ID, revoked or not, with the hash of the token (the token itself
// is never stored).
type APIToken struct {
	ID         int64     `json:"id"`
	Name       string    `json:"name"`
	Hash       string    `json:"hash"`
	Roles      []string  `json:"roles,omitempty"`
	CreatedBy  string    `json:"createdBy,omitempty"`
	CreatedAt  time.Time `json:"createdAt"`
	ExpiresAt  time.Time `json:"expiresAt,omitzero"`
	RevokedAt  time.Time `json:"revokedAt,omitzero"`
	RevokedBy  string    `json:"revokedBy,omitempty"`
	LastUsedAt time.Time `json:"lastUsedAt,omitzero"`
}

// AuditRecord is one record of the audit log (kind "audit"): a
// store.AuditRecord with its original Seq and Time.
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
	Status         int       `json:"status,omitempty"`
	Outcome        string    `json:"outcome"`
	Message        string    `json:"message,omitempty"`
}

// Secret is one version of a secret of the secret store (kind "secret"):
// its value as the store keeps it (sealed by the store's keyring, never in
// clear), who made it and when. A deleted version has no value and its
// deletedAt: it is kept so that its number is never given again.
type Secret struct {
	Key       string    `json:"key"`
	Version   int64     `json:"version"`
	Value     []byte    `json:"value,omitzero"`
	CreatedBy string    `json:"createdBy,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
	DeletedAt time.Time `json:"deletedAt,omitzero"`
}

// SecretOf is the record of sec, its value sealed as kept, deleted at
// deletedAt (zero: not deleted).
func SecretOf(sec store.Secret, deletedAt time.Time) Secret {
	return Secret{Key: sec.Key, Version: sec.Version, Value: sec.Value, CreatedBy: sec.CreatedBy, CreatedAt: sec.CreatedAt, DeletedAt: deletedAt}
}

// Store is the version as a store.Secret, its value sealed; DeletedAt
// goes beside it.
func (s Secret) Store() store.Secret {
	return store.Secret{Key: s.Key, Version: s.Version, Value: s.Value, CreatedBy: s.CreatedBy, CreatedAt: s.CreatedAt}
}

// NotifyTarget is a place notifications are delivered to (kind
// "notifyTarget"): a store.NotifyTarget with its filter lists and its spec
// as the store keeps it (sealed by the store's keyring, never in clear).
type NotifyTarget struct {
	Name      string             `json:"name"`
	Kind      string             `json:"kind"`
	Filter    store.NotifyFilter `json:"filter,omitzero"`
	Spec      []byte             `json:"spec,omitzero"`
	Source    string             `json:"source,omitempty"`
	CreatedBy string             `json:"createdBy,omitempty"`
	CreatedAt time.Time          `json:"createdAt"`
}

// Delivery is one notification of one event to one target, a row of the
// outbox (kind "delivery"): a store.Delivery with its original ID and the
// key its target's deliveries are ordered by, without its event (the event
// record with seq EventSeq).
type Delivery struct {
	ID           int64               `json:"id"`
	Target       string              `json:"target"`
	Key          string              `json:"key"`
	Type         string              `json:"type"`
	EventSeq     int64               `json:"eventSeq"`
	State        store.DeliveryState `json:"state"`
	Attempts     int                 `json:"attempts,omitempty"`
	NextAt       time.Time           `json:"nextAt"`
	LastError    string              `json:"lastError,omitempty"`
	Owner        string              `json:"owner,omitempty"`
	ClaimedUntil time.Time           `json:"claimedUntil,omitzero"`
	CreatedAt    time.Time           `json:"createdAt"`
	DeliveredAt  time.Time           `json:"deliveredAt,omitzero"`
}

// DeliveryOf is the record of d, whose key is key. d.Event is left out.
func DeliveryOf(d store.Delivery, key string) Delivery {
	return Delivery{
		ID: d.ID, Target: d.Target, Key: key, Type: d.Type, EventSeq: d.EventSeq, State: d.State, Attempts: d.Attempts,
		NextAt: d.NextAt, LastError: d.LastError, Owner: d.Owner, ClaimedUntil: d.ClaimedUntil, CreatedAt: d.CreatedAt,
		DeliveredAt: d.DeliveredAt,
	}
}

// Store is the delivery as a store.Delivery, without its event; Key goes
// beside it.
func (d Delivery) Store() store.Delivery {
	return store.Delivery{
		ID: d.ID, Target: d.Target, Type: d.Type, EventSeq: d.EventSeq, State: d.State, Attempts: d.Attempts,
		NextAt: d.NextAt, LastError: d.LastError, Owner: d.Owner, ClaimedUntil: d.ClaimedUntil, CreatedAt: d.CreatedAt,
		DeliveredAt: d.DeliveredAt,
	}
}

// Process is a command running on the exporting host (kind "process"): a
// store.Process. Exporters do not write them and importers skip them (see
// the package documentation).
type Process struct {
	ID             int64     `json:"id"`
	Application    string    `json:"application,omitempty"`
	Service        string    `json:"service,omitempty"`
	ReleaseChannel string    `json:"releaseChannel,omitempty"`
	Runtime        string    `json:"runtime,omitempty"`
	Kind           string    `json:"kind"`
	Version        string    `json:"version,omitempty"`
	Command        []string  `json:"command,omitempty"`
	Handle         []byte    `json:"handle,omitzero"`
	StartedAt      time.Time `json:"startedAt"`
}

// RecordKind implements Record.
func (Config) RecordKind() Kind { return KindConfig }

// RecordKind implements Record.
func (DesiredState) RecordKind() Kind { return KindDesiredState }

// RecordKind implements Record.
func (Approval) RecordKind() Kind { return KindApproval }

// RecordKind implements Record.
func (Instance) RecordKind() Kind { return KindInstance }

// RecordKind implements Record.
func (Observation) RecordKind() Kind { return KindObservation }

// RecordKind implements Record.
func (Event) RecordKind() Kind { return KindEvent }

// RecordKind implements Record.
func (TaskRun) RecordKind() Kind { return KindTaskRun }

// RecordKind implements Record.
func (Task) RecordKind() Kind { return KindTask }

// RecordKind implements Record.
func (Lease) RecordKind() Kind { return KindLease }

// RecordKind implements Record.
func (RuntimeFacts) RecordKind() Kind { return KindRuntimeFacts }

// RecordKind implements Record.
func (LinkedRuntime) RecordKind() Kind { return KindLinkedRuntime }

// RecordKind implements Record.
func (APIToken) RecordKind() Kind { return KindAPIToken }

// RecordKind implements Record.
func (AuditRecord) RecordKind() Kind { return KindAudit }

// RecordKind implements Record.
func (Secret) RecordKind() Kind { return KindSecret }

// RecordKind implements Record.
func (NotifyTarget) RecordKind() Kind { return KindNotifyTarget }

// RecordKind implements Record.
func (Delivery) RecordKind() Kind { return KindDelivery }

// RecordKind implements Record.
func (Process) RecordKind() Kind { return KindProcess }

func (Config) isRecord()        {}
func (DesiredState) isRecord()  {}
func (Approval) isRecord()      {}
func (Instance) isRecord()      {}
func (Observation) isRecord()   {}
func (Event) isRecord()         {}
func (TaskRun) isRecord()       {}
func (Task) isRecord()          {}
func (Lease) isRecord()         {}
func (RuntimeFacts) isRecord()  {}
func (LinkedRuntime) isRecord() {}
func (APIToken) isRecord()      {}
func (AuditRecord) isRecord()   {}
func (Secret) isRecord()        {}
func (NotifyTarget) isRecord()  {}
func (Delivery) isRecord()      {}
func (Process) isRecord()       {}

// Conversions from and to the store's records. Every record type but
// DesiredState, TaskRun, Secret and Delivery has exactly the store type's
// fields, in its order, so that the two convert directly (dump.Event(e),
// store.Event(r)): a field added to a store type fails to compile here
// until the dump carries it. DesiredState and TaskRun convert with
// FromDesiredState and FromTaskRun, Secret and Delivery with SecretOf and
// DeliveryOf.

// Store is the config version the record describes.
func (c Config) Store() store.ConfigObject { return store.ConfigObject(c) }

// FromDesiredState is the record of d, whose own compiled copy is compiled
// (nil when it has none) and which shares the copy of compiledFrom ("" =
// none). d.Compiled is ignored.
func FromDesiredState(d store.DesiredState, compiled []byte, compiledFrom string) DesiredState {
	return DesiredState{
		ID: d.ID, Application: d.Application, Service: d.Service, Version: d.Version, ConfigVersion: d.ConfigVersion,
		Compiled: compiled, CompiledFrom: compiledFrom, Params: d.Params, Rollback: d.Rollback,
		ReleaseChannels: d.ReleaseChannels, CreatedBy: d.CreatedBy, CreatedAt: d.CreatedAt, ReplacedBy: d.ReplacedBy,
		PrunedAt: d.PrunedAt,
	}
}

// Store is the desired state the record describes, with the record's own
// compiled copy (nil when it shares another's or was pruned).
func (d DesiredState) Store() store.DesiredState {
	return store.DesiredState{
		ID: d.ID, Application: d.Application, Service: d.Service, Version: d.Version, ConfigVersion: d.ConfigVersion,
		Compiled: d.Compiled, Params: d.Params, Rollback: d.Rollback, ReleaseChannels: d.ReleaseChannels,
		CreatedBy: d.CreatedBy, CreatedAt: d.CreatedAt, ReplacedBy: d.ReplacedBy, PrunedAt: d.PrunedAt,
	}
}

// Store is the approval the record describes.
func (a Approval) Store() store.Approval { return store.Approval(a) }

// Store is the instance the record describes.
func (i Instance) Store() store.Instance { return store.Instance(i) }

// Store is the observation the record describes.
func (o Observation) Store() store.Observation { return store.Observation(o) }

// Store is the event the record describes.
func (e Event) Store() store.Event { return store.Event(e) }

// FromTaskRun is the record of a task run.
func FromTaskRun(r store.TaskRun) TaskRun {
	return TaskRun{
		ID: r.ID, Application: r.Application, Service: r.Service, ReleaseChannel: r.ReleaseChannel, Runtime: r.Runtime,
		Kind: r.Kind, Version: r.Version, Command: r.Command, ExitCode: r.ExitCode, Error: r.Error,
		StartedAt: r.StartedAt, FinishedAt: r.FinishedAt, Stdout: bytesOf(r.Stdout), Stderr: bytesOf(r.Stderr),
		Truncated: r.Truncated,
	}
}

// Store is the task run the record describes.
func (r TaskRun) Store() store.TaskRun {
	return store.TaskRun{
		ID: r.ID, Application: r.Application, Service: r.Service, ReleaseChannel: r.ReleaseChannel, Runtime: r.Runtime,
		Kind: r.Kind, Version: r.Version, Command: r.Command, ExitCode: r.ExitCode, Error: r.Error,
		StartedAt: r.StartedAt, FinishedAt: r.FinishedAt, Stdout: string(r.Stdout), Stderr: string(r.Stderr),
		Truncated: r.Truncated,
	}
}

// bytesOf is s as bytes, nil when empty.
func bytesOf(s string) []byte {
	if s == "" {
		return nil
	}
	return []byte(s)
}

// Store is the task the record describes.
func (t Task) Store() store.Task { return store.Task(t) }

// Store is the lease the record describes.
func (l Lease) Store() store.Lease { return store.Lease(l) }

// Store is the runtime facts the record describes.
func (f RuntimeFacts) Store() store.RuntimeFacts { return store.RuntimeFacts(f) }

// Store is the linked runtime the record describes.
func (r LinkedRuntime) Store() store.LinkedRuntime { return store.LinkedRuntime(r) }

// Store is the API token the record describes.
func (t APIToken) Store() store.APIToken { return store.APIToken(t) }

// Store is the audit record the record describes.
func (r AuditRecord) Store() store.AuditRecord { return store.AuditRecord(r) }

// Store is the notification target the record describes, its Spec sealed
// as kept.
func (t NotifyTarget) Store() store.NotifyTarget { return store.NotifyTarget(t) }

// Store is the process the record describes.
func (p Process) Store() store.Process { return store.Process(p) }
