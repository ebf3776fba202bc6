package dump_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/drover-dev/drover/internal/sealing"
	"github.com/drover-dev/drover/internal/store"
	"github.com/drover-dev/drover/internal/store/dump"
	"github.com/drover-dev/drover/internal/store/dump/dumptest"
	"github.com/drover-dev/drover/internal/store/postgres"
	"github.com/drover-dev/drover/internal/store/sqlite"
	"github.com/drover-dev/drover/internal/testing/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// dumpStore is a store that can be exported and imported.
type dumpStore interface {
	store.Store
	dump.Exporter
	dump.Importer
}

// openSQLite opens a SQLite store in a new file, closed when the test ends.
func openSQLite(t *testing.T, opts ...sqlite.Option) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "drover.db"), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// openPostgres opens a PostgreSQL store on a new database, closed when the
// test ends.
func openPostgres(t *testing.T, opts ...postgres.Option) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(t.Context(), pgtest.NewDatabase(t), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// export dumps s.
func export(t *testing.T, s dump.Exporter) []byte {
	t.Helper()
	var buf bytes.Buffer
	if _, err := dump.Write(t.Context(), &buf, s, dump.Header{}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// load imports d into s and returns the records read.
func load(t *testing.T, s dump.Importer, d []byte) dump.Counts {
	t.Helper()
	_, counts, err := dump.Read(t.Context(), bytes.NewReader(d), s)
	if err != nil {
		t.Fatal(err)
	}
	return counts
}

// sameLines fails unless two dumps hold the same record lines, byte for
// byte.
func sameLines(t *testing.T, what string, want, got []byte) {
	t.Helper()
	w, g := dumptest.Lines(want), dumptest.Lines(got)
	if len(w) != len(g) {
		t.Errorf("%s: %d record lines, want %d", what, len(g), len(w))
	}
	for i := range min(len(w), len(g)) {
		if !bytes.Equal(w[i], g[i]) {
			t.Errorf("%s: record line %d differs:\nwant %s\n got %s", what, i+2, w[i], g[i])
		}
	}
}

// TestRoundTripSQLitePostgresSQLite moves a filled SQLite store to
// PostgreSQL and back to SQLite: every store shows the same state through
// the store API (event seqs, run and task ids, lease tokens, API tokens and
// the audit log, times to the nanosecond, bytes), the dumps of all three are
// the same records, and each store numbers what comes after the imported
// records.
func TestRoundTripSQLitePostgresSQLite(t *testing.T) {
	t.Parallel()
	src := openSQLite(t, sqlite.KeepSuperseded(dumptest.Keep))
	dumptest.Fill(t, src)
	want := dumptest.Snapshot(t, src)
	checkFixture(t, want)

	d1 := export(t, src)
	pg := openPostgres(t)
	counts := load(t, pg, d1)
	if counts[dump.KindEvent] != len(want.Events) || counts[dump.KindTask] != len(want.Tasks) || counts[dump.KindProcess] != 0 ||
		counts[dump.KindAPIToken] != len(want.Tokens) || counts[dump.KindAudit] != len(want.Audit) ||
		counts[dump.KindNotifyTarget] != len(want.NotifyTargets) || counts[dump.KindDelivery] != len(want.Deliveries) {
		t.Errorf("imported %s; want %d events, %d tasks, %d API tokens, %d audit records, %d notification targets and %d deliveries, no process",
			counts, len(want.Events), len(want.Tasks), len(want.Tokens), len(want.Audit), len(want.NotifyTargets), len(want.Deliveries))
	}
	dumptest.Compare(t, want, dumptest.Snapshot(t, pg))
	if procs, err := pg.ListProcesses(t.Context()); err != nil || len(procs) != 0 {
		t.Errorf("processes after the import: %v, %v; want none", procs, err)
	}
	if sessions, err := pg.ListSessions(t.Context()); err != nil || len(sessions) != 0 {
		t.Errorf("sessions after the import: %v, %v; want none (people sign in again)", sessions, err)
	}

	d2 := export(t, pg)
	sameLines(t, "the PostgreSQL store's dump", d1, d2)
	back := openSQLite(t)
	load(t, back, d2)
	dumptest.Compare(t, want, dumptest.Snapshot(t, back))
	sameLines(t, "the second SQLite store's dump", d1, export(t, back))

	dumptest.Continues(t, pg, want)
	dumptest.Continues(t, back, want)
}

// TestRoundTripPostgresSQLitePostgres moves a filled PostgreSQL store to
// SQLite and back, and to another PostgreSQL database. The SQLite store
// reads an empty byte value back as nil (the fixture has an event with
// empty data): PostgreSQL keeps the difference, and a move through SQLite
// loses it.
func TestRoundTripPostgresSQLitePostgres(t *testing.T) {
	t.Parallel()
	src := openPostgres(t, postgres.KeepSuperseded(dumptest.Keep))
	dumptest.Fill(t, src)
	want := dumptest.Snapshot(t, src)
	checkFixture(t, want)

	d1 := export(t, src)
	pg := openPostgres(t)
	load(t, pg, d1)
	dumptest.Compare(t, want, dumptest.Snapshot(t, pg))
	sameLines(t, "the second PostgreSQL store's dump", d1, export(t, pg))

	lite := openSQLite(t)
	load(t, lite, d1)
	viaSQLite := dumptest.EmptyBytesAsNil(want)
	dumptest.Compare(t, viaSQLite, dumptest.Snapshot(t, lite))
	d2 := export(t, lite)
	back := openPostgres(t)
	load(t, back, d2)
	dumptest.Compare(t, viaSQLite, dumptest.Snapshot(t, back))
	sameLines(t, "the dump of the store back in PostgreSQL", d2, export(t, back))
	dumptest.Continues(t, pg, want)
	dumptest.Continues(t, lite, want)
	dumptest.Continues(t, back, want)
}

// checkFixture checks that the filled store holds what the round trips are
// meant to cover.
func checkFixture(t *testing.T, st dumptest.State) {
	t.Helper()
	var pruned, whole int
	for _, d := range st.DesiredStates {
		switch {
		case !d.PrunedAt.IsZero():
			pruned++
		case d.Compiled != nil:
			whole++
		}
		if d.ID == "web-6" && (d.Compiled == nil || !d.PrunedAt.IsZero()) {
			t.Errorf("web-6 (a shared copy) = %+v, want its compiled form", d)
		}
	}
	if pruned < 2 || whole < 3 {
		t.Errorf("the fixture has %d pruned and %d whole desired states; want some of each", pruned, whole)
	}
	if len(st.Secrets) != 3 || st.Secrets[1].VersionName() != "db-password-0" || st.Secrets[2].VersionName() != "db-password-2" {
		t.Errorf("secrets %+v, want api.token-0, db-password-0 and db-password-2 (1 deleted)", st.Secrets)
	}
	if tg := st.NotifyTargets; len(tg) != 2 || tg[0].Name != "hooks" || !strings.Contains(string(tg[0].Spec), `"secret":"s3cr3t ü"`) ||
		len(tg[0].Filter.Types) != 2 || len(tg[0].Filter.Services) != 2 || tg[1].Source != "config" || len(tg[1].Filter.Statuses) != 1 {
		t.Errorf("notification targets %+v, want hooks (its spec opened, filter lists) and shop-slack (from config)", tg)
	}
	deliveries := map[string]int{}
	for _, d := range st.Deliveries {
		switch {
		case d.Target == "gone" && d.State == store.DeliveryDelivered:
			deliveries["of the deleted target"]++
		case d.State == store.DeliveryPending && d.Owner != "":
			deliveries["claimed"]++
		case d.State == store.DeliveryPending && d.Attempts > 0:
			deliveries["to retry"]++
		case d.State == store.DeliveryPending:
			deliveries["never attempted"]++
		default:
			deliveries[string(d.State)]++
		}
	}
	if fmt.Sprint(deliveries) != "map[claimed:1 dead:1 delivered:1 never attempted:1 of the deleted target:3 to retry:1]" {
		t.Errorf("deliveries %v (%+v), want some in every state", deliveries, st.Deliveries)
	}
	statuses := map[store.TaskStatus]int{}
	for _, task := range st.Tasks {
		statuses[task.Status]++
	}
	if len(statuses) != 4 {
		t.Errorf("task statuses %v, want all four", statuses)
	}
	if len(st.Runs) == 0 || !strings.Contains(st.Runs[len(st.Runs)-1].Stdout, "\x00\xff") {
		t.Errorf("the fixture's first run has no binary output: %+v", st.Runs)
	}
	if len(st.Linked) != 2 || len(st.Linked[0].Labels) == 0 || st.Linked[0].Agent.DisconnectedAt.IsZero() || !st.Linked[1].Agent.Connected {
		t.Errorf("linked runtimes %+v, want edge (labels, disconnected) and lab (connected)", st.Linked)
	}
	if tokens := st.Tokens; len(tokens) != 3 || tokens[0].RevokedAt.IsZero() || tokens[0].RevokedBy == "" || tokens[0].LastUsedAt.IsZero() ||
		tokens[1].Name != tokens[0].Name || !tokens[1].RevokedAt.IsZero() || len(tokens[1].Roles) != 3 || tokens[1].ExpiresAt.IsZero() ||
		tokens[1].LastUsedAt.IsZero() || tokens[2].Roles != nil {
		t.Errorf("API tokens %+v, want ci (used, revoked), ci again (roles, expiry, used) and robot (no roles)", tokens)
	}
	if len(st.Audit) != 3 || st.Audit[1].Application == "" || st.Audit[1].Message == "" || st.Audit[1].Status != 403 {
		t.Errorf("audit records %+v, want three, the second a refusal of shop/web/prod", st.Audit)
	}
}

// TestImportIntoNonEmptyStore: an import into a store that holds anything
// fails with ErrNotEmpty, saying what it holds, and writes nothing.
func TestImportIntoNonEmptyStore(t *testing.T) {
	t.Parallel()
	src := openSQLite(t, sqlite.KeepSuperseded(dumptest.Keep))
	dumptest.Fill(t, src)
	d := export(t, src)
	for name, open := range map[string]func(t *testing.T) dumpStore{
		"sqlite":   func(t *testing.T) dumpStore { return openSQLite(t) },
		"postgres": func(t *testing.T) dumpStore { return openPostgres(t) },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dst := open(t)
			if err := dst.AppendEvents(t.Context(), store.Event{Type: "configured", Message: "already here"}); err != nil {
				t.Fatal(err)
			}
			before := dumptest.Snapshot(t, dst)
			_, _, err := dump.Read(t.Context(), bytes.NewReader(d), dst)
			if !errors.Is(err, dump.ErrNotEmpty) || !strings.Contains(err.Error(), "1 events") {
				t.Fatalf("import into a store with an event: %v, want ErrNotEmpty naming the event", err)
			}
			dumptest.Compare(t, before, dumptest.Snapshot(t, dst))

			// A linked runtime alone makes a store not empty.
			only := open(t)
			if err := only.LinkRuntime(t.Context(), store.LinkedRuntime{Name: "edge", TokenHash: "ab12"}); err != nil {
				t.Fatal(err)
			}
			_, _, err = dump.Read(t.Context(), bytes.NewReader(d), only)
			if !errors.Is(err, dump.ErrNotEmpty) || !strings.Contains(err.Error(), "it holds 1 linked runtimes;") {
				t.Fatalf("import into a store with a linked runtime: %v, want ErrNotEmpty naming it", err)
			}

			// So does an API token, or an audit record.
			tokened := open(t)
			if _, err := tokened.CreateAPIToken(t.Context(), store.APIToken{Name: "ci", Hash: "ab12"}); err != nil {
				t.Fatal(err)
			}
			_, _, err = dump.Read(t.Context(), bytes.NewReader(d), tokened)
			if !errors.Is(err, dump.ErrNotEmpty) || !strings.Contains(err.Error(), "it holds 1 API tokens;") {
				t.Fatalf("import into a store with an API token: %v, want ErrNotEmpty naming it", err)
			}
			// So does a notification target.
			notified := open(t)
			if err := notified.PutNotifyTarget(t.Context(), store.NotifyTarget{Name: "ci", Kind: store.NotifyWebhook}); err != nil {
				t.Fatal(err)
			}
			_, _, err = dump.Read(t.Context(), bytes.NewReader(d), notified)
			if !errors.Is(err, dump.ErrNotEmpty) || !strings.Contains(err.Error(), "it holds 1 notification targets;") {
				t.Fatalf("import into a store with a notification target: %v, want ErrNotEmpty naming it", err)
			}
			audited := open(t)
			if _, err := audited.AppendAudit(t.Context(), store.AuditRecord{Identity: "admin", Action: "POST /v1/x", Outcome: "ok"}); err != nil {
				t.Fatal(err)
			}
			_, _, err = dump.Read(t.Context(), bytes.NewReader(d), audited)
			if !errors.Is(err, dump.ErrNotEmpty) || !strings.Contains(err.Error(), "it holds 1 audit records;") {
				t.Fatalf("import into a store with an audit record: %v, want ErrNotEmpty naming it", err)
			}
		})
	}
}

// TestImportOlderDump: a dump of a drover that knew no API tokens and no
// audit log (the same lines without those kinds) imports into either store,
// which then holds everything else and neither tokens nor audit records.
func TestImportOlderDump(t *testing.T) {
	t.Parallel()
	src := openSQLite(t, sqlite.KeepSuperseded(dumptest.Keep))
	dumptest.Fill(t, src)
	want := dumptest.Snapshot(t, src)
	want.Tokens, want.Audit = nil, nil
	older := withoutKinds(t, export(t, src), dump.KindAPIToken, dump.KindAudit)
	for name, open := range map[string]func(t *testing.T) dumpStore{
		"sqlite":   func(t *testing.T) dumpStore { return openSQLite(t) },
		"postgres": func(t *testing.T) dumpStore { return openPostgres(t) },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dst := open(t)
			counts := load(t, dst, older)
			if counts[dump.KindAPIToken] != 0 || counts[dump.KindAudit] != 0 || counts[dump.KindEvent] != len(want.Events) {
				t.Errorf("imported %s; want the events, no API tokens, no audit records", counts)
			}
			got := dumptest.Snapshot(t, dst)
			if len(got.Tokens) != 0 || len(got.Audit) != 0 {
				t.Errorf("API tokens %+v and audit records %+v after the import, want none", got.Tokens, got.Audit)
			}
			got.Tokens, got.Audit = nil, nil // empty lists of either store alike
			dumptest.Compare(t, want, got)
			dumptest.Continues(t, dst, want)
		})
	}
}

// TestImportDumpWithoutNotifications: a dump of a drover that knew no
// notifications (the same lines without notification targets and
// deliveries) imports into either store, which then has none.
func TestImportDumpWithoutNotifications(t *testing.T) {
	t.Parallel()
	src := openSQLite(t, sqlite.KeepSuperseded(dumptest.Keep))
	dumptest.Fill(t, src)
	want := dumptest.Snapshot(t, src)
	want.NotifyTargets, want.Deliveries = nil, nil
	older := withoutKinds(t, export(t, src), dump.KindNotifyTarget, dump.KindDelivery)
	for name, open := range map[string]func(t *testing.T) dumpStore{
		"sqlite":   func(t *testing.T) dumpStore { return openSQLite(t) },
		"postgres": func(t *testing.T) dumpStore { return openPostgres(t) },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dst := open(t)
			counts := load(t, dst, older)
			if counts[dump.KindNotifyTarget] != 0 || counts[dump.KindDelivery] != 0 || counts[dump.KindSecret] == 0 {
				t.Errorf("imported %s; want the secrets, no notification targets, no deliveries", counts)
			}
			got := dumptest.Snapshot(t, dst)
			if len(got.NotifyTargets) != 0 || len(got.Deliveries) != 0 {
				t.Errorf("notification targets %+v and deliveries %+v after the import, want none", got.NotifyTargets, got.Deliveries)
			}
			got.NotifyTargets, got.Deliveries = nil, nil
			dumptest.Compare(t, want, got)
			dumptest.Continues(t, dst, want)
		})
	}
}

// TestRoundTripSealed moves a store that seals (secrets' values,
// notification targets' specs) to another store of the other kind with the
// same keyring: the dump holds the sealed values, never the clear ones, the
// target opens them, and a store with another keyring cannot.
func TestRoundTripSealed(t *testing.T) {
	t.Parallel()
	keys, err := sealing.ParseKeyring(sealing.NewKey())
	if err != nil {
		t.Fatal(err)
	}
	other, err := sealing.ParseKeyring(sealing.NewKey())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name     string
		src, dst func(t *testing.T, keys store.Sealer) dumpStore
	}{
		{"sqlite to postgres",
			func(t *testing.T, keys store.Sealer) dumpStore {
				return openSQLite(t, sqlite.KeepSuperseded(dumptest.Keep), sqlite.WithSealer(keys))
			},
			func(t *testing.T, keys store.Sealer) dumpStore { return openPostgres(t, postgres.WithSealer(keys)) }},
		{"postgres to sqlite",
			func(t *testing.T, keys store.Sealer) dumpStore {
				return openPostgres(t, postgres.KeepSuperseded(dumptest.Keep), postgres.WithSealer(keys))
			},
			func(t *testing.T, keys store.Sealer) dumpStore { return openSQLite(t, sqlite.WithSealer(keys)) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			src := c.src(t, keys)
			dumptest.Fill(t, src)
			want := dumptest.Snapshot(t, src)
			checkFixture(t, want)
			d := export(t, src)
			for _, clear := range []string{"s3cr3t", "#shop-deploys", "hunter2"} {
				if bytes.Contains(d, []byte(clear)) {
					t.Errorf("the dump holds %q in clear", clear)
				}
			}
			var sealed int
			for _, l := range dumptest.Lines(d) {
				var rec struct {
					Kind   dump.Kind
					Record dump.NotifyTarget
				}
				if err := json.Unmarshal(l, &rec); err != nil {
					t.Fatal(err)
				}
				if rec.Kind != dump.KindNotifyTarget {
					continue
				}
				sealed++
				if opened, err := keys.Open(rec.Record.Spec); err != nil || bytes.Equal(opened, rec.Record.Spec) {
					t.Errorf("the spec of target %s in the dump is not sealed with the keyring: %v", rec.Record.Name, err)
				}
			}
			if sealed != len(want.NotifyTargets) {
				t.Errorf("%d notification targets in the dump, want %d", sealed, len(want.NotifyTargets))
			}
			dst := c.dst(t, keys)
			load(t, dst, d)
			got := dumptest.Snapshot(t, dst)
			if c.name == "postgres to sqlite" {
				// SQLite reads empty bytes back as nil (an event's data).
				want = dumptest.EmptyBytesAsNil(want)
			} else {
				sameLines(t, "the dump of the target store", d, export(t, dst))
			}
			dumptest.Compare(t, want, got)
			dumptest.Continues(t, dst, want)

			// Another keyring does not open them.
			wrong := c.dst(t, other)
			load(t, wrong, d)
			if _, err := wrong.GetNotifyTarget(ctx, "hooks"); err == nil {
				t.Error("a store with another keyring opened the spec of a moved target")
			}
		})
	}
}

// withoutKinds returns dump d without its records of kinds, its end line
// counting those left, as a drover that knew no such kinds wrote it.
func withoutKinds(t *testing.T, d []byte, kinds ...dump.Kind) []byte {
	t.Helper()
	lines := bytes.SplitAfter(d, []byte("\n"))
	out := slices.Clone(lines[:1]) // the header
	n, dropped := 0, 0
	for _, l := range dumptest.Lines(d) {
		var rec struct{ Kind dump.Kind }
		if err := json.Unmarshal(l, &rec); err != nil {
			t.Fatal(err)
		}
		switch {
		case slices.Contains(kinds, rec.Kind):
			dropped++
		case rec.Kind == "end":
			out = append(out, []byte(`{"kind":"end","record":{"records":`+strconv.Itoa(n)+"}}\n"))
		default:
			out = append(out, append(slices.Clone(l), '\n'))
			n++
		}
	}
	if dropped == 0 {
		t.Fatalf("the dump has no records of %v to leave out", kinds)
	}
	return bytes.Join(out, nil)
}

// TestImportOfDamagedDumpWritesNothing: a dump that is damaged in its middle
// or cut short fails, naming the line, and the store stays empty (a good
// dump imports afterwards).
func TestImportOfDamagedDumpWritesNothing(t *testing.T) {
	t.Parallel()
	src := openSQLite(t, sqlite.KeepSuperseded(dumptest.Keep))
	dumptest.Fill(t, src)
	want := dumptest.Snapshot(t, src)
	d := export(t, src)
	lines := bytes.SplitAfter(d, []byte("\n"))
	n := len(lines) - 1 // the last element is empty
	damaged := bytes.Join(append(append(slices.Clone(lines[:n-5]), []byte("{\"kind\":\"task\",\"record\":{\"id\":\n")), lines[n-4:]...), nil)
	truncated := bytes.Join(lines[:n-1], nil)
	cut := d[:len(d)-10]
	for name, open := range map[string]func(t *testing.T) dumpStore{
		"sqlite":   func(t *testing.T) dumpStore { return openSQLite(t) },
		"postgres": func(t *testing.T) dumpStore { return openPostgres(t) },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dst := open(t)
			empty := dumptest.Snapshot(t, dst)
			for _, c := range []struct {
				what, msg string
				dump      []byte
			}{
				{"damaged", "line " + strconv.Itoa(n-4) + ": not a dump record", damaged},
				{"without its end line", "line " + strconv.Itoa(n-1) + ": the dump ends without its end line", truncated},
				{"cut in a line", "line " + strconv.Itoa(n) + ": the line is cut short", cut},
			} {
				_, _, err := dump.Read(t.Context(), bytes.NewReader(c.dump), dst)
				if err == nil || !strings.Contains(err.Error(), c.msg) {
					t.Errorf("import of a dump %s: %v, want an error with %q", c.what, err, c.msg)
				}
				dumptest.Compare(t, empty, dumptest.Snapshot(t, dst))
			}
			load(t, dst, d)
			dumptest.Compare(t, want, dumptest.Snapshot(t, dst))
		})
	}
}

// TestExportStopsAtEmitError: an export stops at the first error of emit and
// returns it.
func TestExportStopsAtEmitError(t *testing.T) {
	t.Parallel()
	for name, s := range map[string]dumpStore{"sqlite": openSQLite(t), "postgres": openPostgres(t)} {
		dumptest.Fill(t, s)
		stop := errors.New("stop")
		n := 0
		err := s.Export(context.Background(), func(dump.Record) error {
			n++
			if n == 3 {
				return stop
			}
			return nil
		})
		if !errors.Is(err, stop) || n != 3 {
			t.Errorf("%s: Export = %v after %d records, want the emit error after 3", name, err, n)
		}
	}
}
