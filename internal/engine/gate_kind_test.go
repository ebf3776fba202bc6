package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	ds "github.com/drover-dev/drover/internal/desiredstate"
	"github.com/drover-dev/drover/internal/engine"
	"github.com/drover-dev/drover/internal/gates"
	"github.com/drover-dev/drover/internal/runtimes"
	"github.com/drover-dev/drover/internal/store"
	"github.com/drover-dev/drover/internal/store/sqlite"
)

// changeTicket is a toy gate kind, defined here and nowhere else: a
// deployment waits until its change ticket is approved.
const changeTicket = "changeTicket"

// ticketSpec is the toy kind's own spec.
type ticketSpec struct {
	Ticket string `json:"ticket"`
}

// ticketDesk is the toy kind's evaluator: it says yes to the tickets
// approved so far.
type ticketDesk struct {
	mu       sync.Mutex
	approved map[string]bool
	asked    []gates.Target
}

func (d *ticketDesk) approve(ticket string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.approved[ticket] = true
}

func (d *ticketDesk) Evaluate(_ context.Context, target gates.Target, raw json.RawMessage) (gates.Outcome, error) {
	var spec ticketSpec
	if err := gates.Decode(raw, &spec); err != nil {
		return gates.Outcome{}, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.asked = append(d.asked, target)
	if d.approved[spec.Ticket] {
		return gates.Outcome{Passed: true, Message: "ticket " + spec.Ticket + " approved"}, nil
	}
	return gates.Outcome{Message: "ticket " + spec.Ticket + " not approved yet"}, nil
}

func (d *ticketDesk) Describe(raw json.RawMessage) string {
	var spec ticketSpec
	if gates.Decode(raw, &spec) != nil {
		return ""
	}
	return "asks the desk about ticket " + spec.Ticket
}

// instantRuntime runs what it is given at once, under every runtime name,
// counting the applies.
type instantRuntime struct {
	mu      sync.Mutex
	running map[string]string // target -> version
	applies int
}

func (r *instantRuntime) Runtime(context.Context, string) (runtimes.Runtime, error) { return r, nil }

func (r *instantRuntime) Fetch(_ context.Context, t runtimes.Target) (runtimes.State, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	v := r.running[t.String()]
	return runtimes.State{Version: v, Converged: v != ""}, nil
}

func (r *instantRuntime) Apply(_ context.Context, t runtimes.Target) (runtimes.ApplyResult, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.running[t.String()] = t.Version
	r.applies++
	return runtimes.ApplyResult{}, nil
}

func (r *instantRuntime) applied() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.applies
}

// TestToyGateKindEndToEnd: a gate kind registered from outside the engine
// (its own spec type and evaluator, nothing else) gates a push through the
// real engine and store, on a runtime that runs what it is given: the channel is held, naming the
// evaluator's answer, while it says no, and converges once it says yes.
func TestToyGateKindEndToEnd(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "drover.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })

	desk := &ticketDesk{approved: map[string]bool{}}
	reg := &gates.Registry{}
	if err := reg.Register(changeTicket, desk); err != nil {
		t.Fatal(err)
	}

	// The push: one channel whose deployment is gated by the toy check
	// (under an id of its own: the engine caches desired states by id
	// across loops of a process).
	gate, err := ds.NewGate(changeTicket, ticketSpec{Ticket: "CHG-7"})
	if err != nil {
		t.Fatal(err)
	}
	chk := ds.Check{Kind: ds.CheckProtection, Name: "change", Lifecycle: ds.PhaseDeployment, FailureBehavior: ds.FailureBlock,
		Entity: ds.ID{Type: "PROTECTION_LINK", Name: "app/svc/prod/protection/drover/change/deployment"},
		Source: ds.SourceDrover, Attachment: "change", PollInterval: ds.Duration{Duration: 20 * time.Millisecond}, Gate: gate}
	compiled, err := ds.Encode(&ds.Compiled{Application: "app", Service: "svc", Version: "v1",
		Channels: []ds.Channel{{Name: "prod", Runtime: "rt", Backend: "kubernetes", Checks: []ds.Check{chk}}}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(compiled), `"changeTicket":{"ticket":"CHG-7"}`) {
		t.Fatalf("stored check does not carry the toy gate as its member: %s", compiled)
	}
	if err := st.CreateDesiredState(ctx, store.DesiredState{ID: "ds-toy-gate", Application: "app", Service: "svc", Version: "v1", Compiled: compiled}); err != nil {
		t.Fatal(err)
	}

	settings := engine.DefaultSettings()
	settings.PollInterval, settings.CheckInterval = 20*time.Millisecond, 20*time.Millisecond
	rt := &instantRuntime{running: map[string]string{}}
	loop := engine.NewLoop(engine.Config{Store: st, Runtimes: rt, Settings: settings, Gates: reg, Workers: 2, TaskPoll: 20 * time.Millisecond})
	lctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- loop.Run(lctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("loop: %v", err)
		}
	})
	loop.Enqueue("app", "svc")

	instance := func() store.Instance {
		inst, err := st.GetInstance(ctx, "app", "svc", "prod")
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			t.Fatal(err)
		}
		return inst
	}
	waitFor := func(what string, ok func(store.Instance) bool) store.Instance {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for {
			inst := instance()
			if ok(inst) {
				return inst
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: instance is %s (%s): %s; checks %+v", what, inst.Status, inst.Reason, inst.Message, inst.Checks)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	// Blocked while the desk says no: the check ran (more than once), its
	// answer is recorded and shown, and nothing was applied.
	held := waitFor("held by the toy gate", func(i store.Instance) bool {
		return i.Status == ds.StatusBlocked && slices.ContainsFunc(i.Checks, func(r store.CheckResult) bool { return !r.Passed && r.Runs >= 2 })
	})
	if held.CurrentVersion != "" || !held.AppliedAt.IsZero() || rt.applied() != 0 {
		t.Fatalf("applied past a failing gate: current %q, applied at %v, %d applies", held.CurrentVersion, held.AppliedAt, rt.applied())
	}
	if want := "blocked by change (deployment): ticket CHG-7 not approved yet"; held.Message != want {
		t.Fatalf("held with %q, want %q", held.Message, want)
	}
	ch := engine.Channel{Channel: mustDecode(t, compiled).Channels[0], Version: "v1", StateID: "ds-toy-gate"}
	reports := engine.CheckReports(ch, held, nil, nil, time.Now())
	if len(reports) != 1 || reports[0].State != engine.CheckFailing || reports[0].Message != "ticket CHG-7 not approved yet" {
		t.Fatalf("status of the toy check: %+v", reports)
	}
	if got := reg.Describe(*reports[0].Check.Gate); got != "asks the desk about ticket CHG-7" {
		t.Fatalf("describe: %q", got)
	}

	// Converged once it says yes.
	desk.approve("CHG-7")
	waitFor("converged once approved", func(i store.Instance) bool {
		return i.Status == ds.StatusConverged && i.CurrentVersion == "v1"
	})
	desk.mu.Lock()
	defer desk.mu.Unlock()
	if want := (gates.Target{Application: "app", Service: "svc", ReleaseChannel: "prod", DesiredStateID: "ds-toy-gate", Version: "v1"}); desk.asked[0] != want {
		t.Fatalf("evaluated for %+v, want %+v", desk.asked[0], want)
	}
}

func mustDecode(t *testing.T, raw []byte) *ds.Compiled {
	t.Helper()
	c, err := ds.Decode(raw)
	if err != nil {
		t.Fatal(fmt.Errorf("decode the pushed desired state: %w", err))
	}
	return c
}
