package engine

import (
	"math/rand/v2"
	"testing"
	"time"

	ds "github.com/drover-dev/drover/internal/desiredstate"
)

// TestPlanGateProperties drives one channel through random worlds: a
// deployment BLOCK gate and a postDeployment check (60s) that turn red and
// green at random, a runtime that shows what was applied converged after a
// random delay, time jumping by random steps (never past the pass the plan
// asked for, as the engine's queue would not). Whatever happens:
//   - no rollout of the pushed version starts while the BLOCK gate fails;
//   - the channel is CONVERGED only after its postDeployment check held for
//     its whole duration: a pass inside the soak where the check fails
//     never converges it, and it converges no sooner than 60s into it.
func TestPlanGateProperties(t *testing.T) {
	t.Parallel()
	pass := &ds.Builtin{AlwaysPassing: true}
	fail := &ds.Builtin{AlwaysFailing: true, Message: "red"}
	pick := func(ok bool) *ds.Builtin {
		if ok {
			return pass
		}
		return fail
	}
	converged, blocked, failedInSoak := 0, 0, 0
	for seed := range 400 {
		r := rand.New(rand.NewPCG(uint64(seed), 14))
		gateOK, soakOK := r.IntN(2) == 0, true
		d := oneChannel(
			ds.Check{Name: "gate", Lifecycle: ds.PhaseDeployment, FailureBehavior: ds.FailureBlock},
			ds.Check{Name: "soak", Lifecycle: ds.PhasePostDeployment, CheckFor: ds.Duration{Duration: time.Minute}},
		)
		w := newWorld(t, d)
		shown := ""       // the version the runtime runs
		convergesAt := t0 // when it shows it converged
		var soakStart time.Time
		var requeue time.Duration
		for step := range 80 {
			switch r.IntN(5) {
			case 0:
				gateOK = !gateOK
			case 1:
				soakOK = r.IntN(4) != 0 // mostly green
			}
			d.Channels[0].Checks[0].Builtin, d.Channels[0].Checks[1].Builtin = pick(gateOK), pick(soakOK)
			dt := time.Duration(r.IntN(40)) * time.Second
			if requeue > 0 && requeue < dt {
				dt = requeue
			}
			w.now = w.now.Add(dt)
			if shown == "" {
				w.observed["prod"] = Observation{}
			} else {
				w.observed["prod"] = running(shown, !w.now.Before(convergesAt))
			}
			prev := w.instances["prod"]
			p := w.plan()
			requeue = p.RequeueAfter
			inst := w.instances["prod"]
			for _, a := range p.Actions {
				if a.Kind != ActionApply {
					continue
				}
				if a.Version == "v1" && !a.Rollback && prev.TargetVersion != "v1" && !gateOK {
					t.Fatalf("seed %d step %d: the rollout of v1 started while the BLOCK gate fails", seed, step)
				}
				shown, convergesAt = a.Version, w.now.Add(time.Duration(r.IntN(60))*time.Second)
			}
			soaking := prev.Status == ds.StatusConverging && prev.Reason == ds.ReasonLifecycleCheckPending
			switch {
			case inst.Status == ds.StatusBlocked && prev.Status != ds.StatusBlocked:
				blocked++
			case inst.Status == ds.StatusConverged && prev.Status != ds.StatusConverged:
				converged++
			case soaking && inst.Status == ds.StatusRollingBack || soaking && inst.Status == ds.StatusFailed:
				failedInSoak++
			}
			if inst.Status == ds.StatusConverged && inst.CurrentVersion == "v1" && prev.Status != ds.StatusConverged {
				switch {
				case soaking && !soakOK && w.now.Sub(soakStart) < time.Minute:
					t.Fatalf("seed %d step %d: CONVERGED at a pass inside the soak where the postDeployment check fails", seed, step)
				case soakStart.IsZero() || w.now.Sub(soakStart) < time.Minute:
					t.Fatalf("seed %d step %d: CONVERGED after %v of soak (since %v), want 1m", seed, step, w.now.Sub(soakStart), soakStart)
				}
			}
			switch {
			case inst.Status == ds.StatusConverging && inst.Reason == ds.ReasonLifecycleCheckPending:
				if !soaking {
					soakStart = w.now
				}
			default:
				soakStart = time.Time{}
			}
		}
	}
	// The worlds must have exercised what the properties are about.
	if converged < 100 || blocked < 100 || failedInSoak < 20 {
		t.Errorf("too few interesting worlds: %d converged, %d blocked, %d failed in their soak", converged, blocked, failedInSoak)
	}
	t.Logf("%d converged, %d blocked, %d failed in their soak", converged, blocked, failedInSoak)
}
