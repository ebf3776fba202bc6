package e2e

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	apiv1 "github.com/drover-dev/drover/api/v1"
)

// oneChannelTree is an application with a single channel, staging, on a
// fake runtime.
func oneChannelTree(t *testing.T, app, rollout string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), app)
	files := webService(app)
	files["runtimes/staging.pvn.yaml"] = fakeRuntime("staging", rollout, "")
	files["app.pvn.yaml"] = `application:
  name: ` + app + `
  releaseChannels:
    - name: staging
      runtimes:
        - runtime: staging
      constants:
        - name: replicas
          string:
            value: "2"
`
	writeTree(t, dir, files)
	return dir
}

// breakVersion re-applies the staging runtime so that rollouts of version
// (and only of it) fail. The server rebuilds a runtime whose config changed.
func breakVersion(t *testing.T, s *server, dir, version string) {
	t.Helper()
	writeTree(t, dir, map[string]string{"runtimes/staging.pvn.yaml": fakeRuntime("staging", "1s", "^"+regexp.QuoteMeta(version)+"$")})
	r := s.ok("alice", "apply", dir+"/...")
	if !strings.Contains(r.stdout, "runtime/staging: configured (version 2)") {
		t.Fatalf("re-applying the runtime should store version 2: %s", r)
	}
}

// TestAutoRollback: a version that fails in its runtime is rolled back to the
// last converged version automatically; drover wait reports it (exit 2); the
// channel stays on the old version until the next push.
func TestAutoRollback(t *testing.T) {
	requireE2E(t)
	dir := oneChannelTree(t, "solo", "1s")
	// A short poll interval shows the rollback's progress in the status.
	s := newServer(t, "--poll-interval", "100ms")
	s.ok("alice", "apply", dir+"/...")
	v1, _ := s.push("alice", "solo", "web", "image=1.0")
	if r := s.as("alice", "wait", "web", "--app", "solo", "--timeout", "30s"); r.code != 0 {
		t.Fatalf("wait for v1: %s", r)
	}

	v2 := compiledVersion(t, dir, "solo", "web", "image=2.0")
	breakVersion(t, s, dir, v2)
	if got, _ := s.push("alice", "solo", "web", "image=2.0"); got != v2 {
		t.Fatalf("push gave %s, compile said %s", got, v2)
	}
	// The server dies in the middle of the rollback; the rollback goes on.
	s.waitStatus("solo", "web", 30*time.Second, "staging rolling back to v1", inRollout("staging", "ROLLING_BACK", v1, 1))
	s.restart()
	r := s.as("alice", "wait", "web", "--app", "solo", "--timeout", "30s")
	if r.code != 2 || !strings.Contains(r.stderr, "solo/web rolled back") {
		t.Errorf("wait on a failing version: want exit 2 (rolled back), got %s", r)
	}
	st := s.waitStatus("solo", "web", 30*time.Second, "staging rolled back", channelIs("staging", "ROLLED_BACK", v1))
	c := channel(t, st, "staging")
	if c.TargetVersion != v1 || c.DesiredVersion != v2 || !strings.Contains(c.Message, "rolled back from "+v2+" to "+v1) {
		t.Errorf("staging after the rollback: %s", dump(c))
	}
	if st.Status != "ROLLED_BACK" || st.DesiredVersion != v2 {
		t.Errorf("service after the rollback: %s desired %s", st.Status, st.DesiredVersion)
	}
	evs := s.events("solo", "web")
	checkSeqs(t, evs)
	iFail := indexOf(evs, 0, "failed", "staging")
	iRollback := indexOf(evs, 0, "rollback", "staging")
	if iFail < 0 || iRollback < iFail || !strings.Contains(evs[iFail].Message, v2) || !strings.Contains(evs[iRollback].Message, "from "+v2+" to "+v1) {
		t.Fatalf("want failed then rollback events: %v", eventKeys(evs))
	}
	if i := indexOf(evs, iRollback, "converged", "staging"); i < 0 || !strings.Contains(evs[i].Message, v1) {
		t.Errorf("no converged event for v1 after the rollback: %v", eventKeys(evs))
	}

	// Pinned: the failed version is not retried.
	n := len(evs)
	deadline := time.Now().Add(1500 * time.Millisecond)
	for time.Now().Before(deadline) {
		if c := channel(t, s.status("solo", "web"), "staging"); c.Status != "ROLLED_BACK" || c.Version != v1 || c.TargetVersion != v1 {
			t.Fatalf("a rolled-back channel moved: %s", dump(c))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if evs := s.events("solo", "web"); len(evs) != n {
		t.Errorf("events after the rollback settled: %v", eventKeys(evs[n:]))
	}

	// The next push moves it again.
	v3, _ := s.push("alice", "solo", "web", "image=3.0")
	if r := s.as("alice", "wait", "web", "--app", "solo", "--timeout", "30s"); r.code != 0 {
		t.Fatalf("wait for v3: %s", r)
	}
	if st := s.status("solo", "web"); !converged(v3)(st) {
		t.Fatalf("not converged on v3:\n%s", dump(st))
	}
}

// TestAutoRollbackUpstreamWait: in the quickstart's shape, staging fails and
// rolls back; prod will never receive the version. drover wait must report
// the rollback (exit 2) instead of waiting for prod forever.
func TestAutoRollbackUpstreamWait(t *testing.T) {
	requireE2E(t)
	dir := twoChannelTree(t, "shop", "1s")
	s := newServer(t)
	s.ok("alice", "apply", dir+"/...")
	v1, _ := s.push("alice", "shop", "web", "image=1.0")
	s.waitStatus("shop", "web", 30*time.Second, "prod waiting for approval", func(st *apiv1.ServiceStatus) bool {
		return findChannel(st, "prod").Status == "WAITING_MANUAL_APPROVAL"
	})
	s.ok("alice", "approve", "web", "--app", "shop", "--release-channel", "prod")
	s.waitStatus("shop", "web", 30*time.Second, "v1 everywhere", converged(v1))

	v2 := compiledVersion(t, dir, "shop", "web", "image=2.0")
	breakVersion(t, s, dir, v2)
	s.push("alice", "shop", "web", "image=2.0")
	s.waitStatus("shop", "web", 30*time.Second, "staging rolled back", channelIs("staging", "ROLLED_BACK", v1))
	r := s.as("alice", "wait", "web", "--app", "shop", "--timeout", "5s")
	if r.code != 2 {
		t.Errorf("wait with staging rolled back: want exit 2, got %s\nstatus:\n%s", r, dump(s.status("shop", "web")))
	}
}

// TestManualRollback: after a successful v2, drover rollback returns staging
// to v1 and keeps it there until the next push; prod is not touched.
func TestManualRollback(t *testing.T) {
	requireE2E(t)
	dir := twoChannelTree(t, "shop", "1s")
	s := newServer(t)
	s.ok("alice", "apply", dir+"/...")
	release := func(image string) string {
		v, _ := s.push("alice", "shop", "web", "image="+image)
		s.waitStatus("shop", "web", 30*time.Second, "prod waiting for approval of "+image, func(st *apiv1.ServiceStatus) bool {
			return findChannel(st, "prod").Status == "WAITING_MANUAL_APPROVAL"
		})
		s.ok("alice", "approve", "web", "--app", "shop", "--release-channel", "prod")
		if r := s.as("alice", "wait", "web", "--app", "shop", "--timeout", "30s"); r.code != 0 {
			t.Fatalf("wait for %s: %s", image, r)
		}
		return v
	}
	v1 := release("1.0")
	v2 := release("2.0")

	// Nothing to roll back to for a channel that never converged anything
	// else is covered by the unit tests; here the user rolls staging back.
	r := s.ok("bob", "rollback", "web", "--app", "shop", "--release-channel", "staging")
	if !strings.Contains(r.stdout, "ROLLING_BACK") && !strings.Contains(r.stdout, "ROLLED_BACK") {
		t.Errorf("rollback output should show the rollback: %s", r)
	}
	st := s.waitStatus("shop", "web", 30*time.Second, "staging back on v1", channelIs("staging", "ROLLED_BACK", v1))
	if c := channel(t, st, "staging"); c.TargetVersion != v1 || c.DesiredVersion != v2 {
		t.Errorf("staging after the rollback: %s", dump(c))
	}
	if c := channel(t, st, "prod"); c.Status != "CONVERGED" || c.Version != v2 {
		t.Errorf("prod must not be touched by staging's rollback: %s", dump(c))
	}
	r = s.as("alice", "wait", "web", "--app", "shop", "--timeout", "10s")
	if r.code != 2 {
		t.Errorf("wait after a rollback: want exit 2, got %s", r)
	}
	evs := s.events("shop", "web")
	if i := indexOf(evs, 0, "rollback", "staging"); i < 0 || evs[i].Actor != "bob" || !strings.Contains(evs[i].Message, "from "+v2+" to "+v1) {
		t.Errorf("no rollback event by bob: %v", eventKeys(evs))
	}
	// The next push moves staging forward again.
	v3, _ := s.push("alice", "shop", "web", "image=3.0")
	s.waitStatus("shop", "web", 30*time.Second, "staging on v3", channelIs("staging", "CONVERGED", v3))
}

// TestRollbackTwiceDoesNotRedeploy: after rolling staging back from v2 to
// v1, a second drover rollback must not roll it "back" to v2, the version
// the user just rolled back from.
func TestRollbackTwiceDoesNotRedeploy(t *testing.T) {
	requireE2E(t)
	dir := oneChannelTree(t, "solo", "1s")
	s := newServer(t)
	s.ok("alice", "apply", dir+"/...")
	v1, _ := s.push("alice", "solo", "web", "image=1.0")
	s.waitStatus("solo", "web", 30*time.Second, "v1", converged(v1))
	v2, _ := s.push("alice", "solo", "web", "image=2.0")
	s.waitStatus("solo", "web", 30*time.Second, "v2", converged(v2))

	s.ok("bob", "rollback", "web", "--app", "solo", "--release-channel", "staging")
	s.waitStatus("solo", "web", 30*time.Second, "staging back on v1", channelIs("staging", "ROLLED_BACK", v1))
	r := s.as("bob", "rollback", "web", "--app", "solo", "--release-channel", "staging")
	if c := channel(t, s.status("solo", "web"), "staging"); c.TargetVersion != v1 {
		t.Fatalf("a second rollback re-deploys %s, the version rolled back from (rollback exit %d: %s):\n%s", c.TargetVersion, r.code, r.stdout, dump(c))
	}
	if r.code == 0 {
		t.Errorf("a second rollback with nothing older than v1 should be refused: %s", r)
	}
}
