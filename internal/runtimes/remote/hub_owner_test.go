package remote

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// clock is a test's clock: it moves only when told.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// ownerRig is a hub whose heartbeat never comes during a test and whose
// clock the test moves: whether an agent still answers is what the test
// says.
func ownerRig(t *testing.T) (*hubRig, *clock) {
	t.Helper()
	c := &clock{now: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)}
	r := newHubRig(t, func(cfg *HubConfig) {
		cfg.Now, cfg.Heartbeat, cfg.TakeoverAfter = c.Now, time.Hour, time.Minute
	})
	return r, c
}

// A second agent on the token of a runtime whose agent answers is refused,
// told which agent serves it and what to do; the first keeps serving, and
// the refusal is logged and reported.
func TestHubRefusesSecondAgent(t *testing.T) {
	t.Parallel()
	r, c := ownerRig(t)
	token := r.link("edge")
	first := r.goodAgent(token, "first")
	c.advance(30 * time.Second) // silent for less than TakeoverAfter
	_, err := r.dial(token, "second", nil)
	if !errors.Is(err, ErrInUse) {
		t.Fatalf("second agent: %v, want ErrInUse", err)
	}
	addr := first.LocalAddr().String()
	for _, want := range []string{"runtime edge is already served by an agent connected from " + addr + " since 2026-12-01T10:00:00Z",
		"version test, host good-host", "stop that agent first", "drover runtimes rotate-token edge"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q lacks %q", err, want)
		}
	}
	if first.IsClosed() {
		t.Fatal("the first agent was disconnected")
	}
	if _, err := r.runtimeOf("edge").Fetch(t.Context(), testTarget()); err != nil {
		t.Errorf("the first agent after the refusal: %v", err)
	}
	// Once more: counted.
	if _, err := r.dial(token, "second", nil); !errors.Is(err, ErrInUse) {
		t.Fatalf("second agent again: %v", err)
	}
	p := r.hub.Presence("edge")
	if !p.Connected || p.RemoteAddr != addr || !p.Since.Equal(c.Now().Add(-30*time.Second)) || p.Version != "test" || p.Host != "good-host" {
		t.Errorf("presence: %+v", p)
	}
	if a := p.Refused; !a.At.Equal(c.Now()) || a.RemoteAddr == "" || a.Version != "test" || a.Count != 2 || a.Holder != addr {
		t.Errorf("refused attempt: %+v", a)
	}
	if logs := r.logs.String(); !strings.Contains(logs, `msg="agent refused: another agent serves its runtime" runtime=edge`) ||
		!strings.Contains(logs, "holder_addr="+addr) {
		t.Errorf("the refusal is not logged:\n%s", logs)
	}
	c.advance(RefusalsShownFor)
	if a := r.hub.Presence("edge").Refused; !a.At.IsZero() {
		t.Errorf("a refusal of %v ago is still reported: %+v", RefusalsShownFor, a)
	}
}

// The agent serving a runtime that connects again (the same process)
// replaces its own connection.
func TestHubSameAgentReconnects(t *testing.T) {
	t.Parallel()
	r, _ := ownerRig(t)
	token := r.link("edge")
	old := r.goodAgent(token, "one")
	again := r.goodAgent(token, "one")
	waitClosed(t, old, "the agent's older connection")
	if again.IsClosed() {
		t.Fatal("the new connection was closed")
	}
	if p := r.hub.Presence("edge"); p.RemoteAddr != again.LocalAddr().String() || !p.Refused.At.IsZero() {
		t.Errorf("presence: %+v", p)
	}
}

// An agent that stopped answering loses its runtime to the next agent that
// connects.
func TestHubTakeoverFromSilentAgent(t *testing.T) {
	t.Parallel()
	r, c := ownerRig(t)
	token := r.link("edge")
	first := r.goodAgent(token, "first")
	c.advance(time.Minute + time.Second) // no answer for more than TakeoverAfter
	second := r.goodAgent(token, "second")
	waitClosed(t, first, "the silent agent")
	if p := r.hub.Presence("edge"); !p.Connected || p.RemoteAddr != second.LocalAddr().String() {
		t.Errorf("presence after the takeover: %+v", p)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(r.logs.String(), `reason="another agent took the runtime over: this one had not answered for 1m0s"`) {
		if time.Now().After(deadline) {
			t.Fatal("the silent agent's end is not logged with its reason")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if logs := r.logs.String(); !strings.Contains(logs, `msg="agent took over the runtime of an agent that stopped answering"`) {
		t.Errorf("the takeover is not logged:\n%s", logs)
	}
	if _, err := r.runtimeOf("edge").Fetch(t.Context(), testTarget()); err != nil {
		t.Errorf("the new agent: %v", err)
	}
}
