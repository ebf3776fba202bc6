package engine

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	ds "github.com/drover-dev/drover/internal/desiredstate"
	"github.com/drover-dev/drover/internal/runtimes"
	"github.com/drover-dev/drover/internal/store"
)

func TestBackoffDoublesAndCaps(t *testing.T) {
	t.Parallel()
	base, limit := 500*time.Millisecond, 10*time.Second
	want := []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second}
	for n, w := range want {
		if got := backoff(base, limit, n); got != w {
			t.Errorf("backoff(n=%d) = %v, want %v", n, got, w)
		}
	}
	if got := backoff(base, limit, 1000); got != limit {
		t.Errorf("backoff after many failures = %v, want the cap", got)
	}
}

func TestTerminalWrapsAndIsFound(t *testing.T) {
	t.Parallel()
	base := errors.New("bad action")
	err := fmt.Errorf("execute: %w", Terminal(base))
	if !IsTerminal(err) || !errors.Is(err, base) || err.Error() != "execute: bad action" {
		t.Errorf("Terminal: IsTerminal %v, Is %v, text %q", IsTerminal(err), errors.Is(err, base), err)
	}
	if IsTerminal(base) || Terminal(nil) != nil {
		t.Error("a plain error is terminal, or Terminal(nil) is not nil")
	}
}

// TestSettleFollowsTheRetryContract checks every combination written on
// Result: what ends up in the queue, and the per-service failure count
// behind the backoff.
func TestSettleFollowsTheRetryContract(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	settings := DefaultSettings()
	settings.RetryBackoff, settings.MaxBackoff = time.Second, 4*time.Second
	l := NewLoop(Config{Settings: settings, Now: func() time.Time { return now }})
	state := func(key string) (ready bool, after time.Duration) {
		l.queue.mu.Lock()
		defer l.queue.mu.Unlock()
		at, delayed := l.queue.delayedAt[key]
		if delayed {
			after = at.Sub(now)
		}
		_, ready = l.queue.queued[key]
		return ready, after
	}
	failures := func(key string) int {
		l.failMu.Lock()
		defer l.failMu.Unlock()
		return l.failures[key]
	}
	boom := errors.New("store unavailable")

	l.settle("a/nothing", "test", Result{}, nil)
	if ready, after := state("a/nothing"); ready || after != 0 {
		t.Errorf("Result{}: queued %v, after %v; want nothing", ready, after)
	}
	l.settle("a/now", "test", Result{Requeue: true}, nil)
	if ready, _ := state("a/now"); !ready {
		t.Error("Requeue: not queued")
	}
	l.settle("a/later", "test", Result{Requeue: true, RequeueAfter: 3 * time.Second}, nil)
	if ready, after := state("a/later"); ready || after != 3*time.Second {
		t.Errorf("RequeueAfter: queued %v, after %v; want after 3s (RequeueAfter wins)", ready, after)
	}
	for i, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 4 * time.Second} {
		l.queue.mu.Lock()
		delete(l.queue.delayedAt, "b/svc") // look at this settle's delay only
		l.queue.mu.Unlock()
		l.settle("b/svc", "test", Result{Requeue: true}, boom)
		if ready, after := state("b/svc"); ready || after != want {
			t.Errorf("error #%d: queued %v, after %v; want after %v (the result is ignored)", i+1, ready, after, want)
		}
	}
	l.settle("b/svc", "test", Result{}, nil)
	if n := failures("b/svc"); n != 0 {
		t.Errorf("a success left %d failures counted", n)
	}
	l.settle("c/svc", "test", Result{}, boom)
	l.settle("c/svc", "test", Result{Requeue: true}, Terminal(boom))
	if n := failures("c/svc"); n != 0 {
		t.Errorf("a terminal error left %d failures counted", n)
	}
	l.queue.mu.Lock()
	delete(l.queue.delayedAt, "c/svc")
	l.queue.mu.Unlock()
	l.settle("c/svc", "test", Result{}, Terminal(boom))
	if ready, after := state("c/svc"); ready || after != 0 {
		t.Errorf("Terminal: queued %v, after %v; want no retry", ready, after)
	}
}

// TestLocalExecutorRefusesWhatItCannotDo: checks and deletes are shapes the
// planner does not decide yet; given one, the local executor fails for good
// instead of pretending.
func TestLocalExecutorRefusesWhatItCannotDo(t *testing.T) {
	t.Parallel()
	x := NewLocalExecutor(nil, nil, DefaultSettings(), nil, nil)
	for _, k := range []ActionKind{ActionRunCheck, ActionDelete, "teleport"} {
		res, err := x.Execute(t.Context(), "app", "svc", Action{Kind: k, ReleaseChannel: "prod"})
		if !IsTerminal(err) || res.Result != (Result{}) {
			t.Errorf("%s: %+v, %v; want a terminal error", k, res, err)
		}
	}
}

// failingRuntime's Apply fails with err.
type failingRuntime struct{ err error }

func (r failingRuntime) Fetch(context.Context, runtimes.Target) (runtimes.State, error) {
	return runtimes.State{}, nil
}

func (r failingRuntime) Apply(context.Context, runtimes.Target) (runtimes.ApplyResult, error) {
	return runtimes.ApplyResult{}, r.err
}

// TestApplyOutcomeAttempts: a failed apply counts as an attempt; a
// permanent error uses up the attempts; a runtime that cannot be reached
// now (an agent away) never makes the instance give up.
func TestApplyOutcomeAttempts(t *testing.T) {
	st := openStore(t)
	pushOneChannel(t, st, "ds-1")
	settings := DefaultSettings()
	limit := settings.MaxApplyAttempts
	for _, tc := range []struct {
		name          string
		err           error
		before, after int
	}{
		{"plain failure", errors.New("boom"), limit, limit},
		{"permanent", runtimes.Permanent(errors.New("bad config")), 1, limit},
		{"unavailable, first attempt", fmt.Errorf("agent away: %w", runtimes.ErrUnavailable), 1, 1},
		{"unavailable, later attempt", fmt.Errorf("agent away: %w", runtimes.ErrUnavailable), 3, 2},
		{"unavailable, last attempt", fmt.Errorf("agent away: %w", runtimes.ErrUnavailable), limit, limit - 1},
	} {
		x := NewLocalExecutor(st, oneRuntime{failingRuntime{tc.err}}, settings, nil, nil)
		out, err := x.Execute(t.Context(), "app", "svc", Action{Kind: ActionApply, ReleaseChannel: "prod", StateID: "ds-1", Version: "v1", Runtime: "rt"})
		if err != nil || !out.Failed || out.Change == nil {
			t.Fatalf("%s: outcome %+v, %v", tc.name, out, err)
		}
		inst := store.Instance{ApplyAttempts: tc.before}
		out.Change.Apply(&inst)
		if inst.ApplyAttempts != tc.after || inst.Reason != ds.ReasonApplyFailed {
			t.Errorf("%s: attempts %d -> %d (reason %s), want %d", tc.name, tc.before, inst.ApplyAttempts, inst.Reason, tc.after)
		}
	}
}
