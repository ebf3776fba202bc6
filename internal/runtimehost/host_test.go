package runtimehost_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/runtimehost"
	"github.com/drover-dev/drover/internal/runtimes"
	"github.com/drover-dev/drover/internal/store"
	"github.com/drover-dev/drover/internal/store/sqlite"
)

// testRuntime is a runtime that watches: its watch reports one key, then
// waits for its context to end.
type testRuntime struct {
	name    string
	opts    runtimes.Options
	closed  chan struct{}
	watched chan struct{} // closed once the watch ended
}

func (r *testRuntime) Fetch(context.Context, runtimes.Target) (runtimes.State, error) {
	return runtimes.State{}, nil
}

func (r *testRuntime) Apply(context.Context, runtimes.Target) (runtimes.ApplyResult, error) {
	return runtimes.ApplyResult{}, nil
}

func (r *testRuntime) Watch(ctx context.Context, notify func(runtimes.InstanceKey)) error {
	defer close(r.watched)
	notify(runtimes.InstanceKey{Application: "a", Service: r.name, ReleaseChannel: "rc"})
	<-ctx.Done()
	return nil
}

func (r *testRuntime) Close() error { close(r.closed); return nil }

var (
	_ runtimes.Runtime = (*testRuntime)(nil)
	_ runtimes.Watcher = (*testRuntime)(nil)
	_ runtimes.Closer  = (*testRuntime)(nil)
)

// builds records every runtime the registry built.
type builds struct {
	mu  sync.Mutex
	all []*testRuntime
}

func (b *builds) registry() runtimehost.Registry {
	return runtimehost.Registry{"fake": func(cfg *config.Runtime, opts runtimes.Options) (runtimes.Runtime, error) {
		r := &testRuntime{name: cfg.Name, opts: opts, closed: make(chan struct{}), watched: make(chan struct{})}
		b.mu.Lock()
		b.all = append(b.all, r)
		b.mu.Unlock()
		return r, nil
	}}
}

func (b *builds) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.all)
}

func newStore(t *testing.T) store.Store {
	t.Helper()
	st, err := sqlite.Open(t.Context(), sqlite.MemoryPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// putRuntime stores a fake runtime config named name; label makes versions differ.
func putRuntime(t *testing.T, st store.Store, name, label string) {
	t.Helper()
	body := fmt.Sprintf(`{"runtime": {"name": %q, "fake": {}, "labels": [{"label": "l", "value": %q}]}}`, name, label)
	if _, _, err := st.PutConfig(t.Context(), store.ConfigObject{Kind: "runtime", Name: name, Body: []byte(body), Hash: label}); err != nil {
		t.Fatal(err)
	}
}

func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not happen", what)
	}
}

func TestHostBuildsRebuildsAndWatches(t *testing.T) {
	t.Parallel()
	st := newStore(t)
	var b builds
	h := runtimehost.New(runtimehost.Config{Store: st, Registry: b.registry(), DataDir: t.TempDir()})
	notified := make(chan runtimes.InstanceKey, 4)
	if err := h.Start(t.Context(), func(k runtimes.InstanceKey) { notified <- k }); err != nil {
		t.Fatal(err)
	}
	defer h.Close()

	if _, err := h.Runtime(t.Context(), "rt"); err == nil || !strings.Contains(err.Error(), `runtime "rt" is not configured`) {
		t.Fatalf("an unknown runtime: %v", err)
	}
	putRuntime(t, st, "rt", "1")
	rt1, err := h.Runtime(t.Context(), "rt")
	if err != nil {
		t.Fatal(err)
	}
	if k := <-notified; k.Service != "rt" {
		t.Errorf("the watch reported %+v", k)
	}
	if again, err := h.Runtime(t.Context(), "rt"); err != nil || again != rt1 {
		t.Errorf("a second lookup built anew (%v)", err)
	}
	// A new version is seen once configs were applied (Invalidate): the old
	// runtime is closed and its watch stopped, the new one watches.
	putRuntime(t, st, "rt", "2")
	if again, _ := h.Runtime(t.Context(), "rt"); again != rt1 {
		t.Error("rebuilt before Invalidate")
	}
	h.Invalidate()
	rt2, err := h.Runtime(t.Context(), "rt")
	if err != nil {
		t.Fatal(err)
	}
	if rt2 == rt1 || b.count() != 2 {
		t.Fatalf("not rebuilt on a new config version (%d builds)", b.count())
	}
	old := rt1.(*testRuntime)
	waitClosed(t, old.closed, "closing the old runtime")
	waitClosed(t, old.watched, "stopping the old watch")
	<-notified
	// Invalidate with an unchanged version keeps the runtime.
	h.Invalidate()
	if again, _ := h.Runtime(t.Context(), "rt"); again != rt2 || b.count() != 2 {
		t.Error("rebuilt on an unchanged config")
	}
	// The runtime's options record runs in the store.
	opts := rt2.(*testRuntime).opts
	if err := opts.Runs.RecordRun(t.Context(), runtimes.Run{InstanceKey: runtimes.InstanceKey{Application: "a", Service: "s", ReleaseChannel: "rc"}, Runtime: "rt",
		Kind: "apply", Command: []string{"true"}, StartedAt: time.Now(), FinishedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if runs, err := st.ListRuns(t.Context(), store.RunFilter{Application: "a"}); err != nil || len(runs) != 1 || len(runs[0].Command) != 1 {
		t.Errorf("runs %+v (%v)", runs, err)
	}
	// Close closes every runtime and stops every watch.
	h.Close()
	cur := rt2.(*testRuntime)
	waitClosed(t, cur.closed, "closing the runtime")
	waitClosed(t, cur.watched, "stopping the watch")
}

func TestHostRecordsProcessesAndEndsLeftoversAtStart(t *testing.T) {
	t.Parallel()
	st := newStore(t)
	var b builds
	h := runtimehost.New(runtimehost.Config{Store: st, Registry: b.registry()})
	putRuntime(t, st, "rt", "1")
	if err := h.Start(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	rt, err := h.Runtime(t.Context(), "rt")
	if err != nil {
		t.Fatal(err)
	}
	procs := rt.(*testRuntime).opts.Processes
	remove, err := procs.AddProcess(t.Context(), runtimes.Process{InstanceKey: runtimes.InstanceKey{Application: "a", Service: "s", ReleaseChannel: "rc"},
		Runtime: "rt", Kind: "apply", Command: []string{"sleep", "60"}, Handle: []byte(`{"pgid": 4242, "bootId": "another boot"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := procs.AddProcess(t.Context(), runtimes.Process{InstanceKey: runtimes.InstanceKey{Application: "a", Service: "s", ReleaseChannel: "rc"},
		Runtime: "rt", Kind: "apply", Command: []string{"true"}, Handle: []byte(`{"pgid": 4243, "bootId": "another boot"}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.AddProcess(t.Context(), store.Process{Application: "a", Service: "s", ReleaseChannel: "rc", Kind: "apply", Handle: []byte(`not json`)}); err != nil {
		t.Fatal(err)
	}
	remove()
	list, err := st.ListProcesses(t.Context())
	if err != nil || len(list) != 2 {
		t.Fatalf("after one command ended: %d records (%v), want 2", len(list), err)
	}
	h.Close()
	// The next start (after a crash, say) ends what the records name (the
	// groups of another boot are gone) and drops every record.
	next := runtimehost.New(runtimehost.Config{Store: st, Registry: b.registry()})
	if err := next.Start(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	defer next.Close()
	if list, err := st.ListProcesses(t.Context()); err != nil || len(list) != 0 {
		t.Errorf("after a start: %d records (%v), want none", len(list), err)
	}
}

// discoveringRuntime answers Discover with the facts its config's label
// names, or fails when the label is "down".
type discoveringRuntime struct{ testRuntime }

func (r *discoveringRuntime) Discover(context.Context) (runtimes.Facts, error) {
	if r.name == "down" {
		return runtimes.Facts{}, fmt.Errorf("cluster unreachable")
	}
	return runtimes.Facts{KubeVersion: "v1.33.4", APIVersions: []string{"apps/v1", "example.com/v1/Widget"}}, nil
}

// TestHostDiscovers checks that the host stores what its runtimes say of
// their backends at start and after configs were applied, and leaves out
// those that cannot say or fail to.
func TestHostDiscovers(t *testing.T) {
	t.Parallel()
	st := newStore(t)
	reg := runtimehost.Registry{"fake": func(cfg *config.Runtime, opts runtimes.Options) (runtimes.Runtime, error) {
		tr := testRuntime{name: cfg.Name, opts: opts, closed: make(chan struct{}), watched: make(chan struct{})}
		if cfg.Name == "plain" {
			return &tr, nil
		}
		return &discoveringRuntime{tr}, nil
	}}
	putRuntime(t, st, "cluster", "1")
	h := runtimehost.New(runtimehost.Config{Store: st, Registry: reg, DataDir: t.TempDir(), DiscoverEvery: time.Hour})
	if err := h.Start(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	waitFacts := func(want ...string) []store.RuntimeFacts {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			got, err := st.ListRuntimeFacts(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, f := range got {
				names = append(names, f.Runtime)
			}
			if strings.Join(names, ",") == strings.Join(want, ",") {
				return got
			}
			if time.Now().After(deadline) {
				t.Fatalf("facts of %v, want %v", names, want)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	got := waitFacts("cluster")
	if got[0].KubeVersion != "v1.33.4" || len(got[0].APIVersions) != 2 || got[0].ObservedAt.IsZero() {
		t.Errorf("facts at start: %+v", got[0])
	}
	// Configs applied: the new runtime is asked; one that cannot answer
	// and one that fails are left out.
	putRuntime(t, st, "edge", "1")
	putRuntime(t, st, "plain", "1")
	putRuntime(t, st, "down", "1")
	h.Invalidate()
	waitFacts("cluster", "edge")
}

// slowConfigs is a store whose config reads of runtime slow wait for
// release (a slow query in flight), saying so on reading.
type slowConfigs struct {
	store.Store
	reading chan struct{}
	release chan struct{}
}

func (s slowConfigs) GetConfig(ctx context.Context, kind, name string) (store.ConfigObject, error) {
	if name == "slow" {
		s.reading <- struct{}{}
		<-s.release
	}
	return s.Store.GetConfig(ctx, kind, name)
}

// Close waits for a discovery round in flight, and closes what it built:
// nothing is built, nor writes in the data directory, after Close.
func TestHostCloseWaitsForDiscovery(t *testing.T) {
	t.Parallel()
	st := slowConfigs{Store: newStore(t), reading: make(chan struct{}, 1), release: make(chan struct{})}
	putRuntime(t, st, "slow", "1")
	var b builds
	h := runtimehost.New(runtimehost.Config{Store: st, Registry: b.registry(), DiscoverEvery: time.Hour})
	if err := h.Start(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, st.reading, "discovery reading the config")
	closed := make(chan struct{})
	go func() { h.Close(); close(closed) }()
	select {
	case <-closed:
		t.Fatal("Close returned while discovery was still building a runtime")
	case <-time.After(100 * time.Millisecond):
	}
	close(st.release)
	waitClosed(t, closed, "Close")
	// The round, cancelled, may have built the runtime or given up.
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, r := range b.all {
		select {
		case <-r.closed:
		default:
			t.Errorf("runtime %s, built by discovery, is not closed", r.name)
		}
	}
}
