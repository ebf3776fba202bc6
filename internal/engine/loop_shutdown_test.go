package engine

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ds "github.com/drover-dev/drover/internal/desiredstate"
	"github.com/drover-dev/drover/internal/runtimes"
	"github.com/drover-dev/drover/internal/store"
	"github.com/drover-dev/drover/internal/store/sqlite"
)

// blockingRuntime's Apply runs until release is closed or its context ends.
type blockingRuntime struct {
	started chan struct{}
	release chan struct{}
}

func (r *blockingRuntime) Fetch(context.Context, runtimes.Target) (runtimes.State, error) {
	return runtimes.State{}, nil
}

func (r *blockingRuntime) Apply(ctx context.Context, _ runtimes.Target) (runtimes.ApplyResult, error) {
	close(r.started)
	select {
	case <-r.release:
		return runtimes.ApplyResult{Changes: []runtimes.Change{{Object: "thing", Action: runtimes.ActionConfigured}}}, nil
	case <-ctx.Done():
		return runtimes.ApplyResult{}, context.Cause(ctx)
	}
}

type oneRuntime struct{ rt runtimes.Runtime }

func (o oneRuntime) Runtime(context.Context, string) (runtimes.Runtime, error) { return o.rt, nil }

func openStore(t *testing.T) store.Store {
	t.Helper()
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "drover.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// pushOneChannel stores desired state id of app/svc at version v1: one
// release channel, prod, on runtime rt.
func pushOneChannel(t *testing.T, st store.Store, id string) {
	t.Helper()
	compiled, err := ds.Encode(&ds.Compiled{Application: "app", Service: "svc", Version: "v1", Channels: []ds.Channel{{Name: "prod", Runtime: "rt"}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.CreateDesiredState(t.Context(), store.DesiredState{ID: id, Application: "app", Service: "svc", Version: "v1", Compiled: compiled}); err != nil {
		t.Fatal(err)
	}
}

// shutdownFixture is a loop with one instance whose apply blocks.
type shutdownFixture struct {
	st   store.Store
	rt   *blockingRuntime
	loop *Loop
	inst store.Instance
}

func newShutdownFixture(t *testing.T, grace time.Duration) *shutdownFixture {
	t.Helper()
	ctx := t.Context()
	st := openStore(t)
	pushOneChannel(t, st, "ds-shutdown")
	b := &store.Batch{Instances: []store.Instance{{
		Application: "app", Service: "svc", ReleaseChannel: "prod", DesiredStateID: "ds-shutdown",
		TargetStateID: "ds-shutdown", TargetVersion: "v1", Status: "CONVERGING", ApplyAttempts: 1, LastApplyAt: time.Now(),
	}}, Tasks: []store.Task{{Key: "app/svc", Instance: "prod", Kind: "engine.apply",
		Payload: []byte(`{"kind":"apply","releaseChannel":"prod","stateId":"ds-shutdown","version":"v1","runtime":"rt"}`)}}}
	if err := st.Write(ctx, b); err != nil {
		t.Fatal(err)
	}
	rt := &blockingRuntime{started: make(chan struct{}), release: make(chan struct{})}
	return &shutdownFixture{
		st: st, rt: rt, inst: b.Instances[0],
		loop: NewLoop(Config{Store: st, Runtimes: oneRuntime{rt}, ShutdownGrace: grace}),
	}
}

// shutDuringApply starts the apply, shuts the loop down as Run does once its
// context ends, and returns a channel closed when the shutdown is complete.
func (f *shutdownFixture) shutDuringApply(t *testing.T) <-chan struct{} {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	stop := f.loop.startApplyContext(ctx)
	dispatched := make(chan struct{})
	go func() {
		f.loop.dispatch(ctx)
		close(dispatched)
	}()
	select {
	case <-f.rt.started:
	case <-time.After(10 * time.Second):
		t.Fatal("the apply did not start")
	}
	cancel() // SIGTERM
	done := make(chan struct{})
	go func() {
		<-dispatched
		f.loop.drain(stop)
		close(done)
	}()
	return done
}

func (f *shutdownFixture) task(t *testing.T) store.Task {
	t.Helper()
	tasks, err := f.st.ListTasks(t.Context(), store.TaskFilter{})
	if err != nil || len(tasks) != 1 {
		t.Fatalf("tasks %v %v", tasks, err)
	}
	return tasks[0]
}

func (f *shutdownFixture) eventTypes(t *testing.T) []string {
	t.Helper()
	evs, err := f.st.ListEvents(t.Context(), store.EventFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, e := range evs {
		types = append(types, string(e.Type))
	}
	return types
}

// TestB11ShutdownLetsApplyFinish: once the server is told to stop, an apply
// in flight runs on (its context is not canceled) and its outcome is
// recorded.
func TestB11ShutdownLetsApplyFinish(t *testing.T) {
	t.Parallel()
	f := newShutdownFixture(t, time.Minute)
	done := f.shutDuringApply(t)
	select {
	case <-done:
		t.Fatal("shutdown did not wait for the apply")
	case <-time.After(100 * time.Millisecond):
	}
	close(f.rt.release)
	<-done
	if got := f.eventTypes(t); len(got) != 1 || got[0] != "applied" {
		t.Errorf("events %v", got)
	}
	if task := f.task(t); task.Status != store.TaskSucceeded || task.FinishedAt.IsZero() || task.Attempts != 1 {
		t.Errorf("task %+v, want succeeded", task)
	}
	if inst, err := f.st.GetInstance(t.Context(), "app", "svc", "prod"); err != nil || inst.AppliedAt.IsZero() {
		t.Errorf("the instance does not record the finished apply: %+v %v", inst, err)
	}
}

// TestB11ShutdownPastGraceRecordsInterrupted: an apply still running when the
// shutdown grace is over is stopped and recorded as interrupted (not failed,
// and not left claimed), with a context the shutdown did not cancel.
func TestB11ShutdownPastGraceRecordsInterrupted(t *testing.T) {
	t.Parallel()
	f := newShutdownFixture(t, 50*time.Millisecond)
	select {
	case <-f.shutDuringApply(t):
	case <-time.After(10 * time.Second):
		t.Fatal("shutdown did not stop the apply after the grace")
	}
	if got := f.eventTypes(t); len(got) != 1 || got[0] != "apply-interrupted" {
		t.Errorf("events %v", got)
	}
	inst, err := f.st.GetInstance(t.Context(), "app", "svc", "prod")
	if err != nil || inst.Reason != "" || inst.Revision != f.inst.Revision {
		t.Errorf("the instance was changed: %+v %v", inst, err)
	}
	// The task is handed back: any runner (this server's next start, or
	// another sharing the store) carries it out again.
	if task := f.task(t); task.Status != store.TaskPending || task.Owner != "" || task.Attempts != 1 ||
		!strings.Contains(task.Message, "shut down") {
		t.Errorf("task %+v, want pending again, with why", task)
	}
}

// TestB12InterruptedTasksResetAtStart: apply tasks a crash left claimed get
// an event and become claimable again before the engine plans anything.
func TestB12InterruptedTasksResetAtStart(t *testing.T) {
	t.Parallel()
	f := newShutdownFixture(t, 0)
	ctx := t.Context()
	claimed, err := f.st.ClaimTasks(ctx, "dead-runner", time.Hour, 1)
	if err != nil || len(claimed) != 1 {
		t.Fatal(claimed, err)
	}
	if err := f.loop.resetInterrupted(ctx); err != nil {
		t.Fatal(err)
	}
	if task := f.task(t); task.Status != store.TaskPending || task.Owner != "" || task.Attempts != 1 {
		t.Errorf("task %+v, want pending again", task)
	}
	evs, err := f.st.ListEvents(ctx, store.EventFilter{})
	if err != nil || len(evs) != 1 || evs[0].Type != "apply-interrupted" || evs[0].ReleaseChannel != "prod" ||
		!strings.Contains(evs[0].Message, "interrupted by a server restart") || evs[0].DesiredStateID != "ds-shutdown" {
		t.Errorf("events %+v %v", evs, err)
	}
	// A second start finds nothing claimed.
	if err := f.loop.resetInterrupted(ctx); err != nil {
		t.Fatal(err)
	}
	if evs, _ := f.st.ListEvents(ctx, store.EventFilter{}); len(evs) != 1 {
		t.Errorf("events after a second start: %+v", evs)
	}
}
