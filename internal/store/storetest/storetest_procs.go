package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/drover-dev/drover/internal/store"
)

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
