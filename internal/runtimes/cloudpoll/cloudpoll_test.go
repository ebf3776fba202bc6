package cloudpoll

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/runtimes"
	"github.com/drover-dev/drover/internal/runtimes/runtimestest"
)

// spec is a test backend's target: the name of what it describes.
type spec struct{ name string }

// backend is a fake cloud: what each name's observation is, and the
// batches Describe was called with.
type backend struct {
	mu      sync.Mutex
	states  map[string]runtimes.State
	errs    map[string]error
	infos   map[string][]runtimes.InfoOutput
	batches [][]string
	// during runs inside each Describe call (a racing apply, say).
	during func()
}

func newBackend() *backend {
	return &backend{states: map[string]runtimes.State{}, errs: map[string]error{}, infos: map[string][]runtimes.InfoOutput{}}
}

func (b *backend) describe(_ context.Context, batch []spec) []Result {
	b.mu.Lock()
	var names []string
	out := make([]Result, len(batch))
	for i, s := range batch {
		names = append(names, s.name)
		out[i] = Result{State: b.states[s.name], Err: b.errs[s.name], Info: b.infos[s.name]}
	}
	b.batches = append(b.batches, names)
	during := b.during
	b.mu.Unlock()
	if during != nil {
		during()
	}
	return out
}

func (b *backend) set(name string, st runtimes.State, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.states[name], b.errs[name] = st, err
}

// described returns the names described since the last call, sorted.
func (b *backend) described() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var all []string
	for _, batch := range b.batches {
		all = append(all, batch...)
	}
	b.batches = nil
	slices.Sort(all)
	return all
}

func (b *backend) calls() [][]string {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := b.batches
	b.batches = nil
	return out
}

func sameSpec(a, b spec) bool { return a == b }

func key(name string) runtimes.InstanceKey {
	return runtimes.InstanceKey{Application: "shop", Service: name, ReleaseChannel: "prod"}
}

func target(name, version string) runtimes.Target {
	return runtimes.Target{InstanceKey: key(name), Version: version}
}

var converged = runtimes.State{Version: "v1", Converged: true, Message: "v1 running"}
var rolling = runtimes.State{Version: "v1", Message: "v1 rolling out"}

// newTest is a Poller on a manual clock, whose passes the test runs.
func newTest(t *testing.T, b *backend, batch int) (*Poller[spec], *runtimestest.Clock) {
	t.Helper()
	clock := runtimestest.NewClock(time.Time{})
	p := newPoller(Config[spec]{Poll: 10 * time.Second, Steady: time.Minute, Now: clock.Now, Batch: batch, Same: sameSpec, Describe: b.describe})
	t.Cleanup(p.Close)
	return p, clock
}

// Instances not observed yet go at once; then the converged ones every
// steady interval and the others every poll interval, on the runtime's
// beats; an observation that failed is not converged.
func TestBeats(t *testing.T) {
	t.Parallel()
	b := newBackend()
	p, clock := newTest(t, b, 1)
	b.set("a", converged, nil)
	b.set("b", rolling, nil)
	b.set("c", converged, errors.New("throttled"))
	for _, n := range []string{"a", "b", "c"} {
		p.Touch(target(n, "v1"), spec{n})
	}
	steps := []struct {
		advance time.Duration
		want    string
		next    time.Duration
	}{
		{0, "a b c", 10 * time.Second},                // never observed; both beats start
		{time.Second, "", 9 * time.Second},            // between beats
		{9 * time.Second, "b c", 10 * time.Second},    // poll beat: the unconverged and the failed
		{20 * time.Second, "b c", 10 * time.Second},   // a late pass is one beat, not two
		{30 * time.Second, "a b c", 10 * time.Second}, // steady beat: all of them
		{5*time.Second + 500*time.Millisecond, "", 4500 * time.Millisecond},
		{4499 * time.Millisecond, "", minWait}, // never sleeps less than minWait
	}
	for i, s := range steps {
		clock.Advance(s.advance)
		next := p.pass()
		if got := strings.Join(b.described(), " "); got != s.want || next != s.next {
			t.Errorf("step %d (+%s): described %q, next in %s; want %q, next in %s", i, s.advance, got, next, s.want, s.next)
		}
	}
	// Once b converges it waits for the steady beat too.
	b.set("b", converged, nil)
	clock.Advance(time.Second)
	p.pass()
	b.described()
	clock.Advance(10 * time.Second)
	if p.pass(); len(b.described()) != 1 {
		t.Errorf("the poll beat after b converged should describe only c")
	}
}

// Instances nobody touched for ForgetAfter (or three steady intervals,
// when longer) are forgotten; one touched stays.
func TestForget(t *testing.T) {
	t.Parallel()
	b := newBackend()
	p, clock := newTest(t, b, 1)
	b.set("old", converged, nil)
	b.set("used", converged, nil)
	p.Touch(target("old", "v1"), spec{"old"})
	p.Touch(target("used", "v1"), spec{"used"})
	p.pass()
	b.described()
	clock.Advance(ForgetAfter - time.Minute)
	p.Touch(target("used", "v1"), spec{"used"})
	clock.Advance(time.Minute + time.Second)
	p.pass()
	if got := b.described(); !slices.Equal(got, []string{"used"}) {
		t.Errorf("described %v after ForgetAfter, want only the instance still used", got)
	}
	if p.Info(key("old")) != nil || len(p.insts) != 1 {
		t.Errorf("old is still kept: %d instances", len(p.insts))
	}

	// With a steady interval of 10m, instances are kept for 30m.
	slow := newPoller(Config[spec]{Steady: 10 * time.Minute, Now: clock.Now, Same: sameSpec, Describe: b.describe})
	t.Cleanup(slow.Close)
	slow.Touch(target("x", "v1"), spec{"x"})
	clock.Advance(29 * time.Minute)
	slow.pass()
	if got := b.described(); !slices.Equal(got, []string{"x"}) {
		t.Errorf("described %v at 29m of a 10m steady interval, want x", got)
	}
	clock.Advance(2 * time.Minute)
	slow.pass()
	if got := b.described(); len(got) != 0 || len(slow.insts) != 0 {
		t.Errorf("described %v at 31m, want x forgotten", got)
	}
}

// Fetch observes an instance without an observation at once and returns
// the latest one otherwise; a new version, or a spec Same says differs,
// drops it, and so does an apply.
func TestFetch(t *testing.T) {
	t.Parallel()
	b := newBackend()
	p, _ := newTest(t, b, 1)
	b.set("a", converged, nil)
	fetch := func(version string, s spec) runtimes.State {
		t.Helper()
		st, err := p.Fetch(t.Context(), target("a", version), s)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	if st := fetch("v1", spec{"a"}); !st.Converged || len(b.described()) != 1 {
		t.Errorf("first fetch: %+v", st)
	}
	fetch("v1", spec{"a"})
	if n := len(b.described()); n != 0 {
		t.Errorf("a second fetch described %d times, want the cached observation", n)
	}
	fetch("v2", spec{"a"})
	if n := len(b.described()); n != 1 {
		t.Errorf("a new version: described %d times, want 1", n)
	}
	b.set("other", rolling, nil)
	if st := fetch("v2", spec{"other"}); st.Converged || len(b.described()) != 1 {
		t.Errorf("another spec: %+v", st)
	}
	p.Applied(key("a"))
	fetch("v2", spec{"other"})
	if n := len(b.described()); n != 1 {
		t.Errorf("after an apply: described %d times, want 1", n)
	}
	// An observation that failed is returned as it is.
	b.set("bad", runtimes.State{}, errors.New("access denied"))
	if _, err := p.Fetch(t.Context(), target("bad", "v1"), spec{"bad"}); err == nil || err.Error() != "access denied" {
		t.Errorf("failed observation: %v", err)
	}
}

// An observation made for a target that changed meanwhile is not kept:
// Fetch observes again, three times at most.
func TestFetchTargetChanged(t *testing.T) {
	t.Parallel()
	b := newBackend()
	p, _ := newTest(t, b, 1)
	b.set("a", converged, nil)
	b.during = func() { p.Applied(key("a")) } // an apply ends under each describe
	if _, err := p.Fetch(t.Context(), target("a", "v1"), spec{"a"}); !errors.Is(err, ErrTargetChanged) {
		t.Errorf("fetch racing applies: %v, want ErrTargetChanged", err)
	}
	if n := len(b.described()); n != 3 {
		t.Errorf("described %d times, want 3", n)
	}
	// One race only: the second observation is kept.
	calls := 0
	b.during = func() {
		if calls++; calls == 1 {
			p.Applied(key("a"))
		}
	}
	if st, err := p.Fetch(t.Context(), target("a", "v2"), spec{"a"}); err != nil || !st.Converged || calls != 2 {
		t.Errorf("fetch after one race: %+v, %v, %d describes", st, err, calls)
	}
	// What a canceled Fetch saw is no observation.
	ctx, cancel := context.WithCancel(t.Context())
	b.during = cancel
	p.Applied(key("a"))
	if _, err := p.Fetch(ctx, target("a", "v2"), spec{"a"}); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled fetch: %v", err)
	}
	p.mu.Lock()
	have := p.insts[key("a")].have
	p.mu.Unlock()
	if have {
		t.Error("a canceled describe was recorded")
	}
}

// The instances due are described Batch at a time, in the order of their
// keys.
func TestBatches(t *testing.T) {
	t.Parallel()
	b := newBackend()
	p, _ := newTest(t, b, 2)
	for _, n := range []string{"e", "b", "d", "a", "c"} {
		b.set(n, converged, nil)
		p.Touch(target(n, "v1"), spec{n})
	}
	p.pass()
	want := [][]string{{"a", "b"}, {"c", "d"}, {"e"}}
	if got := b.calls(); !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("batches %v, want %v", got, want)
	}
}

// A failed observation without info keeps the last info; one with info,
// or a good one, replaces it.
func TestInfo(t *testing.T) {
	t.Parallel()
	b := newBackend()
	p, clock := newTest(t, b, 1)
	first := []runtimes.InfoOutput{{Name: "deployments", Text: "PRIMARY"}}
	b.set("a", rolling, nil)
	b.infos["a"] = first
	p.Touch(target("a", "v1"), spec{"a"})
	p.pass()
	b.set("a", runtimes.State{}, errors.New("throttled"))
	b.infos["a"] = nil
	clock.Advance(10 * time.Second)
	p.pass()
	if got := p.Info(key("a")); !slices.Equal(got, first) {
		t.Errorf("info after a failed observation: %v, want the last one", got)
	}
	b.set("a", rolling, nil)
	clock.Advance(10 * time.Second)
	p.pass()
	if got := p.Info(key("a")); got != nil {
		t.Errorf("info after a good observation without any: %v", got)
	}
	if p.Info(key("nobody")) != nil {
		t.Error("info of an unknown instance")
	}
}

// watch runs a Watch call and returns the keys it delivers.
func watch(t *testing.T, p *Poller[spec]) (<-chan runtimes.InstanceKey, <-chan error) {
	t.Helper()
	keys := make(chan runtimes.InstanceKey, 16)
	done := make(chan error, 1)
	go func() { done <- p.Watch(t.Context(), func(k runtimes.InstanceKey) { keys <- k }) }()
	deadline := time.Now().Add(10 * time.Second)
	for p.notifier.Watchers() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the watcher did not start")
		}
		time.Sleep(time.Millisecond)
	}
	return keys, done
}

func next(t *testing.T, keys <-chan runtimes.InstanceKey) runtimes.InstanceKey {
	t.Helper()
	select {
	case k := <-keys:
		return k
	case <-time.After(10 * time.Second):
		t.Fatal("no notification")
		return runtimes.InstanceKey{}
	}
}

// Watchers hear of the first observation and of each that differs (its
// state or its error), and of Notify; not of an observation like the last.
func TestWatch(t *testing.T) {
	t.Parallel()
	b := newBackend()
	p, clock := newTest(t, b, 1)
	keys, _ := watch(t, p)
	b.set("a", rolling, nil)
	p.Touch(target("a", "v1"), spec{"a"})
	p.pass()
	if k := next(t, keys); k != key("a") {
		t.Errorf("first observation: notified %v", k)
	}
	// An observation like the last notifies nobody: the next delivery is
	// what Notify queued after it.
	clock.Advance(10 * time.Second)
	p.pass()
	p.Notify(key("b"))
	if k := next(t, keys); k != key("b") {
		t.Errorf("after an unchanged observation: notified %v, want only b's Notify", k)
	}
	for i, change := range []func(){
		func() { b.set("a", rolling, errors.New("throttled")) },
		func() { b.set("a", rolling, errors.New("throttled again")) },
		func() { b.set("a", converged, nil) },
	} {
		change()
		clock.Advance(10 * time.Second)
		p.pass()
		if k := next(t, keys); k != key("a") {
			t.Errorf("change %d: notified %v", i, k)
		}
	}
}

// The poller goroutine: it describes what is due when woken (Applied
// wakes it) and stops at Close, which ends the Watch calls.
func TestPollerAndClose(t *testing.T) {
	t.Parallel()
	b := newBackend()
	woke := make(chan string, 16)
	b.during = func() { woke <- "described" }
	clock := runtimestest.NewClock(time.Time{})
	p := New(Config[spec]{Now: clock.Now, Same: sameSpec, Describe: b.describe})
	_, done := watch(t, p)
	if poll, steady := p.Intervals(); poll != DefaultPollInterval || steady != DefaultSteadyPollInterval {
		t.Errorf("default intervals %s, %s", poll, steady)
	}
	b.set("a", rolling, nil)
	p.Touch(target("a", "v1"), spec{"a"})
	p.Applied(key("a"))
	select {
	case <-woke:
	case <-time.After(10 * time.Second):
		t.Fatal("Applied did not wake the poller")
	}
	p.Close()
	p.Close() // again: nothing more
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Watch after Close: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not end Watch")
	}
	for range len(woke) {
		<-woke
	}
	p.Applied(key("a"))
	p.Wake()
	if len(woke) != 0 { // the goroutine has ended: nothing can run now
		t.Error("the poller described after Close")
	}
}

// OneAtATime describes each spec in turn and stops when ctx ends.
func TestOneAtATime(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	var seen []string
	describe := OneAtATime(func(_ context.Context, s spec) Result {
		seen = append(seen, s.name)
		if s.name == "b" {
			cancel()
		}
		return Result{State: runtimes.State{Message: s.name}}
	})
	out := describe(ctx, []spec{{"a"}, {"b"}, {"c"}})
	if !slices.Equal(seen, []string{"a", "b"}) || len(out) != 2 || out[1].State.Message != "b" {
		t.Errorf("described %v, results %+v", seen, out)
	}
}

// TestLockApply: applies of one instance take turns, those of two do not
// wait for each other, and an instance's lock is gone once no apply holds
// or waits for it.
func TestLockApply(t *testing.T) {
	p := New(Config[spec]{Same: sameSpec, Describe: newBackend().describe})
	defer p.Close()
	a, b := runtimes.InstanceKey{Service: "a"}, runtimes.InstanceKey{Service: "b"}
	unlockA := p.LockApply(a)
	p.LockApply(b)() // another instance: no wait
	done := make(chan struct{})
	go func() {
		p.LockApply(a)()
		close(done)
	}()
	select {
	case <-done:
		t.Fatal("a second apply of a did not wait for the first")
	case <-time.After(50 * time.Millisecond):
	}
	unlockA()
	<-done
	p.mu.Lock()
	n := len(p.applyMu)
	p.mu.Unlock()
	if n != 0 {
		t.Errorf("%d apply locks kept after every apply ended", n)
	}
}
