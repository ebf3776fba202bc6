package engine

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	ds "github.com/drover-dev/drover/internal/desiredstate"
	"github.com/drover-dev/drover/internal/runtimes"
	"github.com/drover-dev/drover/internal/store"
)

var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

// twoChannels is the quickstart shape: prod after staging and an approval.
func twoChannels(id, version string) *Desired {
	return &Desired{ID: id, Application: "app", Service: "web", Version: version, Channels: []Channel{
		{Channel: ds.Channel{Name: "staging", Runtime: "rs", AutoRollback: true}, Version: version, StateID: id},
		{Channel: ds.Channel{Name: "prod", Runtime: "rp", DependsOn: []string{"staging"}, Approvals: []Gate{{Topic: "prod", MinApprovers: 1}}, AutoRollback: true}, Version: version, StateID: id},
	}}
}

func running(version string, converged bool) Observation {
	return Observation{State: runtimes.State{Version: version, Converged: converged}}
}

// world is a tiny simulation for scenario tests: it keeps instances as the
// store would and applies plans.
type world struct {
	t         *testing.T
	now       time.Time
	desired   *Desired
	instances map[string]store.Instance
	observed  map[string]Observation
	approvals []store.Approval
	// running holds the task instances of open tasks (checks).
	running  map[string]bool
	freezes  []ds.Freeze
	settings Settings
}

func newWorld(t *testing.T, d *Desired) *world {
	return &world{t: t, now: t0, desired: d, instances: map[string]store.Instance{}, observed: map[string]Observation{}, settings: DefaultSettings()}
}

func (w *world) plan() Plan {
	p := PlanService(PlanInput{Now: w.now, Desired: w.desired, Instances: refs(w.instances), Observed: w.observed, Approvals: w.approvals, Running: w.running, Freezes: w.freezes, Settings: w.settings})
	for _, inst := range p.Instances {
		w.instances[inst.ReleaseChannel] = inst
	}
	return p
}

func (w *world) status(rc string) ds.Status { return w.instances[rc].Status }

func applied(p Plan) []string {
	var out []string
	for _, a := range p.Actions {
		out = append(out, a.ReleaseChannel+"="+a.Version)
	}
	return out
}

func TestPlanQuickstartFlow(t *testing.T) {
	t.Parallel()
	w := newWorld(t, twoChannels("ds1", "v1"))
	w.observed["staging"], w.observed["prod"] = Observation{}, Observation{}

	p := w.plan()
	if got := applied(p); !slices.Equal(got, []string{"staging=v1"}) {
		t.Fatalf("first pass applies %v, want staging only", got)
	}
	if w.status("prod") != ds.StatusWaitingPreconditions {
		t.Fatalf("prod is %s, want WAITING_PRECONDITIONS", w.status("prod"))
	}

	// Staging rolls out, then converges: prod now waits for approval only.
	w.observed["staging"] = running("v1", false)
	if p = w.plan(); len(p.Actions) != 0 || w.status("staging") != ds.StatusConverging {
		t.Fatalf("rolling out: applies %v, staging %s", applied(p), w.status("staging"))
	}
	w.observed["staging"] = running("v1", true)
	p = w.plan()
	if len(p.Actions) != 0 || w.status("staging") != ds.StatusConverged || w.status("prod") != ds.StatusWaitingManualApproval {
		t.Fatalf("after staging converged: applies %v, staging %s, prod %s", applied(p), w.status("staging"), w.status("prod"))
	}
	if w.instances["staging"].CurrentVersion != "v1" {
		t.Fatalf("staging current version %q", w.instances["staging"].CurrentVersion)
	}

	w.approvals = append(w.approvals, store.Approval{DesiredStateID: "ds1", ReleaseChannel: "prod", Topic: "prod", User: "ana"})
	if got := applied(w.plan()); !slices.Equal(got, []string{"prod=v1"}) {
		t.Fatalf("after approval applies %v", got)
	}
	w.observed["prod"] = running("v1", true)
	w.plan()
	if w.status("prod") != ds.StatusConverged {
		t.Fatalf("prod %s", w.status("prod"))
	}
	// Fixpoint: nothing left to do.
	if p := w.plan(); len(p.Actions) != 0 || len(p.Instances) != 0 || len(p.Events) != 0 {
		t.Fatalf("converged service still plans %+v", p)
	}
}

func TestPlanScenarios(t *testing.T) {
	t.Parallel()
	converged := func(rc, version string) store.Instance {
		return store.Instance{Application: "app", Service: "web", ReleaseChannel: rc, DesiredStateID: "ds1",
			TargetStateID: "ds1", TargetVersion: version, CurrentStateID: "ds1", CurrentVersion: version, Status: ds.StatusConverged, Revision: 1}
	}
	cases := []struct {
		name      string
		desired   *Desired
		instances []store.Instance
		observed  map[string]Observation
		approvals []store.Approval
		now       time.Time
		// want
		applies []string
		status  map[string]ds.Status
		reason  map[string]ds.Reason
	}{
		{
			name:      "drift after convergence is re-applied at once",
			desired:   twoChannels("ds1", "v1"),
			instances: []store.Instance{converged("staging", "v1")},
			observed:  map[string]Observation{"staging": running("", false)},
			applies:   []string{"staging=v1"},
			status:    map[string]ds.Status{"staging": ds.StatusConverging},
		},
		{
			name:      "rejection fails the channel and applies nothing",
			desired:   twoChannels("ds1", "v1"),
			instances: []store.Instance{converged("staging", "v1")},
			observed:  map[string]Observation{"staging": running("v1", true), "prod": {}},
			approvals: []store.Approval{{DesiredStateID: "ds1", ReleaseChannel: "prod", Topic: "prod", User: "bo", Reject: true, Comment: "not today"}},
			status:    map[string]ds.Status{"prod": ds.StatusFailed},
			reason:    map[string]ds.Reason{"prod": ds.ReasonManualApprovalRejected},
		},
		{
			name:    "approval of an older desired state does not count",
			desired: twoChannels("ds2", "v2"),
			instances: []store.Instance{func() store.Instance {
				i := converged("staging", "v2")
				i.DesiredStateID, i.TargetStateID, i.CurrentStateID = "ds2", "ds2", "ds2"
				return i
			}()},
			observed:  map[string]Observation{"staging": running("v2", true), "prod": {}},
			approvals: []store.Approval{{DesiredStateID: "ds1", ReleaseChannel: "prod", Topic: "prod", User: "ana"}},
			status:    map[string]ds.Status{"prod": ds.StatusWaitingManualApproval},
		},
		{
			name:      "two approvers needed, one given",
			desired:   func() *Desired { d := twoChannels("ds1", "v1"); d.Channels[1].Approvals[0].MinApprovers = 2; return d }(),
			instances: []store.Instance{converged("staging", "v1")},
			observed:  map[string]Observation{"staging": running("v1", true), "prod": {}},
			approvals: []store.Approval{
				{DesiredStateID: "ds1", ReleaseChannel: "prod", Topic: "prod", User: "ana"},
				{DesiredStateID: "ds1", ReleaseChannel: "prod", Topic: "prod", User: "ana"},
			},
			status: map[string]ds.Status{"prod": ds.StatusWaitingManualApproval},
		},
		{
			name:    "failed rollout rolls back to the last converged version",
			desired: twoChannels("ds2", "v2"),
			instances: []store.Instance{func() store.Instance {
				i := converged("staging", "v1")
				i.DesiredStateID, i.TargetStateID, i.TargetVersion, i.Status, i.ApplyAttempts, i.LastApplyAt = "ds2", "ds2", "v2", "CONVERGING", 1, t0
				return i
			}()},
			observed: map[string]Observation{"staging": {State: runtimes.State{Version: "v2", Failed: true, Message: "crash loop"}}},
			now:      t0.Add(time.Minute),
			applies:  []string{"staging=v1"},
			status:   map[string]ds.Status{"staging": ds.StatusRollingBack},
		},
		{
			name:    "no auto rollback when disabled",
			desired: func() *Desired { d := twoChannels("ds2", "v2"); d.Channels[0].AutoRollback = false; return d }(),
			instances: []store.Instance{func() store.Instance {
				i := converged("staging", "v1")
				i.DesiredStateID, i.TargetStateID, i.TargetVersion, i.Status, i.ApplyAttempts, i.LastApplyAt = "ds2", "ds2", "v2", "CONVERGING", 1, t0
				return i
			}()},
			observed: map[string]Observation{"staging": {State: runtimes.State{Version: "v2", Failed: true}}},
			now:      t0.Add(time.Minute),
			status:   map[string]ds.Status{"staging": ds.StatusFailed},
			reason:   map[string]ds.Reason{"staging": ds.ReasonRuntimeObjectFailed},
		},
		{
			name:      "progress deadline fails a stuck rollout",
			desired:   twoChannels("ds1", "v1"),
			instances: []store.Instance{{Application: "app", Service: "web", ReleaseChannel: "staging", DesiredStateID: "ds1", TargetStateID: "ds1", TargetVersion: "v1", Status: "CONVERGING", ApplyAttempts: 1, LastApplyAt: t0}},
			observed:  map[string]Observation{"staging": running("v1", false)},
			now:       t0.Add(11 * time.Minute),
			status:    map[string]ds.Status{"staging": ds.StatusFailed},
			reason:    map[string]ds.Reason{"staging": ds.ReasonProgressDeadlineExceeded},
		},
		{
			name:      "paused channel is not applied",
			desired:   twoChannels("ds1", "v1"),
			instances: []store.Instance{{Application: "app", Service: "web", ReleaseChannel: "staging", Paused: true, Status: "PAUSED"}},
			observed:  map[string]Observation{"staging": {}},
			status:    map[string]ds.Status{"staging": ds.StatusPaused},
		},
		{
			name:      "apply failure backs off, then retries",
			desired:   twoChannels("ds1", "v1"),
			instances: []store.Instance{{Application: "app", Service: "web", ReleaseChannel: "staging", DesiredStateID: "ds1", TargetStateID: "ds1", TargetVersion: "v1", Status: "CONVERGING", Reason: ds.ReasonApplyFailed, ApplyAttempts: 2, LastApplyAt: t0}},
			observed:  map[string]Observation{"staging": {}},
			now:       t0.Add(3 * time.Second),
			applies:   []string{"staging=v1"},
		},
		{
			name:      "apply failure within backoff waits",
			desired:   twoChannels("ds1", "v1"),
			instances: []store.Instance{{Application: "app", Service: "web", ReleaseChannel: "staging", DesiredStateID: "ds1", TargetStateID: "ds1", TargetVersion: "v1", Status: "CONVERGING", Reason: ds.ReasonApplyFailed, Message: "boom", ApplyAttempts: 2, LastApplyAt: t0}},
			observed:  map[string]Observation{"staging": {}},
			now:       t0.Add(time.Second),
		},
		{
			name:      "attempts exhausted fail the channel",
			desired:   twoChannels("ds1", "v1"),
			instances: []store.Instance{{Application: "app", Service: "web", ReleaseChannel: "staging", DesiredStateID: "ds1", TargetStateID: "ds1", TargetVersion: "v1", Status: "CONVERGING", Reason: ds.ReasonApplyFailed, ApplyAttempts: 5, LastApplyAt: t0}},
			observed:  map[string]Observation{"staging": {}},
			now:       t0.Add(time.Hour),
			status:    map[string]ds.Status{"staging": ds.StatusFailed},
			reason:    map[string]ds.Reason{"staging": ds.ReasonApplyFailed},
		},
		{
			name:      "fetch error keeps status and explains",
			desired:   twoChannels("ds1", "v1"),
			instances: []store.Instance{converged("staging", "v1")},
			observed:  map[string]Observation{"staging": {Err: "connection refused"}},
			status:    map[string]ds.Status{"staging": ds.StatusConverged},
			reason:    map[string]ds.Reason{"staging": ds.ReasonFetchFailed},
		},
		{
			name:    "new push replaces: prod keeps running v1 until staging runs v2",
			desired: twoChannels("ds2", "v2"),
			instances: []store.Instance{
				converged("staging", "v1"), converged("prod", "v1"),
			},
			observed: map[string]Observation{"staging": running("v1", true), "prod": running("v1", true)},
			applies:  []string{"staging=v2"},
			status:   map[string]ds.Status{"prod": ds.StatusWaitingPreconditions},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, tc.desired)
			for _, inst := range tc.instances {
				w.instances[inst.ReleaseChannel] = inst
			}
			w.observed, w.approvals = tc.observed, tc.approvals
			if !tc.now.IsZero() {
				w.now = tc.now
			}
			p := w.plan()
			if got := applied(p); !slices.Equal(got, tc.applies) {
				t.Errorf("applies %v, want %v", got, tc.applies)
			}
			for rc, want := range tc.status {
				if got := w.status(rc); got != want {
					t.Errorf("%s status %s, want %s (%s)", rc, got, want, w.instances[rc].Message)
				}
			}
			for rc, want := range tc.reason {
				if got := w.instances[rc].Reason; got != want {
					t.Errorf("%s reason %s, want %s (%s)", rc, got, want, w.instances[rc].Message)
				}
			}
			for _, inst := range p.Instances {
				if inst.Message == "" && inst.Status != ds.StatusPending {
					t.Errorf("%s is %s with no explanation", inst.ReleaseChannel, inst.Status)
				}
			}
		})
	}
}

// randomInput builds a random but well-formed planner input over a chain of
// channels c0 <- c1 <- c2 (each after the previous one, some with approvals).
func randomInput(r *rand.Rand) PlanInput {
	versions := []string{"v1", "v2", "v3"}
	id := fmt.Sprintf("ds%d", r.IntN(3))
	version := versions[r.IntN(3)]
	d := &Desired{ID: id, Application: "a", Service: "s", Version: version}
	n := 1 + r.IntN(3)
	for i := range n {
		ch := Channel{Channel: ds.Channel{Name: fmt.Sprintf("c%d", i), Runtime: "r", AutoRollback: r.IntN(2) == 0}, Version: version, StateID: id}
		if i > 0 {
			ch.DependsOn = []string{fmt.Sprintf("c%d", i-1)}
		}
		if r.IntN(2) == 0 {
			ch.Approvals = []Gate{{Topic: ch.Name, MinApprovers: 1 + r.IntN(2)}}
		}
		d.Channels = append(d.Channels, ch)
	}
	statuses := []ds.Status{ds.StatusPending, ds.StatusConverging, ds.StatusConverged, ds.StatusFailed, ds.StatusWaitingPreconditions, ds.StatusWaitingManualApproval, ds.StatusRollingBack, ds.StatusRolledBack}
	in := PlanInput{Now: t0.Add(time.Duration(r.IntN(3600)) * time.Second), Desired: d, Instances: map[string]*store.Instance{}, Observed: map[string]Observation{}, Settings: DefaultSettings()}
	for _, ch := range d.Channels {
		if r.IntN(4) > 0 {
			inst := store.Instance{Application: "a", Service: "s", ReleaseChannel: ch.Name, DesiredStateID: fmt.Sprintf("ds%d", r.IntN(3)),
				Status: statuses[r.IntN(len(statuses))], ApplyAttempts: r.IntN(6), LastApplyAt: t0, Paused: r.IntN(8) == 0}
			if r.IntN(2) == 0 {
				inst.CurrentVersion, inst.CurrentStateID = versions[r.IntN(3)], fmt.Sprintf("ds%d", r.IntN(3))
			}
			if r.IntN(2) == 0 {
				inst.TargetVersion, inst.TargetStateID = versions[r.IntN(3)], fmt.Sprintf("ds%d", r.IntN(3))
			}
			if r.IntN(3) == 0 {
				// Conditions met earlier, for some version.
				inst.Satisfied = []string{fmt.Sprintf("c%d@%s", r.IntN(3), versions[r.IntN(3)])}
			}
			in.Instances[ch.Name] = &inst
		}
		if r.IntN(5) > 0 {
			in.Observed[ch.Name] = Observation{State: runtimes.State{Version: []string{"", "v1", "v2", "v3"}[r.IntN(4)], Converged: r.IntN(2) == 0, Failed: r.IntN(6) == 0, Drifted: r.IntN(6) == 0}}
		}
		for range r.IntN(3) {
			in.Approvals = append(in.Approvals, store.Approval{DesiredStateID: fmt.Sprintf("ds%d", r.IntN(3)), ReleaseChannel: ch.Name, Topic: ch.Name, User: []string{"ana", "bo", "cy"}[r.IntN(3)]})
		}
	}
	return in
}

// refs is m as PlanInput takes it (pointers to copies).
func refs(m map[string]store.Instance) map[string]*store.Instance {
	out := make(map[string]*store.Instance, len(m))
	for k, v := range m {
		out[k] = &v
	}
	return out
}

// valueOf is *inst, or the zero instance for nil.
func valueOf(inst *store.Instance) store.Instance {
	if inst == nil {
		return store.Instance{}
	}
	return *inst
}

// TestPropertyNoVersionBeforePreconditions: whenever the planner applies the
// desired version to a channel that was not already targeting it, every
// channel it depends on runs that version converged and its approvals are in.
func TestPropertyNoVersionBeforePreconditions(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 20000 {
		in := randomInput(r)
		before := make(map[string]store.Instance, len(in.Instances))
		for k, v := range in.Instances {
			before[k] = *v
		}
		p := PlanService(in)
		for k, v := range in.Instances {
			// The planner reads the stored instances; its changes go to the plan.
			if !reflect.DeepEqual(*v, before[k]) {
				t.Fatalf("case %d: the planner changed its input instance %s:\nbefore %+v\nafter  %+v", i, k, before[k], *v)
			}
		}
		for _, a := range p.Actions {
			var ch Channel
			for _, c := range in.Desired.Channels {
				if c.Name == a.ReleaseChannel {
					ch = c
				}
			}
			old := valueOf(in.Instances[ch.Name])
			if a.Version != ch.Version || a.Rollback || (old.TargetVersion == ch.Version && old.TargetStateID == ch.StateID) {
				continue // re-applying its existing target, or rolling back
			}
			for _, dep := range ch.DependsOn {
				di := valueOf(in.Instances[dep])
				metBefore := slices.Contains(old.Satisfied, dep+"@"+ch.Version)
				if (di.Status != ds.StatusConverged || di.CurrentVersion != ch.Version) && !dependencyConvergedInPlan(p, dep, ch.Version) && !metBefore {
					t.Fatalf("case %d: %s received %s while %s is %s at %q\ninput: %+v", i, ch.Name, ch.Version, dep, di.Status, di.CurrentVersion, in)
				}
			}
			for _, g := range ch.Approvals {
				users := map[string]bool{}
				for _, ap := range in.Approvals {
					if ap.DesiredStateID == in.Desired.ID && ap.ReleaseChannel == ch.Name && ap.Topic == g.Topic && !ap.Reject {
						users[ap.User] = true
					}
				}
				if len(users) < g.MinApprovers {
					t.Fatalf("case %d: %s received %s with %d/%d approvals", i, ch.Name, ch.Version, len(users), g.MinApprovers)
				}
			}
			if old.Paused {
				t.Fatalf("case %d: paused channel %s was applied", i, ch.Name)
			}
		}
	}
}

// dependencyConvergedInPlan reports whether the plan itself records dep as
// converged at version (a dependency that converged in the same pass).
func dependencyConvergedInPlan(p Plan, dep, version string) bool {
	for _, inst := range p.Instances {
		if inst.ReleaseChannel == dep && inst.Status == ds.StatusConverged && inst.CurrentVersion == version {
			return true
		}
	}
	return false
}

// TestPropertyReplanAfterEffects: after the plan's writes are stored and its
// applies have started (the runtime shows the applied version rolling out),
// planning again issues no apply; and once nothing changes, planning reaches
// a fixpoint.
func TestPropertyReplanAfterEffects(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 4))
	for i := range 20000 {
		in := randomInput(r)
		p := PlanService(in)
		if len(p.Actions) == 0 {
			continue
		}
		next := in
		next.Instances = map[string]*store.Instance{}
		for k, v := range in.Instances {
			next.Instances[k] = v
		}
		for _, inst := range p.Instances {
			next.Instances[inst.ReleaseChannel] = &inst
		}
		next.Observed = map[string]Observation{}
		for k, v := range in.Observed {
			next.Observed[k] = v
		}
		for _, a := range p.Actions {
			next.Observed[a.ReleaseChannel] = Observation{State: runtimes.State{Version: a.Version}}
		}
		p2 := PlanService(next)
		if len(p2.Actions) != 0 {
			t.Fatalf("case %d: re-planning after the effects applies again: first %+v then %+v\ninput %+v", i, p.Actions, p2.Actions, in)
		}
		for _, inst := range p2.Instances {
			next.Instances[inst.ReleaseChannel] = &inst
		}
		if p3 := PlanService(next); len(p3.Actions) != 0 || len(p3.Instances) != 0 {
			t.Fatalf("case %d: no fixpoint: %+v", i, p3)
		}
	}
}

// TestPlanRepushWaitsForStagingAgain is the regression for a new version
// reaching prod while staging was still rolling it out: a condition met for
// v1 must not count for v2.
func TestPlanRepushWaitsForStagingAgain(t *testing.T) {
	t.Parallel()
	w := newWorld(t, twoChannels("ds1", "v1"))
	w.observed["staging"], w.observed["prod"] = running("v1", true), running("v1", true)
	w.approvals = []store.Approval{{DesiredStateID: "ds1", ReleaseChannel: "prod", Topic: "prod", User: "ana"}}
	for range 4 {
		w.plan()
	}
	if w.status("prod") != ds.StatusConverged {
		t.Fatalf("setup: prod %s", w.status("prod"))
	}
	w.desired = twoChannels("ds2", "v2")
	w.approvals = append(w.approvals, store.Approval{DesiredStateID: "ds2", ReleaseChannel: "prod", Topic: "prod", User: "ana"})
	p := w.plan()
	if got := applied(p); !slices.Equal(got, []string{"staging=v2"}) {
		t.Fatalf("applies %v, want staging only", got)
	}
	w.observed["staging"] = running("v2", false)
	if p := w.plan(); len(p.Actions) != 0 || w.status("prod") != ds.StatusWaitingPreconditions {
		t.Fatalf("while staging rolls out v2: applies %v, prod %s", applied(p), w.status("prod"))
	}
	w.observed["staging"] = running("v2", true)
	if got := applied(w.plan()); !slices.Equal(got, []string{"prod=v2"}) {
		t.Fatalf("after staging converged v2: applies %v", got)
	}
}

// TestPlanEveryActionNeedsApprovalPerDrift: with everyAction, drift is not
// healed until someone approves that apply, and the next drift needs a new
// approval.
func TestPlanEveryActionNeedsApprovalPerDrift(t *testing.T) {
	t.Parallel()
	d := twoChannels("ds1", "v1")
	d.Channels[0].EveryAction = true
	w := newWorld(t, d)
	w.instances["staging"] = store.Instance{Application: "app", Service: "web", ReleaseChannel: "staging", DesiredStateID: "ds1",
		TargetStateID: "ds1", TargetVersion: "v1", CurrentStateID: "ds1", CurrentVersion: "v1", Status: ds.StatusConverged}
	w.observed["staging"] = Observation{State: runtimes.State{Version: "v1", Drifted: true, Message: "fetch reports drift"}}
	for range 2 {
		if p := w.plan(); len(p.Actions) != 0 {
			t.Fatalf("drift applied without approval: %v", applied(p))
		}
	}
	if w.status("staging") != ds.StatusWaitingManualApproval {
		t.Fatalf("staging %s", w.status("staging"))
	}
	w.approvals = append(w.approvals, store.Approval{DesiredStateID: "ds1", ReleaseChannel: "staging", Topic: ActionTopic("staging", 1), User: "ana"})
	if got := applied(w.plan()); !slices.Equal(got, []string{"staging=v1"}) {
		t.Fatalf("after approval applies %v", got)
	}
	w.observed["staging"] = running("v1", true)
	w.plan()
	if w.status("staging") != ds.StatusConverged {
		t.Fatalf("staging %s: %s", w.status("staging"), w.instances["staging"].Message)
	}
	// A second drift needs a second approval: the first one was used.
	w.observed["staging"] = Observation{State: runtimes.State{Version: "v1", Drifted: true}}
	if p := w.plan(); len(p.Actions) != 0 || w.status("staging") != ds.StatusWaitingManualApproval {
		t.Fatalf("second drift: applies %v, staging %s", applied(p), w.status("staging"))
	}
}

// TestPlanHoldsUnenforcedGates: a protection or extension the engine cannot
// evaluate yet holds the channel instead of being passed silently.
func TestPlanHoldsUnenforcedGates(t *testing.T) {
	t.Parallel()
	d := twoChannels("ds1", "v1")
	d.Channels[0].Checks = []ds.Check{{Kind: ds.CheckProtection, Name: "window", Lifecycle: "preApproval"}}
	w := newWorld(t, d)
	w.observed["staging"], w.observed["prod"] = Observation{}, Observation{}
	if p := w.plan(); len(p.Actions) != 0 {
		t.Fatalf("applied past an unenforced protection: %v", applied(p))
	}
	if w.status("staging") != ds.StatusWaitingPreconditions || !strings.Contains(w.instances["staging"].Message, "not supported yet") {
		t.Fatalf("staging %s: %s", w.status("staging"), w.instances["staging"].Message)
	}
}

// TestPlanReviewRegressions covers rules added after review: no target move
// while an apply runs; resume keeps a converged channel converged (so drift
// found after it still needs its everyAction approval); a rejected heal
// asks again under a new topic.
func TestPlanReviewRegressions(t *testing.T) {
	t.Parallel()
	t.Run("no target move while applying", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, twoChannels("ds2", "v2"))
		w.instances["staging"] = store.Instance{Application: "app", Service: "web", ReleaseChannel: "staging", DesiredStateID: "ds2",
			TargetStateID: "ds1", TargetVersion: "v1", Status: ds.StatusConverging, ApplyAttempts: 1, LastApplyAt: t0}
		w.observed["staging"] = Observation{Applying: true}
		if p := w.plan(); len(p.Actions) != 0 || w.instances["staging"].TargetVersion != "v1" {
			t.Fatalf("moved the target during an apply: %v, target %s", applied(p), w.instances["staging"].TargetVersion)
		}
	})
	t.Run("resume keeps converged", func(t *testing.T) {
		t.Parallel()
		inst := store.Instance{ReleaseChannel: "staging", TargetStateID: "ds1", TargetVersion: "v1", CurrentStateID: "ds1", CurrentVersion: "v1", Status: ds.StatusConverged}
		paused, _, _ := Pause(inst, "ana", t0)
		resumed, _, _ := Resume(paused, "ana", t0)
		if resumed.Status != ds.StatusConverged {
			t.Fatalf("resumed as %s", resumed.Status)
		}
	})
	t.Run("rejected heal asks again", func(t *testing.T) {
		t.Parallel()
		d := twoChannels("ds1", "v1")
		d.Channels[0].EveryAction = true
		w := newWorld(t, d)
		w.instances["staging"] = store.Instance{Application: "app", Service: "web", ReleaseChannel: "staging", DesiredStateID: "ds1",
			TargetStateID: "ds1", TargetVersion: "v1", CurrentStateID: "ds1", CurrentVersion: "v1", Status: ds.StatusConverged}
		w.observed["staging"] = Observation{State: runtimes.State{Version: "v1", Drifted: true}}
		w.plan()
		w.approvals = []store.Approval{{DesiredStateID: "ds1", ReleaseChannel: "staging", Topic: ActionTopic("staging", 1), User: "bo", Reject: true}}
		if p := w.plan(); len(p.Actions) != 0 {
			t.Fatalf("applied a rejected heal: %v", applied(p))
		}
		w.approvals = append(w.approvals, store.Approval{DesiredStateID: "ds1", ReleaseChannel: "staging", Topic: ActionTopic("staging", 2), User: "ana"})
		if got := applied(w.plan()); !slices.Equal(got, []string{"staging=v1"}) {
			t.Fatalf("approval of the new topic applies %v", got)
		}
	})
}

// TestPlanChainWaitersStayPut checks that a channel waiting on a channel
// that waits itself does not quote its message: messages stay short, and
// progress at the head of a chain rewrites the next channel only.
func TestPlanChainWaitersStayPut(t *testing.T) {
	t.Parallel()
	names := []string{"c1", "c2", "c3", "c4", "c5"}
	d := &Desired{ID: "ds1", Application: "app", Service: "web", Version: "v1"}
	for i, n := range names {
		ch := Channel{Channel: ds.Channel{Name: n, Runtime: "r"}, Version: "v1", StateID: "ds1"}
		if i > 0 {
			ch.DependsOn = []string{names[i-1]}
		}
		d.Channels = append(d.Channels, ch)
	}
	w := newWorld(t, d)
	for _, n := range names {
		w.observed[n] = Observation{}
	}
	if got := applied(w.plan()); !slices.Equal(got, []string{"c1=v1"}) {
		t.Fatalf("first pass applies %v, want c1 only", got)
	}
	for _, n := range names[2:] {
		if msg := w.instances[n].Message; strings.Contains(msg, "c1") {
			t.Errorf("%s quotes the head of the chain: %q", n, msg)
		}
	}
	// c1 rolls out with changing progress: only c1 changes; c2 waits with
	// the same message all along.
	c2 := w.instances["c2"].Message
	if want := "waiting for c1 to run v1 converged: c1 (not converged yet)"; c2 != want {
		t.Errorf("c2 says %q, want %q", c2, want)
	}
	for i := range 3 {
		w.now = w.now.Add(time.Second)
		w.observed["c1"] = Observation{State: runtimes.State{Version: "v1", Message: fmt.Sprintf("%d/3 ready", i)}}
		p := w.plan()
		for _, inst := range p.Instances {
			if inst.ReleaseChannel != "c1" {
				t.Errorf("progress %d of c1 rewrote %s: %q", i, inst.ReleaseChannel, inst.Message)
			}
		}
	}
	// Stuck is another matter: c2 says why c1 will not get there alone.
	c1 := w.instances["c1"]
	c1.Paused = true
	w.instances["c1"] = c1
	w.plan()
	if msg := w.instances["c2"].Message; !strings.Contains(msg, "c1 (PAUSED: paused; resume with drover resume)") {
		t.Errorf("c2 does not say c1 is paused: %q", msg)
	}
}

// TestPlanRuntimeGraces: a runtime's convergence grace (Desired.Graces)
// bounds how long an applied channel that sets none waits for the runtime
// to report its version before applying again; a channel's own grace wins.
func TestPlanRuntimeGraces(t *testing.T) {
	t.Parallel()
	plan := func(own time.Duration, graces []time.Duration) Plan {
		d := twoChannels("ds1", "v1")
		d.Channels[0].ConvergenceGrace.Duration = own
		d.Graces = graces
		w := newWorld(t, d)
		w.now = t0.Add(30 * time.Second)
		w.instances["staging"] = store.Instance{Application: "app", Service: "web", ReleaseChannel: "staging", DesiredStateID: "ds1",
			TargetStateID: "ds1", TargetVersion: "v1", Status: ds.StatusConverging, ApplyAttempts: 1, LastApplyAt: t0, AppliedAt: t0}
		w.observed["staging"] = running("v0", true)
		return w.plan()
	}
	if p := plan(0, nil); len(p.Actions) != 0 {
		t.Errorf("applied again within the default grace: %v", applied(p))
	}
	if p := plan(0, []time.Duration{20 * time.Second, 0}); len(applied(p)) != 1 || applied(p)[0] != "staging=v1" {
		t.Errorf("after the runtime's 20s grace: applied %v, want staging=v1", applied(p))
	}
	if p := plan(time.Hour, []time.Duration{20 * time.Second, 0}); len(p.Actions) != 0 {
		t.Errorf("the runtime's grace overrode the channel's own: applied %v", applied(p))
	}
}

// TestIsMet: comparing in place says what comparing with the joined
// "dep@version" says, including names that contain '@' or run into each
// other.
func TestIsMet(t *testing.T) {
	t.Parallel()
	entries := []string{"", "@", "rc-1@v1", "rc-10@v1", "rc-1@v10", "rc-1@v", "a@b@c", "rc-1v1", "rc-1@@v1"}
	deps := []string{"", "rc-1", "rc-10", "a", "a@b", "rc-1@"}
	versions := []string{"", "v1", "v10", "b@c", "c", "@v1"}
	for _, x := range entries {
		for _, dep := range deps {
			for _, v := range versions {
				if got, want := isMet(x, dep, v), x == dep+"@"+v; got != want {
					t.Errorf("isMet(%q, %q, %q) = %v, want %v", x, dep, v, got, want)
				}
			}
		}
	}
}
