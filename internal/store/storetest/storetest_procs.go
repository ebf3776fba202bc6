package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/drover-dev/drover/internal/store"
)

// testOpenApplies: attempts without an outcome are listed across services,
// oldest first; FinishApply closes one and appends its events atomically
// (how a restarted server records attempts a crash interrupted, B12).
func testOpenApplies(t *testing.T, s store.Store) {
	ctx := t.Context()
	create(t, s, desiredState("ds-1", "shop", "web", 1))
	create(t, s, desiredState("ds-2", "shop", "api", 1))
	start := func(svc, ds, rc string, i int) store.ApplyAttempt {
		a := store.ApplyAttempt{Application: "shop", Service: svc, ReleaseChannel: rc, DesiredStateID: ds, Version: "1.0.0", StartedAt: ts(i)}
		var err error
		a.ID, err = s.StartApply(ctx, a)
		must(t, err)
		return a
	}
	a1 := start("web", "ds-1", "staging", 1)
	a2 := start("api", "ds-2", "staging", 2)
	a3 := start("web", "ds-1", "production", 3)
	must(t, s.FinishApply(ctx, a1.ID, "succeeded", "", ts(4)))
	open, err := s.OpenApplies(ctx)
	must(t, err)
	same(t, open, []store.ApplyAttempt{a2, a3}, "OpenApplies")

	evs := []store.Event{ev("shop", "api", "interrupted"), ev("shop", "api", "other")}
	must(t, s.FinishApply(ctx, a2.ID, store.OutcomeInterrupted, "interrupted by a server restart", ts(5), evs...))
	if evs[0].Seq <= 0 || evs[1].Seq <= evs[0].Seq {
		t.Errorf("FinishApply did not set the events' Seq: %d %d", evs[0].Seq, evs[1].Seq)
	}
	got := events(t, s, store.EventFilter{Service: "api"})
	if len(got) != 2 || got[0].Type != "interrupted" || got[1].Type != "other" {
		t.Errorf("events after FinishApply: %v", got)
	}
	open, err = s.OpenApplies(ctx)
	must(t, err)
	same(t, open, []store.ApplyAttempt{a3}, "OpenApplies after FinishApply")
	a2.Outcome, a2.Message, a2.FinishedAt = store.OutcomeInterrupted, "interrupted by a server restart", ts(5)
	list, err := s.ListApplies(ctx, "shop", "api", 0)
	must(t, err)
	same(t, list, []store.ApplyAttempt{a2}, "ListApplies after an interrupted outcome")

	// An unknown id appends nothing.
	wantErr(t, s.FinishApply(ctx, a3.ID+100, store.OutcomeInterrupted, "", ts(6), ev("shop", "web", "lost")), store.ErrNotFound, "FinishApply of an unknown id")
	if got := events(t, s, store.EventFilter{Service: "web"}); len(got) != 0 {
		t.Errorf("a failed FinishApply appended events: %v", got)
	}
}

func process(svc string, i int) store.Process {
	return store.Process{
		Application: "shop", Service: svc, ReleaseChannel: "production", Runtime: "scripts", Kind: "apply",
		Version: fmt.Sprintf("1.%d.0", i), Command: []string{"sh", "-c", "deploy ✓"},
		Handle:    []byte(fmt.Sprintf(`{"pgid":%d,"startTicks":123456,"bootId":"b"}`, 1000+i)),
		StartedAt: ts(i),
	}
}

// testProcesses: records of running commands survive until removed.
func testProcesses(t *testing.T, s store.Store) {
	ctx := t.Context()
	var ps []store.Process
	for i, svc := range []string{"web", "api", "web"} {
		p := process(svc, i)
		id, err := s.AddProcess(ctx, p)
		must(t, err)
		if id <= 0 || (i > 0 && id <= ps[i-1].ID) {
			t.Fatalf("AddProcess id %d, want positive and increasing", id)
		}
		p.ID = id
		ps = append(ps, p)
	}
	list := func(want ...store.Process) {
		t.Helper()
		got, err := s.ListProcesses(ctx)
		must(t, err)
		same(t, got, want, "ListProcesses")
	}
	list(ps...)
	must(t, s.RemoveProcess(ctx, ps[1].ID))
	list(ps[0], ps[2])
	wantErr(t, s.RemoveProcess(ctx, ps[1].ID), store.ErrNotFound, "RemoveProcess twice")

	bare := store.Process{Kind: "fetch", Handle: []byte(`{"pgid":7}`)}
	id, err := s.AddProcess(ctx, bare)
	must(t, err)
	got, err := s.ListProcesses(ctx)
	must(t, err)
	if len(got) != 3 || got[2].ID != id || got[2].StartedAt.IsZero() {
		t.Errorf("a process without times: %+v", got)
	}
}

func testProcessInvalid(t *testing.T, s store.Store) {
	ctx := t.Context()
	_, err := s.AddProcess(ctx, store.Process{Kind: "apply"})
	wantInvalid(t, err, "AddProcess without a handle")
	_, err = s.AddProcess(ctx, store.Process{Handle: []byte(`{}`)})
	wantInvalid(t, err, "AddProcess without a kind")
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.AddProcess(canceled, process("web", 1)); !errors.Is(err, context.Canceled) {
		t.Errorf("AddProcess with a canceled context: %v, want context.Canceled", err)
	}
	got, err := s.ListProcesses(ctx)
	must(t, err)
	if len(got) != 0 {
		t.Errorf("invalid processes were stored: %v", got)
	}
}
