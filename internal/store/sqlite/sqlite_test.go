package sqlite

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/drover-dev/drover/internal/sealing"
	"github.com/drover-dev/drover/internal/store/migration"

	"github.com/drover-dev/drover/internal/store"
	"github.com/drover-dev/drover/internal/store/storetest"
)

func openTemp(t testing.TB) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "drover.db")
	s, err := Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	return s, path
}

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) store.Store {
		s, _ := openTemp(t)
		return s
	})
}

func TestConformanceMemory(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := Open(t.Context(), MemoryPath)
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func TestCacheRole(t *testing.T) {
	t.Parallel()
	storetest.RunCache(t, func(t *testing.T) store.Store {
		s, _ := openTemp(t)
		return s
	})
}

type appliedMigration struct {
	version   int64
	appliedAt string
}

func appliedMigrations(t *testing.T, s *Store) []appliedMigration {
	t.Helper()
	rows, err := s.read.QueryContext(t.Context(), "SELECT version, applied_at FROM schema_migrations ORDER BY version")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []appliedMigration
	for rows.Next() {
		var m appliedMigration
		if err := rows.Scan(&m.version, &m.appliedAt); err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func tableExists(t *testing.T, s *Store, name string) bool {
	t.Helper()
	var n int
	if err := s.read.QueryRowContext(t.Context(), "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = ?", name).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n == 1
}

func TestMigrationsAppliedOnce(t *testing.T) {
	t.Parallel()
	s, path := openTemp(t)
	first := appliedMigrations(t, s)
	if len(first) != len(migrations) {
		t.Fatalf("applied migrations = %v, want %d", first, len(migrations))
	}
	for i, m := range first {
		if m.version != int64(i+1) {
			t.Errorf("migration %d has version %d", i, m.version)
		}
		if _, err := time.Parse(timeLayout, m.appliedAt); err != nil {
			t.Errorf("applied_at %q: %v", m.appliedAt, err)
		}
	}
	for _, table := range []string{"configs", "desired_states", "approvals", "instances", "events", "task_runs"} {
		if !tableExists(t, s, table) {
			t.Errorf("table %s missing", table)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		s, err := Open(t.Context(), path)
		if err != nil {
			t.Fatal(err)
		}
		again := appliedMigrations(t, s)
		if fmt.Sprint(again) != fmt.Sprint(first) {
			t.Errorf("after reopening, migrations = %v, want %v", again, first)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestMigrationsInOrderOneTransactionEach(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "drover.db")
	ctx := t.Context()
	load := func(files map[string]string) []migration.Migration {
		t.Helper()
		fsys := fstest.MapFS{}
		for name, sql := range files {
			fsys["m/"+name] = &fstest.MapFile{Data: []byte(sql)}
		}
		ms, err := migration.Load(fsys, "m")
		if err != nil {
			t.Fatal(err)
		}
		return ms
	}
	v1 := map[string]string{"0001_a.sql": "CREATE TABLE a (x INTEGER); INSERT INTO a VALUES (1);"}
	s, err := open(ctx, path, load(v1))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// 0002 fails halfway: 0003 is not attempted and 0002's first statements are rolled back.
	broken := map[string]string{
		"0001_a.sql": v1["0001_a.sql"],
		"0002_b.sql": "CREATE TABLE b (x INTEGER); INSERT INTO a VALUES (2); INSERT INTO nope VALUES (1);",
		"0003_c.sql": "CREATE TABLE c (x INTEGER);",
	}
	_, err = open(ctx, path, load(broken))
	if err == nil || !strings.Contains(err.Error(), "version 2 (0002_b.sql)") {
		t.Fatalf("open with a broken migration: %v, want an error naming it", err)
	}
	s, err = open(ctx, path, load(v1))
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := s.read.QueryRowContext(ctx, "SELECT count(*) FROM a").Scan(&n); err != nil || n != 1 {
		t.Errorf("rows in a = %d (%v), want 1: the failed migration was not rolled back", n, err)
	}
	if tableExists(t, s, "b") || tableExists(t, s, "c") {
		t.Error("tables of the failed migrations exist")
	}
	if got := appliedMigrations(t, s); len(got) != 1 {
		t.Errorf("applied = %v, want version 1 only", got)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	fixed := map[string]string{
		"0001_a.sql": v1["0001_a.sql"],
		"0002_b.sql": "CREATE TABLE b (x INTEGER); INSERT INTO a VALUES (2);",
		"0003_c.sql": "CREATE TABLE c (x INTEGER REFERENCES b (x)); INSERT INTO a SELECT max(x) + 1 FROM a;",
	}
	s, err = open(ctx, path, load(fixed))
	if err != nil {
		t.Fatal(err)
	}
	if got := appliedMigrations(t, s); len(got) != 3 || got[2].version != 3 {
		t.Errorf("applied = %v, want versions 1-3", got)
	}
	var xs []string
	rows, err := s.read.QueryContext(ctx, "SELECT x FROM a ORDER BY rowid")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var x string
		if err := rows.Scan(&x); err != nil {
			t.Fatal(err)
		}
		xs = append(xs, x)
	}
	rows.Close()
	if got := strings.Join(xs, ","); got != "1,2,3" {
		t.Errorf("a = %s, want 1,2,3 (migrations applied in order)", got)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// An older binary (knowing only 0001) refuses the newer database.
	_, err = open(ctx, path, load(v1))
	if err == nil || !strings.Contains(err.Error(), "schema version 3") || !strings.Contains(err.Error(), "version 1") {
		t.Errorf("open by an older binary: %v, want an error naming versions 3 and 1", err)
	}
}

func TestOpenNewerSchemaFails(t *testing.T) {
	t.Parallel()
	s, path := openTemp(t)
	if _, err := s.write.ExecContext(t.Context(), "INSERT INTO schema_migrations (version, applied_at) VALUES (9999, ?)", dbTime(now())); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	_, err := Open(t.Context(), path)
	latest := fmt.Sprintf("version %d)", len(migrations))
	if err == nil || !strings.Contains(err.Error(), "schema version 9999") || !strings.Contains(err.Error(), latest) {
		t.Fatalf("Open of a newer schema: %v, want an error naming 9999 and %q", err, latest)
	}
	t.Log(err)
}

func TestOpenErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, path := range []string{"", filepath.Join(dir, "missing", "drover.db"), dir} {
		if s, err := Open(t.Context(), path); err == nil {
			s.Close()
			t.Errorf("Open(%q) succeeded", path)
		}
	}
	// Characters special in SQLite URIs are part of the file name.
	odd := filepath.Join(dir, "a?b#c%20d.db")
	s, err := Open(t.Context(), odd)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := os.Stat(odd); err != nil {
		t.Errorf("database not at %q: %v", odd, err)
	}
}

func TestPragmas(t *testing.T) {
	t.Parallel()
	s, _ := openTemp(t)
	defer s.Close()
	ctx := t.Context()
	check := func(pool, pragma, want string) {
		t.Helper()
		db := s.write
		if pool == "read" {
			db = s.read
		}
		var got string
		if err := db.QueryRowContext(ctx, "PRAGMA "+pragma).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("%s pool: PRAGMA %s = %s, want %s", pool, pragma, got, want)
		}
	}
	for _, pool := range []string{"write", "read"} {
		check(pool, "journal_mode", "wal")
		check(pool, "foreign_keys", "1")
		check(pool, "busy_timeout", strconv.Itoa(int(busyTimeout.Milliseconds())))
	}
	check("write", "synchronous", "2")
	check("read", "query_only", "1")
	if _, err := s.read.ExecContext(ctx, "INSERT INTO events (time, type) VALUES ('x', 'y')"); err == nil {
		t.Error("the read pool can write")
	}
}

func TestDataSurvivesReopen(t *testing.T) {
	t.Parallel()
	s, path := openTemp(t)
	ctx := t.Context()
	cfg, _, err := s.PutConfig(ctx, store.ConfigObject{Kind: "service", Name: "shop/web", Body: []byte(`{"a":1}`), Hash: "h1"})
	if err != nil {
		t.Fatal(err)
	}
	ds := store.DesiredState{ID: "ds-1", Application: "shop", Service: "web", Version: "1.0.0", Compiled: []byte(`{}`),
		CreatedAt: time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC)}
	evs := []store.Event{{Application: "shop", Service: "web", Type: "pushed", Message: "pushed 1.0.0"}}
	if err := s.CreateDesiredState(ctx, ds, evs...); err != nil {
		t.Fatal(err)
	}
	b := &store.Batch{Instances: []store.Instance{{Application: "shop", Service: "web", ReleaseChannel: "production", Status: "pending"}}}
	if err := s.Write(ctx, b); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s, err = Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got, err := s.GetConfig(ctx, "service", "shop/web"); err != nil || got.Hash != "h1" || !got.CreatedAt.Equal(cfg.CreatedAt) {
		t.Errorf("config after reopen: %+v, %v", got, err)
	}
	if got, err := s.GetDesiredState(ctx, "ds-1"); err != nil || !got.CreatedAt.Equal(ds.CreatedAt) || got.Version != "1.0.0" {
		t.Errorf("desired state after reopen: %+v, %v", got, err)
	}
	if got, err := s.GetInstance(ctx, "shop", "web", "production"); err != nil || got.Revision != 1 {
		t.Errorf("instance after reopen: %+v, %v", got, err)
	}
	more := []store.Event{{Type: "started"}}
	if err := s.AppendEvents(ctx, more...); err != nil {
		t.Fatal(err)
	}
	list, err := s.ListEvents(ctx, store.EventFilter{})
	if err != nil || len(list) != 2 || list[0].Seq != evs[0].Seq || more[0].Seq <= evs[0].Seq {
		t.Errorf("events after reopen: %+v, %v", list, err)
	}
}

// crashEnv names the database the child process of TestCrashDurability
// writes to until it is killed.
const crashEnv = "DROVER_STORE_CRASH_CHILD_DB"

// TestCrashDurability kills a process writing to the store with SIGKILL and
// checks that every write it saw return is in the reopened database.
func TestCrashDurability(t *testing.T) {
	if path := os.Getenv(crashEnv); path != "" {
		crashChild(path)
		return
	}
	t.Parallel()
	if testing.Short() {
		t.Skip("spawns a process")
	}
	path := filepath.Join(t.TempDir(), "drover.db")
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestCrashDurability$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashEnv+"="+path)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}

	const killAfter = 400 // acknowledged writes
	var (
		seqs    []int64
		lastRev int64
		acks    int
		killed  bool
	)
	r := bufio.NewReader(out)
	for {
		line, err := r.ReadString('\n')
		if err != nil { // EOF; a trailing fragment without '\n' was never acknowledged
			break
		}
		kind, num, _ := strings.Cut(strings.TrimSpace(line), " ")
		n, perr := strconv.ParseInt(num, 10, 64)
		switch {
		case perr != nil:
			t.Fatalf("child printed %q", line)
		case kind == "seq":
			seqs = append(seqs, n)
		case kind == "rev":
			lastRev = max(lastRev, n)
		default:
			t.Fatalf("child printed %q", line)
		}
		if acks++; acks == killAfter {
			if err := cmd.Process.Kill(); err != nil { // SIGKILL
				t.Fatal(err)
			}
			killed = true
		}
	}
	waitErr := cmd.Wait()
	if !killed {
		t.Fatalf("child exited before it was killed (%v):\n%s", waitErr, stderr.String())
	}
	t.Logf("child killed after %d acknowledged writes (%d lines read; %v)", killAfter, acks, waitErr)

	ctx := t.Context()
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatalf("reopen after the crash: %v", err)
	}
	defer s.Close()
	var check string
	if err := s.read.QueryRowContext(ctx, "PRAGMA integrity_check").Scan(&check); err != nil || check != "ok" {
		t.Errorf("integrity_check = %q, %v", check, err)
	}
	events, err := s.ListEvents(ctx, store.EventFilter{})
	if err != nil {
		t.Fatal(err)
	}
	stored := map[int64]store.Event{}
	for _, e := range events {
		stored[e.Seq] = e
	}
	for _, seq := range seqs {
		e, ok := stored[seq]
		if !ok {
			t.Errorf("event %d was acknowledged but is missing after the crash", seq)
		} else if e.Message != "crash event" {
			t.Errorf("event %d = %+v", seq, e)
		}
	}
	in, err := s.GetInstance(ctx, "crash", "web", "production")
	if err != nil || in.Revision < lastRev {
		t.Errorf("instance after the crash: revision %d (%v), acknowledged %d", in.Revision, err, lastRev)
	}
	// The store keeps working: new events come after every old one.
	more := []store.Event{{Type: "recovered"}}
	if err := s.AppendEvents(ctx, more...); err != nil {
		t.Fatal(err)
	}
	if len(events) > 0 && more[0].Seq <= events[len(events)-1].Seq {
		t.Errorf("seq after the crash %d, not after %d", more[0].Seq, events[len(events)-1].Seq)
	}
	b := &store.Batch{Instances: []store.Instance{in}}
	if err := s.Write(ctx, b); err != nil {
		t.Errorf("Write after the crash: %v", err)
	}
}

// crashChild writes to the store from several goroutines until it is killed,
// printing each acknowledged write.
func crashChild(path string) {
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "crash child:", err)
		os.Exit(3)
	}
	ctx := context.Background()
	s, err := Open(ctx, path)
	if err != nil {
		fail(err)
	}
	var mu sync.Mutex
	ack := func(kind string, n int64) {
		mu.Lock()
		defer mu.Unlock()
		// os.Stdout is unbuffered: the line is in the pipe when this returns.
		if _, err := io.WriteString(os.Stdout, kind+" "+strconv.FormatInt(n, 10)+"\n"); err != nil {
			fail(err)
		}
	}
	for range 4 {
		go func() {
			for {
				evs := []store.Event{{Application: "crash", Service: "web", Type: "tick", Message: "crash event",
					Data: []byte(`{"padding": "` + strings.Repeat("x", 512) + `"}`)}}
				if err := s.AppendEvents(ctx, evs...); err != nil {
					fail(err)
				}
				ack("seq", evs[0].Seq)
			}
		}()
	}
	go func() {
		in := store.Instance{Application: "crash", Service: "web", ReleaseChannel: "production", Status: "progressing"}
		for {
			b := &store.Batch{
				Instances: []store.Instance{in},
				Events:    []store.Event{{Application: "crash", Service: "web", Type: "applied", Message: "crash event"}},
			}
			if err := s.Write(ctx, b); err != nil {
				fail(err)
			}
			in = b.Instances[0]
			ack("rev", in.Revision)
			ack("seq", b.Events[0].Seq)
		}
	}()
	select {}
}

// TestConformanceSealed: a store that seals config bodies and desired
// states passes the same suite.
func TestConformanceSealed(t *testing.T) {
	t.Parallel()
	keys, err := sealing.ParseKeyring(sealing.NewKey())
	if err != nil {
		t.Fatal(err)
	}
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := Open(t.Context(), filepath.Join(t.TempDir(), "drover.db"), WithSealer(keys))
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// TestSealedAtRest: with a sealer, a config's body, a desired state's
// parameters and its compiled form, and a secret's value are not in the database file in clear,
// and read back as they were written.
func TestSealedAtRest(t *testing.T) {
	keys, err := sealing.ParseKeyring(sealing.NewKey())
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "drover.db")
	s, err := Open(t.Context(), path, WithSealer(keys))
	if err != nil {
		t.Fatal(err)
	}
	const secret = "hunter2-the-sealed-secret"
	ctx := t.Context()
	body := []byte(`{"service":{"name":"web","env":{"PASSWORD":{"rawSecret":"` + secret + `"}}}}`)
	if _, _, err := s.PutConfig(ctx, store.ConfigObject{Kind: "service", Name: "shop/web", Body: body, Hash: "h1"}); err != nil {
		t.Fatal(err)
	}
	ds := store.DesiredState{ID: "ds-1", Application: "shop", Service: "web", Version: "v1",
		Compiled: []byte(`{"env":"` + secret + `"}`), Params: []byte(`[{"name":"p","secret":"` + secret + `"}]`)}
	if err := s.CreateDesiredState(ctx, ds); err != nil {
		t.Fatal(err)
	}
	c, err := s.GetConfig(ctx, "service", "shop/web")
	if err != nil || string(c.Body) != string(body) {
		t.Fatalf("config read back: %q %v", c.Body, err)
	}
	got, err := s.GetDesiredState(ctx, "ds-1")
	if err != nil || string(got.Compiled) != string(ds.Compiled) || string(got.Params) != string(ds.Params) {
		t.Fatalf("desired state read back: %+v %v", got, err)
	}
	active, err := s.ActiveDesiredState(ctx, "shop", "web")
	if err != nil || string(active.Params) != string(ds.Params) {
		t.Fatalf("active desired state: %+v %v", active, err)
	}
	if _, err := s.PutSecret(ctx, store.Secret{Key: "db", Value: []byte(secret)}); err != nil {
		t.Fatal(err)
	}
	if sec, err := s.GetSecret(ctx, "db", 0); err != nil || string(sec.Value) != secret {
		t.Fatalf("secret read back: %q %v", sec.Value, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{path, path + "-wal"} {
		raw, err := os.ReadFile(f)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		if strings.Contains(string(raw), secret) {
			t.Errorf("%s holds the secret in clear", filepath.Base(f))
		}
	}
}

// TestReseal: after a new key goes first in the keyring, Reseal seals every
// value with it, so a keyring of the new key alone reads the store.
func TestReseal(t *testing.T) {
	path := filepath.Join(t.TempDir(), "drover.db")
	storetest.Reseal(t, func(keys *sealing.Keyring) (storetest.Resealer, error) {
		return Open(t.Context(), path, WithSealer(keys))
	})
}
