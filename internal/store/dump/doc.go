// Package dump is drover's store-neutral dump format: the whole state of an
// installation as a stream of JSON lines, which moves it from one store to
// another (the embedded SQLite store to PostgreSQL, or back) without losing
// history. drover admin export writes one, drover admin import reads one.
//
// # Format
//
// A dump is UTF-8 text, one JSON object per line, each line ending in "\n".
// The first line is the header:
//
//	{"format":"drover-dump","version":1,"exportedAt":"2026-01-02T15:04:05.123456789Z","store":"sqlite"}
//
// format is always "drover-dump"; version is the format's version (Version),
// and a reader refuses a version newer than it knows; store says which kind of
// store wrote it (information only). Then comes one line per record,
//
//	{"kind":"event","record":{"seq":1,"time":"…","type":"pushed","message":"…"}}
//
// in this order of kinds, so that everything a record refers to comes before
// it: config, desiredState, approval, instance, observation, event, taskRun,
// task, lease, runtimeFacts, linkedRuntime, apiToken, audit, secret,
// notifyTarget, delivery. The last line closes the dump and counts the
// records before it:
//
//	{"kind":"end","record":{"records":1234}}
//
// A dump without it was cut short (a full disk, an interrupted copy) and is
// refused, as is anything after it, a line that is not valid JSON, a record of
// an unknown kind or with a field this version does not know, and records out
// of order: errors name the line.
//
// Kinds added to the format come after the kinds before them, and a dump
// need not hold a record of every kind: a dump of an older drover, which
// knows no apiToken or audit records (or no notifyTarget and delivery
// records), is still in order and imports as it did (into a store then
// without API tokens and audit log, or without notifications).
//
// # Records
//
// Each kind's record has the fields of the store's own record (see the types
// of this package: Config, DesiredState, Approval, Instance, Observation,
// Event, TaskRun, Task, Lease, RuntimeFacts, LinkedRuntime, APIToken,
// AuditRecord, Secret, NotifyTarget, Delivery), in their JSON form: times in RFC 3339 with up to nine
// fractional digits in UTC (exact to the nanosecond), byte fields in standard
// base64 (kept byte for byte; an empty value is "", an absent one is left
// out), and text as JSON strings.
//
//   - config: every version of every config, ordered by kind, name and version.
//   - desiredState: every desired state in the order they were created (the
//     order "newest first" lists read), with replacedBy (the chain of
//     replacements) and prunedAt (retention dropped its compiled copy).
//     compiled is the copy the desired state holds itself; a desired state
//     whose copy is shared with an earlier, identical one has none and names
//     it in compiledFrom instead, as the stores keep them.
//   - approval: every approval and rejection, in the order recorded.
//   - instance: every instance with its revision, so optimistic concurrency
//     goes on where it stopped.
//   - observation: what the engine last saw of each instance, with since.
//   - event: the whole history, with each event's original seq and time: an
//     event stream resumed after seq N (the API's ?after=N) goes on where it
//     was after a move.
//   - taskRun: the task runs kept, with their original ids (drover run ID)
//     and their output byte for byte (stdout and stderr are bytes, as
//     command output need not be text).
//   - task: the durable tasks with their ids, status, owner, claim token,
//     attempts and times.
//   - lease: every lease key ever claimed with its owner, fencing token and
//     expiry: tokens are kept, so fencing stays monotonic after a move.
//   - runtimeFacts: what each runtime last reported about its backend.
//   - linkedRuntime: every runtime served by an agent, ordered by name, with
//     its labels, the hash of its agent's join token (so linked agents
//     reconnect after a move without new tokens; the tokens themselves are
//     never stored) and what its agent last reported (agent).
//   - apiToken: every API token, revoked ones included, by id, with its
//     original id, roles and times (created, expires, revoked, last used)
//     and the hash of the token: tokens go on working after a move, and the
//     tokens themselves are never stored. Hashes are unique, and so are the
//     names of the tokens not revoked.
//   - audit: the whole audit log, with each record's original seq and time,
//     so that a reader paging it after seq N goes on where it was.
//   - secret: every version of every secret of the secret store (drover
//     secrets set), ordered by key and version, with its value as the store
//     keeps it (sealed with the store's keyring: the target needs the same
//     keyring), who made it and when; a deleted version has no value and its
//     deletedAt, so that its number is never given again after a move.
//   - notifyTarget: every notification target (drover notifications add,
//     an application's notifications.slack), ordered by name, with its
//     kind, its filter lists, its source, who made it and when, and its
//     spec as the store keeps it (sealed with the store's keyring, as
//     secrets' values: the target needs the same keyring).
//   - delivery: the outbox of notifications, every delivery by id with its
//     original id, target, key (its target's deliveries of one key go one
//     at a time, in order), notification type, event (eventSeq), state,
//     attempts, when it is due (nextAt), last error, claim (owner,
//     claimedUntil) and times: pending deliveries go on after a move, a
//     claim held stays held by its owner until it expires, and ids stay
//     stable. A delivery not delivered names a target and an event before
//     it (a delivered one may outlive both).
//
// Processes (store.Process) are not exported: they name process groups of
// the host that ran the exporting server (to end what a crashed server left
// running), which mean nothing, or the wrong processes, on another host or
// after a restart. Stop the server before exporting, and it ends them itself.
// A reader still accepts records of the kind "process" (last, after the
// deliveries), and importers skip them.
//
// Sessions (store.Session: the people signed in through the OpenID
// provider) are not exported either, and there is no kind for them: they
// are short-lived credentials, and a moved or restored installation
// requires people to sign in again. An importer deletes the sessions the
// target store holds (in its transaction: a failed import keeps them), as
// they were issued before the import; they do not make a store count as
// not empty.
//
// Text is JSON text: a string of invalid UTF-8, which only the SQLite store
// can hold (in free text that quotes a command's output, such as an event
// message), is written with U+FFFD in place of the invalid bytes, as the
// PostgreSQL store stores it. Command output is bytes and kept exactly. An
// empty byte value ("") and an absent one differ in a dump and in the
// PostgreSQL store; the SQLite store reads both back as absent (nil).
//
// # Export and import
//
// A store that can be dumped implements Exporter: it reads every record in
// one consistent snapshot (one read transaction). A store that can be loaded
// implements Importer: it loads a dump into an empty store only (a store
// holding any record fails with ErrNotEmpty), in one transaction (a dump that
// fails halfway writes nothing), and moves its sequences and identities past
// the imported maximums, so that events, task runs and tasks created after
// the import continue after the imported ones (API tokens, audit records and
// deliveries too). Write and Read connect them to a file.
package dump
