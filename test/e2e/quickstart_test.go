package e2e

import (
	"slices"
	"strings"
	"testing"
	"time"

	apiv1 "github.com/drover-dev/drover/api/v1"
)

// TestQuickstart is the journey of the README: apply the quickstart, push
// an image, watch staging converge and prod wait for an approval, approve,
// wait for the rollout, and read the history.
func TestQuickstart(t *testing.T) {
	requireE2E(t)
	dir := copyQuickstart(t, "1s")
	s := newServer(t)

	r := s.ok("alice", "apply", dir+"/...")
	for _, want := range []string{"application/quickstart: created", "runtime/staging: created", "runtime/prod: created", "service/quickstart/web: created"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("apply output lacks %q:\n%s", want, r.stdout)
		}
	}
	// Applying the same tree again changes nothing.
	r = s.ok("alice", "apply", dir+"/...")
	if strings.Contains(r.stdout, "created") || strings.Contains(r.stdout, "configured") || strings.Count(r.stdout, "unchanged") != 4 {
		t.Errorf("second apply of the same tree should report 4 unchanged configs:\n%s", r.stdout)
	}

	version, dsID := s.push("alice", "quickstart", "web", "image=1.27")
	if want := compiledVersion(t, dir, "quickstart", "web", "image=1.27"); version != want {
		t.Errorf("push reported version %s, drover compile says %s", version, want)
	}

	st := s.waitStatus("quickstart", "web", 30*time.Second, "staging converged and prod waiting for approval", func(st *apiv1.ServiceStatus) bool {
		return channelIs("staging", "CONVERGED", version)(st) && findChannel(st, "prod").Status == "WAITING_MANUAL_APPROVAL"
	})
	if st.DesiredStateID != dsID || st.DesiredVersion != version || st.Status != "WAITING_MANUAL_APPROVAL" {
		t.Errorf("service status: got %s %s %s, want WAITING_MANUAL_APPROVAL %s %s", st.Status, st.DesiredStateID, st.DesiredVersion, dsID, version)
	}
	prod := channel(t, st, "prod")
	if prod.Reason != "MANUAL_APPROVAL_PENDING" || prod.Version != "" || prod.TargetVersion != "" || prod.DesiredVersion != version {
		t.Errorf("prod before approval: %s", dump(prod))
	}
	if !strings.Contains(prod.Message, "drover approve web --app quickstart --release-channel prod") {
		t.Errorf("prod's message should tell how to approve: %q", prod.Message)
	}
	if len(prod.Approvals) != 1 || prod.Approvals[0].MinApprovers != 1 || len(prod.Approvals[0].ApprovedBy) != 0 {
		t.Errorf("prod approvals before approving: %s", dump(prod.Approvals))
	}
	staging := channel(t, st, "staging")
	if staging.TargetVersion != version || staging.Runtime != "staging" {
		t.Errorf("staging: %s", dump(staging))
	}

	// Waiting now returns at once: prod waits for a person (exit 4), and
	// wait says how to approve; with --wait-for-approval it can only time
	// out (exit 3).
	r = s.as("bob", "wait", "web", "--app", "quickstart", "--timeout", "30s")
	if r.code != 4 || !strings.Contains(r.stdout, "prod waits for a manual approval") ||
		!strings.Contains(r.stdout, "drover approve web --app quickstart --release-channel prod --server "+s.url) {
		t.Errorf("wait while prod waits for approval: want exit 4 with the approve command, got %s", r)
	}
	r = s.as("bob", "wait", "web", "--app", "quickstart", "--timeout", "1s", "--wait-for-approval")
	if r.code != 3 {
		t.Errorf("wait --wait-for-approval while prod waits for approval: want exit 3 (timeout), got %s", r)
	}
	if st := s.status("quickstart", "web"); channel(t, st, "prod").TargetVersion != "" {
		t.Fatalf("prod received %s without an approval:\n%s", version, dump(st))
	}

	r = s.ok("alice", "approve", "web", "--app", "quickstart", "--release-channel", "prod", "--comment", "looks good")
	if !strings.Contains(r.stdout, "approved prod of quickstart/web as alice") {
		t.Errorf("approve output: %s", r)
	}
	r = s.as("alice", "wait", "web", "--app", "quickstart", "--timeout", "60s")
	if r.code != 0 || !strings.Contains(r.stdout, "quickstart/web converged: every release channel runs "+version) {
		t.Fatalf("wait after approval: want exit 0 and converged, got %s", r)
	}

	st = s.status("quickstart", "web")
	if !converged(version)(st) {
		t.Fatalf("not converged after wait returned 0:\n%s", dump(st))
	}
	if got := approvedBy(channel(t, st, "prod")); !slices.Equal(got, []string{"alice"}) {
		t.Errorf("prod approved by %v, want [alice]", got)
	}

	// The history, as a person reads it.
	r = s.ok("bob", "events", "web", "--app", "quickstart")
	for _, want := range []string{
		"pushed            pushed " + version,
		"approved          prod: " + version + " (1.27) approved by alice: looks good [alice]",
		"applied           staging: applied " + version,
		"applied           prod: applied " + version,
		"converged         staging: " + version + " (1.27) converged",
		"converged         prod: " + version + " (1.27) converged",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("events output lacks %q:\n%s", want, r.stdout)
		}
	}
	// And as JSON: in causal order, seqs increasing, actors right.
	evs := s.events("quickstart", "web")
	checkSeqs(t, evs)
	order := []struct{ typ, rc string }{
		{"pushed", ""}, {"applied", "staging"}, {"converged", "staging"},
		{"approved", "prod"}, {"started", "prod"}, {"applied", "prod"}, {"converged", "prod"},
	}
	at := 0
	for _, o := range order {
		i := indexOf(evs, at, o.typ, o.rc)
		if i < 0 {
			t.Fatalf("no %s/%s event after index %d; events: %v", o.typ, o.rc, at, eventKeys(evs))
		}
		at = i + 1
	}
	for _, e := range evs {
		switch e.Type {
		case "pushed", "approved", "configured":
			if e.Actor != "alice" {
				t.Errorf("%s event by %q, want alice: %+v", e.Type, e.Actor, e)
			}
		case "applied", "converged", "started", "applying":
			if e.Actor != "engine" {
				t.Errorf("%s event by %q, want engine", e.Type, e.Actor)
			}
		}
		if e.Type != "configured" && e.DesiredStateID != dsID {
			t.Errorf("event %d (%s) has desired state %q, want %s", e.Seq, e.Type, e.DesiredStateID, dsID)
		}
	}
}

// TestReject: a rejected approval fails prod, drover wait reports the failure
// (exit 2), and the next push asks for an approval again.
func TestReject(t *testing.T) {
	requireE2E(t)
	dir := twoChannelTree(t, "shop", "1s")
	s := newServer(t)
	s.ok("alice", "apply", dir+"/...")
	version, dsID := s.push("alice", "shop", "web", "image=2.0")
	s.waitStatus("shop", "web", 30*time.Second, "prod waiting for approval", func(st *apiv1.ServiceStatus) bool {
		return findChannel(st, "prod").Status == "WAITING_MANUAL_APPROVAL"
	})

	r := s.ok("bob", "reject", "web", "--app", "shop", "--release-channel", "prod", "--comment", "not on a Friday")
	if !strings.Contains(r.stdout, "rejected prod of shop/web as bob") {
		t.Errorf("reject output: %s", r)
	}
	st := s.waitStatus("shop", "web", 20*time.Second, "prod failed", func(st *apiv1.ServiceStatus) bool {
		return findChannel(st, "prod").Status == "FAILED"
	})
	prod := channel(t, st, "prod")
	if prod.Reason != "MANUAL_APPROVAL_REJECTED" || !strings.Contains(prod.Message, "rejected by bob") || !strings.Contains(prod.Message, "not on a Friday") {
		t.Errorf("prod after rejection: %s", dump(prod))
	}
	if prod.Version != "" || prod.TargetVersion != "" {
		t.Errorf("a rejected channel must not receive the version: %s", dump(prod))
	}
	if len(prod.Approvals) != 1 || prod.Approvals[0].RejectedBy != "bob" {
		t.Errorf("prod approvals: %s", dump(prod.Approvals))
	}
	if st.Status != "FAILED" || st.DesiredStateID != dsID {
		t.Errorf("service: %s %s", st.Status, st.DesiredStateID)
	}
	if c := channel(t, st, "staging"); c.Status != "CONVERGED" || c.Version != version {
		t.Errorf("staging should be untouched by prod's rejection: %s", dump(c))
	}

	r = s.as("alice", "wait", "web", "--app", "shop", "--timeout", "20s")
	if r.code != 2 || !strings.Contains(r.stderr, "shop/web failed") {
		t.Errorf("wait after a rejection: want exit 2 with shop/web failed, got %s", r)
	}
	// Approving after the rejection is refused: the channel failed.
	r = s.as("alice", "approve", "web", "--app", "shop", "--release-channel", "prod")
	if r.code == 0 || !strings.Contains(r.stderr, "not waiting for an approval") {
		t.Errorf("approve after reject: want a refusal, got %s", r)
	}
	evs := s.events("shop", "web")
	if i := indexOf(evs, 0, "rejected", "prod"); i < 0 || evs[i].Actor != "bob" || !strings.Contains(evs[i].Message, "rejected by bob: not on a Friday") {
		t.Errorf("no rejected event by bob: %v", eventKeys(evs))
	}
	if i := indexOf(evs, 0, "failed", "prod"); i < 0 {
		t.Errorf("no failed event for prod: %v", eventKeys(evs))
	}
	if indexOf(evs, 0, "applying", "prod") >= 0 {
		t.Errorf("prod was applied despite the rejection: %v", eventKeys(evs))
	}

	// A new push starts over: the rejection was for the old desired state.
	v2, _ := s.push("alice", "shop", "web", "image=2.1")
	st = s.waitStatus("shop", "web", 30*time.Second, "prod waiting for approval of the new push", func(st *apiv1.ServiceStatus) bool {
		return channelIs("staging", "CONVERGED", v2)(st) && findChannel(st, "prod").Status == "WAITING_MANUAL_APPROVAL"
	})
	if prod := channel(t, st, "prod"); prod.Approvals[0].RejectedBy != "" || prod.TargetVersion != "" {
		t.Errorf("the old rejection leaked into the new push: %s", dump(prod))
	}
	s.ok("alice", "approve", "web", "--app", "shop", "--release-channel", "prod")
	if r := s.as("alice", "wait", "web", "--app", "shop", "--timeout", "60s"); r.code != 0 {
		t.Fatalf("wait after approving the new push: %s", r)
	}
}

// TestReplacementRespectsOrder: a push replaces the rollout in progress, and
// prod never receives the new version before staging runs it converged, even
// when prod's approval came early.
func TestReplacementRespectsOrder(t *testing.T) {
	requireE2E(t)
	// 2s: the window in which prod must hold still survives slow CLI calls.
	dir := twoChannelTree(t, "shop", "2s")
	s := newServer(t)
	s.ok("alice", "apply", dir+"/...")

	v1, _ := s.push("alice", "shop", "web", "image=1.0")
	s.waitStatus("shop", "web", 30*time.Second, "prod waiting for approval of v1", func(st *apiv1.ServiceStatus) bool {
		return findChannel(st, "prod").Status == "WAITING_MANUAL_APPROVAL"
	})
	s.ok("alice", "approve", "web", "--app", "shop", "--release-channel", "prod")
	s.waitStatus("shop", "web", 30*time.Second, "v1 everywhere", converged(v1))

	v2, ds2 := s.push("alice", "shop", "web", "image=2.0")
	if v2 == v1 {
		t.Fatalf("a new image gave the same version %s", v2)
	}
	// Approve prod for v2 at once, long before staging runs it.
	r := s.ok("carol", "approve", "web", "--app", "shop", "--release-channel", "prod")
	if !strings.Contains(r.stdout, "approved prod") {
		t.Errorf("early approval: %s", r)
	}
	samples := 0
	sawStagingRolling := false
	s.sampleStatus("shop", "web", 30*time.Second, "staging converged on v2", func(st *apiv1.ServiceStatus) bool {
		stg, prod := findChannel(st, "staging"), findChannel(st, "prod")
		if stg.Version == v2 {
			return true // from here on prod may move
		}
		samples++
		if stg.TargetVersion == v2 && stg.Status == "CONVERGING" {
			sawStagingRolling = true
		}
		if prod.Version != v1 || prod.TargetVersion != v1 {
			t.Fatalf("prod received v2 while staging runs %q (%s):\n%s", stg.Version, stg.Status, dump(st))
		}
		if !strings.HasPrefix(prod.Status, "WAITING_") && prod.Status != "PENDING" {
			t.Fatalf("prod should wait while staging rolls out v2, got %s:\n%s", prod.Status, dump(st))
		}
		return false
	})
	if samples < 5 || !sawStagingRolling {
		t.Fatalf("the check is vacuous: %d samples before staging converged, saw staging rolling out: %v", samples, sawStagingRolling)
	}
	st := s.status("shop", "web")
	if st.DesiredStateID != ds2 {
		t.Errorf("desired state %s, want %s", st.DesiredStateID, ds2)
	}
	// The early approval counts: no second approval is needed.
	if r := s.as("alice", "wait", "web", "--app", "shop", "--timeout", "60s"); r.code != 0 {
		t.Fatalf("wait for v2: %s", r)
	}
	st = s.status("shop", "web")
	if !converged(v2)(st) || !slices.Equal(approvedBy(channel(t, st, "prod")), []string{"carol"}) {
		t.Fatalf("after v2:\n%s", dump(st))
	}

	// The replaced desired state left its mark in the history.
	evs := s.events("shop", "web")
	checkSeqs(t, evs)
	iStaging := indexOf(evs, 0, "converged", "staging")
	for iStaging >= 0 && !strings.Contains(evs[iStaging].Message, v2) {
		iStaging = indexOf(evs, iStaging+1, "converged", "staging")
	}
	iProd := -1
	for i := range evs {
		if evs[i].Type == "started" && evs[i].ReleaseChannel == "prod" && strings.Contains(evs[i].Message, v2) {
			iProd = i
		}
	}
	if iStaging < 0 || iProd < 0 || iProd < iStaging {
		t.Errorf("prod must start v2 after staging converged it (staging converged at %d, prod started at %d): %v", iStaging, iProd, eventKeys(evs))
	}
}

// TestPushReplacesRolloutInProgress: a push during staging's rollout
// replaces it; the replaced version never reaches prod, and the approval
// given for the replaced push does not count for the new one.
func TestPushReplacesRolloutInProgress(t *testing.T) {
	requireE2E(t)
	// 2s: the second push must land while staging still rolls out v1.
	dir := twoChannelTree(t, "shop", "2s")
	s := newServer(t)
	s.ok("alice", "apply", dir+"/...")
	v1, ds1 := s.push("alice", "shop", "web", "image=1.0")
	// Approve v1 for prod while staging rolls it out.
	s.ok("alice", "approve", "web", "--app", "shop", "--release-channel", "prod")
	s.waitStatus("shop", "web", 20*time.Second, "staging rolling out v1", func(st *apiv1.ServiceStatus) bool {
		c := findChannel(st, "staging")
		return c.TargetVersion == v1 && c.Status == "CONVERGING"
	})
	r := s.ok("alice", "push", "web", "--app", "shop", "--param", "image=2.0")
	if !strings.Contains(r.stdout, "replaces desired state "+ds1) {
		t.Errorf("push output should name the replaced desired state %s:\n%s", ds1, r.stdout)
	}
	m := pushedRE.FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("push output: %s", r)
	}
	v2 := m[1]
	st := s.waitStatus("shop", "web", 30*time.Second, "staging converged on v2 and prod waiting for a new approval", func(st *apiv1.ServiceStatus) bool {
		if c := findChannel(st, "prod"); c.Version != "" || c.TargetVersion != "" {
			t.Fatalf("prod received something before its approval for v2:\n%s", dump(st))
		}
		return channelIs("staging", "CONVERGED", v2)(st) && findChannel(st, "prod").Status == "WAITING_MANUAL_APPROVAL"
	})
	if got := approvedBy(channel(t, st, "prod")); len(got) != 0 {
		t.Errorf("v1's approval counted for v2: approved by %v", got)
	}
	evs := s.events("shop", "web")
	if i := indexOf(evs, 0, "replaced", "staging"); i < 0 || !strings.Contains(evs[i].Message, ds1) {
		t.Errorf("no replaced event for staging: %v", eventKeys(evs))
	}
	s.ok("bob", "approve", "web", "--app", "shop", "--release-channel", "prod")
	if r := s.as("alice", "wait", "web", "--app", "shop", "--timeout", "60s"); r.code != 0 {
		t.Fatalf("wait for v2: %s", r)
	}
	if st := s.status("shop", "web"); !converged(v2)(st) {
		t.Fatalf("not converged on v2:\n%s", dump(st))
	}
}

// TestRePushOfOlderVersionWaitsForStaging: going back to an older version by
// pushing it again is a new rollout; prod must not receive it before staging
// runs it converged again.
func TestRePushOfOlderVersionWaitsForStaging(t *testing.T) {
	requireE2E(t)
	// 2s: the window in which prod must hold still survives slow CLI calls.
	dir := twoChannelTree(t, "shop", "2s")
	s := newServer(t)
	s.ok("alice", "apply", dir+"/...")
	rollout := func(image string) string {
		v, _ := s.push("alice", "shop", "web", "image="+image)
		s.waitStatus("shop", "web", 30*time.Second, "prod waiting for approval of "+image, func(st *apiv1.ServiceStatus) bool {
			return findChannel(st, "prod").Status == "WAITING_MANUAL_APPROVAL"
		})
		s.ok("alice", "approve", "web", "--app", "shop", "--release-channel", "prod")
		s.waitStatus("shop", "web", 30*time.Second, image+" everywhere", converged(v))
		return v
	}
	v1 := rollout("1.0")
	v2 := rollout("2.0")

	again, _ := s.push("alice", "shop", "web", "image=1.0")
	if again != v1 {
		t.Fatalf("pushing image 1.0 again gave %s, want the same version %s", again, v1)
	}
	s.ok("alice", "approve", "web", "--app", "shop", "--release-channel", "prod")
	samples := 0
	s.sampleStatus("shop", "web", 30*time.Second, "staging back on v1", func(st *apiv1.ServiceStatus) bool {
		stg, prod := findChannel(st, "staging"), findChannel(st, "prod")
		if stg.Version == v1 {
			return true
		}
		samples++
		if prod.TargetVersion != v2 || prod.Version != v2 {
			t.Fatalf("prod received %s while staging runs %s (%s): a condition met for an earlier push was reused:\n%s", v1, stg.Version, stg.Status, dump(st))
		}
		return false
	})
	if samples < 3 {
		t.Fatalf("vacuous: only %d samples while staging rolled back to v1", samples)
	}
	if r := s.as("alice", "wait", "web", "--app", "shop", "--timeout", "60s"); r.code != 0 {
		t.Fatalf("wait: %s", r)
	}
}

// TestPauseResume: a paused channel gets nothing, even approved and with its
// dependency stable; resuming lets it converge.
func TestPauseResume(t *testing.T) {
	requireE2E(t)
	dir := twoChannelTree(t, "shop", "1s")
	s := newServer(t)
	s.ok("alice", "apply", dir+"/...")
	version, _ := s.push("alice", "shop", "web", "image=3.0")

	r := s.ok("alice", "pause", "web", "--app", "shop", "--release-channel", "prod")
	if !strings.Contains(r.stdout, "prod") {
		t.Errorf("pause output: %s", r)
	}
	s.ok("bob", "approve", "web", "--app", "shop", "--release-channel", "prod")
	st := s.waitStatus("shop", "web", 30*time.Second, "staging converged", channelIs("staging", "CONVERGED", version))
	// Observe prod for a while after everything else would have let it go:
	// two rollout durations.
	until := time.Now().Add(2 * time.Second)
	samples := 0
	for time.Now().Before(until) {
		st = s.statusHTTP("shop", "web")
		prod := channel(t, st, "prod")
		if prod.Status != "PAUSED" || !prod.Paused || prod.Version != "" || prod.TargetVersion != "" {
			t.Fatalf("paused prod changed:\n%s", dump(prod))
		}
		samples++
		time.Sleep(50 * time.Millisecond)
	}
	if samples < 10 {
		t.Fatalf("only %d samples of paused prod", samples)
	}
	if st.Status != "PAUSED" {
		t.Errorf("service status %s, want PAUSED", st.Status)
	}
	if got := approvedBy(channel(t, st, "prod")); !slices.Equal(got, []string{"bob"}) {
		t.Errorf("prod approvals while paused: %v", got)
	}
	// Pausing twice is harmless.
	s.ok("alice", "pause", "web", "--app", "shop", "--release-channel", "prod")

	s.ok("carol", "resume", "web", "--app", "shop", "--release-channel", "prod")
	if r := s.as("alice", "wait", "web", "--app", "shop", "--timeout", "60s"); r.code != 0 {
		t.Fatalf("wait after resume: %s", r)
	}
	st = s.status("shop", "web")
	if !converged(version)(st) || channel(t, st, "prod").Paused {
		t.Fatalf("after resume:\n%s", dump(st))
	}
	evs := s.events("shop", "web")
	iPause, iResume := indexOf(evs, 0, "paused", "prod"), indexOf(evs, 0, "resumed", "prod")
	if iPause < 0 || iResume < 0 || evs[iPause].Actor != "alice" || evs[iResume].Actor != "carol" {
		t.Fatalf("pause/resume events: %v", eventKeys(evs))
	}
	if iStart := indexOf(evs, 0, "started", "prod"); iStart < iResume {
		t.Errorf("prod started (event %d) before it was resumed (event %d): %v", iStart, iResume, eventKeys(evs))
	}
	if n := strings.Count(strings.Join(eventKeys(evs), " "), "paused/prod"); n != 1 {
		t.Errorf("%d paused events for prod, want 1 (the second pause changed nothing)", n)
	}
}
