package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	ds "github.com/drover-dev/drover/internal/desiredstate"
	"github.com/drover-dev/drover/internal/runtimes"
	"github.com/drover-dev/drover/internal/store"
	"github.com/drover-dev/drover/internal/store/postgres"
	"github.com/drover-dev/drover/internal/testing/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// slowRuntime takes a while to apply and counts the applies that completed,
// per instance and version.
type slowRuntime struct {
	delay time.Duration
	mu    sync.Mutex
	runs  map[string]string // instance -> version running
	done  map[string]int    // instance@version -> completed applies
	by    map[string]string // instance@version -> the engine that applied it
	owner func(ctx context.Context) string
}

func (r *slowRuntime) Fetch(_ context.Context, t runtimes.Target) (runtimes.State, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	v := r.runs[t.String()]
	return runtimes.State{Version: v, Converged: v != ""}, nil
}

func (r *slowRuntime) Apply(ctx context.Context, t runtimes.Target) (runtimes.ApplyResult, error) {
	select {
	case <-time.After(r.delay):
	case <-ctx.Done():
		return runtimes.ApplyResult{}, context.Cause(ctx)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	k := t.String()
	r.runs[k] = t.Version
	r.done[k+"@"+t.Version]++
	r.by[k+"@"+t.Version] += r.owner(ctx) + " "
	return runtimes.ApplyResult{}, nil
}

type ownerKey struct{}

// ownedRuntimes hands each engine the shared runtime with its name in the
// context, so the runtime can tell who applied.
type ownedRuntimes struct {
	rt    *slowRuntime
	owner string
}

func (o ownedRuntimes) Runtime(context.Context, string) (runtimes.Runtime, error) {
	return ownedRuntime{o}, nil
}

type ownedRuntime struct{ o ownedRuntimes }

func (r ownedRuntime) Fetch(ctx context.Context, t runtimes.Target) (runtimes.State, error) {
	return r.o.rt.Fetch(ctx, t)
}

func (r ownedRuntime) Apply(ctx context.Context, t runtimes.Target) (runtimes.ApplyResult, error) {
	return r.o.rt.Apply(context.WithValue(ctx, ownerKey{}, r.o.owner), t)
}

// mortalStore is a store as seen by one process: once killed, nothing the
// process does reaches the store any more (a crash), and it released
// nothing.
type mortalStore struct {
	store.Store
	dead atomic.Bool
}

var errDead = errors.New("the process is dead")

func (m *mortalStore) check() error {
	if m.dead.Load() {
		return errDead
	}
	return nil
}

func (m *mortalStore) Write(ctx context.Context, b *store.Batch) error {
	if err := m.check(); err != nil {
		return err
	}
	return m.Store.Write(ctx, b)
}

func (m *mortalStore) ClaimLease(ctx context.Context, key, owner string, ttl time.Duration) (store.Lease, error) {
	if err := m.check(); err != nil {
		return store.Lease{}, err
	}
	return m.Store.ClaimLease(ctx, key, owner, ttl)
}

func (m *mortalStore) RenewLease(ctx context.Context, l store.Lease, ttl time.Duration) (store.Lease, error) {
	if err := m.check(); err != nil {
		return store.Lease{}, err
	}
	return m.Store.RenewLease(ctx, l, ttl)
}

func (m *mortalStore) ReleaseLease(ctx context.Context, l store.Lease) error {
	if err := m.check(); err != nil {
		return err
	}
	return m.Store.ReleaseLease(ctx, l)
}

func (m *mortalStore) ClaimTasks(ctx context.Context, owner string, ttl time.Duration, limit int) ([]store.Task, error) {
	if err := m.check(); err != nil {
		return nil, err
	}
	return m.Store.ClaimTasks(ctx, owner, ttl, limit)
}

func (m *mortalStore) HeartbeatTask(ctx context.Context, t store.Task, ttl time.Duration) (store.Task, error) {
	if err := m.check(); err != nil {
		return store.Task{}, err
	}
	return m.Store.HeartbeatTask(ctx, t, ttl)
}

func (m *mortalStore) CompleteTask(ctx context.Context, t store.Task, status store.TaskStatus, msg string, b *store.Batch) error {
	if err := m.check(); err != nil {
		return err
	}
	return m.Store.CompleteTask(ctx, t, status, msg, b)
}

func (m *mortalStore) ReleaseTask(ctx context.Context, t store.Task, msg string, b *store.Batch) error {
	if err := m.check(); err != nil {
		return err
	}
	return m.Store.ReleaseTask(ctx, t, msg, b)
}

func (m *mortalStore) AppendEvents(ctx context.Context, events ...store.Event) error {
	if err := m.check(); err != nil {
		return err
	}
	return m.Store.AppendEvents(ctx, events...)
}

// TestTwoEnginesShareOneStore: two engines, each with its task runner, on
// one store converge 200 services on a slow runtime; each version is applied
// to each instance once. Engine A dies a quarter of the way (it releases
// nothing); B takes A's services and tasks over once their leases and
// claims lapse.
func TestTwoEnginesShareOneStore(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("converges 200 services")
	}
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		st := openStore(t)
		runTwoEngines(t, st, st)
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		// Two pools on one database, as two processes would have.
		url := pgtest.NewDatabase(t)
		open := func() store.Store {
			s, err := postgres.Open(t.Context(), url)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			return s
		}
		runTwoEngines(t, open(), open())
	})
}

// runTwoEngines runs engine A on stA and engine B on stB, two handles on
// one store.
func runTwoEngines(t *testing.T, stA, st store.Store) {
	ctx := t.Context()
	const services = 200
	for i := range services {
		svc := fmt.Sprintf("svc%03d", i)
		compiled, err := ds.Encode(&ds.Compiled{Application: "app", Service: svc, Version: "v1",
			Channels: []ds.Channel{{Name: "staging", Runtime: "slow"}, {Name: "prod", Runtime: "slow", DependsOn: []string{"staging"}}}})
		if err != nil {
			t.Fatal(err)
		}
		if err := st.CreateDesiredState(ctx, store.DesiredState{ID: "ds-shared-" + svc, Application: "app", Service: svc, Version: "v1", Compiled: compiled}); err != nil {
			t.Fatal(err)
		}
	}
	rt := &slowRuntime{delay: 10 * time.Millisecond, runs: map[string]string{}, done: map[string]int{}, by: map[string]string{},
		owner: func(ctx context.Context) string { s, _ := ctx.Value(ownerKey{}).(string); return s }}
	settings := DefaultSettings()
	settings.PollInterval, settings.SteadyPollInterval = 50*time.Millisecond, time.Second
	// A task claim outlives the slowest store write of a loaded CI machine
	// (under -race beside other packages' tests); a claim that lapses while
	// its runner is alive lets another runner apply again, which is the
	// at-least-once contract but not what this test is about.
	newLoop := func(owner string, s store.Store) *Loop {
		return NewLoop(Config{Store: s, Runtimes: ownedRuntimes{rt: rt, owner: owner}, Settings: settings, Owner: owner,
			Workers: 4, MaxApplies: 8, LeaseTTL: time.Second, TaskTTL: 3 * time.Second, TaskPoll: 20 * time.Millisecond})
	}
	mortal := &mortalStore{Store: stA}
	a, b := newLoop("engine-a", mortal), newLoop("engine-b", st)
	aCtx, killA := context.WithCancel(ctx)
	bCtx, stopB := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { _ = a.Run(aCtx) })
	wg.Go(func() { _ = b.Run(bCtx) })
	defer func() {
		killA()
		stopB()
		wg.Wait()
	}()

	converged := func() int {
		list, err := st.ListInstances(ctx, "app", "")
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, inst := range list {
			if inst.Status == ds.StatusConverged && inst.CurrentVersion == "v1" {
				n++
			}
		}
		return n
	}
	wait := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(90 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s (%d of %d instances converged)", what, converged(), 2*services)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	wait("a quarter converged", func() bool { return converged() >= services/2 })
	mortal.dead.Store(true) // engine A dies: it writes nothing more and releases nothing
	killA()
	wait("every instance converged", func() bool { return converged() == 2*services })

	rt.mu.Lock()
	defer rt.mu.Unlock()
	// A crash can come between an apply reaching the runtime and its
	// task's completion: that apply is done again by B (at least once, as
	// a killed process would leave it). Only A's applies in flight at its
	// death (MaxApplies at most) may be done twice, and never by B twice.
	byA, byB, again := 0, 0, 0
	for k, n := range rt.done {
		switch {
		case n == 1 && rt.by[k] == "engine-a ":
			byA++
		case n == 1 && rt.by[k] == "engine-b ":
			byB++
		case n == 2 && rt.by[k] == "engine-a engine-b ":
			again++
		default:
			t.Errorf("%s applied %d times (by %s), want once", k, n, rt.by[k])
		}
	}
	t.Logf("applied once by A: %d, once by B: %d, by A then again by B after A died: %d", byA, byB, again)
	if again > 8 {
		t.Errorf("%d applies of the dead engine were done again, more than it could have in flight (8)", again)
	}
	if len(rt.done) != 2*services || byA == 0 || byB == 0 {
		t.Errorf("%d instances applied (%d by A, %d by B), want %d by both engines", len(rt.done), byA, byB, 2*services)
	}
}

// TestResyncFindsServicesPushedElsewhere: a desired state created after
// the engine started, of which the engine was never told (it was pushed
// through another server sharing the store), is converged once the loop
// resyncs; without resync it is not.
func TestResyncFindsServicesPushedElsewhere(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	rt := &slowRuntime{delay: time.Millisecond, runs: map[string]string{}, done: map[string]int{}, by: map[string]string{},
		owner: func(context.Context) string { return "e" }}
	settings := DefaultSettings()
	settings.PollInterval = 20 * time.Millisecond
	for _, resync := range []time.Duration{0, 50 * time.Millisecond} {
		st := openStore(t)
		l := NewLoop(Config{Store: st, Runtimes: ownedRuntimes{rt: rt, owner: "e"}, Settings: settings, Workers: 2,
			TaskPoll: 20 * time.Millisecond, Resync: resync})
		lctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); _ = l.Run(lctx) }()
		svc := fmt.Sprintf("late-%d", resync.Milliseconds())
		compiled, err := ds.Encode(&ds.Compiled{Application: "app", Service: svc, Version: "v1", Channels: []ds.Channel{{Name: "prod", Runtime: "slow"}}})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond) // the loop has listed the (no) services
		if err := st.CreateDesiredState(ctx, store.DesiredState{ID: "ds-" + svc, Application: "app", Service: svc, Version: "v1", Compiled: compiled}); err != nil {
			t.Fatal(err)
		}
		converged := func() bool {
			inst, err := st.GetInstance(ctx, "app", svc, "prod")
			return err == nil && inst.Status == ds.StatusConverged
		}
		deadline := time.Now().Add(10 * time.Second)
		if resync == 0 {
			deadline = time.Now().Add(500 * time.Millisecond)
		}
		for !converged() && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if got := converged(); got != (resync > 0) {
			t.Errorf("resync %v: converged %v", resync, got)
		}
		stop()
		<-done
	}
}

// cutStore is a store whose connection can be cut: then every call fails
// as an unreachable database does.
type cutStore struct {
	store.Store
	cut atomic.Bool
}

var errUnreachable = errors.New("connect: connection refused")

func (c *cutStore) HeartbeatTask(ctx context.Context, t store.Task, ttl time.Duration) (store.Task, error) {
	if c.cut.Load() {
		return store.Task{}, errUnreachable
	}
	return c.Store.HeartbeatTask(ctx, t, ttl)
}

func (c *cutStore) ClaimTasks(ctx context.Context, owner string, ttl time.Duration, limit int) ([]store.Task, error) {
	if c.cut.Load() {
		return nil, errUnreachable
	}
	return c.Store.ClaimTasks(ctx, owner, ttl, limit)
}

func (c *cutStore) ClaimLease(ctx context.Context, key, owner string, ttl time.Duration) (store.Lease, error) {
	if c.cut.Load() {
		return store.Lease{}, errUnreachable
	}
	return c.Store.ClaimLease(ctx, key, owner, ttl)
}

// stuckRuntime's applies run until their context ends, and report how
// they ended.
type stuckRuntime struct {
	started chan struct{}
	ended   chan error
}

func (r *stuckRuntime) Runtime(context.Context, string) (runtimes.Runtime, error) { return r, nil }

func (r *stuckRuntime) Fetch(context.Context, runtimes.Target) (runtimes.State, error) {
	return runtimes.State{}, nil
}

func (r *stuckRuntime) Apply(ctx context.Context, _ runtimes.Target) (runtimes.ApplyResult, error) {
	r.started <- struct{}{}
	<-ctx.Done()
	r.ended <- context.Cause(ctx)
	return runtimes.ApplyResult{}, context.Cause(ctx)
}

// TestRunnerStopsWhenClaimLapses: a runner cut off from the store stops its
// apply once the claim it cannot renew has lapsed (another runner may have
// it by then), rather than running on.
func TestRunnerStopsWhenClaimLapses(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := &cutStore{Store: openStore(t)}
	compiled, err := ds.Encode(&ds.Compiled{Application: "app", Service: "svc", Version: "v1", Channels: []ds.Channel{{Name: "prod", Runtime: "r"}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.CreateDesiredState(ctx, store.DesiredState{ID: "ds-cut", Application: "app", Service: "svc", Version: "v1", Compiled: compiled}); err != nil {
		t.Fatal(err)
	}
	rt := &stuckRuntime{started: make(chan struct{}, 1), ended: make(chan error, 1)}
	const ttl = 300 * time.Millisecond
	l := NewLoop(Config{Store: st, Runtimes: rt, Workers: 1, LeaseTTL: ttl, TaskTTL: ttl, TaskPoll: 20 * time.Millisecond})
	lctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = l.Run(lctx) }()
	defer func() { stop(); <-done }()
	select {
	case <-rt.started:
	case <-time.After(10 * time.Second):
		t.Fatal("the apply never started")
	}
	cutAt := time.Now()
	st.cut.Store(true)
	select {
	case cause := <-rt.ended:
		if !errors.Is(cause, errClaimLapsed) {
			t.Errorf("the apply ended with %v, want the lapsed claim", cause)
		}
		if d := time.Since(cutAt); d > 3*ttl {
			t.Errorf("the apply ran %v after the cut, want about the claim's ttl (%v)", d, ttl)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the apply ran on with its claim lapsed")
	}
}
