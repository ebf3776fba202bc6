// Package sqlite implements store.Store on an embedded SQLite database
// (modernc.org/sqlite: pure Go, no cgo). It is drover's default store.
//
// # Durability
//
// The database runs in WAL mode with synchronous=FULL: a transaction's commit
// fsyncs the write-ahead log before Commit returns, so every write that
// returned survives a SIGKILL of the server and a power loss or kernel crash
// (given storage that honours fsync). WAL lets readers proceed while a write
// is in progress. Foreign keys are enforced. busy_timeout (5s) only matters
// when another process (a second server, the sqlite3 shell, a backup) holds a
// lock.
//
// # Connections and transactions
//
// Writes go through a pool of exactly one connection, so the process's write
// transactions run one at a time, queued in call order (and honouring their
// contexts while they wait); they never fail with
// SQLITE_BUSY against each other. Write transactions begin IMMEDIATE, taking
// SQLite's write lock up front rather than upgrading a read lock mid-
// transaction, which could fail against another process. Each Store method
// that writes is one transaction: the records and their events commit
// together or not at all. Writes that arrive while another commits are
// committed with it (group commit, group.go): each runs in its own savepoint,
// so one that fails is undone alone, and each returns once the group's
// commit did. Reads use a separate pool of query_only connections
// and see the last committed state. Hot statements (event insert, instance
// insert/update, task run insert/prune) are prepared once on the write
// connection.
//
// # Instance cache
//
// The store keeps each service's instances (up to 250,000) and its active
// desired state in memory once read, so that the engine's passes and task
// completions read them without a query: every instance write goes through the write
// transactions here, which put what they committed into the cache, and a
// read that missed fills it only if no commit touched the service
// meanwhile (instcache.go). This holds because the store is its file's only
// writer: a server takes its data directory's lock, and writing to the
// database from another process (the sqlite3 shell) while a server runs is
// not supported. Lists across services (ListInstances of an application or
// of all, ListInstancesIn, ListInstanceBriefs) read the file.
//
// # Files and health
//
// Open creates the database with mode 0600 and tightens existing files to
// 0600 (SQLite gives -wal and -shm the database's mode); refuses a missing
// or empty database while path+MarkerSuffix (written at the first open) says
// one existed; runs PRAGMA quick_check and refuses damage; and reports a
// full disk as "no space left on device". It remembers the device and inode
// of the file and its directory: each write transaction checks them before
// it commits (two stat calls), and once they changed every write fails with
// ErrReplaced. Check adds a small read and the outcome of the last write.
//
// # Retention
//
// CreateDesiredState shares the compiled copy of the active desired state
// when the new one is identical (compiled_from), and drops the compiled copy
// of superseded desired states beyond KeepSuperseded that no instance needs
// (pruned_at); see retention.go.
//
// Opening MemoryPath gives a private in-memory database on a single
// connection, for tests of other packages; it is not durable.
//
// # Schema
//
// The schema is versioned: migrations/NNNN_description.sql are embedded and
// applied in order at Open, each in its own transaction together with its row
// in schema_migrations(version, applied_at); a migration that fails leaves
// the database at the previous version. Opening a database whose schema is
// newer than the binary knows fails, naming both versions. Published
// migrations are never edited: changes are new files. (A migration that
// rebuilds a table must account for foreign_keys being on, which cannot be
// switched off inside a transaction.)
//
// Tables:
//
//   - configs: every version of every config object, primary key (kind, name,
//     version). PutConfig compares the hash with the latest version only.
//   - desired_states: every push. ord (an INTEGER PRIMARY KEY) is the order
//     of creation, which "newest first" uses (never the clock). A partial
//     unique index allows one active (replaced_by IS NULL) desired state per
//     (application, service); replaced_by references the replacing id with a
//     deferred foreign key.
//   - approvals: unique (desired_state_id, topic, user_name); a second
//     approval of the same topic by the same user is refused
//     (store.ErrDuplicate) and its events are not written. AddApproval reads
//     the desired state and its approvals and inserts in one write
//     transaction, so its decision cannot race another approval.
//   - instances: primary key (application, service, release_channel) and a
//     revision for optimistic concurrency: a write updates the row only where
//     revision matches (or inserts only where no row exists, for revision 0).
//   - apply_attempts: dropped by 0008 (durable tasks carry what it held).
//   - events: seq INTEGER PRIMARY KEY AUTOINCREMENT, so sequence numbers
//     increase strictly and are never reused.
//   - task_runs (0002): AUTOINCREMENT id; the command as a JSON array, the
//     output as TEXT kept byte for byte. RecordRun deletes, in the same
//     transaction, the runs of the instance and kind older than the newest
//     200, using the index on (application, service, release_channel, kind,
//     id DESC), which also serves listing newest first.
//   - desired_states (0003): compiled_from (the row whose compiled copy this
//     one shares) and pruned_at (retention dropped the compiled copy).
//   - desired_state_compiled (0009): the compiled copies, by desired state
//     id, apart from the desired_states rows so that reading a row's other
//     columns never walks a large copy's overflow pages.
//   - processes (0004): the commands running on this host, one row from a
//     command's start until its process group is gone; the handle (how to
//     find the group again) is an opaque BLOB.
//
// Times are stored as TEXT in UTC with nine fractional digits
// ("2006-01-02T15:04:05.000000000Z"): exact to the nanosecond, readable in the
// sqlite3 shell and sortable; NULL is the zero time. They come back in UTC.
// JSON fields (config bodies, compiled desired states, params,
// event data) are BLOBs kept byte for byte; nil is NULL. An instance's
// satisfied conditions are a JSON array in TEXT ("[]" when empty).
package sqlite
