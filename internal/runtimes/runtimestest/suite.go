// Package runtimestest is the conformance suite every runtimes.Runtime
// implementation must pass, and helpers for testing runtimes.
//
// A runtime's test calls Run with a Harness:
//
//	func TestConformance(t *testing.T) {
//		runtimestest.Run(t, runtimestest.Harness{
//			New:    func(t *testing.T) runtimes.Runtime { ... },
//			Target: func(key runtimes.InstanceKey, version string) runtimes.Target { ... },
//		})
//	}
package runtimestest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/runtimes"
)

// Harness adapts one runtime implementation to the suite.
type Harness struct {
	// New returns a fresh, empty runtime. It registers any cleanup (such as
	// Close) with t.Cleanup. Each case gets its own runtime.
	New func(t *testing.T) runtimes.Runtime
	// Target returns a valid target of version for key. The objects must
	// depend on the version (as compiled objects do, through labels or
	// image tags) and on the key, so instances do not share objects.
	Target func(key runtimes.InstanceKey, version string) runtimes.Target
	// Settle, if set, is called between two fetches while the suite waits
	// for a state: it may advance an injected clock, or wait a little. When
	// nil the suite polls with a short backoff.
	Settle func(t *testing.T, rt runtimes.Runtime)
	// Timeout bounds every wait (default 30s).
	Timeout time.Duration
	// Goroutines and KeysPerGoroutine size the concurrency case (default 8 and 16).
	Goroutines, KeysPerGoroutine int
}

// Key returns a distinct instance key for a case.
func Key(service, channel string) runtimes.InstanceKey {
	return runtimes.InstanceKey{Application: "conformance", Service: service, ReleaseChannel: channel}
}

// Run runs the conformance suite on the runtime h describes.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.New == nil || h.Target == nil {
		t.Fatal("runtimestest: Harness.New and Harness.Target are required")
	}
	if h.Timeout <= 0 {
		h.Timeout = 30 * time.Second
	}
	if h.Goroutines <= 0 {
		h.Goroutines = 8
	}
	if h.KeysPerGoroutine <= 0 {
		h.KeysPerGoroutine = 16
	}
	s := &suite{h: h}
	cases := []struct {
		name string
		run  func(*testing.T)
	}{
		{"FetchBeforeApply", s.fetchBeforeApply},
		{"ApplyConverges", s.applyConverges},
		{"ReapplyIsIdempotent", s.reapplyIsIdempotent},
		{"UpgradeConverges", s.upgradeConverges},
		{"InstancesAreIndependent", s.instancesAreIndependent},
		{"FetchUnknownKey", s.fetchUnknownKey},
		{"ConcurrentApply", s.concurrentApply},
		{"WatchNotifies", s.watchNotifies},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.run(t)
		})
	}
}

type suite struct{ h Harness }

func (s *suite) ctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), s.h.Timeout)
	t.Cleanup(cancel)
	return ctx
}

// Converged reports whether st is version running healthy.
func Converged(st runtimes.State, version string) bool {
	return st.Version == version && st.Converged && !st.Failed && !st.Drifted
}

// Eventually fetches target until cond holds, calling settle (if any) or
// backing off between fetches, and fails t at the deadline.
func Eventually(t testing.TB, rt runtimes.Runtime, target runtimes.Target, timeout time.Duration, settle func(), what string, cond func(runtimes.State) bool) runtimes.State {
	t.Helper()
	deadline := time.Now().Add(timeout)
	backoff := time.Millisecond
	for {
		st, err := rt.Fetch(context.Background(), target)
		if err != nil {
			t.Fatalf("Fetch(%s): %v", target.InstanceKey, err)
		}
		if cond(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s: not reached within %v; last state: %+v", target.InstanceKey, what, timeout, st)
		}
		if settle != nil {
			settle()
		} else {
			time.Sleep(backoff) // polling: real time must pass
			backoff = min(2*backoff, 100*time.Millisecond)
		}
	}
}

func (s *suite) settle(t *testing.T, rt runtimes.Runtime) func() {
	if s.h.Settle == nil {
		return nil
	}
	return func() { s.h.Settle(t, rt) }
}

func (s *suite) waitConverged(t *testing.T, rt runtimes.Runtime, target runtimes.Target) runtimes.State {
	t.Helper()
	return Eventually(t, rt, target, s.h.Timeout, s.settle(t, rt), "converged at "+target.Version, func(st runtimes.State) bool {
		if st.Failed {
			t.Fatalf("%s: rollout of %s failed: %s", target.InstanceKey, target.Version, st.Message)
		}
		return Converged(st, target.Version)
	})
}

func (s *suite) apply(ctx context.Context, t *testing.T, rt runtimes.Runtime, target runtimes.Target) runtimes.ApplyResult {
	t.Helper()
	res, err := rt.Apply(ctx, target)
	if err != nil {
		t.Fatalf("Apply(%s, %s): %v", target.InstanceKey, target.Version, err)
	}
	return res
}

func (s *suite) fetch(ctx context.Context, t *testing.T, rt runtimes.Runtime, target runtimes.Target) runtimes.State {
	t.Helper()
	st, err := rt.Fetch(ctx, target)
	if err != nil {
		t.Fatalf("Fetch(%s): %v", target.InstanceKey, err)
	}
	return st
}

func (s *suite) fetchBeforeApply(t *testing.T) {
	rt, ctx := s.h.New(t), s.ctx(t)
	st := s.fetch(ctx, t, rt, s.h.Target(Key("fresh", "staging"), "v1"))
	if st.Version != "" || st.Converged || st.Failed {
		t.Errorf("before any apply: got %+v, want nothing deployed (no version, not converged)", st)
	}
}

func (s *suite) applyConverges(t *testing.T) {
	rt, ctx := s.h.New(t), s.ctx(t)
	target := s.h.Target(Key("web", "staging"), "v1")
	res := s.apply(ctx, t, rt, target)
	if len(res.Changes) == 0 {
		t.Errorf("first apply reported no changes")
	}
	for _, c := range res.Changes {
		if c.Action != runtimes.ActionCreated {
			t.Errorf("first apply: %s %s, want %s", c.Object, c.Action, runtimes.ActionCreated)
		}
	}
	st := s.waitConverged(t, rt, target)
	for _, o := range st.Objects {
		if o.Status != runtimes.ObjectSucceeded {
			t.Errorf("converged, but object %s/%s is %s", o.ObjectType, o.Name, o.Status)
		}
	}
}

func (s *suite) reapplyIsIdempotent(t *testing.T) {
	rt, ctx := s.h.New(t), s.ctx(t)
	target := s.h.Target(Key("web", "staging"), "v1")
	s.apply(ctx, t, rt, target)
	s.waitConverged(t, rt, target)
	for i := range 3 {
		res := s.apply(ctx, t, rt, s.h.Target(target.InstanceKey, "v1"))
		for _, c := range res.Changes {
			if c.Action != runtimes.ActionUnchanged {
				t.Errorf("re-apply %d: %s %s, want %s", i+1, c.Object, c.Action, runtimes.ActionUnchanged)
			}
		}
		// No restart: still converged right after the re-apply.
		if st := s.fetch(ctx, t, rt, target); !Converged(st, "v1") {
			t.Fatalf("re-apply %d restarted the rollout: %+v", i+1, st)
		}
	}
}

func (s *suite) upgradeConverges(t *testing.T) {
	rt, ctx := s.h.New(t), s.ctx(t)
	key := Key("web", "staging")
	v1, v2 := s.h.Target(key, "v1"), s.h.Target(key, "v2")
	s.apply(ctx, t, rt, v1)
	s.waitConverged(t, rt, v1)
	res := s.apply(ctx, t, rt, v2)
	changed := false
	for _, c := range res.Changes {
		changed = changed || c.Action == runtimes.ActionCreated || c.Action == runtimes.ActionConfigured
	}
	if !changed {
		t.Errorf("apply of v2 over v1 changed nothing: %+v", res.Changes)
	}
	if st := s.fetch(ctx, t, rt, v2); st.Version != "v2" && st.Version != "v1" {
		t.Errorf("during the upgrade: version %q, want v1 or v2", st.Version)
	}
	s.waitConverged(t, rt, v2)
}

func (s *suite) instancesAreIndependent(t *testing.T) {
	rt, ctx := s.h.New(t), s.ctx(t)
	a, b := Key("api", "staging"), Key("api", "production")
	a1, b2 := s.h.Target(a, "v1"), s.h.Target(b, "v2")
	s.apply(ctx, t, rt, a1)
	s.apply(ctx, t, rt, b2)
	s.waitConverged(t, rt, a1)
	s.waitConverged(t, rt, b2)
	a3 := s.h.Target(a, "v3")
	s.apply(ctx, t, rt, a3)
	if st := s.fetch(ctx, t, rt, b2); !Converged(st, "v2") {
		t.Errorf("applying %s disturbed %s: %+v", a, b, st)
	}
	s.waitConverged(t, rt, a3)
	if st := s.fetch(ctx, t, rt, b2); !Converged(st, "v2") {
		t.Errorf("after %s converged, %s: %+v", a, b, st)
	}
}

func (s *suite) fetchUnknownKey(t *testing.T) {
	rt, ctx := s.h.New(t), s.ctx(t)
	known := s.h.Target(Key("known", "staging"), "v1")
	s.apply(ctx, t, rt, known)
	st, err := rt.Fetch(ctx, s.h.Target(Key("unknown", "staging"), "v1"))
	if err != nil {
		t.Fatalf("Fetch of an unknown key: %v, want no error", err)
	}
	if st.Version != "" || st.Converged {
		t.Errorf("Fetch of an unknown key: %+v, want nothing deployed", st)
	}
}

func (s *suite) concurrentApply(t *testing.T) {
	rt, ctx := s.h.New(t), s.ctx(t)
	var wg sync.WaitGroup
	errs := make(chan error, s.h.Goroutines)
	var targets []runtimes.Target
	for g := range s.h.Goroutines {
		for k := range s.h.KeysPerGoroutine {
			targets = append(targets, s.h.Target(Key(fmt.Sprintf("svc-%d-%d", g, k), "staging"), "v2"))
		}
	}
	for g := range s.h.Goroutines {
		mine := targets[g*s.h.KeysPerGoroutine : (g+1)*s.h.KeysPerGoroutine]
		wg.Go(func() {
			for _, tg := range mine {
				for _, v := range []string{"v1", "v2", "v2"} {
					if _, err := rt.Apply(ctx, s.h.Target(tg.InstanceKey, v)); err != nil {
						errs <- fmt.Errorf("Apply(%s, %s): %w", tg.InstanceKey, v, err)
						return
					}
					if _, err := rt.Fetch(ctx, tg); err != nil {
						errs <- fmt.Errorf("Fetch(%s): %w", tg.InstanceKey, err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for _, tg := range targets {
		s.waitConverged(t, rt, tg)
	}
}

func (s *suite) watchNotifies(t *testing.T) {
	rt := s.h.New(t)
	w, ok := rt.(runtimes.Watcher)
	if !ok {
		t.Skip("runtime does not implement runtimes.Watcher")
	}
	ctx := s.ctx(t)
	key := Key("watched", "staging")
	got := make(chan runtimes.InstanceKey, 1024)
	wctx, cancel := context.WithCancel(ctx)
	watchDone := make(chan error, 1)
	go func() {
		watchDone <- w.Watch(wctx, func(k runtimes.InstanceKey) {
			select {
			case got <- k:
			default:
			}
		})
	}()
	// The watch may not be established yet when the first apply happens:
	// apply new versions until one is reported.
	deadline := time.Now().Add(s.h.Timeout)
	wait := 10 * time.Millisecond
	for i := 1; ; i++ {
		s.apply(ctx, t, rt, s.h.Target(key, fmt.Sprintf("v%d", i)))
		if waitKey(got, key, wait) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no notification for %s within %v", key, s.h.Timeout)
		}
		if s.h.Settle != nil {
			s.h.Settle(t, rt)
		}
		wait = min(2*wait, time.Second)
	}
	cancel()
	select {
	case err := <-watchDone:
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("Watch returned %v after its context ended", err)
		}
	case <-time.After(s.h.Timeout):
		t.Fatalf("Watch did not return within %v of its context ending", s.h.Timeout)
	}
}

func waitKey(ch <-chan runtimes.InstanceKey, key runtimes.InstanceKey, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case k := <-ch:
			if k == key {
				return true
			}
		case <-timer.C:
			return false
		}
	}
}
