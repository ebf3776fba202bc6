package engine

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	ds "github.com/drover-dev/drover/internal/desiredstate"
	"github.com/drover-dev/drover/internal/runtimes"
	"github.com/drover-dev/drover/internal/store"
)

// instantRuntime runs what it is given at once.
type instantRuntime struct {
	mu   sync.Mutex
	runs map[string]string
}

func (r *instantRuntime) Fetch(_ context.Context, t runtimes.Target) (runtimes.State, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	v, ok := r.runs[t.ReleaseChannel]
	return runtimes.State{Version: v, Converged: ok}, nil
}

func (r *instantRuntime) Apply(_ context.Context, t runtimes.Target) (runtimes.ApplyResult, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.runs[t.ReleaseChannel] = t.Version
	return runtimes.ApplyResult{}, nil
}

// countingObserver counts the passes by result.
type countingObserver struct {
	noObserver
	mu      sync.Mutex
	results map[string]int
}

func (o *countingObserver) Reconciled(_ time.Duration, result string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.results[result]++
}

func (o *countingObserver) count(result string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.results[result]
}

// TestUndecodableDesiredStateShowsEngineError: a stored desired state that
// no longer decodes leaves no stale status: each instance of the service
// says ENGINE_ERROR with the decoder's complaint, written once (not at every
// retry), the pass is counted as an error, and a new push that decodes
// clears it.
func TestUndecodableDesiredStateShowsEngineError(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := openStore(t)
	push := func(id, version string, compiled []byte) {
		t.Helper()
		if compiled == nil {
			var err error
			compiled, err = ds.Encode(&ds.Compiled{Application: "app", Service: "svc", Version: version,
				Channels: []ds.Channel{{Name: "staging", Runtime: "rt"}, {Name: "prod", Runtime: "rt", DependsOn: []string{"staging"}}}})
			if err != nil {
				t.Fatal(err)
			}
		}
		if err := st.CreateDesiredState(ctx, store.DesiredState{ID: id, Application: "app", Service: "svc", Version: version, Compiled: compiled}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor := func(what string, ok func([]store.Instance) bool) []store.Instance {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			list, err := st.ListInstances(ctx, "app", "svc")
			if err != nil {
				t.Fatal(err)
			}
			if len(list) == 2 && ok(list) {
				return list
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %+v", what, list)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	all := func(f func(store.Instance) bool) func([]store.Instance) bool {
		return func(list []store.Instance) bool {
			for _, in := range list {
				if !f(in) {
					return false
				}
			}
			return true
		}
	}
	push("ds-1", "v1", nil)
	settings := DefaultSettings()
	settings.RetryBackoff, settings.MaxBackoff = 5*time.Millisecond, 20*time.Millisecond
	obs := &countingObserver{results: map[string]int{}}
	l := NewLoop(Config{Store: st, Runtimes: oneRuntime{&instantRuntime{runs: map[string]string{}}}, Settings: settings, Exclusive: true, Observer: obs})
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
	waitFor("v1 converged", all(func(in store.Instance) bool { return in.Status == ds.StatusConverged }))

	// Written by a newer drover, read by this one after a downgrade.
	push("ds-2", "v2", []byte(`{"format": 99, "application": "app", "service": "svc", "version": "v2"}`))
	l.Enqueue("app", "svc")
	broken := waitFor("ENGINE_ERROR shown", all(func(in store.Instance) bool { return in.Reason == ds.ReasonEngineError }))
	for _, in := range broken {
		if !strings.Contains(in.Message, "the engine cannot plan this service: desired state ds-2") || !strings.Contains(in.Message, "format 99 is newer") {
			t.Errorf("%s: message %q, want the decoder's complaint about ds-2", in.ReleaseChannel, in.Message)
		}
	}
	// Retries go on (backing off) and write the same status no more.
	errorsBefore := obs.count(ResultError)
	for obs.count(ResultError) < errorsBefore+3 {
		time.Sleep(5 * time.Millisecond)
	}
	again, err := st.ListInstances(ctx, "app", "svc")
	if err != nil {
		t.Fatal(err)
	}
	for i, in := range again {
		if in.Revision != broken[i].Revision {
			t.Errorf("%s: rewritten at a retry (revision %d -> %d)", in.ReleaseChannel, broken[i].Revision, in.Revision)
		}
	}

	push("ds-3", "v3", nil)
	l.Enqueue("app", "svc")
	waitFor("v3 converged, the error cleared", all(func(in store.Instance) bool {
		return in.Status == ds.StatusConverged && in.CurrentVersion == "v3" && in.Reason != ds.ReasonEngineError
	}))
	if obs.count(ResultSuccess)+obs.count(ResultRequeueAfter) == 0 {
		t.Error("no pass counted as a success")
	}
}

// TestEngineErrorClearedWhereThePlannerLeavesTheStatus: an instance the
// planner leaves as it is (failed for this push) loses the engine error
// once a pass plans again.
func TestEngineErrorClearedWhereThePlannerLeavesTheStatus(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	failed := &store.Instance{ReleaseChannel: "prod", Status: ds.StatusFailed, Reason: ds.ReasonEngineError, Message: "the engine cannot plan this service: x"}
	fine := &store.Instance{ReleaseChannel: "staging", Status: ds.StatusConverged}
	planned := store.Instance{ReleaseChannel: "qa", Status: ds.StatusConverging, Reason: ds.ReasonEngineError, Message: "old"}
	plan := Plan{Instances: []store.Instance{planned}}
	clearEngineErrors(&plan, map[string]*store.Instance{"prod": failed, "staging": fine, "qa": &planned}, now)
	if len(plan.Instances) != 2 {
		t.Fatalf("plan instances %+v, want qa and prod", plan.Instances)
	}
	for _, in := range plan.Instances {
		if in.Reason != ds.ReasonNone || in.Message != "" {
			t.Errorf("%s kept %s %q", in.ReleaseChannel, in.Reason, in.Message)
		}
	}
	if p := plan.Instances[1]; p.ReleaseChannel != "prod" || p.Status != ds.StatusFailed || !p.UpdatedAt.Equal(now) {
		t.Errorf("prod: %+v", p)
	}
}
