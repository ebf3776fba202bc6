package sqlite

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	ds "github.com/drover-dev/drover/internal/desiredstate"
	"github.com/drover-dev/drover/internal/store"
)

// fromFile reads a service's instances from the database, past the cache.
func (s *Store) fromFile(t *testing.T, app, svc string) []store.Instance {
	t.Helper()
	q, args := byService("SELECT "+instanceColumns+" FROM instances", app, svc)
	list, err := queryAll(t.Context(), s.reads, q, args, scanInstance)
	if err != nil {
		t.Fatal(err)
	}
	return list
}

// TestInstanceCacheMatchesTheFile: concurrent writers (creating, updating,
// conflicting, failing after writing, committed together in groups) and
// readers filling the cache meanwhile; afterwards, every service's cached
// instances are what the file holds, field for field, and so is each one
// GetInstance returns. A small cache limit makes it drop services as it goes.
func TestInstanceCacheMatchesTheFile(t *testing.T) {
	t.Parallel()
	s, _ := openTemp(t)
	t.Cleanup(func() { _ = s.Close() })
	s.instances.limit = 10
	ctx := t.Context()
	const services, channels, writers, rounds = 6, 4, 8, 40
	errFail := errors.New("fails after writing")
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 1))
			for range rounds {
				svc := fmt.Sprintf("svc-%d", r.IntN(services))
				list, err := s.ListInstances(ctx, "app", svc)
				if err != nil {
					t.Error(err)
					return
				}
				have := map[string]store.Instance{}
				for _, in := range list {
					have[in.ReleaseChannel] = in
				}
				b := &store.Batch{}
				for c := range channels {
					if r.IntN(2) == 0 {
						continue
					}
					rc := fmt.Sprintf("rc-%d", c)
					in, ok := have[rc]
					if !ok {
						in = store.Instance{Application: "app", Service: svc, ReleaseChannel: rc, DesiredStateID: "d1"}
					}
					in.Status = ds.Status([]string{"CONVERGING", "CONVERGED", "FAILED"}[r.IntN(3)])
					in.Message = fmt.Sprintf("writer %d", w)
					in.Satisfied = append(in.Satisfied, fmt.Sprintf("x@%d", r.IntN(9)))
					in.LastApplyAt = time.Now().In(time.FixedZone("elsewhere", 3600))
					// Columns that change now and then, to nothing as well
					// (a write sets only what changed).
					switch r.IntN(4) {
					case 0:
						in.TargetVersion, in.ConvergedAt, in.Paused = fmt.Sprintf("v%d", r.IntN(3)), time.Time{}, !in.Paused
					case 1:
						in.ApplyAttempts, in.Healed, in.ConvergedAt = r.IntN(3), in.Healed+1, time.Now()
					case 2:
						in.Satisfied, in.Checks, in.Reason = nil, nil, ds.Reason(fmt.Sprint(r.IntN(2)))
					}
					if r.IntN(3) == 0 {
						in.Checks = []store.CheckResult{{Key: "k", DesiredStateID: "d1", Passed: true, At: time.Now(), Runs: r.IntN(4)}}
					}
					b.Instances = append(b.Instances, in)
				}
				if r.IntN(5) == 0 {
					// A write that fails after writing rolls back to its
					// savepoint: the cache must not take its rows in.
					at := now()
					rows, err := s.prepareBatch(b, at)
					if err != nil {
						t.Fatal(err)
					}
					err = s.writeTxMode(ctx, crashSafe, func(tx *wtx) error {
						if _, _, err := s.applyBatch(ctx, tx, b, rows, at); err != nil {
							return err
						}
						return errFail
					})
					if !errors.Is(err, errFail) && !errors.Is(err, store.ErrConflict) {
						t.Errorf("failing write: %v", err)
					}
					continue
				}
				if err := s.Write(ctx, b); err != nil && !errors.Is(err, store.ErrConflict) {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	checked := 0
	for i := range services {
		svc := fmt.Sprintf("svc-%d", i)
		want := s.fromFile(t, "app", svc)
		for range 2 { // a miss, then a hit
			got, err := s.ListInstances(ctx, "app", svc)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%s: cached instances differ from the file:\n got %+v\nwant %+v", svc, got, want)
			}
		}
		for _, in := range want {
			got, err := s.GetInstance(ctx, "app", svc, in.ReleaseChannel)
			if err != nil || !reflect.DeepEqual(got, in) {
				t.Fatalf("GetInstance %s/%s: %+v, %v; want %+v", svc, in.ReleaseChannel, got, err, in)
			}
			checked++
		}
		if _, err := s.GetInstance(ctx, "app", svc, "nowhere"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("GetInstance of a missing channel: %v, want not found", err)
		}
	}
	if checked == 0 {
		t.Fatal("no instance was written")
	}
	// Copies: changing what a read returned changes nothing stored.
	list, err := s.ListInstances(ctx, "app", "svc-0")
	if err != nil || len(list) == 0 {
		t.Fatalf("%v, %d instances", err, len(list))
	}
	list[0].Message = "changed by a caller"
	if len(list[0].Satisfied) > 0 {
		list[0].Satisfied[0] = "changed by a caller"
	}
	if again := s.fromFile(t, "app", "svc-0"); !reflect.DeepEqual(mustList(t, s, "svc-0"), again) {
		t.Error("a change to a returned instance reached the cache")
	}
}

// TestCachedListsReadBackAsTheFile: the cache keeps a written instance's
// lists as the file reads them back (JSON replaces invalid UTF-8, keeps
// the rest), and not the caller's slices, which may change afterwards.
func TestCachedListsReadBackAsTheFile(t *testing.T) {
	t.Parallel()
	s, _ := openTemp(t)
	t.Cleanup(func() { _ = s.Close() })
	ctx := t.Context()
	for i, satisfied := range [][]string{
		{"staging@v1", "html <a&b> \u2028 and \"quotes\""},
		{"bad \xff utf-8", "ok@v1"},
		{},
		nil,
	} {
		svc := fmt.Sprintf("svc-%d", i)
		if _, err := s.ListInstances(ctx, "app", svc); err != nil { // cache the service
			t.Fatal(err)
		}
		in := store.Instance{Application: "app", Service: svc, ReleaseChannel: "rc", DesiredStateID: "d1",
			Message: "v1 running", Satisfied: satisfied}
		if err := s.Write(ctx, &store.Batch{Instances: []store.Instance{in}}); err != nil {
			t.Fatal(err)
		}
		if len(satisfied) > 0 {
			satisfied[0] = "changed by the caller after writing"
		}
		want := s.fromFile(t, "app", svc)
		if got := mustList(t, s, svc); !reflect.DeepEqual(got, want) {
			t.Errorf("%q: cached %+v\nfile %+v", satisfied, got, want)
		}
	}
}

func mustList(t *testing.T, s *Store, svc string) []store.Instance {
	t.Helper()
	list, err := s.ListInstances(t.Context(), "app", svc)
	if err != nil {
		t.Fatal(err)
	}
	return list
}

// TestStoredTime: storedTime is what a time column reads back.
func TestStoredTime(t *testing.T) {
	t.Parallel()
	for _, in := range []time.Time{
		{}, time.Time{}.In(time.FixedZone("z", 3600)), time.Now(), time.Now().In(time.FixedZone("z", -7*3600)),
		time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC), time.Date(1999, 12, 31, 23, 59, 59, 999999999, time.Local),
		time.Unix(0, 0),
	} {
		var read time.Time
		if err := (scanTime{&read}).Scan(dbTime(in)); err != nil {
			t.Fatal(err)
		}
		if got := storedTime(in); !reflect.DeepEqual(got, read) {
			t.Errorf("storedTime(%v) = %#v, the column reads back %#v", in, got, read)
		}
	}
}

// TestActiveStateCacheFollowsPushes: pushes from several writers while
// readers read the active desired state: afterwards (and after each push)
// it is the one the file says is active.
func TestActiveStateCacheFollowsPushes(t *testing.T) {
	t.Parallel()
	s, _ := openTemp(t)
	t.Cleanup(func() { _ = s.Close() })
	ctx := t.Context()
	fromFile := func(svc string) store.DesiredState {
		t.Helper()
		d, err := scanDesiredState(s.reads.QueryRowContext(ctx,
			selectDesiredStateHead+" WHERE application = 'app' AND service = ? AND replaced_by IS NULL", svc))
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 15 {
				svc := fmt.Sprintf("svc-%d", i%3)
				if _, err := s.ActiveDesiredState(ctx, "app", svc); err != nil && !errors.Is(err, store.ErrNotFound) {
					t.Error(err)
					return
				}
				d := store.DesiredState{ID: fmt.Sprintf("ds-%d-%d", w, i), Application: "app", Service: svc, Version: fmt.Sprint(i),
					Params: []byte(`{"w":1}`), ReleaseChannels: []string{"a", "b"}, Compiled: []byte(`{}`)}
				if err := s.CreateDesiredState(ctx, d); err != nil {
					t.Error(err)
					return
				}
				got, err := s.ActiveDesiredState(ctx, "app", svc)
				if err != nil {
					t.Error(err)
					return
				}
				if got.ReplacedBy != "" {
					t.Errorf("active desired state %s is replaced by %s", got.ID, got.ReplacedBy)
				}
			}
		})
	}
	wg.Wait()
	for i := range 3 {
		svc := fmt.Sprintf("svc-%d", i)
		for range 2 { // a miss, then a hit
			got, err := s.ActiveDesiredState(ctx, "app", svc)
			if err != nil {
				t.Fatal(err)
			}
			if want := fromFile(svc); !reflect.DeepEqual(got, want) {
				t.Fatalf("%s: active desired state %+v, the file says %+v", svc, got, want)
			}
		}
	}
}

// TestUpdatedColumns: the column table names the instanceColumns after the
// key, in order, and each column compares its own field alone.
func TestUpdatedColumns(t *testing.T) {
	t.Parallel()
	names := strings.Split(instanceColumns, ", ")[3:]
	if len(names) != len(updatedColumns) {
		t.Fatalf("%d columns in the table, %d after the key", len(updatedColumns), len(names))
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	in := store.Instance{Application: "a", Service: "s", ReleaseChannel: "r", DesiredStateID: "d", TargetStateID: "ts",
		TargetVersion: "tv", CurrentStateID: "cs", CurrentVersion: "cv", Status: ds.StatusConverged, Reason: ds.Reason("R"),
		Message: "m", Paused: true, ApplyAttempts: 2, LastApplyAt: at, ConvergedAt: at.Add(1), UpdatedAt: at.Add(2),
		PreviousStateID: "ps", PreviousVersion: "pv", DesiredVersion: "dv", Satisfied: []string{"x@1"}, RollbackFrom: "rf",
		RollbackReason: "rr", FailedVersion: "fv", Healed: 3, ActionSeq: 4, ActionPending: true, AppliedAt: at.Add(3),
		Checks: []store.CheckResult{{Key: "k", At: at}}, RuntimeMemo: "{}", Revision: 9}
	for i, c := range updatedColumns {
		if c.name != names[i] {
			t.Errorf("column %d: %s in the table, %s in instanceColumns", i, c.name, names[i])
		}
	}
	// Changing one field makes its column, and only it, differ.
	change := map[string]func(*store.Instance){
		"desired_state_id": func(i *store.Instance) { i.DesiredStateID += "x" }, "target_state_id": func(i *store.Instance) { i.TargetStateID += "x" },
		"target_version": func(i *store.Instance) { i.TargetVersion += "x" }, "current_state_id": func(i *store.Instance) { i.CurrentStateID += "x" },
		"current_version": func(i *store.Instance) { i.CurrentVersion += "x" }, "status": func(i *store.Instance) { i.Status += "x" },
		"reason": func(i *store.Instance) { i.Reason += "x" }, "message": func(i *store.Instance) { i.Message += "x" },
		"paused": func(i *store.Instance) { i.Paused = !i.Paused }, "apply_attempts": func(i *store.Instance) { i.ApplyAttempts++ },
		"last_apply_at": func(i *store.Instance) { i.LastApplyAt = i.LastApplyAt.Add(1) }, "converged_at": func(i *store.Instance) { i.ConvergedAt = time.Time{} },
		"updated_at": func(i *store.Instance) { i.UpdatedAt = i.UpdatedAt.Add(1) }, "previous_state_id": func(i *store.Instance) { i.PreviousStateID += "x" },
		"previous_version": func(i *store.Instance) { i.PreviousVersion += "x" }, "desired_version": func(i *store.Instance) { i.DesiredVersion += "x" },
		"satisfied": func(i *store.Instance) { i.Satisfied = []string{"x@2"} }, "rollback_from": func(i *store.Instance) { i.RollbackFrom += "x" },
		"rollback_reason": func(i *store.Instance) { i.RollbackReason += "x" }, "failed_version": func(i *store.Instance) { i.FailedVersion += "x" },
		"healed": func(i *store.Instance) { i.Healed++ }, "action_seq": func(i *store.Instance) { i.ActionSeq++ },
		"action_pending": func(i *store.Instance) { i.ActionPending = !i.ActionPending }, "applied_at": func(i *store.Instance) { i.AppliedAt = time.Time{} },
		"checks": func(i *store.Instance) { i.Checks = []store.CheckResult{{Key: "k", At: at, Runs: 1}} }, "revision": func(i *store.Instance) { i.Revision++ },
		"runtime_memo": func(i *store.Instance) { i.RuntimeMemo = `{"x":1}` },
	}
	for _, c := range updatedColumns {
		f, ok := change[c.name]
		if !ok {
			t.Fatalf("no change for column %s", c.name)
		}
		other := in
		f(&other)
		for _, d := range updatedColumns {
			if differs := !d.same(&in, &other); differs != (d.name == c.name) {
				t.Errorf("changing %s: column %s differs = %v", c.name, d.name, differs)
			}
		}
	}
}

// TestCacheDuringCommit: between a commit and the cache taking its rows in,
// reads of the services it writes go to the file and fills are refused; a
// commit that failed drops the service; an import sends every read to the
// file until it ends, then drops everything.
func TestCacheDuringCommit(t *testing.T) {
	t.Parallel()
	var c instanceCache
	row := func(rc string, rev int64) store.Instance {
		return store.Instance{Application: "a", Service: "s", ReleaseChannel: rc, Revision: rev}
	}
	_, gen, _ := c.list("a", "s")
	c.fill("a", "s", gen, []store.Instance{row("one", 1)})
	if _, _, ok := c.list("a", "s"); !ok {
		t.Fatal("filled, yet a miss")
	}
	w := &instWrites{written: []store.Instance{row("one", 2), row("two", 1)}, touched: []svcKey{{"a", "s"}}}
	c.committing(w)
	_, gen, ok := c.list("a", "s")
	if ok {
		t.Fatal("a hit while a commit writing the service is under way")
	}
	if _, ok := c.at("a", "s", "one", 1); ok {
		t.Fatal("at answered while a commit writing the service is under way")
	}
	c.fill("a", "s", gen, []store.Instance{row("one", 1)}) // read before the commit: refused
	c.done(w, true)
	list, _, ok := c.list("a", "s")
	if !ok || len(list) != 2 || list[0].Revision != 2 || list[1].ReleaseChannel != "two" {
		t.Fatalf("after the commit: %+v (hit %v)", list, ok)
	}
	w = &instWrites{written: []store.Instance{row("one", 3)}, touched: []svcKey{{"a", "s"}}}
	c.committing(w)
	c.done(w, false)
	if _, _, ok := c.list("a", "s"); ok {
		t.Fatal("a service a failed commit touched is still cached")
	}
	_, gen, _ = c.list("a", "s")
	c.fill("a", "s", gen, []store.Instance{row("one", 2)})
	imp := &instWrites{all: true}
	c.committing(imp)
	if _, _, ok := c.list("a", "s"); ok {
		t.Fatal("a hit while an import commits")
	}
	c.done(imp, true)
	if _, _, ok := c.list("a", "s"); ok {
		t.Fatal("cached after an import")
	}
	if c.held != 0 {
		t.Errorf("%d instances counted as held with none cached", c.held)
	}
}

// TestPreparedUpdateFollowsImports: a write prepares the UPDATE of the
// columns it changes against the cached row, before its transaction. A
// commit that replaces every row meanwhile (an import, which keeps
// revisions) makes it write the whole row instead: the file then holds
// exactly what was written, not a mix of the two.
func TestPreparedUpdateFollowsImports(t *testing.T) {
	t.Parallel()
	s, _ := openTemp(t)
	t.Cleanup(func() { _ = s.Close() })
	ctx := t.Context()
	in := store.Instance{Application: "app", Service: "web", ReleaseChannel: "prod", DesiredStateID: "d1", TargetVersion: "v1", Status: ds.StatusConverging}
	if err := s.Write(ctx, &store.Batch{Instances: []store.Instance{in}}); err != nil {
		t.Fatal(err)
	}
	list, err := s.ListInstances(ctx, "app", "web")
	if err != nil || len(list) != 1 {
		t.Fatalf("instances %v, %v", list, err)
	}
	next := list[0]
	next.Status, next.Message = ds.StatusConverged, "done"
	b := &store.Batch{Instances: []store.Instance{next}}
	at := now()
	rows, err := s.prepareBatch(b, at)
	if err != nil {
		t.Fatal(err)
	}
	if rows.instances[0].args == nil {
		t.Fatal("the update of the changed columns was not prepared from the cache")
	}
	// As an import does: every row may change, revisions kept.
	if err := s.writeTx(ctx, func(tx *wtx) error {
		tx.inst.all = true
		_, err := tx.ExecContext(ctx, "UPDATE instances SET target_version = 'v9', desired_state_id = 'd9'")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.writeTxRerun(ctx, crashSafe, func(tx *wtx) error {
		_, _, err := s.applyBatch(ctx, tx, b, rows, at)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	got := s.fromFile(t, "app", "web")
	if len(got) != 1 || got[0].TargetVersion != "v1" || got[0].DesiredStateID != "d1" || got[0].Status != ds.StatusConverged || got[0].Message != "done" {
		t.Errorf("file holds %+v, want what was written", got)
	}
}
