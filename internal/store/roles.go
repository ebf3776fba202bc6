package store

import (
	"context"
	"time"
)

// The roles below are the parts of Store, cut by what its consumers use:
// each consumer takes the roles it needs (the engine: engine.Store), and a
// backend implements them all. Implementations are safe for concurrent use.
// Times are returned in UTC, exact to the nanosecond; a limit <= 0 means no
// limit. Validation failures (a missing key field) are errors that are
// neither ErrNotFound nor ErrConflict.

// Configs keeps the versions of configs (applications, services, runtimes,
// protections, freezes...).
type Configs interface {
	// PutConfig stores obj as a new version when its Hash differs from the
	// latest version's, and returns the stored object and whether a new
	// version was created (Version and CreatedAt are assigned by the store).
	PutConfig(ctx context.Context, obj ConfigObject) (ConfigObject, bool, error)

	// PutConfigs stores each of objs as PutConfig does, all in one
	// transaction: every one or none. For each new version it appends, in
	// the same transaction, the event onCreated makes of the stored object
	// (nil onCreated: none). The results are in the order of objs.
	PutConfigs(ctx context.Context, objs []ConfigObject, onCreated func(ConfigObject) Event) ([]PutConfigResult, error)

	// GetConfig returns the latest version of a config, or ErrNotFound.
	GetConfig(ctx context.Context, kind, name string) (ConfigObject, error)

	// GetConfigVersion returns one version of a config, or ErrNotFound.
	GetConfigVersion(ctx context.Context, kind, name string, version int64) (ConfigObject, error)

	// ListConfigs returns the latest version of every config of the given
	// kinds (none: of every kind; an empty kind is refused), ordered by kind
	// and name.
	ListConfigs(ctx context.Context, kinds ...string) ([]ConfigObject, error)
}

// DesiredStates keeps pushes: the desired states services converge to.
type DesiredStates interface {
	// CreateDesiredState stores ds and, in the same transaction, sets
	// ReplacedBy on the service's previous active desired state and appends
	// events. ds.ID must be set and unique (an existing ID fails with
	// ErrConflict and nothing is written). A zero CreatedAt is set to the
	// current time; ds.ReplacedBy and ds.PrunedAt are ignored.
	//
	// Retention: in the same transaction, the service's superseded desired
	// states beyond the newest N (a setting of the implementation,
	// DefaultKeepSuperseded unless configured; negative keeps all) lose
	// their Compiled and get PrunedAt, except those an instance of the
	// service references (DesiredStateID, TargetStateID, CurrentStateID or
	// PreviousStateID), which stay whole. A ds whose Compiled
	// equals the active one's may share its stored copy; reads return the
	// same bytes either way.
	CreateDesiredState(ctx context.Context, ds DesiredState, events ...Event) error

	// PushDesiredState is CreateDesiredState with the audit record of the
	// request that made ds, appended (as AppendAudit does) in the same
	// transaction: one commit makes both durable, or neither is written.
	// It returns the record's Seq.
	PushDesiredState(ctx context.Context, ds DesiredState, audit AuditRecord, events ...Event) (int64, error)

	// GetDesiredState returns a desired state by id, or ErrNotFound.
	GetDesiredState(ctx context.Context, id string) (DesiredState, error)

	// ActiveDesiredState returns the service's newest desired state (the one
	// not replaced), or ErrNotFound. Its Compiled is nil: the engine's
	// passes and the service lists read the active state often and keep
	// compiled forms cached by id; GetDesiredState reads it whole.
	ActiveDesiredState(ctx context.Context, application, service string) (DesiredState, error)

	// ListActiveDesiredStates returns every service's active desired state,
	// ordered by application and service, without Compiled (as
	// ActiveDesiredState).
	ListActiveDesiredStates(ctx context.Context) ([]DesiredState, error)

	// ListDesiredStates returns a service's desired states, newest (most
	// recently created, whatever their CreatedAt) first.
	ListDesiredStates(ctx context.Context, application, service string, limit int) ([]DesiredState, error)
}

// Approvals keeps the approvals and rejections of desired states.
type Approvals interface {
	// AddApproval records an approval or rejection of desired state
	// desiredStateID that decide chooses, in one transaction with decide:
	// decide sees the desired state as stored now (ReplacedBy is set once a
	// push replaced it) and its approvals recorded so far, oldest first, and
	// returns the approval to record (for desiredStateID) and its events.
	// Calls for one desired state are serialized, so what decide counts is
	// what is recorded: concurrent approvals never overshoot a gate nor count
	// one person twice. An error from decide aborts the call, writes nothing
	// and is returned wrapped. An unknown desired state fails with
	// ErrNotFound before decide is called. If the same user already has a
	// record for the approval's topic, nothing is written and the call fails
	// with ErrDuplicate. A zero CreatedAt is set to the current time. It
	// returns the approval as recorded; the events' Seq are set in the slice
	// decide returned.
	AddApproval(ctx context.Context, desiredStateID string, decide DecideApproval) (Approval, error)

	// ListApprovals returns the approvals of a desired state, oldest first.
	ListApprovals(ctx context.Context, desiredStateID string) ([]Approval, error)
}

// Instances keeps the engine's state of each service instance and what it
// last observed of it, written in atomic batches.
type Instances interface {
	// GetInstance returns an instance, or ErrNotFound.
	GetInstance(ctx context.Context, application, service, releaseChannel string) (Instance, error)

	// ListInstances returns a service's instances ("" service = the
	// application's; both "" = all), ordered by application, service and
	// release channel.
	ListInstances(ctx context.Context, application, service string) ([]Instance, error)

	// ListInstancesIn returns the instances of the services in span, in the
	// order of ListInstances (to read every service's a part at a time).
	ListInstancesIn(ctx context.Context, span ServiceSpan) ([]Instance, error)

	// ListInstanceBriefs is ListInstancesIn with only the fields of an
	// InstanceBrief, in the same order.
	ListInstanceBriefs(ctx context.Context, span ServiceSpan) ([]InstanceBrief, error)

	// ListObservations returns the observations of a service's instances
	// ("" service = the application's; both "" = all), ordered like
	// ListInstances. Batches write them.
	ListObservations(ctx context.Context, application, service string) ([]Observation, error)

	// ListObservationsIn returns the observations of the services in span,
	// ordered like ListInstances.
	ListObservationsIn(ctx context.Context, span ServiceSpan) ([]Observation, error)

	// Write applies a batch atomically: the fence (if any) is checked, each
	// instance is upserted with a Revision check (0 = create, ErrConflict if
	// it exists; otherwise the stored revision must equal Revision,
	// ErrConflict if it differs or the instance does not exist), events are
	// appended, tasks enqueued and observations replaced. On any error nothing is written and b is
	// unchanged. On success the revisions of the instances are incremented
	// in b, a zero UpdatedAt is set to the current time, the events' Seq
	// (and zero Time) and the tasks' ID, Status and CreatedAt are set in b.
	Write(ctx context.Context, b *Batch) error
}

// Work is the engine's shared work: leases on service keys and durable
// tasks, fenced by tokens.
type Work interface {
	// ClaimLease gives key to owner for ttl: when nobody holds it, when it
	// expired, or when owner holds it already (a renewal keeps the token).
	// A new holder gets a higher Token than any before it. Another owner's
	// unexpired lease fails with ErrLeaseHeld, and the holder's lease is
	// returned with it.
	ClaimLease(ctx context.Context, key, owner string, ttl time.Duration) (Lease, error)

	// RenewLease extends l by ttl from now if l.Owner still holds the key
	// with l.Token (even if it expired meanwhile and nobody claimed it);
	// otherwise ErrFenced.
	RenewLease(ctx context.Context, l Lease, ttl time.Duration) (Lease, error)

	// ReleaseLease ends l now if it is still held with l.Token (the token
	// is kept, so later claims get higher ones); a lost lease is no error.
	ReleaseLease(ctx context.Context, l Lease) error

	// ListLeases returns every lease (held or expired), ordered by key.
	ListLeases(ctx context.Context) ([]Lease, error)

	// ClaimTasks gives owner up to limit (at least 1) of the oldest
	// claimable tasks for ttl, oldest first: pending ones, or running ones
	// whose claim expired (their runner is gone). Each becomes running with
	// a new Token and Attempts+1. No claimable task is an empty list.
	ClaimTasks(ctx context.Context, owner string, ttl time.Duration, limit int) ([]Task, error)

	// HeartbeatTask extends the claim t by ttl from now if t.Owner still
	// holds it with t.Token; otherwise ErrFenced.
	HeartbeatTask(ctx context.Context, t Task, ttl time.Duration) (Task, error)

	// CompleteTask records the outcome of the claim t (TaskSucceeded or
	// TaskFailed, with message) and applies b (may be nil) in the same
	// transaction, as Write does. A claim no longer held fails with
	// ErrFenced and writes nothing. Finished tasks of the same Key and
	// Instance beyond the newest KeepFinishedTasks are deleted.
	CompleteTask(ctx context.Context, t Task, status TaskStatus, message string, b *Batch) error

	// ReleaseTask ends the claim t without an outcome: the task is pending
	// again (keeping Attempts and the message given), for any runner to
	// claim, and b (may be nil) is applied in the same transaction. A
	// runner that stops before its task is done (a shutdown) hands it over
	// this way rather than letting the claim lapse. A claim no longer held
	// fails with ErrFenced and writes nothing.
	ReleaseTask(ctx context.Context, t Task, message string, b *Batch) error

	// ResetClaims ends every lease and every task claim now: running tasks
	// become pending again (keeping Attempts), and tokens keep growing;
	// events are appended in the same transaction. It is for a process
	// that owns the store exclusively (the SQLite data directory's lock),
	// at its start, when every holder is known dead.
	ResetClaims(ctx context.Context, events ...Event) error

	// GetTask returns a task by id, or ErrNotFound.
	GetTask(ctx context.Context, id int64) (Task, error)

	// ListTasks returns tasks matching f, oldest first.
	ListTasks(ctx context.Context, f TaskFilter) ([]Task, error)

	// OpenTaskInstances returns the instances of key's open (pending or
	// running) tasks, in no particular order: what a pass needs to know
	// of its service's tasks, read from an index alone.
	OpenTaskInstances(ctx context.Context, key string) ([]string, error)
}

// Events is the append-only history.
type Events interface {
	// AppendEvents appends events, assigning Seq (and Time when zero).
	AppendEvents(ctx context.Context, events ...Event) error

	// ListEvents returns events matching f, oldest first.
	ListEvents(ctx context.Context, f EventFilter) ([]Event, error)

	// LastEventSeq returns the Seq of the newest event (0: none yet).
	// Every event with a lower Seq is committed: a reader that filters
	// events by type may move its AfterSeq up to it.
	LastEventSeq(ctx context.Context) (int64, error)

	// PruneEvents deletes the events with a Seq up to throughSeq, except
	// the newest event of all (the history's end, from which seqs go on)
	// and the events of notifications not yet delivered (pending or dead
	// deliveries), and returns how many it deleted. Event retention calls it once the
	// events are archived (see docs/data-directory.md).
	PruneEvents(ctx context.Context, throughSeq int64) (int64, error)
}

// Facts keeps what runtimes reported about their backends.
type Facts interface {
	// PutRuntimeFacts records what a runtime reported about its backend,
	// replacing what it reported before. Runtime is required; a zero
	// ObservedAt is set to the current time.
	PutRuntimeFacts(ctx context.Context, f RuntimeFacts) error

	// ListRuntimeFacts returns the facts of every runtime that reported
	// some, ordered by runtime name.
	ListRuntimeFacts(ctx context.Context) ([]RuntimeFacts, error)
}

// Agents keeps the linked runtimes (served by agents) and the replicas
// agents connect to.
type Agents interface {
	// LinkRuntime records a new linked runtime (CreatedAt zero = now);
	// ErrConflict if one with its name or token hash exists. Name and
	// TokenHash are required.
	LinkRuntime(ctx context.Context, r LinkedRuntime) error

	// GetLinkedRuntime returns a linked runtime by name, or ErrNotFound.
	GetLinkedRuntime(ctx context.Context, name string) (LinkedRuntime, error)

	// LinkedRuntimeByToken returns the linked runtime whose TokenHash is
	// tokenHash, or ErrNotFound.
	LinkedRuntimeByToken(ctx context.Context, tokenHash string) (LinkedRuntime, error)

	// ListLinkedRuntimes returns every linked runtime, ordered by name.
	ListLinkedRuntimes(ctx context.Context) ([]LinkedRuntime, error)

	// SetLinkToken replaces a linked runtime's token hash (the old token
	// stops working); ErrNotFound if it is not linked, ErrConflict if
	// another has that hash.
	SetLinkToken(ctx context.Context, name, tokenHash string) error

	// PutAgentState replaces what is recorded of a linked runtime's agent;
	// ErrNotFound if it is not linked (any more).
	PutAgentState(ctx context.Context, name string, st AgentState) error

	// UnlinkRuntime removes a linked runtime; ErrNotFound if it is not linked.
	UnlinkRuntime(ctx context.Context, name string) error

	// PutReplica records that the server r.Name is up and that agents reach
	// it directly at r.AgentURL: it inserts or replaces the record, with
	// SeenAt set to now by the store's clock (r.SeenAt is ignored). It also
	// forgets the replicas not seen for ReplicaForgetAfter.
	PutReplica(ctx context.Context, r Replica) error

	// ListReplicas lists the replicas seen within maxAge of now (the
	// store's clock), by name.
	ListReplicas(ctx context.Context, maxAge time.Duration) ([]Replica, error)

	// RemoveReplica forgets a replica (its server stops); no error when
	// it is unknown.
	RemoveReplica(ctx context.Context, name string) error
}

// Tokens keeps API tokens (their hashes).
type Tokens interface {
	// CreateAPIToken records a new API token and returns it as stored (ID
	// and, when zero, CreatedAt set). Name and Hash are required. A token
	// not revoked with the same Name, or any with the same Hash, fails with
	// ErrConflict.
	CreateAPIToken(ctx context.Context, t APIToken) (APIToken, error)

	// APITokenByHash returns the token whose Hash is hash (revoked and
	// expired ones too: the caller decides), or ErrNotFound.
	APITokenByHash(ctx context.Context, hash string) (APIToken, error)

	// ListAPITokens returns every token, revoked ones included, by ID.
	ListAPITokens(ctx context.Context) ([]APIToken, error)

	// RevokeAPIToken revokes the token named name that is not revoked yet,
	// now, by by, and returns it; ErrNotFound if there is none.
	RevokeAPIToken(ctx context.Context, name, by string) (APIToken, error)

	// TouchAPIToken records that token id was used at at (a later time
	// than the one recorded; an earlier one changes nothing). It is the
	// store's own bookkeeping: crash safe, not durable.
	TouchAPIToken(ctx context.Context, id int64, at time.Time) error
}

// Sessions keeps the sessions of people signed in through the OpenID provider.
type Sessions interface {
	// CreateSession records a new session and returns it as stored (ID
	// and, when zero, CreatedAt set). Hash, Identity and ExpiresAt are
	// required; a session with the same Hash fails with ErrConflict.
	CreateSession(ctx context.Context, s Session) (Session, error)

	// SessionByHash returns the session whose Hash is hash (revoked and
	// expired ones too, until DeleteEndedSessions removes them: the
	// caller decides), or ErrNotFound.
	SessionByHash(ctx context.Context, hash string) (Session, error)

	// ListSessions returns every session the store still holds, ended
	// ones included, by ID.
	ListSessions(ctx context.Context) ([]Session, error)

	// RevokeSession ends session id now, by by, and returns it;
	// ErrNotFound if there is no such session or it was already revoked.
	RevokeSession(ctx context.Context, id int64, by string) (Session, error)

	// RevokeSessionsOf ends every session of identity not yet revoked
	// nor expired, now, by by, and returns how many it ended (0 is not an
	// error).
	RevokeSessionsOf(ctx context.Context, identity, by string) (int, error)

	// TouchSession records that session id was used at at, as
	// TouchAPIToken does for tokens: crash safe, not durable.
	TouchSession(ctx context.Context, id int64, at time.Time) error

	// DeleteEndedSessions removes the sessions that expired or were
	// revoked before before, and returns how many it removed. Sessions
	// are credentials, not history: the audit log keeps sign-ins.
	DeleteEndedSessions(ctx context.Context, before time.Time) (int, error)
}

// Audit is the audit log, kept whole.
type Audit interface {
	// AppendAudit records r and returns its Seq (r.Seq is ignored; a zero
	// Time is set to the current time). Action, Identity and Outcome are
	// required. Audit records are never deleted.
	AppendAudit(ctx context.Context, r AuditRecord) (int64, error)

	// ListAudit returns the audit records matching f, oldest first.
	ListAudit(ctx context.Context, f AuditFilter) ([]AuditRecord, error)
}

// Secrets keeps drover's secrets, sealed at rest, in versions.
type Secrets interface {
	// PutSecret stores sec.Value as a new version of secret sec.Key and
	// returns it as stored (Version, and a zero CreatedAt, assigned; Value
	// nil): the first version is 0, each next one the highest number ever
	// given to the key plus 1, deleted versions included. A key or value
	// that CheckPut refuses is an error. Concurrent puts of one key get
	// distinct versions.
	PutSecret(ctx context.Context, sec Secret) (Secret, error)

	// GetSecret returns version version of secret key with its value, or
	// ErrNotFound (also for a deleted version).
	GetSecret(ctx context.Context, key string, version int64) (Secret, error)

	// ListSecrets returns every version not deleted, without values,
	// ordered by key and version.
	ListSecrets(ctx context.Context) ([]Secret, error)

	// DeleteSecret deletes version version of secret key, or every version
	// of it (AllSecretVersions), and returns how many it deleted; none is
	// ErrNotFound. A deleted version's value is erased and its number is
	// never given again.
	DeleteSecret(ctx context.Context, key string, version int64) (int, error)
}

// Processes records the commands runtimes started on this host and not yet
// seen to end.
type Processes interface {
	// AddProcess records a command that started and returns its id (p.ID is
	// ignored). Kind and Handle are required; a zero StartedAt is set to the
	// current time.
	AddProcess(ctx context.Context, p Process) (int64, error)

	// RemoveProcess deletes a process record, or returns ErrNotFound.
	RemoveProcess(ctx context.Context, id int64) error

	// ListProcesses returns every process record, oldest first.
	ListProcesses(ctx context.Context) ([]Process, error)
}

// Runs keeps the task runs (commands and their output) of instances.
type Runs interface {
	// RecordRun stores a finished task run and returns its id (r.ID is
	// ignored; ids increase). Application, service, release channel and kind
	// are required. A zero StartedAt or FinishedAt is set to the current
	// time. In the same transaction the store deletes the runs of the same
	// instance and kind beyond the newest 200.
	RecordRun(ctx context.Context, r TaskRun) (int64, error)

	// ListRuns returns task runs matching f, newest (most recently recorded,
	// whatever their times) first.
	ListRuns(ctx context.Context, f RunFilter) ([]TaskRun, error)

	// GetRun returns one task run by id, or ErrNotFound.
	GetRun(ctx context.Context, id int64) (TaskRun, error)
}

// Health reports whether the store can read and write.
type Health interface {
	// Check reports the store's health: nil when it can read and write;
	// otherwise an error that says what is wrong (its files were removed or
	// replaced, the last write failed for lack of space or an I/O error, a
	// read fails). It is cheap enough for every health request.
	Check(ctx context.Context) error
}

// Store is drover's durable state: every role, and Close. The composition
// root opens one and hands each consumer the roles it uses.
type Store interface {
	Configs
	DesiredStates
	Approvals
	Instances
	Work
	Events
	Facts
	Agents
	Tokens
	Sessions
	Audit
	Secrets
	Notifications
	Processes
	Runs
	Health

	// Close releases the store.
	Close() error
}

// Cache is the role of a store that keeps caches of what it holds in its
// own process: the SQLite store, the only writer of its file, caches
// instances and active desired states, configs, lease tokens and open
// tasks. Not part of Store: a store shared by several servers (PostgreSQL)
// keeps none. Every read answers the same with the caches as without them
// (storetest.RunCache checks it).
type Cache interface {
	// DropCaches empties every cache, so that the next reads go to the
	// database and fill them again. It is safe to call at any time,
	// concurrently with reads and writes.
	DropCaches(ctx context.Context) error
}
