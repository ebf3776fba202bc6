package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/store"
)

// workTests are the conformance cases of leases and durable tasks.
var workTests = []struct {
	name string
	fn   func(t *testing.T, s store.Store)
}{
	{"Lease/ClaimRenewRelease", testLeaseClaimRenewRelease},
	{"Lease/ExpiryTakeoverFencesOldHolder", testLeaseExpiry},
	{"Lease/ConcurrentClaimsOneWinner", testLeaseConcurrent},
	{"Task/EnqueueClaimComplete", testTaskLifecycle},
	{"Task/ExpiredClaimTakenOver", testTaskExpiry},
	{"Task/EnqueuedClaimed", testTaskEnqueuedClaimed},
	{"Task/FinishedKeptNewest", testTaskRetention},
	{"Task/CompletedInBatch", testTaskCompletedInBatch},
	{"Task/ConcurrentClaimsEachOnce", testTaskConcurrentClaims},
	{"Task/ReleaseHandsOver", testTaskRelease},
	{"Work/TwoEnginesTwoRunners", testTwoEnginesTwoRunners},
	{"Work/ResetClaims", testResetClaims},
}

// eventually polls cond until it holds or 10 s pass.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func testLeaseClaimRenewRelease(t *testing.T, s store.Store) {
	ctx := t.Context()
	a, err := s.ClaimLease(ctx, "shop/web", "engine-a", time.Minute)
	must(t, err)
	if a.Key != "shop/web" || a.Owner != "engine-a" || a.Token < 1 || time.Until(a.Expires) < 50*time.Second {
		t.Fatalf("claimed %+v", a)
	}
	held, err := s.ClaimLease(ctx, "shop/web", "engine-b", time.Minute)
	wantErr(t, err, store.ErrLeaseHeld, "claim of a held lease")
	if held.Owner != "engine-a" || held.Token != a.Token {
		t.Errorf("ErrLeaseHeld came with %+v, want the holder's lease", held)
	}
	again, err := s.ClaimLease(ctx, "shop/web", "engine-a", time.Minute)
	must(t, err)
	if again.Token != a.Token {
		t.Errorf("the holder's second claim changed the token %d -> %d", a.Token, again.Token)
	}
	renewed, err := s.RenewLease(ctx, a, 2*time.Minute)
	must(t, err)
	if renewed.Token != a.Token || !renewed.Expires.After(a.Expires) {
		t.Errorf("renewed %+v from %+v", renewed, a)
	}
	must(t, s.Write(ctx, &store.Batch{Fence: &store.Fence{Key: a.Key, Token: a.Token}, Events: []store.Event{ev("shop", "web", "fenced")}}))
	must(t, s.ReleaseLease(ctx, renewed))
	b, err := s.ClaimLease(ctx, "shop/web", "engine-b", time.Minute)
	must(t, err)
	if b.Token <= a.Token {
		t.Errorf("a new holder got token %d, not above %d", b.Token, a.Token)
	}
	_, err = s.RenewLease(ctx, a, time.Minute)
	wantErr(t, err, store.ErrFenced, "renewal of a released lease another owner claimed")
	must(t, s.ReleaseLease(ctx, a)) // a lost lease: no error, and b keeps it
	if _, err := s.ClaimLease(ctx, "shop/web", "engine-c", time.Minute); !errors.Is(err, store.ErrLeaseHeld) {
		t.Errorf("the old holder's release freed the new holder's lease: %v", err)
	}
	leases, err := s.ListLeases(ctx)
	must(t, err)
	if len(leases) != 1 || leases[0].Owner != "engine-b" || leases[0].Token != b.Token {
		t.Errorf("leases %+v", leases)
	}
	for _, bad := range []struct{ key, owner string }{{"", "x"}, {"k", ""}} {
		if _, err := s.ClaimLease(ctx, bad.key, bad.owner, time.Minute); err == nil || errors.Is(err, store.ErrLeaseHeld) {
			t.Errorf("claim %q by %q: %v, want a validation error", bad.key, bad.owner, err)
		}
	}
}

func testLeaseExpiry(t *testing.T, s store.Store) {
	ctx := t.Context()
	a, err := s.ClaimLease(ctx, "shop/web", "engine-a", 50*time.Millisecond)
	must(t, err)
	var b store.Lease
	eventually(t, "the lease to expire", func() bool {
		b, err = s.ClaimLease(ctx, "shop/web", "engine-b", time.Minute)
		return err == nil
	})
	if b.Token <= a.Token || b.Owner != "engine-b" {
		t.Fatalf("taken over as %+v from %+v", b, a)
	}
	_, err = s.RenewLease(ctx, a, time.Minute)
	wantErr(t, err, store.ErrFenced, "renewal by the holder whose lease expired and was taken")
	// The old holder's fenced write is refused whole.
	inst := instance("shop", "web", "prod")
	err = s.Write(ctx, &store.Batch{Fence: &store.Fence{Key: a.Key, Token: a.Token}, Instances: []store.Instance{inst},
		Events: []store.Event{ev("shop", "web", "stale")}, Tasks: []store.Task{{Key: "shop/web", Instance: "prod", Kind: "apply"}}})
	wantErr(t, err, store.ErrFenced, "write fenced by a lost lease")
	if _, err := s.GetInstance(ctx, "shop", "web", "prod"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a fenced-out write created the instance: %v", err)
	}
	if evs := events(t, s, store.EventFilter{}); len(evs) != 0 {
		t.Errorf("a fenced-out write appended %d events", len(evs))
	}
	if tasks, err := s.ListTasks(ctx, store.TaskFilter{}); err != nil || len(tasks) != 0 {
		t.Errorf("a fenced-out write enqueued %v (%v)", tasks, err)
	}
	// A fence on a key nobody ever claimed is refused too.
	err = s.Write(ctx, &store.Batch{Fence: &store.Fence{Key: "nobody/claimed", Token: 1}, Events: []store.Event{ev("a", "b", "x")}})
	wantErr(t, err, store.ErrFenced, "write fenced by a lease that never existed")
	must(t, s.Write(ctx, &store.Batch{Fence: &store.Fence{Key: b.Key, Token: b.Token}, Instances: []store.Instance{inst}}))
}

func testLeaseConcurrent(t *testing.T, s store.Store) {
	ctx := t.Context()
	var wins atomic.Int32
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			_, err := s.ClaimLease(ctx, "shop/web", fmt.Sprintf("engine-%d", i), time.Minute)
			switch {
			case err == nil:
				wins.Add(1)
			case !errors.Is(err, store.ErrLeaseHeld):
				t.Errorf("claim: %v", err)
			}
		})
	}
	wg.Wait()
	if n := wins.Load(); n != 1 {
		t.Errorf("%d of 8 concurrent claims of one key won, want 1", n)
	}
}

// claimOne claims the oldest claimable task, or fails with ErrNotFound.
func claimOne(ctx context.Context, s store.Store, owner string, ttl time.Duration) (store.Task, error) {
	tasks, err := s.ClaimTasks(ctx, owner, ttl, 1)
	switch {
	case err != nil:
		return store.Task{}, err
	case len(tasks) == 0:
		return store.Task{}, store.ErrNotFound
	case len(tasks) > 1:
		return store.Task{}, fmt.Errorf("claimed %d tasks with limit 1", len(tasks))
	}
	return tasks[0], nil
}

func testTaskLifecycle(t *testing.T, s store.Store) {
	ctx := t.Context()
	if _, err := s.ClaimTasks(ctx, "runner-a", time.Minute, 0); err == nil {
		t.Error("a claim of at most 0 tasks was accepted")
	}
	if _, err := claimOne(ctx, s, "runner-a", time.Minute); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("claim with nothing queued: %v, want ErrNotFound", err)
	}
	inst := instance("shop", "web", "prod")
	b := &store.Batch{Instances: []store.Instance{inst}, Tasks: []store.Task{
		{Key: "shop/web", Instance: "prod", Kind: "apply", Payload: []byte(`{"version":"v1"}`)},
		{Key: "shop/web", Instance: "staging", Kind: "apply"},
	}}
	must(t, s.Write(ctx, b))
	if b.Tasks[0].ID == 0 || b.Tasks[1].ID <= b.Tasks[0].ID || b.Tasks[0].Status != store.TaskPending || b.Tasks[0].CreatedAt.IsZero() {
		t.Fatalf("enqueued %+v", b.Tasks)
	}
	// A second open task for one instance is refused, with the whole batch.
	dup := &store.Batch{Events: []store.Event{ev("shop", "web", "dup")}, Tasks: []store.Task{{Key: "shop/web", Instance: "prod", Kind: "apply"}}}
	wantErr(t, s.Write(ctx, dup), store.ErrConflict, "a second open task for one instance")
	if evs := events(t, s, store.EventFilter{}); len(evs) != 0 {
		t.Errorf("the refused batch appended %d events", len(evs))
	}
	if err := s.Write(ctx, &store.Batch{Tasks: []store.Task{{Key: "shop/web", Instance: "x"}}}); err == nil {
		t.Error("a task without a kind was enqueued")
	}

	first, err := claimOne(ctx, s, "runner-a", time.Minute)
	must(t, err)
	if first.ID != b.Tasks[0].ID || first.Status != store.TaskRunning || first.Owner != "runner-a" || first.Attempts != 1 ||
		first.Token < 1 || string(first.Payload) != `{"version":"v1"}` || first.ClaimedAt.IsZero() {
		t.Fatalf("claimed %+v, want the oldest task", first)
	}
	second, err := claimOne(ctx, s, "runner-b", time.Minute)
	must(t, err)
	if second.ID != b.Tasks[1].ID {
		t.Fatalf("second claim got task %d, want %d", second.ID, b.Tasks[1].ID)
	}
	if _, err := claimOne(ctx, s, "runner-c", time.Minute); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a third claim: %v, want ErrNotFound (both tasks are claimed)", err)
	}
	hb, err := s.HeartbeatTask(ctx, first, 2*time.Minute)
	must(t, err)
	if !hb.Expires.After(first.Expires) || hb.Token != first.Token {
		t.Errorf("heartbeat %+v from %+v", hb, first)
	}
	wrong := first
	wrong.Owner = "runner-b"
	_, err = s.HeartbeatTask(ctx, wrong, time.Minute)
	wantErr(t, err, store.ErrFenced, "heartbeat by another owner")

	stored, err := s.GetInstance(ctx, "shop", "web", "prod")
	must(t, err)
	stored.CurrentVersion = "v1"
	done := &store.Batch{Instances: []store.Instance{stored}, Events: []store.Event{ev("shop", "web", "applied")}}
	must(t, s.CompleteTask(ctx, hb, store.TaskSucceeded, "applied v1", done))
	if done.Instances[0].Revision != stored.Revision+1 || done.Events[0].Seq == 0 {
		t.Errorf("the completion batch was not committed into b: %+v", done)
	}
	got, err := s.GetTask(ctx, first.ID)
	must(t, err)
	if got.Status != store.TaskSucceeded || got.Message != "applied v1" || got.FinishedAt.IsZero() {
		t.Errorf("completed task %+v", got)
	}
	wantErr(t, s.CompleteTask(ctx, hb, store.TaskFailed, "again", nil), store.ErrFenced, "completing a completed task")
	if err := s.CompleteTask(ctx, second, "bogus", "", nil); err == nil || errors.Is(err, store.ErrFenced) {
		t.Errorf("completion with a bad status: %v", err)
	}
	// A completion whose batch conflicts writes nothing, the task stays claimed.
	staleDone := &store.Batch{Instances: []store.Instance{stored}}
	wantErr(t, s.CompleteTask(ctx, second, store.TaskFailed, "x", staleDone), store.ErrConflict, "completion with a stale instance")
	if got, err := s.GetTask(ctx, second.ID); err != nil || got.Status != store.TaskRunning {
		t.Errorf("after a conflicting completion the task is %+v (%v), want still running", got, err)
	}
	must(t, s.CompleteTask(ctx, second, store.TaskFailed, "runtime said no", nil))
	// Now prod has no open task: a new one may be enqueued.
	must(t, s.Write(ctx, &store.Batch{Tasks: []store.Task{{Key: "shop/web", Instance: "prod", Kind: "apply"}}}))
	open, err := s.ListTasks(ctx, store.TaskFilter{Key: "shop/web", Open: true})
	must(t, err)
	if len(open) != 1 || open[0].Instance != "prod" || open[0].Status != store.TaskPending {
		t.Errorf("open tasks %+v", open)
	}
	must(t, s.Write(ctx, &store.Batch{Tasks: []store.Task{{Key: "shop/api", Instance: "prod", Kind: "apply"}}}))
	insts, err := s.OpenTaskInstances(ctx, "shop/web")
	must(t, err)
	if !slices.Equal(insts, []string{"prod"}) {
		t.Errorf("instances of the open tasks of shop/web: %q, want [prod] (its finished tasks and shop/api's are not)", insts)
	}
	if insts, err := s.OpenTaskInstances(ctx, "shop/none"); err != nil || len(insts) != 0 {
		t.Errorf("instances of the open tasks of a key without tasks: %q, %v", insts, err)
	}
	all, err := s.ListTasks(ctx, store.TaskFilter{Key: "shop/web"})
	must(t, err)
	if len(all) != 3 || all[0].ID != first.ID {
		t.Errorf("all tasks %+v", all)
	}
	if _, err := s.GetTask(ctx, 1<<40); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("get unknown task: %v", err)
	}
}

func testTaskExpiry(t *testing.T, s store.Store) {
	ctx := t.Context()
	must(t, s.Write(ctx, &store.Batch{Tasks: []store.Task{{Key: "shop/web", Instance: "prod", Kind: "apply"}}}))
	a, err := claimOne(ctx, s, "runner-a", 50*time.Millisecond)
	must(t, err)
	var b store.Task
	eventually(t, "the claim to expire", func() bool {
		b, err = claimOne(ctx, s, "runner-b", time.Minute)
		return err == nil
	})
	if b.ID != a.ID || b.Attempts != 2 || b.Token <= a.Token || b.Owner != "runner-b" {
		t.Fatalf("taken over as %+v from %+v", b, a)
	}
	_, err = s.HeartbeatTask(ctx, a, time.Minute)
	wantErr(t, err, store.ErrFenced, "heartbeat of a claim taken over")
	inst := instance("shop", "web", "prod")
	wantErr(t, s.CompleteTask(ctx, a, store.TaskSucceeded, "late", &store.Batch{Instances: []store.Instance{inst}}), store.ErrFenced, "completion of a claim taken over")
	if _, err := s.GetInstance(ctx, "shop", "web", "prod"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a fenced-out completion wrote its batch: %v", err)
	}
	must(t, s.CompleteTask(ctx, b, store.TaskSucceeded, "done", nil))
}

// testTaskEnqueuedClaimed: a batch's tasks enqueued already claimed are
// running under the claim (heartbeats and completion hold it), no other
// runner gets them while it holds, and one whose claim lapses is taken over
// like any other.
func testTaskEnqueuedClaimed(t *testing.T, s store.Store) {
	ctx := t.Context()
	if err := s.Write(ctx, &store.Batch{Tasks: []store.Task{{Key: "shop/web", Instance: "prod", Kind: "apply"}},
		Claim: &store.TaskClaim{Owner: "runner-a"}}); err == nil {
		t.Fatal("a claim without a ttl was accepted")
	}
	b := &store.Batch{Tasks: []store.Task{
		{Key: "shop/web", Instance: "prod", Kind: "apply", Payload: []byte(`{"version":"v1"}`)},
		{Key: "shop/web", Instance: "staging", Kind: "apply"},
	}, Claim: &store.TaskClaim{Owner: "runner-a", TTL: time.Minute}}
	must(t, s.Write(ctx, b))
	a := b.Tasks[0]
	if a.ID == 0 || a.Status != store.TaskRunning || a.Owner != "runner-a" || a.Token != 1 || a.Attempts != 1 ||
		a.ClaimedAt.IsZero() || time.Until(a.Expires) < 50*time.Second {
		t.Fatalf("enqueued claimed as %+v", a)
	}
	got, err := s.GetTask(ctx, a.ID)
	must(t, err)
	if got.Status != store.TaskRunning || got.Owner != "runner-a" || got.Token != 1 || got.Attempts != 1 ||
		got.ClaimedAt.IsZero() || time.Until(got.Expires) < 50*time.Second || string(got.Payload) != `{"version":"v1"}` {
		t.Fatalf("stored as %+v", got)
	}
	if _, err := claimOne(ctx, s, "runner-b", time.Minute); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("another runner claimed a task enqueued claimed: %v", err)
	}
	// A second open task for the instance is refused, claimed or not.
	wantErr(t, s.Write(ctx, &store.Batch{Tasks: []store.Task{{Key: "shop/web", Instance: "prod", Kind: "apply"}},
		Claim: &store.TaskClaim{Owner: "runner-b", TTL: time.Minute}}), store.ErrConflict, "a second open task, claimed")
	hb, err := s.HeartbeatTask(ctx, a, time.Minute)
	must(t, err)
	must(t, s.CompleteTask(ctx, hb, store.TaskSucceeded, "applied v1", nil))
	if got, err := s.GetTask(ctx, a.ID); err != nil || got.Status != store.TaskSucceeded {
		t.Fatalf("completed claimed task is %+v (%v)", got, err)
	}
	// One whose claim lapses goes to the next runner, as a second attempt.
	short := &store.Batch{Tasks: []store.Task{{Key: "shop/web", Instance: "canary", Kind: "apply"}},
		Claim: &store.TaskClaim{Owner: "runner-a", TTL: 50 * time.Millisecond}}
	must(t, s.Write(ctx, short))
	var taken store.Task
	eventually(t, "the enqueued claim to lapse", func() bool {
		// staging's task is still claimed by runner-a for a minute.
		taken, err = claimOne(ctx, s, "runner-b", time.Minute)
		return err == nil
	})
	if taken.ID != short.Tasks[0].ID || taken.Attempts != 2 || taken.Token <= 1 || taken.Owner != "runner-b" {
		t.Fatalf("taken over as %+v", taken)
	}
	wantErr(t, s.CompleteTask(ctx, short.Tasks[0], store.TaskSucceeded, "late", nil), store.ErrFenced, "completion of a lapsed enqueued claim")
}

// testTaskCompletedInBatch: a batch ends claimed tasks with the rest of its
// writes, all or nothing: a claim no longer held, or an outcome that is not
// one, fails the whole batch and writes nothing of it.
func testTaskCompletedInBatch(t *testing.T, s store.Store) {
	ctx := t.Context()
	lease, err := s.ClaimLease(ctx, "service/shop/web", "engine-a", time.Minute)
	must(t, err)
	fence := &store.Fence{Key: lease.Key, Token: lease.Token}
	first := &store.Batch{Fence: fence, Tasks: []store.Task{{Key: "shop/web", Instance: "staging", Kind: "apply"}},
		Claim: &store.TaskClaim{Owner: "engine-a", TTL: time.Minute}}
	must(t, s.Write(ctx, first))
	done := first.Tasks[0]
	events := func() int {
		evs, err := s.ListEvents(ctx, store.EventFilter{Application: "shop", Service: "web"})
		must(t, err)
		return len(evs)
	}
	before := events()
	for _, bad := range []struct {
		what string
		d    store.TaskDone
		want error
	}{
		{"an outcome that is not one", store.TaskDone{Task: done, Status: store.TaskRunning}, nil},
		{"a claim held by nobody of that token", store.TaskDone{Task: func() store.Task { x := done; x.Token++; return x }(), Status: store.TaskSucceeded}, store.ErrFenced},
		{"a claim of another owner", store.TaskDone{Task: func() store.Task { x := done; x.Owner = "engine-b"; return x }(), Status: store.TaskSucceeded}, store.ErrFenced},
	} {
		err := s.Write(ctx, &store.Batch{Fence: fence, Complete: []store.TaskDone{bad.d},
			Instances: []store.Instance{instance("shop", "web", "staging")}, Events: []store.Event{ev("shop", "web", "applied")}})
		switch {
		case err == nil:
			t.Fatalf("%s: the batch was written", bad.what)
		case bad.want != nil:
			wantErr(t, err, bad.want, bad.what)
		}
		if _, err := s.GetInstance(ctx, "shop", "web", "staging"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("%s: the batch's instance was written (%v)", bad.what, err)
		}
		if n := events(); n != before {
			t.Fatalf("%s: %d events were appended", bad.what, n-before)
		}
		if got, err := s.GetTask(ctx, done.ID); err != nil || got.Status != store.TaskRunning {
			t.Fatalf("%s: the task is %+v (%v)", bad.what, got, err)
		}
	}
	next := &store.Batch{Fence: fence,
		Complete:  []store.TaskDone{{Task: done, Status: store.TaskSucceeded, Message: "applied v1"}},
		Instances: []store.Instance{instance("shop", "web", "staging")},
		Events:    []store.Event{ev("shop", "web", "applied")},
		Tasks:     []store.Task{{Key: "shop/web", Instance: "prod", Kind: "apply"}},
		Claim:     &store.TaskClaim{Owner: "engine-a", TTL: time.Minute}}
	must(t, s.Write(ctx, next))
	got, err := s.GetTask(ctx, done.ID)
	must(t, err)
	if got.Status != store.TaskSucceeded || got.Message != "applied v1" || got.FinishedAt.IsZero() || !got.Expires.IsZero() {
		t.Fatalf("completed in a batch as %+v", got)
	}
	if _, err := s.GetInstance(ctx, "shop", "web", "staging"); err != nil {
		t.Fatalf("the batch's instance: %v", err)
	}
	if n := events(); n != before+1 {
		t.Fatalf("%d events appended, want 1", n-before)
	}
	if next.Tasks[0].Status != store.TaskRunning {
		t.Fatalf("the batch's new task is %+v", next.Tasks[0])
	}
	// Completed once: a second completion of the claim is fenced.
	wantErr(t, s.Write(ctx, &store.Batch{Complete: []store.TaskDone{{Task: done, Status: store.TaskFailed}}}), store.ErrFenced, "a second completion")
	wantErr(t, s.CompleteTask(ctx, done, store.TaskFailed, "again", nil), store.ErrFenced, "CompleteTask after a completion in a batch")
}

// testTaskRetention: completing a task deletes the instance's finished
// tasks beyond the newest store.KeepFinishedTasks, and no other's.
func testTaskRetention(t *testing.T, s store.Store) {
	ctx := t.Context()
	run := func(instance string) int64 {
		b := &store.Batch{Tasks: []store.Task{{Key: "shop/web", Instance: instance, Kind: "apply"}},
			Claim: &store.TaskClaim{Owner: "runner-a", TTL: time.Minute}}
		must(t, s.Write(ctx, b))
		must(t, s.CompleteTask(ctx, b.Tasks[0], store.TaskSucceeded, "done", nil))
		return b.Tasks[0].ID
	}
	other := run("staging")
	var ids []int64
	for range store.KeepFinishedTasks + 3 {
		ids = append(ids, run("prod"))
		all, err := s.ListTasks(ctx, store.TaskFilter{Key: "shop/web"})
		must(t, err)
		var kept []int64
		for _, task := range all {
			if task.Instance == "prod" {
				kept = append(kept, task.ID)
			}
		}
		want := ids[max(0, len(ids)-store.KeepFinishedTasks):]
		if fmt.Sprint(kept) != fmt.Sprint(want) {
			t.Fatalf("after %d completions prod keeps tasks %v, want %v", len(ids), kept, want)
		}
		if all[0].ID != other {
			t.Fatalf("staging's finished task %d was deleted with prod's: %+v", other, all)
		}
	}
}

func testTaskConcurrentClaims(t *testing.T, s store.Store) {
	ctx := t.Context()
	const n = 40
	b := &store.Batch{}
	for i := range n {
		b.Tasks = append(b.Tasks, store.Task{Key: fmt.Sprintf("shop/svc%d", i), Instance: "prod", Kind: "apply"})
	}
	must(t, s.Write(ctx, b))
	var mu sync.Mutex
	claimed := map[int64]string{}
	var wg sync.WaitGroup
	for r := range 4 {
		owner := fmt.Sprintf("runner-%d", r)
		wg.Go(func() {
			for {
				tasks, err := s.ClaimTasks(ctx, owner, time.Minute, 3)
				if err != nil {
					t.Errorf("claim: %v", err)
					return
				}
				if len(tasks) == 0 {
					return
				}
				if len(tasks) > 3 {
					t.Errorf("claimed %d tasks at once, limit 3", len(tasks))
				}
				for _, task := range tasks {
					mu.Lock()
					if prev, dup := claimed[task.ID]; dup {
						t.Errorf("task %d claimed by %s and %s", task.ID, prev, owner)
					}
					claimed[task.ID] = owner
					mu.Unlock()
					if err := s.CompleteTask(ctx, task, store.TaskSucceeded, "", nil); err != nil {
						t.Errorf("complete: %v", err)
					}
				}
			}
		})
	}
	wg.Wait()
	if len(claimed) != n {
		t.Errorf("%d of %d tasks were claimed", len(claimed), n)
	}
}

// testTwoEnginesTwoRunners runs the shape the engine uses over one store:
// engines lease service keys, write a plan and enqueue an apply task in one
// fenced batch; runners claim tasks and complete them with the instance's
// new state. Engine A stops midway without releasing its leases (a crash);
// B takes its services over once they expire. Every service ends applied,
// and each (service, version) is applied exactly once.
func testTwoEnginesTwoRunners(t *testing.T, s store.Store) {
	ctx := t.Context()
	const services = 40
	const ttl = 200 * time.Millisecond
	var mu sync.Mutex
	applied := map[string]int{}

	// plan is one engine pass over a service under its lease.
	plan := func(ctx context.Context, owner string, svc string) error {
		key := "shop/" + svc
		lease, err := s.ClaimLease(ctx, key, owner, ttl)
		if err != nil {
			return err
		}
		inst, err := s.GetInstance(ctx, "shop", svc, "prod")
		if errors.Is(err, store.ErrNotFound) {
			inst = store.Instance{Application: "shop", Service: svc, ReleaseChannel: "prod", Status: "PENDING"}
		} else if err != nil {
			return err
		}
		open, err := s.ListTasks(ctx, store.TaskFilter{Key: key, Open: true})
		if err != nil {
			return err
		}
		if inst.TargetVersion == "v1" || len(open) > 0 {
			return nil // decided already
		}
		inst.TargetVersion, inst.Status = "v1", "CONVERGING"
		return s.Write(ctx, &store.Batch{Fence: &store.Fence{Key: key, Token: lease.Token}, Instances: []store.Instance{inst},
			Tasks: []store.Task{{Key: key, Instance: "prod", Kind: "apply", Payload: []byte("v1")}}})
	}
	engine := func(ctx context.Context, owner string, only func(i int) bool) {
		for {
			pending := 0
			for i := range services {
				if !only(i) {
					continue
				}
				inst, err := s.GetInstance(ctx, "shop", fmt.Sprintf("svc%d", i), "prod")
				if err == nil && inst.TargetVersion == "v1" {
					continue
				}
				pending++
				err = plan(ctx, owner, fmt.Sprintf("svc%d", i))
				switch {
				case ctx.Err() != nil:
					return
				case err != nil && !errors.Is(err, store.ErrLeaseHeld) && !errors.Is(err, store.ErrFenced) && !errors.Is(err, store.ErrConflict):
					t.Errorf("%s: plan svc%d: %v", owner, i, err)
					return
				}
			}
			if pending == 0 {
				return
			}
			time.Sleep(time.Millisecond)
		}
	}
	runner := func(ctx context.Context, owner string) {
		for ctx.Err() == nil {
			task, err := claimOne(ctx, s, owner, time.Minute)
			if errors.Is(err, store.ErrNotFound) {
				time.Sleep(time.Millisecond)
				continue
			}
			if err != nil {
				if ctx.Err() == nil {
					t.Errorf("%s: claim: %v", owner, err)
				}
				return
			}
			svc := task.Key[len("shop/"):]
			mu.Lock()
			applied[svc+"@"+string(task.Payload)]++
			mu.Unlock()
			for {
				inst, err := s.GetInstance(ctx, "shop", svc, "prod")
				if err != nil {
					t.Errorf("%s: %v", owner, err)
					return
				}
				inst.CurrentVersion, inst.Status = string(task.Payload), "CONVERGED"
				err = s.CompleteTask(ctx, task, store.TaskSucceeded, "applied", &store.Batch{Instances: []store.Instance{inst}})
				if !errors.Is(err, store.ErrConflict) {
					if err != nil {
						t.Errorf("%s: complete: %v", owner, err)
					}
					break
				}
			}
		}
	}

	runCtx, stopRunners := context.WithCancel(ctx)
	var runners sync.WaitGroup
	runners.Go(func() { runner(runCtx, "runner-1") })
	runners.Go(func() { runner(runCtx, "runner-2") })

	// Engine A leases the even services and "crashes" before planning them.
	for i := 0; i < services; i += 2 {
		if _, err := s.ClaimLease(ctx, fmt.Sprintf("shop/svc%d", i), "engine-a", ttl); err != nil {
			t.Fatal(err)
		}
	}
	// Both engines work; A only gets to plan the first quarter, then stops.
	aCtx, crashA := context.WithCancel(ctx)
	var engines sync.WaitGroup
	engines.Go(func() { engine(aCtx, "engine-a", func(i int) bool { return i < services/4 }) })
	engines.Go(func() { engine(ctx, "engine-b", func(int) bool { return true }) })
	time.Sleep(20 * time.Millisecond)
	crashA()
	engines.Wait()

	eventually(t, "every service applied", func() bool {
		list, err := s.ListInstances(ctx, "shop", "")
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, inst := range list {
			if inst.CurrentVersion == "v1" {
				n++
			}
		}
		return n == services
	})
	stopRunners()
	runners.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(applied) != services {
		t.Errorf("%d services applied, want %d", len(applied), services)
	}
	for k, n := range applied {
		if n != 1 {
			t.Errorf("%s applied %d times, want once", k, n)
		}
	}
}

// testTaskRelease: a released claim makes the task pending again for any
// runner (attempts kept, the message recorded), with the batch in the same
// transaction; a release by a claim no longer held writes nothing.
func testTaskRelease(t *testing.T, s store.Store) {
	ctx := t.Context()
	must(t, s.Write(ctx, &store.Batch{Tasks: []store.Task{{Key: "shop/web", Instance: "prod", Kind: "apply"}}}))
	first, err := claimOne(ctx, s, "runner-a", time.Hour)
	must(t, err)
	b := &store.Batch{Events: []store.Event{ev("shop", "web", "apply-interrupted")}}
	must(t, s.ReleaseTask(ctx, first, "the server shut down", b))
	if b.Events[0].Seq <= 0 {
		t.Errorf("ReleaseTask did not set the event's Seq: %+v", b.Events[0])
	}
	got, err := s.GetTask(ctx, first.ID)
	must(t, err)
	if got.Status != store.TaskPending || got.Owner != "" || got.Attempts != 1 || got.Message != "the server shut down" || !got.Expires.IsZero() {
		t.Errorf("released task %+v", got)
	}
	wantErr(t, s.ReleaseTask(ctx, first, "again", &store.Batch{Events: []store.Event{ev("shop", "web", "lost")}}),
		store.ErrFenced, "a second release of one claim")
	wantErr(t, s.CompleteTask(ctx, first, store.TaskSucceeded, "", nil), store.ErrFenced, "completion of a released claim")
	second, err := claimOne(ctx, s, "runner-b", time.Minute)
	must(t, err)
	if second.ID != first.ID || second.Attempts != 2 || second.Token <= first.Token || second.Owner != "runner-b" {
		t.Errorf("claimed %+v after the release of %+v", second, first)
	}
	if evs := events(t, s, store.EventFilter{}); len(evs) != 1 {
		t.Errorf("events %v, want only the release's", evs)
	}
	must(t, s.CompleteTask(ctx, second, store.TaskSucceeded, "applied", nil))
}

// testResetClaims: after a reset (a sole owner starting), every lease can be
// claimed at once with a higher token and running tasks are pending again;
// the old holders are fenced out.
func testResetClaims(t *testing.T, s store.Store) {
	ctx := t.Context()
	old, err := s.ClaimLease(ctx, "shop/web", "dead-engine", time.Hour)
	must(t, err)
	must(t, s.Write(ctx, &store.Batch{Tasks: []store.Task{{Key: "shop/web", Instance: "prod", Kind: "apply"}}}))
	running, err := claimOne(ctx, s, "dead-runner", time.Hour)
	must(t, err)
	evs := []store.Event{ev("shop", "web", "apply-interrupted")}
	must(t, s.ResetClaims(ctx, evs...))
	if evs[0].Seq <= 0 {
		t.Errorf("ResetClaims did not set the event's Seq: %+v", evs[0])
	}
	if got := events(t, s, store.EventFilter{}); len(got) != 1 || got[0].Type != "apply-interrupted" {
		t.Errorf("events after ResetClaims: %v", got)
	}
	l, err := s.ClaimLease(ctx, "shop/web", "new-engine", time.Minute)
	must(t, err)
	if l.Token <= old.Token {
		t.Errorf("token after reset %d, not above %d", l.Token, old.Token)
	}
	again, err := claimOne(ctx, s, "new-runner", time.Minute)
	must(t, err)
	if again.ID != running.ID || again.Attempts != 2 || again.Token <= running.Token {
		t.Errorf("reclaimed %+v after %+v", again, running)
	}
	wantErr(t, s.CompleteTask(ctx, running, store.TaskSucceeded, "", nil), store.ErrFenced, "completion by the runner from before the reset")
	_, err = s.RenewLease(ctx, old, time.Minute)
	wantErr(t, err, store.ErrFenced, "renewal by the engine from before the reset")
}
