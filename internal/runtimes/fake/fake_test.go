package fake

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/runtimes"
	"github.com/drover-dev/drover/internal/runtimes/runtimestest"
)

func key(svc, rc string) runtimes.InstanceKey {
	return runtimes.InstanceKey{Application: "shop", Service: svc, ReleaseChannel: rc}
}

func manifest(t testing.TB, m map[string]any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func deployment(t testing.TB, name, version string, replicas any) json.RawMessage {
	spec := map[string]any{"template": map[string]any{"spec": map[string]any{
		"containers": []any{map[string]any{"name": name, "image": "ghcr.io/acme/" + name + ":" + version}}}}}
	if replicas != nil {
		spec["replicas"] = replicas
	}
	return manifest(t, map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": name, "labels": map[string]any{"drover.dev/version": version}}, "spec": spec})
}

func configMap(t testing.TB, name string, data map[string]any) json.RawMessage {
	return manifest(t, map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": name}, "data": data})
}

// target is a Deployment of 3 replicas plus a ConfigMap that does not
// depend on the version.
func target(t testing.TB, k runtimes.InstanceKey, version string) runtimes.Target {
	name := k.Service + "-" + k.ReleaseChannel
	return runtimes.Target{InstanceKey: k, Version: version, DesiredStateID: "ds-" + version, Backend: "kubernetes",
		Objects: []json.RawMessage{deployment(t, name, version, 3), configMap(t, name+"-config", map[string]any{"a": "1"})}}
}

// manual is a runtime on a manual clock.
type manual struct {
	*Runtime
	clock *runtimestest.Clock
}

func newManual(t *testing.T, s Settings, dataDir string) manual {
	t.Helper()
	clock := runtimestest.NewClock(time.Time{})
	r := NewWithSettings("sim", s, runtimes.Options{Now: clock.Now, DataDir: dataDir})
	t.Cleanup(func() { _ = r.Close() })
	return manual{r, clock}
}

// advance moves the clock and fires the rollout ends that came due.
func (m manual) advance(d time.Duration) int {
	m.clock.Advance(d)
	return m.Tick()
}

func mustApply(t *testing.T, rt runtimes.Runtime, tg runtimes.Target) []runtimes.Change {
	t.Helper()
	res, err := rt.Apply(t.Context(), tg)
	if err != nil {
		t.Fatalf("Apply(%s, %s): %v", tg.InstanceKey, tg.Version, err)
	}
	return res.Changes
}

func mustFetch(t *testing.T, rt runtimes.Runtime, tg runtimes.Target) runtimes.State {
	t.Helper()
	st, err := rt.Fetch(t.Context(), tg)
	if err != nil {
		t.Fatalf("Fetch(%s): %v", tg.InstanceKey, err)
	}
	return st
}

func changeList(cs []runtimes.Change) string {
	var parts []string
	for _, c := range cs {
		parts = append(parts, c.Object+"="+string(c.Action))
	}
	return strings.Join(parts, " ")
}

func TestConformance(t *testing.T) {
	t.Parallel()
	tgt := func(k runtimes.InstanceKey, v string) runtimes.Target { return target(t, k, v) }
	t.Run("ManualClock", func(t *testing.T) {
		t.Parallel()
		var clocks sync.Map // *Runtime -> *runtimestest.Clock
		runtimestest.Run(t, runtimestest.Harness{
			New: func(t *testing.T) runtimes.Runtime {
				m := newManual(t, Settings{RolloutDuration: 3 * time.Second}, "")
				clocks.Store(m.Runtime, m.clock)
				return m.Runtime
			},
			Target: tgt,
			Settle: func(_ *testing.T, rt runtimes.Runtime) {
				c, _ := clocks.Load(rt)
				c.(*runtimestest.Clock).Advance(500 * time.Millisecond)
				rt.(*Runtime).Tick()
			},
		})
	})
	t.Run("WallClockInstant", func(t *testing.T) {
		t.Parallel()
		runtimestest.Run(t, runtimestest.Harness{
			New: func(t *testing.T) runtimes.Runtime {
				r := NewWithSettings("sim", Settings{}, runtimes.Options{})
				t.Cleanup(func() { _ = r.Close() })
				return r
			},
			Target: tgt,
		})
	})
	t.Run("WallClockPersisted", func(t *testing.T) {
		t.Parallel()
		runtimestest.Run(t, runtimestest.Harness{
			New: func(t *testing.T) runtimes.Runtime {
				r := NewWithSettings("sim", Settings{RolloutDuration: 20 * time.Millisecond, SaveInterval: 5 * time.Millisecond},
					runtimes.Options{DataDir: t.TempDir()})
				t.Cleanup(func() {
					if err := r.Close(); err != nil {
						t.Error(err)
					}
				})
				return r
			},
			Target: tgt,
		})
	})
	t.Run("FromConfig", func(t *testing.T) {
		t.Parallel()
		runtimestest.Run(t, runtimestest.Harness{
			New: func(t *testing.T) runtimes.Runtime {
				cfg := &config.Runtime{Name: "sim", Fake: &config.FakeRuntime{RolloutDuration: config.Duration{Duration: 10 * time.Millisecond}}}
				rt, err := Factory(cfg, runtimes.Options{})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = rt.(runtimes.Closer).Close() })
				return rt
			},
			Target: tgt,
		})
	})
}

func TestNewFromConfig(t *testing.T) {
	t.Parallel()
	r, err := New(&config.Runtime{Name: "a", Fake: &config.FakeRuntime{}}, runtimes.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.settings.RolloutDuration != DefaultRolloutDuration || r.settings.FailVersions != nil {
		t.Errorf("defaults: %+v", r.settings)
	}
	r2, err := New(&config.Runtime{Name: "b", Fake: &config.FakeRuntime{FailVersions: "^v9", RolloutDuration: config.Duration{Duration: time.Minute}}}, runtimes.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	if r2.settings.RolloutDuration != time.Minute || !r2.settings.FailVersions.MatchString("v9.1") {
		t.Errorf("settings: %+v", r2.settings)
	}
	if _, err := New(&config.Runtime{Name: "c", Fake: &config.FakeRuntime{FailVersions: "("}}, runtimes.Options{}); err == nil || !strings.Contains(err.Error(), "failVersions") {
		t.Errorf("invalid failVersions: err = %v", err)
	}
	if _, err := Open("x/y", Settings{}, runtimes.Options{DataDir: t.TempDir()}); err == nil {
		t.Errorf("a name with a slash was accepted for a state file")
	}
}

func TestProgress(t *testing.T) {
	t.Parallel()
	m := newManual(t, Settings{RolloutDuration: 3 * time.Second}, "")
	k := key("api", "staging")
	if st := mustFetch(t, m, target(t, k, "v1")); st.Version != "" || st.Converged || st.Message != "nothing deployed" {
		t.Errorf("before apply: %+v", st)
	}
	tg := target(t, k, "v-abc")
	mustApply(t, m, tg)
	for i, want := range []string{
		"rolling out v-abc: 0/3 replicas available",
		"rolling out v-abc: 1/3 replicas available",
		"rolling out v-abc: 2/3 replicas available",
		"v-abc running: 3/3 replicas available",
	} {
		st := mustFetch(t, m, tg)
		if st.Message != want || st.Version != "v-abc" || st.Converged != (i == 3) || st.Failed || st.Drifted {
			t.Errorf("after %ds: %+v, want message %q", i, st, want)
		}
		if len(st.Objects) != 2 {
			t.Fatalf("objects: %+v", st.Objects)
		}
		d, cm := st.Objects[0], st.Objects[1]
		wantStatus := runtimes.ObjectPending
		if i == 3 {
			wantStatus = runtimes.ObjectSucceeded
		}
		if d.ObjectType != "Deployment.apps" || d.Name != "api-staging" || d.Version != "v-abc" ||
			d.TargetReplicas != 3 || d.Replicas != 3 || d.AvailableReplicas != int32(i) || d.Status != wantStatus {
			t.Errorf("after %ds: deployment %+v", i, d)
		}
		if cm.ObjectType != "ConfigMap" || cm.Name != "api-staging-config" || cm.TargetReplicas != 0 || cm.Status != wantStatus {
			t.Errorf("after %ds: config map %+v", i, cm)
		}
		m.advance(time.Second)
	}
}

func TestFailVersions(t *testing.T) {
	t.Parallel()
	m := newManual(t, Settings{RolloutDuration: 3 * time.Second, FailVersions: regexp.MustCompile(`-bad$`)}, "")
	good, bad := target(t, key("api", "staging"), "v1"), target(t, key("api", "prod"), "v2-bad")
	mustApply(t, m, good)
	mustApply(t, m, bad)
	m.advance(2 * time.Second)
	if st := mustFetch(t, m, bad); st.Failed || st.Converged || st.Message != "rolling out v2-bad: 2/3 replicas available" {
		t.Errorf("failing rollout before its end: %+v", st)
	}
	m.advance(time.Second)
	st := mustFetch(t, m, bad)
	if !st.Failed || st.Converged || st.Version != "v2-bad" || st.Message != "rollout of v2-bad failed: simulated failure (failVersions)" {
		t.Errorf("failed rollout: %+v", st)
	}
	if d := st.Objects[0]; d.Status != runtimes.ObjectFailed || d.AvailableReplicas != 2 {
		t.Errorf("failed deployment: %+v", d)
	}
	if st := mustFetch(t, m, good); !runtimestest.Converged(st, "v1") {
		t.Errorf("good version: %+v", st)
	}
	// A rollout of a good version recovers.
	fixed := target(t, bad.InstanceKey, "v3")
	mustApply(t, m, fixed)
	m.advance(3 * time.Second)
	if st := mustFetch(t, m, fixed); !runtimestest.Converged(st, "v3") {
		t.Errorf("after fixing: %+v", st)
	}
}

func TestApplyChanges(t *testing.T) {
	t.Parallel()
	m := newManual(t, Settings{RolloutDuration: 3 * time.Second}, "")
	k := key("api", "staging")
	tg := target(t, k, "v1")
	if got, want := changeList(mustApply(t, m, tg)), "Deployment.apps/api-staging=created ConfigMap/api-staging-config=created"; got != want {
		t.Errorf("first apply: %s, want %s", got, want)
	}
	m.advance(time.Second)
	// Re-applying mid-rollout changes nothing and does not restart it.
	if got, want := changeList(mustApply(t, m, target(t, k, "v1"))), "Deployment.apps/api-staging=unchanged ConfigMap/api-staging-config=unchanged"; got != want {
		t.Errorf("re-apply: %s, want %s", got, want)
	}
	if st := mustFetch(t, m, tg); st.Objects[0].AvailableReplicas != 1 {
		t.Errorf("re-apply restarted the rollout: %+v", st)
	}
	// v2: the Deployment changes, the ConfigMap does not.
	v2 := target(t, k, "v2")
	if got, want := changeList(mustApply(t, m, v2)), "Deployment.apps/api-staging=configured ConfigMap/api-staging-config=unchanged"; got != want {
		t.Errorf("v2: %s, want %s", got, want)
	}
	if st := mustFetch(t, m, v2); st.Version != "v2" || st.Objects[0].AvailableReplicas != 0 {
		t.Errorf("v2 did not start a new rollout: %+v", st)
	}
	// v3: the ConfigMap goes, a Service comes.
	v3 := v2
	v3.Version = "v3"
	v3.Objects = []json.RawMessage{deployment(t, "api-staging", "v3", 3),
		manifest(t, map[string]any{"apiVersion": "v1", "kind": "Service", "metadata": map[string]any{"name": "api"}})}
	if got, want := changeList(mustApply(t, m, v3)), "Deployment.apps/api-staging=configured Service/api=created ConfigMap/api-staging-config=deleted"; got != want {
		t.Errorf("v3: %s, want %s", got, want)
	}
	// Same version, other objects: a new rollout as well.
	v3b := v3
	v3b.Objects = v3.Objects[:1]
	if got, want := changeList(mustApply(t, m, v3b)), "Deployment.apps/api-staging=unchanged Service/api=deleted"; got != want {
		t.Errorf("v3 without the service: %s, want %s", got, want)
	}
}

func TestReplicasAndObjects(t *testing.T) {
	t.Parallel()
	m := newManual(t, Settings{}, "")
	obj := func(apiVersion, kind, name, ns string, replicas any) json.RawMessage {
		md := map[string]any{"name": name}
		if ns != "" {
			md["namespace"] = ns
		}
		o := map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": md}
		if replicas != nil {
			o["spec"] = map[string]any{"replicas": replicas}
		}
		return manifest(t, o)
	}
	tg := runtimes.Target{InstanceKey: key("db", "prod"), Version: "v1", Backend: "kubernetes", Namespace: "shop-prod",
		Objects: []json.RawMessage{
			obj("apps/v1", "Deployment", "web", "", nil),
			obj("apps/v1", "StatefulSet", "db", "data", nil),
			obj("apps/v1", "ReplicaSet", "rs", "", 5),
			obj("apps/v1", "Deployment", "scaled-down", "", 0),
			obj("v1", "ConfigMap", "cm", "", nil),
		}}
	mustApply(t, m, tg)
	st := mustFetch(t, m, tg)
	if !runtimestest.Converged(st, "v1") || st.Message != "v1 running: 7/7 replicas available" {
		t.Errorf("state: %+v", st)
	}
	var got []string
	for _, o := range st.Objects {
		got = append(got, fmt.Sprintf("%s %s/%s %d/%d", o.ObjectType, o.Namespace, o.Name, o.AvailableReplicas, o.TargetReplicas))
	}
	want := []string{"Deployment.apps shop-prod/web 1/1", "StatefulSet.apps data/db 1/1", "ReplicaSet.apps shop-prod/rs 5/5",
		"Deployment.apps shop-prod/scaled-down 0/0", "ConfigMap shop-prod/cm 0/0"}
	if !slices.Equal(got, want) {
		t.Errorf("objects:\n got %q\nwant %q", got, want)
	}

	custom := runtimes.Target{InstanceKey: key("vm", "prod"), Version: "v1", Backend: "customRuntime",
		Objects: []json.RawMessage{manifest(t, map[string]any{"kind": "custom", "runtime": "vm-runner", "parameterValues": map[string]any{"size": 2}})}}
	if got := changeList(mustApply(t, m, custom)); got != "custom/vm-runner=created" {
		t.Errorf("custom apply: %s", got)
	}
	st = mustFetch(t, m, custom)
	if o := st.Objects[0]; o.ObjectType != "custom" || o.Name != "vm-runner" || o.TargetReplicas != 1 || st.Message != "v1 running: 1/1 replicas available" {
		t.Errorf("custom object: %+v", st)
	}
}

func TestInvalidObjects(t *testing.T) {
	t.Parallel()
	m := newManual(t, Settings{}, "")
	for name, raw := range map[string]string{
		"not json":     `{"kind":`,
		"no name":      `{"apiVersion":"v1","kind":"ConfigMap","metadata":{}}`,
		"bad replicas": `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"x"},"spec":{"replicas":-1}}`,
		"no version":   `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"}}`,
	} {
		tg := runtimes.Target{InstanceKey: key("bad", "staging"), Version: "v1", Backend: "kubernetes", Objects: []json.RawMessage{json.RawMessage(raw)}}
		if name == "no version" {
			tg.Version = ""
		}
		if _, err := m.Apply(t.Context(), tg); err == nil || !runtimes.IsPermanent(err) {
			t.Errorf("%s: err = %v, want a permanent error", name, err)
		}
	}
	if st := mustFetch(t, m, target(t, key("bad", "staging"), "v1")); st.Version != "" {
		t.Errorf("a failed apply left state: %+v", st)
	}
}

func TestIsWallClock(t *testing.T) {
	t.Parallel()
	clock := runtimestest.NewClock(time.Time{})
	for _, c := range []struct {
		now  func() time.Time
		want bool
	}{{nil, true}, {time.Now, true}, {clock.Now, false}, {func() time.Time { return time.Now() }, false}} {
		if got := isWallClock(c.now); got != c.want {
			t.Errorf("isWallClock(%p) = %v, want %v", c.now, got, c.want)
		}
	}
}

func TestDrift(t *testing.T) {
	t.Parallel()
	m := newManual(t, Settings{RolloutDuration: time.Second}, "")
	k := key("api", "staging")
	tg := target(t, k, "v1")
	if err := m.SetDrift(k); err == nil {
		t.Errorf("SetDrift before any apply: no error")
	}
	mustApply(t, m, tg)
	m.advance(time.Second)
	notes := watch(t, m.Runtime)
	if err := m.SetDrift(k); err != nil {
		t.Fatal(err)
	}
	expectNote(t, notes, k)
	st := mustFetch(t, m, tg)
	if st.Version != "" || st.Converged || !st.Drifted || st.Message != "v1 was changed out of band (simulated drift)" {
		t.Errorf("after SetDrift: %+v", st)
	}
	// Self-healing: re-applying the same target repairs it with a new rollout.
	if got, want := changeList(mustApply(t, m, tg)), "Deployment.apps/api-staging=configured ConfigMap/api-staging-config=configured"; got != want {
		t.Errorf("re-apply after drift: %s, want %s", got, want)
	}
	if st := mustFetch(t, m, tg); st.Version != "v1" || st.Converged || st.Drifted {
		t.Errorf("repairing: %+v", st)
	}
	m.advance(time.Second)
	if st := mustFetch(t, m, tg); !runtimestest.Converged(st, "v1") {
		t.Errorf("repaired: %+v", st)
	}
	// The target's objects differ from the applied ones under the same version.
	other := tg
	other.Objects = tg.Objects[:1]
	if st := mustFetch(t, m, other); !st.Drifted || st.Converged || st.Version != "v1" {
		t.Errorf("same version, other objects: %+v", st)
	}
	if st := mustFetch(t, m, target(t, k, "v2")); st.Drifted || !runtimestest.Converged(st, "v1") {
		t.Errorf("another version is not drift: %+v", st)
	}
}

// watch starts a Watch on r until the test ends and returns its notifications.
func watch(t *testing.T, r *Runtime) <-chan runtimes.InstanceKey {
	t.Helper()
	ch := make(chan runtimes.InstanceKey, 4096)
	before := r.notifier.Watchers()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Watch(ctx, func(k runtimes.InstanceKey) { ch <- k }) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Watch: %v", err)
		}
	})
	// Wait until the watch is registered, so no notification is missed.
	deadline := time.Now().Add(10 * time.Second)
	for {
		if r.notifier.Watchers() > before {
			return ch
		}
		if time.Now().After(deadline) {
			t.Fatal("Watch did not register")
		}
		time.Sleep(time.Millisecond)
	}
}

func expectNote(t *testing.T, ch <-chan runtimes.InstanceKey, want runtimes.InstanceKey) {
	t.Helper()
	select {
	case k := <-ch:
		if k != want {
			t.Fatalf("notified %s, want %s", k, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no notification for %s", want)
	}
}

func expectNoNote(t *testing.T, ch <-chan runtimes.InstanceKey) {
	t.Helper()
	select {
	case k := <-ch:
		t.Fatalf("unexpected notification for %s", k)
	default:
	}
}

func TestWatchManualClock(t *testing.T) {
	t.Parallel()
	m := newManual(t, Settings{RolloutDuration: 3 * time.Second}, "")
	n1, n2 := watch(t, m.Runtime), watch(t, m.Runtime)
	a, b := key("a", "staging"), key("b", "staging")
	mustApply(t, m, target(t, a, "v1"))
	expectNote(t, n1, a)
	expectNote(t, n2, a)
	m.advance(time.Second)
	mustApply(t, m, target(t, b, "v1"))
	expectNote(t, n1, b)
	expectNote(t, n2, b)
	if n := m.advance(time.Second); n != 0 {
		t.Errorf("Tick before any rollout ended fired %d", n)
	}
	if n := m.advance(time.Second); n != 1 { // a ends
		t.Errorf("Tick at the end of a's rollout fired %d, want 1", n)
	}
	expectNote(t, n1, a)
	expectNote(t, n2, a)
	// b is superseded by v2 before its end: only v2's end is reported.
	mustApply(t, m, target(t, b, "v2"))
	expectNote(t, n1, b)
	expectNote(t, n2, b)
	if n := m.advance(time.Second); n != 0 {
		t.Errorf("the superseded rollout's end fired %d", n)
	}
	if n := m.advance(2 * time.Second); n != 1 {
		t.Errorf("v2's end fired %d, want 1", n)
	}
	expectNote(t, n1, b)
	expectNote(t, n2, b)
	// A re-apply that changes nothing notifies nobody: the next
	// notification is for the next change.
	mustApply(t, m, target(t, b, "v2"))
	c := key("c", "staging")
	mustApply(t, m, target(t, c, "v1"))
	expectNote(t, n1, c)
	expectNote(t, n2, c)
	expectNoNote(t, n1)
	expectNoNote(t, n2)
}

func TestWatchRealTimer(t *testing.T) {
	t.Parallel()
	// time.Now given explicitly is the wall clock too.
	r := NewWithSettings("sim", Settings{RolloutDuration: 30 * time.Millisecond}, runtimes.Options{Now: time.Now})
	defer r.Close()
	if !r.realClock {
		t.Fatal("time.Now not recognized as the wall clock")
	}
	notes := watch(t, r)
	k := key("a", "staging")
	tg := target(t, k, "v1")
	mustApply(t, r, tg)
	expectNote(t, notes, k) // the apply
	expectNote(t, notes, k) // the rollout's end, from the real timer
	if st := mustFetch(t, r, tg); !runtimestest.Converged(st, "v1") {
		t.Errorf("notified at the end, but: %+v", st)
	}
}

func TestWatchEndsOnClose(t *testing.T) {
	t.Parallel()
	r := NewWithSettings("sim", Settings{}, runtimes.Options{})
	done := make(chan error, 1)
	go func() { done <- r.Watch(context.Background(), func(runtimes.InstanceKey) {}) }()
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Watch: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Watch did not return after Close")
	}
	if err := r.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := r.Apply(t.Context(), target(t, key("a", "b"), "v1")); err == nil {
		t.Errorf("Apply after Close: no error")
	}
}
