package engine

import (
	"context"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/store"
)

// cancelOnWrite cancels the pass's context once a write commits: the loop
// begins to stop right after the pass enqueued its tasks.
type cancelOnWrite struct {
	store.Store
	cancel context.CancelFunc
}

func (c cancelOnWrite) Write(ctx context.Context, b *store.Batch) error {
	err := c.Store.Write(ctx, b)
	c.cancel()
	return err
}

func newClaimFixture(t *testing.T) store.Store {
	t.Helper()
	st := openStore(t)
	pushOneChannel(t, st, "ds-claim")
	return st
}

// TestPassStartsTheTasksItClaims: with a free slot, the apply a pass
// decides is enqueued claimed by the loop and started by the pass itself
// (no dispatcher runs here); its slot is free again once it ends.
func TestPassStartsTheTasksItClaims(t *testing.T) {
	st := newClaimFixture(t)
	rt := &blockingRuntime{started: make(chan struct{}), release: make(chan struct{})}
	l := NewLoop(Config{Store: st, Runtimes: oneRuntime{rt}})
	if _, err := l.Reconcile(t.Context(), "app", "svc"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-rt.started:
	case <-time.After(10 * time.Second):
		t.Fatal("the pass did not start the apply it decided")
	}
	open, err := st.ListTasks(t.Context(), store.TaskFilter{Key: "app/svc", Open: true})
	if err != nil || len(open) != 1 || open[0].Status != store.TaskRunning || open[0].Owner != l.Owner() || open[0].Attempts != 1 {
		t.Fatalf("open tasks %+v (%v), want one running, claimed by the loop at its first attempt", open, err)
	}
	close(rt.release)
	l.tasks.Wait()
	if n := len(l.slots); n != 0 {
		t.Errorf("%d apply slots still taken after the apply ended", n)
	}
	if got, err := st.GetTask(t.Context(), open[0].ID); err != nil || got.Status != store.TaskSucceeded {
		t.Errorf("the apply's task is %+v (%v), want succeeded", got, err)
	}
}

// TestPassStoppingHandsBackClaimedTasks: a pass whose loop began to stop
// once its write committed starts nothing: the task it enqueued claimed is
// pending again for the next runner, and no slot stays taken.
func TestPassStoppingHandsBackClaimedTasks(t *testing.T) {
	st := newClaimFixture(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	rt := &blockingRuntime{started: make(chan struct{}), release: make(chan struct{})}
	l := NewLoop(Config{Store: cancelOnWrite{Store: st, cancel: cancel}, Runtimes: oneRuntime{rt}})
	if _, err := l.Reconcile(ctx, "app", "svc"); err != nil {
		t.Fatal(err)
	}
	l.tasks.Wait()
	select {
	case <-rt.started:
		t.Fatal("an apply started while the loop was stopping")
	default:
	}
	if n := len(l.slots); n != 0 {
		t.Errorf("%d apply slots still taken", n)
	}
	open, err := st.ListTasks(t.Context(), store.TaskFilter{Key: "app/svc", Open: true})
	if err != nil || len(open) != 1 || open[0].Status != store.TaskPending || open[0].Owner != "" {
		t.Fatalf("open tasks %+v (%v), want the apply pending, unclaimed", open, err)
	}
}
