// Package postgres implements store.Store on PostgreSQL (pgx v5, a pgxpool
// pool), for servers that share one database. It has the semantics of the
// SQLite store (internal/store/sqlite), which is the reference, and passes
// the conformance suite (storetest); where a choice is PostgreSQL's own, it
// is described here.
//
// # Schema and migrations
//
// The schema is versioned: migrations/NNNN_description.sql are embedded and
// applied in order at Open, each in its own transaction together with its row
// in schema_migrations(version, applied_at). Open takes the session-level
// advisory lock migrateLock on a dedicated connection around the whole run, so
// processes opening one database at once migrate it once: the first applies
// what is pending, the others wait, then find nothing to do. Opening a
// database whose schema is newer than the binary knows fails, naming both
// versions. Published migrations are never edited: changes are new files.
//
// 0001 creates the final form of the SQLite schema at once (tables configs,
// desired_states with desired_state_compiled, approvals, instances, events,
// task_runs, processes, leases, tasks, observations, runtime_facts; see the
// file's comments); 0002 adds linked_runtimes (runtimes served by agents:
// name, labels, token hash, agent state); 0003 adds replicas (the servers that
// accept agents: name, agent URL, when each last announced itself; not
// dumped); 0004 adds instances.checks (the last command check results); 0005
// adds api_tokens (API tokens, kept as the hash of their value, with a
// partial unique index on the names of those not revoked) and audit (the
// append-only audit log); 0006 adds sessions (the people signed in through
// the OpenID provider, kept as the hash of their secret; not dumped); 0007
// adds instances.runtime_memo (what the runtime remembers of its last
// apply). Times are BIGINT nanoseconds since the Unix
// epoch, NULL for the zero time: Go times round-trip to the nanosecond
// (timestamptz keeps microseconds), and come back in UTC; a time outside
// 1678-2262 fails the write. JSON documents and opaque payloads are BYTEA
// kept byte for byte, and so is command output (TaskRun.Stdout, Stderr),
// which need not be text. Lists of strings are TEXT[]. Keys and names lists
// are ordered by are COLLATE "C", so orders are byte-wise whatever the
// database's collation. PostgreSQL refuses NUL bytes and invalid UTF-8 in
// TEXT: in free text that may quote a command's output (messages, errors,
// comments, commands) they become U+FFFD rather than failing the write; in
// keys and names they fail it. Audit records are the exception: every field
// is cleaned as free text, so that a request is recorded whatever it named.
//
// # Transactions and locking
//
// Each method that writes is one statement or one transaction, READ
// COMMITTED, made correct under concurrency by row locks and advisory locks
// rather than by SERIALIZABLE:
//
//   - Configs: PutConfig and PutConfigs take the transaction advisory locks
//     of the configs' buckets (one of 256, by a hash of kind and name), then
//     compare with the latest version and insert the next: puts of one
//     config run one after another.
//   - Desired states: CreateDesiredState takes an advisory lock on
//     (application, service), so pushes of a service form one chain of
//     replacements; an id used by another service fails on the primary key
//     (ErrConflict). Retention (retention.go) locks the service's instances
//     FOR SHARE before it reads which desired states they reference.
//   - Approvals: AddApproval locks the desired state's row (FOR NO KEY
//     UPDATE) before it reads the approvals and calls decide, so calls for one
//     desired state are serialized and decide counts what is recorded; a
//     second record of a user and topic is refused by ON CONFLICT DO NOTHING
//     (ErrDuplicate).
//   - Instances: an update is conditional on the revision (UPDATE ... WHERE
//     revision = $n); a concurrent update makes it wait and re-check against
//     the committed row, so one writer of a revision wins and the others get
//     ErrConflict. A create is INSERT ... ON CONFLICT DO NOTHING.
//   - Fences: a batch's fence reads the lease row FOR SHARE, in the batch's
//     transaction: a claim that would hand out a newer token waits until the
//     fenced write committed, so no write fenced by an old token commits after
//     a newer one was handed out.
//   - Leases: ClaimLease is one upsert whose ON CONFLICT DO UPDATE is
//     conditional on the stored owner and expiry (evaluated on the locked,
//     committed row): concurrent claims have one winner; renew and release
//     are UPDATEs guarded by owner and token.
//   - Tasks: ClaimTasks is one UPDATE of the rows a subquery picks with FOR
//     UPDATE SKIP LOCKED, so concurrent claimers never wait for or share a
//     task; heartbeats, completions and releases are UPDATEs guarded by status,
//     owner and token (ErrFenced when they change no row), completions and
//     releases in one transaction with their batch. At most one open task per
//     key and instance is the partial unique index tasks_open_instance
//     (ErrConflict).
//   - Task runs: RecordRun takes an advisory lock on (application, service,
//     release channel, kind) before it draws the id, so runs of one instance
//     and kind commit in id order and pruning keeps exactly the newest 200.
//   - API tokens: each method is one statement. The unique hash and the
//     partial unique index api_tokens_live_name (the names of tokens not
//     revoked) decide concurrent creates (ErrConflict); a revoke is an UPDATE
//     of the live row, so of concurrent revokes one wins and the others find
//     none (ErrNotFound).
//   - Sessions: the same, by id: the unique hash decides concurrent creates
//     (ErrConflict), a revoke is an UPDATE of the row not revoked yet.
//
// Lease and claim expiry, and when replicas were last seen, are decided by
// the database's clock (statement_timestamp()), so processes on several hosts
// agree on them whatever their clocks; the other times the store assigns
// (creation, update, event times) are the calling process's.
//
// A transaction PostgreSQL aborts as a deadlock victim (40P01: two batches
// that update the same instances in opposite orders, say) is run again, whole
// (AddApproval calls decide again), after a short jittered pause, until it
// succeeds or its context ends: callers never see those errors (nor 40001,
// which READ COMMITTED does not raise but which is retried the same way).
// Single statements outside a transaction (lease and claim updates, task
// claims) wait for at most one row lock while holding none, so they cannot
// be deadlock victims. Unique violations are returned as store.ErrConflict.
//
// Retention locks the instances that exist; an instance created concurrently
// with a push (Write with Revision 0) is not seen by that push's pruning. The
// engine creates instances pointing at the active desired state, which
// pruning never touches.
//
// # Event order
//
// Seq is an identity column (CACHE 1, so values are drawn in call order
// across sessions). A sequence alone does not make seqs commit in order: a
// transaction may draw seq 10, another 11 and commit first, and a reader
// paging with AfterSeq = 11 would never see 10. So every transaction that
// appends events takes the transaction-level advisory lock eventsLock just
// before it inserts them, as its last statement, and holds it until it
// commits (insertEvents): transactions draw seqs and commit one after
// another, and PostgreSQL releases a transaction's locks only once its commit
// is visible. A reader that sees seq n therefore sees every smaller seq that
// will ever exist. The cost is that the tails of event-appending
// transactions (the inserts and the commit) are serialized database-wide,
// which is what the SQLite store's single writer does for every write;
// everything else in those transactions runs concurrently.
//
// The audit log's seq is ordered the same way, with a lock of its own
// (auditLock): AppendAudit takes it before it inserts, in a transaction of
// its own, so a reader paging the audit log with AfterSeq skips no record.
//
// # Deployment
//
// Open connects with a URL or key=value string as pgx parses them; unless it
// sets pool_max_conns, the pool holds up to max(8, 4*GOMAXPROCS)
// connections. The session needs CREATE on its schema for the first Open.
// Session-level advisory locks and pgx's prepared statements need session
// pooling: a connection pooler in transaction mode is not supported. Check
// runs one query: it fails when the database cannot be read, is a standby or
// read-only, or has another schema version than the binary, and when the last
// write failed for a reason of the storage (a full disk, an I/O error) and no
// write succeeded since.
package postgres
