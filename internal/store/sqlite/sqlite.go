package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/drover-dev/drover/internal/store/migration"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"github.com/drover-dev/drover/internal/store"
	"github.com/drover-dev/drover/internal/store/sqlcore"
)

// MemoryPath opens a private in-memory database (for tests of other packages):
// nothing is durable and reads share the single writer connection.
const MemoryPath = ":memory:"

// busyTimeout is how long a connection waits for a lock held by another
// process (or by a checkpoint) before failing with SQLITE_BUSY. Writers of
// this process never wait on each other inside SQLite: they queue for the
// single write connection instead.
const busyTimeout = 5 * time.Second

// Store is the SQLite implementation of store.Store. It is safe for
// concurrent use.
type Store struct {
	// sealer encrypts config bodies and desired states' parameters and
	// compiled forms at rest (nil: they are kept as they are).
	sealer store.Sealer
	// write has exactly one connection: every write transaction of the
	// process runs on it, one after another, so writers never contend for
	// SQLite's lock. Its transactions begin IMMEDIATE, taking the write lock
	// up front, so a transaction never has to upgrade a read lock (which can
	// fail with SQLITE_BUSY against another process regardless of
	// busy_timeout).
	write *sql.DB
	// reads caches prepared statements of read queries on read.
	reads *stmtCache
	// read is a pool of query_only connections. In WAL mode readers see the
	// last committed transaction and neither block nor are blocked by the
	// writer. For MemoryPath it is the same pool as write.
	read *sql.DB
	// wstmts are the write transactions' statements, prepared once on the
	// write connection (see wtx.go).
	wstmts writeStmts
	// health is what Check reports: the files' identity, and the outcome
	// of the last write (see health.go).
	health health
	// group queues write transactions for group commit (see group.go).
	group group
	// instances caches each service's instances (see instcache.go).
	instances instanceCache
	// configs caches the latest version of every config (configcache.go).
	configs configCache
	// instBuf are the instance write lists of the last group's
	// transaction, kept for the next (see reuse).
	instBuf instWrites
	// leases caches the committed lease tokens for fence checks, and
	// leaseBuf is the last group's list of notes, kept for the next (see
	// leasecache.go).
	leases   leaseCache
	leaseBuf []leaseToken
	// openTasks caches the open tasks of each key (see opentasks.go).
	openTasks openTasks
	// syncConn and syncMode are the write connection (its driver
	// connection) and the synchronous mode the last group set on it: a
	// group in the same mode on the same connection need not set it again.
	syncConn any
	syncMode string
	// ckpt checkpoints the WAL beside the writer (see checkpoint.go; nil
	// for MemoryPath).
	ckpt *checkpointer
	// keepSuperseded is the retention bound of CreateDesiredState (see
	// retention.go); negative keeps everything.
	keepSuperseded int
}

var _ store.Store = (*Store)(nil)

// Open opens (creating it if needed) the SQLite database at path and applies
// any pending schema migrations. It fails if the database's schema is newer
// than this binary knows. path is a file name or MemoryPath.
//
// Opening a file also: refuses a missing or empty database whose marker
// (path+MarkerSuffix) says it existed, creates the files with mode 0600 and
// tightens existing ones, runs PRAGMA quick_check (a corrupted database is
// refused), and remembers the file's identity for Check. A full disk is
// reported as "no space left on device".
func Open(ctx context.Context, path string, opts ...Option) (*Store, error) {
	o := options{keepSuperseded: store.DefaultKeepSuperseded}
	for _, opt := range opts {
		opt(&o)
	}
	s, err := open(ctx, path, migrations)
	if err == nil {
		s.keepSuperseded = o.keepSuperseded
		s.sealer = o.sealer
		if err = s.prepare(ctx); err != nil {
			_ = s.Close()
		}
	}
	if err != nil {
		if path != MemoryPath && path != "" {
			err = explainDiskFull(filepath.Dir(path), err)
		}
		if !errors.Is(err, ErrCorrupt) {
			// Damage found before quick_check ran (reading the schema,
			// preparing statements) gets the same advice.
			err = corrupted(err.Error(), err)
		}
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	return s, nil
}

// open opens the database and migrates it with ms.
func open(ctx context.Context, path string, ms []migration.Migration) (*Store, error) {
	if path == "" {
		return nil, errors.New("empty path")
	}
	params := []string{
		fmt.Sprintf("_pragma=busy_timeout(%d)", busyTimeout.Milliseconds()),
		"_pragma=foreign_keys(1)",
	}
	memory := path == MemoryPath
	var name string
	if memory {
		name = MemoryPath
	} else {
		abs, err := filepath.Abs(path)
		if err != nil {
			return nil, err
		}
		name = "file:" + escapePath(filepath.ToSlash(abs))
		if err := prepareFile(abs); err != nil {
			return nil, err
		}
		path = abs
	}
	writeParams := append(params[:len(params):len(params)],
		"_pragma=journal_mode(WAL)",
		"_pragma=synchronous(FULL)",
		// Group commit runs each write in a savepoint: keep their
		// sub-journals in memory rather than in temporary files.
		"_pragma=temp_store(MEMORY)",
		// The writer touches every table's hot pages (instances, events,
		// tasks, their indexes): a larger page cache than the default 2 MiB
		// saves reading them back from the OS at each transaction.
		fmt.Sprintf("_pragma=cache_size(%d)", -writeCacheKiB),
		fmt.Sprintf("_pragma=wal_autocheckpoint(%d)", backstopCheckpointPages),
		"_txlock=immediate",
	)
	write, err := sql.Open("sqlite", name+"?"+strings.Join(writeParams, "&"))
	if err != nil {
		return nil, err
	}
	oneConnection(write)
	s := &Store{write: write, read: write, reads: &stmtCache{db: write}}
	if err := s.init(ctx, memory, ms); err != nil {
		_ = s.Close()
		return nil, err
	}
	if memory {
		return s, nil
	}
	read, err := sql.Open("sqlite", name+"?"+strings.Join(append(params, "_pragma=query_only(1)"), "&"))
	if err != nil {
		_ = s.Close()
		return nil, err
	}
	n := max(4, runtime.GOMAXPROCS(0))
	read.SetMaxOpenConns(n)
	read.SetMaxIdleConns(n)
	s.read = read
	s.reads = &stmtCache{db: read}
	if err := read.PingContext(ctx); err != nil {
		_ = s.Close()
		return nil, err
	}
	if err := s.adoptFiles(path); err != nil {
		_ = s.Close()
		return nil, err
	}
	if s.ckpt, err = startCheckpointer(name + "?" + strings.Join(params, "&")); err != nil {
		_ = s.Close()
		return nil, err
	}
	return s, nil
}

// oneConnection keeps db to one connection, open for as long as db is.
func oneConnection(db *sql.DB) {
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
}

// init checks the write connection's settings and migrates the schema.
func (s *Store) init(ctx context.Context, memory bool, ms []migration.Migration) error {
	var mode string
	if err := s.write.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return err
	}
	if !memory && !strings.EqualFold(mode, "wal") {
		return fmt.Errorf("journal_mode is %q, want wal (does the file system support WAL?)", mode)
	}
	var sync int
	if err := s.write.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&sync); err != nil {
		return err
	}
	if sync != 2 { // FULL
		return fmt.Errorf("synchronous is %d, want 2 (FULL)", sync)
	}
	if !memory {
		if err := quickCheck(ctx, s.write); err != nil {
			return err
		}
	}
	return migrate(ctx, s.write, ms)
}

// prepare prepares the hottest write statements on the write connection
// up front (the others are prepared when first used, see wtx.go), which also
// checks them against the schema.
func (s *Store) prepare(ctx context.Context) error {
	s.wstmts.m = make(map[string]*sql.Stmt)
	for _, q := range []string{insertEvent, insertInstance, updateInstance, insertRun, pruneRuns,
		sharedCopyQuery, unprunedQuery, pruneSuperseded} {
		st, err := s.write.PrepareContext(ctx, q)
		if err != nil {
			return fmt.Errorf("prepare %q: %w", q, err)
		}
		s.wstmts.m[q] = st
	}
	return nil
}

// escapePath escapes the characters that are special in a SQLite URI file name.
func escapePath(p string) string {
	return strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(p)
}

// Close closes the database. Outstanding calls may fail.
func (s *Store) Close() error {
	var err error
	if s.reads != nil {
		s.reads.close()
	}
	if s.read != nil && s.read != s.write {
		err = s.read.Close()
	}
	err = errors.Join(err, s.wstmts.close(), s.ckpt.close())
	// The write pool closes last: closing the last connection checkpoints the
	// WAL into the database file.
	if s.write != nil {
		err = errors.Join(err, s.write.Close())
	}
	return err
}

// writeCacheKiB is the write connection's page cache.
const writeCacheKiB = 16 << 10

// durability says how hard a commit waits for the disk.
type durability int

const (
	// durable commits survive a power loss (synchronous=FULL: the WAL is
	// synced at every commit). For what people send: configs, desired states,
	// approvals.
	durable durability = iota
	// crashSafe commits survive the process being killed at any instant
	// (synchronous=NORMAL in WAL mode: the commit is in the OS before it
	// returns), but a power loss may undo the last ones before the next WAL
	// checkpoint. For the engine's own bookkeeping (instance states, apply
	// attempts, events), which it re-derives from the runtimes, and for task
	// runs, whose last few can be lost; this is what lets the engine write
	// thousands of small transactions per second.
	crashSafe
)

// writeTx runs fn in a durable write transaction and commits it when fn succeeds.
func (s *Store) writeTx(ctx context.Context, fn func(tx *wtx) error) error {
	return s.writeTxMode(ctx, durable, fn)
}

// writeTxMode runs fn in a write transaction with the given durability:
// committed together with the writes queued beside it (group commit, see
// group.go), it returns once the commit did.
func (s *Store) writeTxMode(ctx context.Context, d durability, fn func(tx *wtx) error) error {
	return s.group.run(ctx, s, &writeReq{ctx: ctx, d: d, fn: fn})
}

// writeTxRerun is writeTxMode for an fn that may run more than once, in
// transactions rolled back but the last: fn then writes only through tx
// (the notes of tx included) and sets each of its results afresh at every
// run. Such a request commits with no savepoint of its own (see
// commitGroup), which is what the engine's writes need most.
func (s *Store) writeTxRerun(ctx context.Context, d durability, fn func(tx *wtx) error) error {
	return s.group.run(ctx, s, &writeReq{ctx: ctx, d: d, fn: fn, rerun: true})
}

// now is the store's clock, truncated to what the store keeps.
func now() time.Time { return time.Now().UTC().Round(0) }

// timeLayout formats times in UTC with a fixed nine-digit fraction so that the
// text round-trips exactly and sorts chronologically.
const timeLayout = "2006-01-02T15:04:05.000000000Z07:00"

// dbTime encodes t for a TEXT column; the zero time is NULL.
func dbTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC().Format(timeLayout)
}

// scanTime decodes a TEXT time column (NULL = zero time) into *t.
type scanTime struct{ t *time.Time }

func (s scanTime) Scan(src any) error {
	var text string
	switch v := src.(type) {
	case nil:
		*s.t = time.Time{}
		return nil
	case string:
		text = v
	case []byte:
		text = string(v)
	default:
		return fmt.Errorf("time column: unexpected %T", src)
	}
	t, err := time.Parse(timeLayout, text)
	if err != nil {
		// Times migrated out of JSON (0005) are in Go's JSON form.
		if t2, err2 := time.Parse(time.RFC3339Nano, text); err2 == nil {
			t, err = t2, nil
		}
	}
	if err != nil {
		return fmt.Errorf("time column: %w", err)
	}
	*s.t = t.UTC()
	return nil
}

// dbStrings encodes a list for a TEXT column holding a JSON array.
func dbStrings(list []string) string {
	if len(list) == 0 {
		return "[]"
	}
	b, err := json.Marshal(list)
	if err != nil { // a []string always marshals
		return "[]"
	}
	return string(b)
}

// dbChecks is the TEXT form of an instance's check results: a JSON array
// ("[]" when empty).
func dbChecks(list []store.CheckResult) string {
	if len(list) == 0 {
		return "[]"
	}
	b, err := json.Marshal(list)
	if err != nil { // plain fields always marshal
		return "[]"
	}
	return string(b)
}

// scanJSON decodes a TEXT column holding JSON (sqlcore.JSONColumn).
type scanJSON = sqlcore.JSONColumn

// dbBytes keeps nil as NULL and stores everything else as a BLOB.
func dbBytes(b []byte) any {
	if b == nil {
		return nil
	}
	return b
}

// limitClause returns " LIMIT n" for n > 0, or "".
func limitClause(n int) string {
	if n <= 0 {
		return ""
	}
	return fmt.Sprintf(" LIMIT %d", n)
}
