package engine

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	ds "github.com/drover-dev/drover/internal/desiredstate"
	"github.com/drover-dev/drover/internal/store"
)

// outcomeStore counts the completions runners write themselves, and can
// refuse every pass write that would record outcomes.
type outcomeStore struct {
	store.Store
	completed    atomic.Int32
	refuseInPass bool
}

var errRefused = errors.New("refused by the test")

func (s *outcomeStore) Write(ctx context.Context, b *store.Batch) error {
	if s.refuseInPass && len(b.Complete) > 0 {
		return errRefused
	}
	return s.Store.Write(ctx, b)
}

// CompleteTask counts the completions that were recorded (a runner tries
// again after a conflict, such as the ENGINE_ERROR status a failed pass
// writes on the instance).
func (s *outcomeStore) CompleteTask(ctx context.Context, t store.Task, status store.TaskStatus, msg string, b *store.Batch) error {
	err := s.Store.CompleteTask(ctx, t, status, msg, b)
	if err == nil {
		s.completed.Add(1)
	}
	return err
}

// runTwoChannels converges staging then prod (which follows it) on st and
// returns the events of the service.
func runTwoChannels(t *testing.T, st store.Store) []store.Event {
	t.Helper()
	ctx := t.Context()
	compiled, err := ds.Encode(&ds.Compiled{Application: "app", Service: "svc", Version: "v1",
		Channels: []ds.Channel{{Name: "staging", Runtime: "rt"}, {Name: "prod", Runtime: "rt", DependsOn: []string{"staging"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.CreateDesiredState(ctx, store.DesiredState{ID: "ds-outcomes", Application: "app", Service: "svc", Version: "v1", Compiled: compiled}); err != nil {
		t.Fatal(err)
	}
	rt := &slowRuntime{runs: map[string]string{}, done: map[string]int{}, by: map[string]string{},
		owner: func(context.Context) string { return "engine" }}
	settings := DefaultSettings()
	settings.RetryBackoff = 10 * time.Millisecond
	l := NewLoop(Config{Store: st, Runtimes: ownedRuntimes{rt: rt, owner: "engine"}, Settings: settings, Exclusive: true})
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = l.Run(runCtx)
	}()
	defer func() {
		stop()
		<-done
	}()
	deadline := time.Now().Add(20 * time.Second)
	for {
		list, err := st.ListInstances(ctx, "app", "svc")
		if err != nil {
			t.Fatal(err)
		}
		converged := 0
		for _, in := range list {
			if in.Status == ds.StatusConverged {
				converged++
			}
		}
		if converged == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not converged: %+v", list)
		}
		time.Sleep(5 * time.Millisecond)
	}
	tasks, err := st.ListTasks(ctx, store.TaskFilter{Key: "app/svc"})
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks) != 2 || tasks[0].Status != store.TaskSucceeded || tasks[1].Status != store.TaskSucceeded {
		t.Fatalf("tasks %+v, want two applies succeeded", tasks)
	}
	evs, err := st.ListEvents(ctx, store.EventFilter{Application: "app", Service: "svc"})
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// seqOf is the seq of the first event of type typ in channel rc (0: none).
func seqOf(evs []store.Event, rc string, typ ds.EventType) int64 {
	for _, e := range evs {
		if e.ReleaseChannel == rc && e.Type == typ {
			return e.Seq
		}
	}
	return 0
}

// TestOutcomeRecordedWithTheNextPass: an apply's outcome is recorded by
// the pass that follows it, in the write that starts the next channel:
// no runner completes a task on its own, and the events come in order.
func TestOutcomeRecordedWithTheNextPass(t *testing.T) {
	t.Parallel()
	st := &outcomeStore{Store: openStore(t)}
	evs := runTwoChannels(t, st)
	if n := st.completed.Load(); n != 0 {
		t.Errorf("runners completed %d tasks on their own, want every outcome recorded by a pass", n)
	}
	applied, started := seqOf(evs, "staging", ds.EventApplied), seqOf(evs, "prod", ds.EventStarted)
	if applied == 0 || started == 0 || applied > started || seqOf(evs, "prod", ds.EventApplied) == 0 {
		t.Errorf("staging applied at seq %d, prod started at %d: want both, in that order (events %+v)", applied, started, evs)
	}
}

// TestOutcomeRecordedByRunnerWhenPassFails: when the pass that took an
// outcome cannot write it, the runner records it itself, and the rollout
// goes on.
func TestOutcomeRecordedByRunnerWhenPassFails(t *testing.T) {
	t.Parallel()
	st := &outcomeStore{Store: openStore(t), refuseInPass: true}
	evs := runTwoChannels(t, st)
	if n := st.completed.Load(); n != 2 {
		t.Errorf("runners completed %d tasks on their own, want both (every pass recording them failed)", n)
	}
	if seqOf(evs, "staging", ds.EventApplied) == 0 || seqOf(evs, "prod", ds.EventApplied) == 0 {
		t.Errorf("applied events missing: %+v", evs)
	}
}
