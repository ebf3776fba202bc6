package postgres

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/drover-dev/drover/internal/sealing"
	"github.com/drover-dev/drover/internal/store"
	"github.com/drover-dev/drover/internal/store/storetest"
	"github.com/drover-dev/drover/internal/testing/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// open opens a store on a fresh database, closed when the test ends.
func open(t *testing.T, opts ...Option) *Store {
	t.Helper()
	s, err := Open(t.Context(), pgtest.NewDatabase(t), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := Open(t.Context(), pgtest.NewDatabase(t))
		if err != nil {
			t.Fatal(err)
		}
		// The suite closes the store too; closing a pool twice is harmless.
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}

// TestConformanceSealed: a store that seals config bodies and desired
// states passes the same suite.
func TestConformanceSealed(t *testing.T) {
	keys, err := sealing.ParseKeyring(sealing.NewKey())
	if err != nil {
		t.Fatal(err)
	}
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := Open(t.Context(), pgtest.NewDatabase(t), WithSealer(keys))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}

// TestOpenConcurrently: processes opening one new database at once migrate
// it once; every Open succeeds.
func TestOpenConcurrently(t *testing.T) {
	url := pgtest.NewDatabase(t)
	const n = 5
	var wg sync.WaitGroup
	errs := make([]error, n)
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			s, err := Open(t.Context(), url)
			if err == nil {
				err = s.Check(t.Context())
				_ = s.Close()
			}
			errs[i] = err
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Open %d: %v", i, err)
		}
	}
	conn := connect(t, url)
	var count, version int64
	if err := conn.QueryRow(t.Context(), "SELECT count(*), max(version) FROM schema_migrations").Scan(&count, &version); err != nil {
		t.Fatal(err)
	}
	if count != int64(len(migrations)) || version != latestVersion() {
		t.Errorf("schema_migrations has %d rows up to version %d, want %d up to %d", count, version, len(migrations), latestVersion())
	}
}

func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

// TestOpenNewerSchema: a database migrated by a newer binary is refused,
// naming both versions; Check of a store open on it says so too.
func TestOpenNewerSchema(t *testing.T) {
	url := pgtest.NewDatabase(t)
	s, err := Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	conn := connect(t, url)
	if _, err := conn.Exec(t.Context(), "INSERT INTO schema_migrations (version, applied_at) VALUES ($1, 0)", latestVersion()+1); err != nil {
		t.Fatal(err)
	}
	if err := s.Check(t.Context()); err == nil {
		t.Error("Check of a database a newer binary migrated passed")
	}
	_, err = Open(t.Context(), url)
	if err == nil || !strings.Contains(err.Error(), "newer than this binary") {
		t.Errorf("Open of a newer schema: %v", err)
	}
}

// TestTimesExact: times round-trip to the nanosecond, also at the edges of
// what the store keeps; times beyond them fail the write, naming the time.
func TestTimesExact(t *testing.T) {
	s := open(t)
	ctx := t.Context()
	for i, tm := range []time.Time{
		time.Date(2025, 3, 14, 15, 9, 26, 535897932, time.FixedZone("x", 3600)),
		time.Unix(0, 0),
		time.Unix(0, 1),
		minNanos.Add(time.Nanosecond),
		maxNanos,
	} {
		evs := []store.Event{{Type: "t", Message: "m", Time: tm}}
		if err := s.AppendEvents(ctx, evs...); err != nil {
			t.Fatalf("time %d (%v): %v", i, tm, err)
		}
		got, err := s.ListEvents(ctx, store.EventFilter{AfterSeq: evs[0].Seq - 1, Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || !got[0].Time.Equal(tm) || got[0].Time.Location() != time.UTC {
			t.Errorf("time %d: stored %v, read back %v", i, tm, got)
		}
	}
	far := time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC)
	err := s.AppendEvents(ctx, store.Event{Type: "t", Time: far})
	if err == nil || !strings.Contains(err.Error(), "out of range") {
		t.Errorf("a time in 2300: %v, want out of range", err)
	}
}

// TestTextCleaned: free text with NUL bytes or invalid UTF-8 (a command's
// output quoted in a message) is stored with U+FFFD in their place rather
// than failing the write (a run of bad bytes becomes one); a run's output is kept byte for byte.
func TestTextCleaned(t *testing.T) {
	s := open(t)
	ctx := t.Context()
	bad := "exit \x00 status \xff\xfe done"
	evs := []store.Event{{Type: "failed", Message: bad}}
	if err := s.AppendEvents(ctx, evs...); err != nil {
		t.Fatal(err)
	}
	got, err := s.ListEvents(ctx, store.EventFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if want := "exit \uFFFD status \uFFFD done"; len(got) != 1 || got[0].Message != want {
		t.Errorf("message read back as %+v, want %q", got, want)
	}
	id, err := s.RecordRun(ctx, store.TaskRun{Application: "a", Service: "s", ReleaseChannel: "c", Kind: "apply",
		Stdout: bad, Stderr: "\x00", Error: bad, Command: []string{"sh", bad}})
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.GetRun(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if r.Stdout != bad || r.Stderr != "\x00" {
		t.Errorf("output read back as %q, %q; want it byte for byte", r.Stdout, r.Stderr)
	}
}

// TestEventsCommitInSeqOrder: while writers append events concurrently, a
// reader paging with AfterSeq never skips an event: every seq it has passed
// is one it saw. (Without the events lock, a transaction could commit a
// smaller seq after the reader moved past it.)
func TestEventsCommitInSeqOrder(t *testing.T) {
	s := open(t)
	ctx := t.Context()
	seqs := func(evs []store.Event, err error) ([]int64, error) {
		out := make([]int64, len(evs))
		for i, e := range evs {
			out[i] = e.Seq
		}
		return out, err
	}
	checkPagedReader(t, "event", func(w, i int) error {
		// A batch with an instance write makes the transactions longer
		// and their commits more spread out.
		in := store.Instance{Application: "a", Service: "s", ReleaseChannel: string(rune('a' + w)), Status: "x"}
		b := &store.Batch{Events: []store.Event{{Type: "e", Message: "m"}}}
		if i == 0 {
			b.Instances = []store.Instance{in}
		}
		return s.Write(ctx, b)
	}, func(after int64) ([]int64, error) {
		return seqs(s.ListEvents(ctx, store.EventFilter{AfterSeq: after}))
	})
}

// checkPagedReader has writers append records concurrently (write(w, i)
// adds writer w's i-th), while a reader pages with list(after), the seqs
// after a seq in order: it fails when the reader passed a seq it never saw,
// or when the records are not all there in the end.
func checkPagedReader(t *testing.T, what string, write func(w, i int) error, list func(after int64) ([]int64, error)) {
	t.Helper()
	const writers, per = 6, 40
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range per {
				if err := write(w, i); err != nil {
					t.Errorf("writer %d: %v", w, err)
					return
				}
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	var (
		after int64
		seen  = map[int64]bool{}
	)
	for finished := false; !finished; {
		select {
		case <-done:
			finished = true
		default:
		}
		page, err := list(after)
		if err != nil {
			t.Fatal(err)
		}
		for _, seq := range page {
			seen[seq] = true
			after = seq
		}
	}
	all, err := list(0)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != writers*per {
		t.Fatalf("%d %ss, want %d", len(all), what, writers*per)
	}
	for _, seq := range all {
		if !seen[seq] {
			t.Errorf("the reader paging by seq skipped %s %d", what, seq)
		}
	}
}

// TestKeepSuperseded: the option bounds how many superseded desired states
// keep their compiled copy.
func TestKeepSuperseded(t *testing.T) {
	s := open(t, KeepSuperseded(1))
	ctx := t.Context()
	for _, id := range []string{"ds-0", "ds-1", "ds-2", "ds-3"} {
		ds := store.DesiredState{ID: id, Application: "a", Service: "s", Compiled: []byte(`{"id":"` + id + `"}`)}
		if err := s.CreateDesiredState(ctx, ds); err != nil {
			t.Fatal(err)
		}
	}
	for id, kept := range map[string]bool{"ds-0": false, "ds-1": false, "ds-2": true, "ds-3": true} {
		ds, err := s.GetDesiredState(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if (ds.Compiled != nil) != kept || ds.PrunedAt.IsZero() != kept {
			t.Errorf("%s: compiled %q, pruned at %v; kept = %v", id, ds.Compiled, ds.PrunedAt, kept)
		}
	}
}

// TestCanceledMigration: an Open whose context ends while it waits for
// another's migration lock fails with the context's error, and leaves the
// lock usable.
func TestCanceledMigration(t *testing.T) {
	url := pgtest.NewDatabase(t)
	conn := connect(t, url)
	if _, err := conn.Exec(t.Context(), "SELECT pg_advisory_lock($1)", migrateLock); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	_, err := Open(ctx, url)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Open while another migrates: %v, want the deadline", err)
	}
	if _, err := conn.Exec(t.Context(), "SELECT pg_advisory_unlock($1)", migrateLock); err != nil {
		t.Fatal(err)
	}
	s, err := Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
}

// TestDeadlockRetried: two batches that lock instances in opposite orders
// deadlock (a gate row held elsewhere lines them up: each has locked its
// first instance when the gate opens); PostgreSQL aborts one, which the store
// runs again: one batch wins and the other gets ErrConflict, never
// PostgreSQL's deadlock error (as it did with retries disabled).
func TestDeadlockRetried(t *testing.T) {
	url := pgtest.NewDatabase(t) + "&deadlock_timeout=20ms"
	s, err := Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	ctx := t.Context()
	inst := func(rc string) store.Instance {
		return store.Instance{Application: "a", Service: "s", ReleaseChannel: rc, Status: "x"}
	}
	b := &store.Batch{Instances: []store.Instance{inst("one"), inst("gate"), inst("two")}}
	if err := s.Write(ctx, b); err != nil {
		t.Fatal(err)
	}
	one, gate, two := b.Instances[0], b.Instances[1], b.Instances[2]

	// The gate row is held by another transaction until both batches have
	// locked their first instance and wait for it.
	conn := connect(t, url)
	holder, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := holder.Exec(ctx, "SELECT 1 FROM instances WHERE release_channel = 'gate' FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, order := range [][]store.Instance{{one, gate, two}, {two, gate, one}} {
		wg.Go(func() { errs[i] = s.Write(ctx, &store.Batch{Instances: order}) })
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		var waiting int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_locks WHERE NOT granted AND pid <> pg_backend_pid()").Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the batches never both waited for the gate")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := holder.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	won, conflicts := 0, 0
	for i, err := range errs {
		switch {
		case err == nil:
			won++
		case errors.Is(err, store.ErrConflict):
			conflicts++
		default:
			t.Errorf("batch %d: %v, want nil or ErrConflict", i, err)
		}
	}
	if won != 1 || conflicts != 1 {
		t.Errorf("%d batches won, %d conflicted; want 1 and 1 (%v)", won, conflicts, errs)
	}
}

// TestOpenInvalid: an empty or unparsable URL fails, without a password in
// the message.
func TestOpenInvalid(t *testing.T) {
	for _, url := range []string{"", "  ", "postgres://user:secret@host:notaport/db"} {
		s, err := Open(t.Context(), url)
		if err == nil {
			_ = s.Close()
			t.Errorf("Open(%q) succeeded", url)
			continue
		}
		if strings.Contains(err.Error(), "secret") {
			t.Errorf("Open(%q): the error quotes the password: %v", url, err)
		}
	}
}

// TestCheckLastWrite: a write that fails for a reason of the storage (here a
// trigger raising disk_full, as PostgreSQL does when its disk is full) makes
// Check fail until a write succeeds again; other failures do not.
func TestCheckLastWrite(t *testing.T) {
	url := pgtest.NewDatabase(t)
	s, err := Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	ctx := t.Context()
	conn := connect(t, url)
	if _, err := conn.Exec(ctx, `CREATE FUNCTION full_disk() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF NEW.message = 'full' THEN RAISE EXCEPTION 'could not extend file: No space left on device' USING ERRCODE = 'disk_full'; END IF;
			RETURN NEW;
		END $$;
		CREATE TRIGGER full_disk BEFORE INSERT ON events FOR EACH ROW EXECUTE FUNCTION full_disk()`); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendEvents(ctx, store.Event{Type: "x", Message: "full"}); err == nil {
		t.Fatal("the append the disk refused succeeded")
	}
	if err := s.Check(ctx); err == nil || !strings.Contains(err.Error(), "No space left") {
		t.Errorf("Check after a failed write: %v, want the write's error", err)
	}
	if _, err := s.ClaimTasks(ctx, "", time.Minute, 1); err == nil {
		t.Fatal("an invalid claim succeeded")
	}
	if err := s.Check(ctx); err == nil {
		t.Error("a validation error cleared the failed write")
	}
	if err := s.AppendEvents(ctx, store.Event{Type: "x", Message: "fits"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Check(ctx); err != nil {
		t.Errorf("Check after a write succeeded again: %v", err)
	}
}

// TestReseal: after a new key goes first in the keyring, Reseal seals every
// value with it, so a keyring of the new key alone reads the store.
func TestReseal(t *testing.T) {
	url := pgtest.NewDatabase(t)
	storetest.Reseal(t, func(keys *sealing.Keyring) (storetest.Resealer, error) {
		return Open(t.Context(), url, WithSealer(keys))
	})
}
