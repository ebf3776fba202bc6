package engine

import (
	"slices"
	"strings"
	"testing"
	"time"

	ds "github.com/drover-dev/drover/internal/desiredstate"
	"github.com/drover-dev/drover/internal/store"
)

// berlinWorkdays is an allowedTimes window: Monday to Friday, 9:00-17:59
// in Berlin (t0 is a Sunday, 11:00 in Berlin).
var berlinWorkdays = &ds.Builtin{AllowedTimes: []ds.Window{{Days: []int{1, 2, 3, 4, 5}, Hours: []int{9, 10, 11, 12, 13, 14, 15, 16, 17}, TZ: "Europe/Berlin", Text: "mon-fri hours 9-17 Europe/Berlin"}}}

// oneChannel is a service with one release channel, prod, gated by checks.
func oneChannel(checks ...ds.Check) *Desired {
	for i := range checks {
		checks[i].Kind = ds.CheckProtection
		checks[i].Entity = ds.ID{Type: ds.TypeProtectionLink, Name: "prod/protection/" + checks[i].Name + "/" + checks[i].Lifecycle}
	}
	return &Desired{ID: "ds1", Application: "app", Service: "web", Version: "v1", Channels: []Channel{
		{Channel: ds.Channel{Name: "prod", Runtime: "rp", AutoRollback: true, Checks: checks}, Version: "v1", StateID: "ds1"},
	}}
}

func TestPlanBuiltinChecks(t *testing.T) {
	t.Parallel()
	monday9 := time.Date(2026, 11, 23, 8, 0, 0, 0, time.UTC) // 9:00 in Berlin
	t.Run("alwaysFailing blocks, with its message", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, oneChannel(ds.Check{Name: "nope", Lifecycle: ds.PhasePreApproval, Builtin: &ds.Builtin{AlwaysFailing: true, Message: "migration pending"}}))
		p := w.plan()
		inst := w.instances["prod"]
		if len(p.Actions) != 0 || inst.Status != ds.StatusBlocked || inst.Reason != ds.ReasonLifecycleCheckFailed ||
			inst.Message != "blocked by protection nope (preApproval): migration pending" {
			t.Fatalf("applies %v; prod %s %s: %s", applied(p), inst.Status, inst.Reason, inst.Message)
		}
		if p.RequeueAfter != 0 {
			t.Errorf("requeue after %v: nothing but a new push changes an always failing check", p.RequeueAfter)
		}
	})
	for _, phase := range []string{ds.PhasePreApproval, ds.PhasePostApproval, ds.PhaseDeployment} {
		t.Run("a window holds "+phase+" until it opens", func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, oneChannel(ds.Check{Name: "hours", Lifecycle: phase, Builtin: berlinWorkdays}))
			w.observed["prod"] = Observation{}
			p := w.plan()
			inst := w.instances["prod"]
			if len(p.Actions) != 0 || inst.Status != ds.StatusBlocked || !strings.Contains(inst.Message, "outside the allowed times (mon-fri hours 9-17 Europe/Berlin) until 2026-11-23T08:00:00Z (Mon 09:00 CET)") {
				t.Fatalf("applies %v; prod %s: %s", applied(p), inst.Status, inst.Message)
			}
			if want := monday9.Sub(t0); p.RequeueAfter != want {
				t.Errorf("requeue after %v, want %v: when the window opens", p.RequeueAfter, want)
			}
			w.now = monday9
			if p := w.plan(); !slices.Equal(applied(p), []string{"prod=v1"}) {
				t.Fatalf("window open: applies %v; prod %s: %s", applied(p), w.status("prod"), w.instances["prod"].Message)
			}
		})
	}
	t.Run("preApproval passes once, before the approval", func(t *testing.T) {
		t.Parallel()
		d := oneChannel(ds.Check{Name: "hours", Lifecycle: ds.PhasePreApproval, Builtin: berlinWorkdays})
		d.Channels[0].Approvals = []Gate{{Topic: "prod", MinApprovers: 1}}
		w := newWorld(t, d)
		w.now = monday9.Add(8*time.Hour + 30*time.Minute) // 17:30 in Berlin
		w.observed["prod"] = Observation{}
		if p := w.plan(); len(p.Actions) != 0 || w.status("prod") != ds.StatusWaitingManualApproval {
			t.Fatalf("inside the window: applies %v, prod %s: %s", applied(p), w.status("prod"), w.instances["prod"].Message)
		}
		// Approved after the window closed: the check passed in its phase.
		w.now = monday9.Add(12 * time.Hour)
		w.approvals = []store.Approval{{DesiredStateID: "ds1", ReleaseChannel: "prod", Topic: "prod", User: "ana"}}
		if p := w.plan(); !slices.Equal(applied(p), []string{"prod=v1"}) {
			t.Fatalf("approved: applies %v, prod %s: %s", applied(p), w.status("prod"), w.instances["prod"].Message)
		}
	})
	t.Run("deployment FAIL fails the rollout when the window closes", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, oneChannel(ds.Check{Name: "hours", Lifecycle: ds.PhaseDeployment, FailureBehavior: ds.FailureFail, Builtin: berlinWorkdays}))
		w.now = monday9.Add(8*time.Hour + 59*time.Minute) // 17:59 in Berlin
		w.observed["prod"] = Observation{}
		if p := w.plan(); !slices.Equal(applied(p), []string{"prod=v1"}) {
			t.Fatalf("applies %v", applied(p))
		}
		w.observed["prod"] = running("v1", false)
		p := w.plan()
		if w.status("prod") != ds.StatusConverging || p.RequeueAfter > time.Minute {
			t.Fatalf("rolling out: prod %s, requeue after %v (want at most the minute left in the window)", w.status("prod"), p.RequeueAfter)
		}
		w.now = w.now.Add(time.Minute)
		w.plan()
		inst := w.instances["prod"]
		if inst.Status != ds.StatusFailed || inst.Reason != ds.ReasonLifecycleCheckFailed || !strings.Contains(inst.Message, "failed during the deployment: outside the allowed times") {
			t.Fatalf("window closed: prod %s %s: %s", inst.Status, inst.Reason, inst.Message)
		}
	})
	t.Run("deployment BLOCK never fails a rollout under way", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, oneChannel(ds.Check{Name: "hours", Lifecycle: ds.PhaseDeployment, FailureBehavior: ds.FailureBlock, Builtin: berlinWorkdays}))
		w.now = monday9.Add(8*time.Hour + 59*time.Minute)
		w.observed["prod"] = Observation{}
		w.plan()
		w.observed["prod"] = running("v1", false)
		w.now = w.now.Add(5 * time.Minute) // the window closed
		w.plan()
		w.observed["prod"] = running("v1", true)
		w.plan()
		if w.status("prod") != ds.StatusConverged {
			t.Fatalf("prod %s: %s", w.status("prod"), w.instances["prod"].Message)
		}
	})
	t.Run("a check drover cannot evaluate is held", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, oneChannel(ds.Check{Name: "migrations", Lifecycle: ds.PhasePreApproval}))
		if p := w.plan(); len(p.Actions) != 0 || w.status("prod") != ds.StatusWaitingPreconditions ||
			!strings.Contains(w.instances["prod"].Message, "protection migrations (preApproval) yet (not supported yet)") {
			t.Fatalf("applies %v; prod %s: %s", applied(p), w.status("prod"), w.instances["prod"].Message)
		}
	})
	t.Run("postDeployment holds CONVERGING for its delay and duration", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, oneChannel(ds.Check{Name: "soak", Lifecycle: ds.PhasePostDeployment, Builtin: &ds.Builtin{AlwaysPassing: true},
			DelayCheck: ds.Duration{Duration: 30 * time.Second}, CheckFor: ds.Duration{Duration: 5 * time.Minute}}))
		w.observed["prod"] = Observation{}
		w.plan()
		w.observed["prod"] = running("v1", true)
		p := w.plan()
		inst := w.instances["prod"]
		if inst.Status != ds.StatusConverging || inst.Reason != ds.ReasonLifecycleCheckPending || !strings.Contains(inst.Message, "protection soak (postDeployment) starts at 10:00:30") || p.RequeueAfter != 30*time.Second {
			t.Fatalf("runtime converged: prod %s %s: %s; requeue %v", inst.Status, inst.Reason, inst.Message, p.RequeueAfter)
		}
		w.now = t0.Add(30 * time.Second)
		if p := w.plan(); w.status("prod") != ds.StatusConverging || !strings.Contains(w.instances["prod"].Message, "must pass until 10:05:30") || p.RequeueAfter != 5*time.Minute {
			t.Fatalf("soaking: prod %s: %s; requeue %v", w.status("prod"), w.instances["prod"].Message, p.RequeueAfter)
		}
		w.now = t0.Add(5*time.Minute + 30*time.Second)
		w.plan()
		if inst := w.instances["prod"]; inst.Status != ds.StatusConverged || inst.CurrentVersion != "v1" {
			t.Fatalf("soaked: prod %s: %s", inst.Status, inst.Message)
		}
	})
	t.Run("a postDeployment window closing in the soak fails the channel", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, oneChannel(ds.Check{Name: "hours", Lifecycle: ds.PhasePostDeployment, Builtin: berlinWorkdays, CheckFor: ds.Duration{Duration: 10 * time.Minute}}))
		w.now = monday9.Add(8*time.Hour + 55*time.Minute) // 17:55 in Berlin
		w.observed["prod"] = Observation{}
		w.plan()
		w.observed["prod"] = running("v1", true)
		if p := w.plan(); w.status("prod") != ds.StatusConverging || p.RequeueAfter != 5*time.Minute {
			t.Fatalf("soaking: prod %s: %s; requeue %v (want when the window closes)", w.status("prod"), w.instances["prod"].Message, p.RequeueAfter)
		}
		w.now = w.now.Add(5 * time.Minute)
		w.plan()
		inst := w.instances["prod"]
		if inst.Status != ds.StatusFailed || inst.Reason != ds.ReasonLifecycleCheckFailed || !strings.Contains(inst.Message, "protection hours (postDeployment) failed 5m0s after the deployment: outside the allowed times") {
			t.Fatalf("window closed in the soak: prod %s %s: %s", inst.Status, inst.Reason, inst.Message)
		}
	})
}

// TestBuiltinWindowChanges: the next change of a window is the next hour
// boundary where being inside it flips, across days and time zones.
func TestBuiltinWindowChanges(t *testing.T) {
	t.Parallel()
	b := &ds.Builtin{AllowedTimes: []ds.Window{{Days: []int{0, 1, 2, 3, 4, 5, 6}, Hours: []int{10}, TZ: "Asia/Kolkata"}}}
	at := time.Date(2026, 11, 23, 4, 29, 0, 0, time.UTC) // 09:59 in Kolkata
	r := b.Evaluate(at)
	if r.Pass || !r.Until.Equal(time.Date(2026, 11, 23, 4, 30, 0, 0, time.UTC)) {
		t.Fatalf("before 10:00 Kolkata: %+v", r)
	}
	r = b.Evaluate(r.Until)
	if !r.Pass || !r.Until.Equal(time.Date(2026, 11, 23, 5, 30, 0, 0, time.UTC)) {
		t.Fatalf("at 10:00 Kolkata: %+v", r)
	}
	always := &ds.Builtin{AllowedTimes: []ds.Window{{Days: []int{0, 1, 2, 3, 4, 5, 6}, Hours: []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23}, TZ: "UTC"}}}
	if r := always.Evaluate(at); !r.Pass || !r.Until.IsZero() {
		t.Fatalf("always open: %+v", r)
	}
}

// TestPlanBypass: a bypass (an approval with the attachment's bypass
// topic, for the desired state) lets every phase of that attachment pass,
// a check drover does not evaluate included; a bypass of another desired
// state does not.
func TestPlanBypass(t *testing.T) {
	t.Parallel()
	d := oneChannel(ds.Check{Name: "nope", Attachment: "nope", Lifecycle: ds.PhasePreApproval, Builtin: &ds.Builtin{AlwaysFailing: true}},
		ds.Check{Name: "nope", Attachment: "nope", Lifecycle: ds.PhaseDeployment, FailureBehavior: ds.FailureFail, Builtin: &ds.Builtin{AlwaysFailing: true}},
		ds.Check{Name: "migrations", Attachment: "migrations", Lifecycle: ds.PhasePostApproval})
	w := newWorld(t, d)
	w.observed["prod"] = Observation{}
	bypass := func(stateID, attachment string) store.Approval {
		return store.Approval{DesiredStateID: stateID, ReleaseChannel: "prod", Topic: BypassTopic(attachment), User: "carol"}
	}
	w.approvals = []store.Approval{bypass("ds1", "migrations"), bypass("ds0", "nope")}
	if p := w.plan(); len(p.Actions) != 0 || w.status("prod") != ds.StatusBlocked {
		t.Fatalf("one bypass of two: applies %v, prod %s: %s", applied(p), w.status("prod"), w.instances["prod"].Message)
	}
	w.approvals = append(w.approvals, bypass("ds1", "nope"))
	if p := w.plan(); !slices.Equal(applied(p), []string{"prod=v1"}) {
		t.Fatalf("both bypassed: applies %v, prod %s: %s", applied(p), w.status("prod"), w.instances["prod"].Message)
	}
	w.observed["prod"] = running("v1", false)
	if w.plan(); w.status("prod") != ds.StatusConverging {
		t.Fatalf("a bypassed FAIL check failed the rollout: prod %s: %s", w.status("prod"), w.instances["prod"].Message)
	}
	if _, _, err := BypassableChecks(d.Channels[0], "other"); err == nil || !strings.Contains(err.Error(), `has no protection "other" (it has: nope, migrations)`) {
		t.Errorf("BypassableChecks of an unknown name: %v", err)
	}
	if a, checks, err := BypassableChecks(d.Channels[0], "nope"); err != nil || a != "nope" || len(checks) != 2 {
		t.Errorf("BypassableChecks(nope) = %s %v %v", a, checks, err)
	}
}

// TestCheckReports: what status says of each check, as the planner sees it.
func TestCheckReports(t *testing.T) {
	t.Parallel()
	d := oneChannel(ds.Check{Name: "hours", Attachment: "hours", Lifecycle: ds.PhasePostApproval, Builtin: berlinWorkdays},
		ds.Check{Name: "hours", Attachment: "hours", Lifecycle: ds.PhaseDeployment, FailureBehavior: ds.FailureBlock, Builtin: berlinWorkdays},
		ds.Check{Name: "migrations", Attachment: "migrations", Lifecycle: ds.PhasePreApproval})
	ch := d.Channels[0]
	state := func(rs []CheckReport) []string {
		var out []string
		for _, r := range rs {
			out = append(out, r.Check.Lifecycle+"="+r.State)
		}
		return out
	}
	rs := CheckReports(ch, store.Instance{}, nil, nil, t0)
	if got := state(rs); !slices.Equal(got, []string{"postApproval=failing", "deployment=failing", "preApproval=notEvaluated"}) {
		t.Fatalf("before the rollout: %v", got)
	}
	if !rs[0].NextChange.Equal(time.Date(2026, 11, 23, 8, 0, 0, 0, time.UTC)) {
		t.Errorf("next change %v", rs[0].NextChange)
	}
	inst := store.Instance{DesiredStateID: "ds1", DesiredVersion: "v1", TargetStateID: "ds1", TargetVersion: "v1", Status: ds.StatusConverging,
		Satisfied: []string{ch.Checks[0].Key() + "@v1"}}
	bypass := []store.Approval{{DesiredStateID: "ds1", ReleaseChannel: "prod", Topic: BypassTopic("migrations"), User: "carol"}}
	rs = CheckReports(ch, inst, nil, bypass, t0)
	if got := state(rs); !slices.Equal(got, []string{"postApproval=passed", "deployment=passed", "preApproval=bypassed"}) || rs[2].BypassedBy != "carol" {
		t.Fatalf("deploying: %v %+v", got, rs[2])
	}
}

// finishCheck records a run of the command check key of rc as the runner
// would: the last result per key.
func (w *world) finishCheck(rc, key string, passed bool, msg string) {
	inst := w.instances[rc]
	inst.Checks = slices.DeleteFunc(slices.Clone(inst.Checks), func(r store.CheckResult) bool { return r.Key == key })
	inst.Checks = append(inst.Checks, store.CheckResult{Key: key, DesiredStateID: w.desired.ID, Passed: passed, Message: msg, At: w.now, Runs: 1})
	w.instances[rc] = inst
}

func TestPlanCommandChecks(t *testing.T) {
	t.Parallel()
	cmd := func(phase string) ds.Check {
		return ds.Check{Name: "migrations", Lifecycle: phase, Source: "releaseChannel", Attachment: "migrations",
			Command: []byte(`{"taskConfig":{}}`), PollInterval: ds.Duration{Duration: 10 * time.Second}}
	}
	const task, key = "prod#releaseChannel/migrations", "releaseChannel/migrations"
	t.Run("preApproval: runs, blocks while failing, runs again each poll, passes once", func(t *testing.T) {
		t.Parallel()
		d := oneChannel(cmd(ds.PhasePreApproval), cmd(ds.PhasePostApproval))
		w := newWorld(t, d)
		w.observed["prod"] = Observation{}
		p := w.plan()
		inst := w.instances["prod"]
		if !slices.Equal(kinds(p), []string{"runCheck:" + task}) || inst.Status != ds.StatusWaitingPreconditions || inst.Reason != ds.ReasonLifecycleCheckPending ||
			inst.Message != "waiting for protection migrations (preApproval): running" {
			t.Fatalf("first pass: actions %v; prod %s %s: %s", applied(p), inst.Status, inst.Reason, inst.Message)
		}
		// While the run is open, no second one is planned.
		w.running = map[string]bool{task: true}
		if p := w.plan(); len(p.Actions) != 0 {
			t.Fatalf("run open: actions %v", applied(p))
		}
		w.running = nil
		w.finishCheck("prod", key, false, "exit code 1: 3 migrations pending")
		p = w.plan()
		inst = w.instances["prod"]
		if len(p.Actions) != 0 || inst.Status != ds.StatusBlocked || inst.Reason != ds.ReasonLifecycleCheckFailed ||
			inst.Message != "blocked by protection migrations (preApproval): exit code 1: 3 migrations pending" || p.RequeueAfter != 10*time.Second {
			t.Fatalf("failed: actions %v; prod %s %s: %s; requeue %v", applied(p), inst.Status, inst.Reason, inst.Message, p.RequeueAfter)
		}
		w.now = w.now.Add(10 * time.Second)
		if p := w.plan(); !slices.Equal(kinds(p), []string{"runCheck:" + task}) || w.status("prod") != ds.StatusBlocked {
			t.Fatalf("poll interval later: runs %v; prod %s", kinds(p), w.status("prod"))
		}
		w.finishCheck("prod", key, true, "no pending migration")
		// One passing run serves both phases of the attachment.
		if p := w.plan(); !slices.Equal(applied(p), []string{"prod=v1"}) {
			t.Fatalf("passed: actions %v; prod %s: %s", applied(p), w.status("prod"), w.instances["prod"].Message)
		}
		if !slices.Contains(w.instances["prod"].Satisfied, "check:prod/protection/migrations/preApproval@v1") {
			t.Errorf("satisfied %v", w.instances["prod"].Satisfied)
		}
	})
	t.Run("a check that could not run is pending, not failed", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, oneChannel(cmd(ds.PhaseDeployment)))
		w.observed["prod"] = Observation{}
		w.plan()
		inst := w.instances["prod"]
		inst.Checks = []store.CheckResult{{Key: key, DesiredStateID: "ds1", Error: "runtime rp cannot run protection commands", At: w.now}}
		w.instances["prod"] = inst
		p := w.plan()
		if len(p.Actions) != 0 || w.status("prod") != ds.StatusWaitingPreconditions ||
			w.instances["prod"].Message != "waiting for protection migrations (deployment): could not run: runtime rp cannot run protection commands" {
			t.Fatalf("actions %v; prod %s: %s", applied(p), w.status("prod"), w.instances["prod"].Message)
		}
	})
	t.Run("postDeployment: a run after the delay, passing for the duration", func(t *testing.T) {
		t.Parallel()
		c := cmd(ds.PhasePostDeployment)
		c.DelayCheck, c.CheckFor = ds.Duration{Duration: 5 * time.Second}, ds.Duration{Duration: 30 * time.Second}
		w := newWorld(t, oneChannel(cmd(ds.PhasePreApproval), c))
		w.observed["prod"] = Observation{}
		w.plan()
		w.finishCheck("prod", key, true, "ok")
		w.plan() // applies
		w.observed["prod"] = running("v1", true)
		w.now = w.now.Add(2 * time.Second)
		if p := w.plan(); len(p.Actions) != 0 || w.status("prod") != ds.StatusConverging {
			t.Fatalf("before the delay: actions %v; prod %s: %s", applied(p), w.status("prod"), w.instances["prod"].Message)
		}
		// The preApproval run was before the window: it runs again.
		w.now = w.now.Add(5 * time.Second)
		if p := w.plan(); !slices.Equal(kinds(p), []string{"runCheck:" + task}) || !strings.Contains(w.instances["prod"].Message, "protection migrations (postDeployment): running") {
			t.Fatalf("window opened: runs %v; prod %s: %s", kinds(p), w.status("prod"), w.instances["prod"].Message)
		}
		w.finishCheck("prod", key, true, "healthy")
		w.plan()
		w.now = w.now.Add(30 * time.Second)
		w.finishCheck("prod", key, true, "healthy")
		if p := w.plan(); w.status("prod") != ds.StatusConverged || len(p.Actions) != 0 {
			t.Fatalf("window over: actions %v; prod %s: %s", p.Actions, w.status("prod"), w.instances["prod"].Message)
		}
	})
	t.Run("postDeployment: a failing run in the window fails and rolls back", func(t *testing.T) {
		t.Parallel()
		c := cmd(ds.PhasePostDeployment)
		c.CheckFor = ds.Duration{Duration: time.Minute}
		w := newWorld(t, oneChannel(c))
		w.instances["prod"] = store.Instance{Application: "app", Service: "web", ReleaseChannel: "prod", DesiredStateID: "ds0", Status: ds.StatusConverged,
			TargetStateID: "ds0", TargetVersion: "v0", CurrentStateID: "ds0", CurrentVersion: "v0",
			Checks: []store.CheckResult{{Key: key, DesiredStateID: "ds0", Passed: true, At: t0}}}
		w.observed["prod"] = running("v0", true)
		w.plan()
		if got := w.instances["prod"].Checks; len(got) != 0 {
			t.Errorf("results of the replaced desired state kept: %v", got)
		}
		w.observed["prod"] = running("v1", true)
		w.plan()
		w.now = w.now.Add(time.Second)
		w.finishCheck("prod", key, false, "exit code 2: error rate 7%")
		p := w.plan()
		inst := w.instances["prod"]
		if inst.Status != ds.StatusRollingBack || !strings.Contains(inst.Message, "protection migrations (postDeployment) failed 1s after the deployment: exit code 2: error rate 7%") ||
			!slices.Equal(applied(p), []string{"prod=v0"}) {
			t.Fatalf("actions %v; prod %s: %s", applied(p), inst.Status, inst.Message)
		}
	})
}

func TestPlanFreeze(t *testing.T) {
	t.Parallel()
	holiday := ds.Freeze{ID: "frz-1", Application: "app", ReleaseChannel: "@group=production", Reason: "holiday freeze", CreatedBy: "ana", CreatedAt: t0.Add(-time.Hour), Until: t0.Add(time.Hour)}
	t.Run("a freeze holds a new rollout in its scope until it ends", func(t *testing.T) {
		t.Parallel()
		d := oneChannel()
		d.Channels[0].Group = "production"
		w := newWorld(t, d)
		w.observed["prod"] = Observation{}
		w.freezes = []ds.Freeze{holiday}
		p := w.plan()
		inst := w.instances["prod"]
		if len(p.Actions) != 0 || inst.Status != ds.StatusBlocked || inst.Reason != ds.ReasonFrozen ||
			!strings.Contains(inst.Message, "v1 not rolled out: frozen by ana since 2026-") || !strings.Contains(inst.Message, ": holiday freeze (frz-1; drover unfreeze to lift)") {
			t.Fatalf("actions %v; prod %s %s: %s", applied(p), inst.Status, inst.Reason, inst.Message)
		}
		if p.RequeueAfter != time.Hour {
			t.Errorf("requeue after %v, want the hour until the freeze ends", p.RequeueAfter)
		}
		w.now = t0.Add(time.Hour)
		if p := w.plan(); !slices.Equal(applied(p), []string{"prod=v1"}) {
			t.Fatalf("freeze over: actions %v; prod %s: %s", applied(p), w.status("prod"), w.instances["prod"].Message)
		}
	})
	t.Run("outside its scope, or lifted, it holds nothing", func(t *testing.T) {
		t.Parallel()
		other := holiday
		other.Application = "other"
		lifted := holiday
		lifted.LiftedAt, lifted.LiftedBy = t0, "bo"
		d := oneChannel()
		d.Channels[0].Group = "production"
		w := newWorld(t, d)
		w.observed["prod"] = Observation{}
		w.freezes = []ds.Freeze{other, lifted, {ID: "frz-2", ReleaseChannel: "staging", Reason: "x", CreatedAt: t0}}
		if p := w.plan(); !slices.Equal(applied(p), []string{"prod=v1"}) {
			t.Fatalf("actions %v; prod %s: %s", applied(p), w.status("prod"), w.instances["prod"].Message)
		}
	})
	t.Run("drift is healed unless the freeze holds healing", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, oneChannel())
		w.observed["prod"] = Observation{}
		w.plan()
		w.observed["prod"] = running("v1", true)
		w.plan()
		w.freezes = []ds.Freeze{{ID: "frz-3", Reason: "incident", CreatedBy: "ana", CreatedAt: t0}}
		w.observed["prod"] = running("v0", true)
		if p := w.plan(); !slices.Equal(applied(p), []string{"prod=v1"}) {
			t.Fatalf("drift under a freeze that heals: actions %v; prod %s: %s", applied(p), w.status("prod"), w.instances["prod"].Message)
		}
		w.observed["prod"] = running("v1", true)
		w.plan()
		w.freezes[0].NoHeal = true
		w.observed["prod"] = running("v0", true)
		p := w.plan()
		inst := w.instances["prod"]
		if len(p.Actions) != 0 || inst.Status != ds.StatusBlocked || inst.Reason != ds.ReasonFrozen || !strings.Contains(inst.Message, `runtime runs "v0" instead of v1; not healed: frozen by ana`) {
			t.Fatalf("drift under --no-heal: actions %v; prod %s %s: %s", applied(p), inst.Status, inst.Reason, inst.Message)
		}
		if p := w.plan(); len(p.Actions) != 0 {
			t.Fatalf("second pass under --no-heal applied: %v", applied(p))
		}
		w.freezes = nil
		if p := w.plan(); !slices.Equal(applied(p), []string{"prod=v1"}) {
			t.Fatalf("freeze lifted: actions %v; prod %s: %s", applied(p), w.status("prod"), w.instances["prod"].Message)
		}
	})
}

// Regressions found by review: a fetch error neither ends a freeze that
// holds a heal nor restarts a soak; a deployment check does not pass on a
// result from long ago.
func TestPlanHoldsAcrossFetchErrors(t *testing.T) {
	t.Parallel()
	t.Run("a --no-heal freeze still holds after a fetch error", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, oneChannel())
		w.observed["prod"] = Observation{}
		w.plan()
		w.observed["prod"] = running("v1", true)
		w.plan()
		w.freezes = []ds.Freeze{{ID: "frz-1", Reason: "incident", CreatedBy: "ana", CreatedAt: t0, NoHeal: true}}
		w.observed["prod"] = running("v0", true)
		w.plan()
		w.observed["prod"] = Observation{Err: "connection refused"}
		w.plan()
		w.observed["prod"] = running("v0", true)
		for i := range 3 {
			if p := w.plan(); len(p.Actions) != 0 {
				t.Fatalf("pass %d: applied %v under the freeze; prod %s %s: %s", i, applied(p), w.status("prod"), w.instances["prod"].Reason, w.instances["prod"].Message)
			}
		}
		if h := w.instances["prod"].Healed; h != 0 {
			t.Errorf("healed %d while held", h)
		}
	})
	t.Run("a fetch error does not restart a soak", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, oneChannel(ds.Check{Name: "soak", Lifecycle: ds.PhasePostDeployment, Builtin: &ds.Builtin{AlwaysPassing: true},
			CheckFor: ds.Duration{Duration: 10 * time.Minute}}))
		w.observed["prod"] = Observation{}
		w.plan()
		w.observed["prod"] = running("v1", true)
		w.plan()
		w.now = t0.Add(9 * time.Minute)
		w.observed["prod"] = Observation{Err: "timeout"}
		w.plan()
		w.now = t0.Add(10*time.Minute + time.Second)
		w.observed["prod"] = running("v1", true)
		w.plan()
		if w.status("prod") != ds.StatusConverged {
			t.Fatalf("prod %s %s: %s", w.status("prod"), w.instances["prod"].Reason, w.instances["prod"].Message)
		}
	})
	t.Run("a deployment check runs again rather than pass on an old result", func(t *testing.T) {
		t.Parallel()
		chk := ds.Check{Name: "migrations", Lifecycle: ds.PhaseDeployment, Source: "releaseChannel", Attachment: "migrations",
			Command: []byte(`{}`), PollInterval: ds.Duration{Duration: 10 * time.Second}}
		w := newWorld(t, oneChannel(chk))
		w.observed["prod"] = Observation{}
		w.plan()
		w.finishCheck("prod", "releaseChannel/migrations", true, "ok")
		w.now = t0.Add(time.Hour)
		p := w.plan()
		if len(p.Actions) != 1 || p.Actions[0].Kind != ActionRunCheck || w.status("prod") != ds.StatusWaitingPreconditions {
			t.Fatalf("an hour-old pass: actions %v; prod %s: %s", p.Actions, w.status("prod"), w.instances["prod"].Message)
		}
	})
}

// twoProd is a service with channels prod-a and prod-b (no dependencies)
// sharing the checks given.
func twoProd(checks ...ds.Check) *Desired {
	for i := range checks {
		checks[i].Kind = ds.CheckConvergenceExtension
		checks[i].Entity = ds.ID{Type: ds.TypeDeliveryExtension, Name: "x/extension/" + checks[i].Name}
	}
	ch := func(name string) Channel {
		return Channel{Channel: ds.Channel{Name: name, Runtime: "r-" + name, AutoRollback: true, Checks: append([]ds.Check(nil), checks...)}, Version: "v1", StateID: "ds1"}
	}
	return &Desired{ID: "ds1", Application: "app", Service: "web", Version: "v1", Channels: []Channel{ch("prod-a"), ch("prod-b")}}
}

func kinds(p Plan) []string {
	var out []string
	for _, a := range p.Actions {
		out = append(out, string(a.Kind)+":"+a.taskInstance())
	}
	return out
}

func TestPlanExtensions(t *testing.T) {
	t.Parallel()
	ext := func(name, lifecycle string) ds.Check {
		return ds.Check{Name: name, Lifecycle: lifecycle, Command: []byte(`{}`), Retry: &ds.Retry{Base: ds.Duration{Duration: 2 * time.Second}}}
	}
	t.Run("PRE_APPROVAL: retried with backoff until it succeeds once, then never again", func(t *testing.T) {
		t.Parallel()
		d := oneChannel()
		c := ext("migrate", ds.ExtPreApproval)
		c.Kind, c.Entity = ds.CheckConvergenceExtension, ds.ID{Type: ds.TypeDeliveryExtension, Name: "prod/extension/migrate"}
		d.Channels[0].Checks = []ds.Check{c}
		w := newWorld(t, d)
		w.observed["prod"] = Observation{}
		if p := w.plan(); !slices.Equal(kinds(p), []string{"runCheck:prod#extension/migrate"}) {
			t.Fatalf("first pass: %v", kinds(p))
		}
		w.finishCheck("prod", "extension/migrate", false, "exit code 1: lock held")
		w.plan()
		w.finishCheck("prod", "extension/migrate", false, "exit code 1: lock held")
		inst := w.instances["prod"]
		inst.Checks[0].Runs = 2
		w.instances["prod"] = inst
		p := w.plan()
		if w.status("prod") != ds.StatusBlocked || !strings.Contains(w.instances["prod"].Message, "convergence extension migrate (PRE_APPROVAL): exit code 1: lock held") || p.RequeueAfter != 4*time.Second {
			t.Fatalf("failing twice: prod %s: %s; requeue %v (want the 4s backoff)", w.status("prod"), w.instances["prod"].Message, p.RequeueAfter)
		}
		w.now = w.now.Add(4 * time.Second)
		if p := w.plan(); !slices.Equal(kinds(p), []string{"runCheck:prod#extension/migrate"}) {
			t.Fatalf("after the backoff: %v", kinds(p))
		}
		w.finishCheck("prod", "extension/migrate", true, "migrated")
		if p := w.plan(); !slices.Equal(kinds(p), []string{"apply:prod"}) {
			t.Fatalf("succeeded: %v; prod %s: %s", kinds(p), w.status("prod"), w.instances["prod"].Message)
		}
		w.now = w.now.Add(time.Hour)
		w.observed["prod"] = running("v1", true)
		if p := w.plan(); len(p.Actions) != 0 || w.status("prod") != ds.StatusConverged {
			t.Fatalf("an hour later: %v; prod %s", kinds(p), w.status("prod"))
		}
	})
	t.Run("a shared POST_DEPLOYMENT run serves both channels, once", func(t *testing.T) {
		t.Parallel()
		c := ext("analysis", ds.ExtPostDeployment)
		c.Shared = "key/canary"
		w := newWorld(t, twoProd(c))
		w.observed["prod-a"], w.observed["prod-b"] = Observation{}, Observation{}
		if p := w.plan(); !slices.Equal(kinds(p), []string{"apply:prod-a", "apply:prod-b"}) {
			t.Fatalf("first pass: %v", kinds(p))
		}
		w.observed["prod-a"], w.observed["prod-b"] = running("v1", true), running("v1", true)
		p := w.plan()
		if !slices.Equal(kinds(p), []string{"runCheck:shared#extension@key/canary"}) {
			t.Fatalf("both converged: %v", kinds(p))
		}
		if w.status("prod-a") != ds.StatusConverging || w.status("prod-b") != ds.StatusConverging {
			t.Fatalf("prod-a %s, prod-b %s: both wait for the analysis", w.status("prod-a"), w.status("prod-b"))
		}
		w.running = map[string]bool{"shared#extension@key/canary": true}
		if p := w.plan(); len(p.Actions) != 0 {
			t.Fatalf("while it runs: %v", kinds(p))
		}
		w.running = nil
		w.finishCheck(p.Actions[0].ReleaseChannel, "extension@key/canary", true, "canary healthy")
		w.plan()
		if w.status("prod-a") != ds.StatusConverged || w.status("prod-b") != ds.StatusConverged {
			t.Fatalf("analysis passed: prod-a %s: %s; prod-b %s: %s", w.status("prod-a"), w.instances["prod-a"].Message, w.status("prod-b"), w.instances["prod-b"].Message)
		}
	})
	t.Run("a DEPLOYMENT extension is retried while the version rolls out", func(t *testing.T) {
		t.Parallel()
		c := ext("smoke", ds.ExtDeployment)
		c.Kind, c.Entity = ds.CheckConvergenceExtension, ds.ID{Type: ds.TypeDeliveryExtension, Name: "prod/extension/smoke"}
		d := oneChannel()
		d.Channels[0].Checks = []ds.Check{c}
		w := newWorld(t, d)
		w.observed["prod"] = Observation{}
		if p := w.plan(); !slices.Equal(kinds(p), []string{"apply:prod", "runCheck:prod#extension/smoke"}) {
			t.Fatalf("rollout: %v", kinds(p))
		}
		w.finishCheck("prod", "extension/smoke", false, "exit code 1: not yet")
		w.observed["prod"] = running("v1", false)
		w.now = w.now.Add(2 * time.Second)
		if p := w.plan(); !slices.Equal(kinds(p), []string{"runCheck:prod#extension/smoke"}) {
			t.Fatalf("rolling out, after the backoff: %v; prod %s: %s", kinds(p), w.status("prod"), w.instances["prod"].Message)
		}
		w.finishCheck("prod", "extension/smoke", true, "ok")
		w.observed["prod"] = running("v1", true)
		if w.plan(); w.status("prod") != ds.StatusConverged {
			t.Fatalf("prod %s: %s", w.status("prod"), w.instances["prod"].Message)
		}
	})
	t.Run("an extension waits for those it depends on", func(t *testing.T) {
		t.Parallel()
		a, b := ext("a", ds.ExtPostApproval), ext("b", ds.ExtPostApproval)
		b.DependsOn = []string{"a"}
		d := oneChannel()
		for _, c := range []*ds.Check{&a, &b} {
			c.Kind, c.Entity = ds.CheckConvergenceExtension, ds.ID{Type: ds.TypeDeliveryExtension, Name: "prod/extension/" + c.Name}
		}
		d.Channels[0].Checks = []ds.Check{b, a}
		w := newWorld(t, d)
		w.observed["prod"] = Observation{}
		if p := w.plan(); !slices.Equal(kinds(p), []string{"runCheck:prod#extension/a"}) || !strings.Contains(w.instances["prod"].Message, "b (POST_APPROVAL): waiting for extension a to succeed") {
			t.Fatalf("first pass: %v; prod: %s", kinds(p), w.instances["prod"].Message)
		}
		w.finishCheck("prod", "extension/a", true, "ok")
		if p := w.plan(); !slices.Equal(kinds(p), []string{"runCheck:prod#extension/b"}) {
			t.Fatalf("a succeeded: %v", kinds(p))
		}
	})
}

// A deploy window that closes mid-rollout: staging rolled out inside it;
// prod, next, is held once it closed, and rolls out when it opens again.
func TestPlanWindowClosesMidRollout(t *testing.T) {
	t.Parallel()
	win := ds.Check{Kind: ds.CheckProtection, Name: "deployWindows", Lifecycle: ds.PhaseDeployment, FailureBehavior: ds.FailureBlock,
		Source: ds.SourceDrover, Attachment: "deployWindows", Entity: ds.ID{Type: ds.TypeProtectionLink, Name: "w"}, Builtin: berlinWorkdays}
	d := twoChannels("ds1", "v1")
	d.Channels[1].Approvals = nil
	for i := range d.Channels {
		d.Channels[i].Checks = []ds.Check{win}
	}
	w := newWorld(t, d)
	w.now = time.Date(2026, 11, 27, 16, 50, 0, 0, time.UTC) // Friday 17:50 in Berlin
	w.observed["staging"], w.observed["prod"] = Observation{}, Observation{}
	if p := w.plan(); !slices.Equal(applied(p), []string{"staging=v1"}) {
		t.Fatalf("inside the window: %v", applied(p))
	}
	w.observed["staging"] = running("v1", true)
	w.now = w.now.Add(15 * time.Minute) // 18:05: closed
	p := w.plan()
	if len(p.Actions) != 0 || w.status("staging") != ds.StatusConverged || w.status("prod") != ds.StatusBlocked ||
		!strings.Contains(w.instances["prod"].Message, "outside the allowed times") {
		t.Fatalf("window closed: %v; staging %s, prod %s: %s", applied(p), w.status("staging"), w.status("prod"), w.instances["prod"].Message)
	}
	monday9 := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	if want := monday9.Sub(w.now); p.RequeueAfter == 0 || p.RequeueAfter > want {
		t.Errorf("requeue after %v, want a pass no later than %v: when the window opens again", p.RequeueAfter, want)
	}
	w.now = monday9
	if p := w.plan(); !slices.Equal(applied(p), []string{"prod=v1"}) {
		t.Fatalf("window open again: %v; prod %s: %s", applied(p), w.status("prod"), w.instances["prod"].Message)
	}
}
