package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	apiv1 "github.com/drover-dev/drover/api/v1"
)

// TestRollbackToChosenVersion: push 1.27, 1.28 and 1.29 through staging
// and prod's approval, list the versions, roll prod back to 1.27 by its
// display name: prod waits for its approval like any rollout, converges on
// 1.27 once approved, staging stays on 1.29, and status names the versions.
func TestRollbackToChosenVersion(t *testing.T) {
	requireE2E(t)
	dir := copyQuickstart(t, "1s")
	s := newServer(t)
	s.ok("alice", "apply", dir+"/...")
	versions := map[string]string{}
	for _, tag := range []string{"1.27", "1.28", "1.29"} {
		version, _ := s.push("alice", "quickstart", "web", "image="+tag)
		versions[tag] = version
		s.waitStatus("quickstart", "web", 60*time.Second, "staging on "+tag+", prod waiting", func(st *apiv1.ServiceStatus) bool {
			return channelIs("staging", "CONVERGED", version)(st) && findChannel(st, "prod").Status == "WAITING_MANUAL_APPROVAL"
		})
		s.ok("bob", "approve", "web", "--app", "quickstart", "--release-channel", "prod")
		s.waitStatus("quickstart", "web", 60*time.Second, "prod on "+tag, channelIs("prod", "CONVERGED", version))
	}

	r := s.ok("alice", "versions", "web", "--app", "quickstart")
	for _, tag := range []string{"1.27", "1.28", "1.29"} {
		if !strings.Contains(r.stdout, versions[tag]) || !strings.Contains(r.stdout, "  "+tag+"  ") {
			t.Errorf("versions lacks %s %s:\n%s", versions[tag], tag, r.stdout)
		}
	}
	r = s.as("alice", "rollback", "web", "--app", "quickstart", "--release-channel", "prod", "--to", "0.1")
	if r.code == 0 || !strings.Contains(r.stderr, `no version "0.1"`) || !strings.Contains(r.stderr, "(1.28)") {
		t.Errorf("rollback to an unknown version: %s", r)
	}
	r = s.as("alice", "rollback", "web", "--app", "quickstart", "--release-channel", "prod", "--to", "1.29")
	if r.code == 0 || !strings.Contains(r.stderr, "already") {
		t.Errorf("rollback to the running version: %s", r)
	}

	r = s.ok("alice", "rollback", "web", "--app", "quickstart", "--release-channel", "prod", "--to", "1.27", "-o", "json")
	var res struct {
		DesiredStateID string                 `json:"desiredStateId"`
		Rollbacks      []apiv1.RollbackTarget `json:"rollbacks"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatalf("rollback -o json: %v\n%s", err, r)
	}
	if res.DesiredStateID == "" || len(res.Rollbacks) != 1 || res.Rollbacks[0].Version != versions["1.27"] || res.Rollbacks[0].DisplayName != "1.27" || res.Rollbacks[0].ReleaseChannel != "prod" {
		t.Fatalf("rollback result: %s", r.stdout)
	}
	st := s.waitStatus("quickstart", "web", 60*time.Second, "prod waiting for the rollback's approval", func(st *apiv1.ServiceStatus) bool {
		return findChannel(st, "prod").Status == "WAITING_MANUAL_APPROVAL" && st.DesiredStateID == res.DesiredStateID
	})
	if p := channel(t, st, "prod"); p.Version != versions["1.29"] || p.DesiredVersion != versions["1.27"] {
		t.Errorf("prod rolled back before its approval: %s", dump(p))
	}
	s.ok("bob", "approve", "web", "--app", "quickstart", "--release-channel", "prod")
	st = s.waitStatus("quickstart", "web", 60*time.Second, "prod back on 1.27", channelIs("prod", "CONVERGED", versions["1.27"]))
	if c := channel(t, st, "staging"); c.Version != versions["1.29"] || c.Status != "CONVERGED" {
		t.Errorf("staging moved: %s", dump(c))
	}

	r = s.ok("alice", "status", "web", "--app", "quickstart")
	for _, want := range []string{versions["1.27"] + " (1.27)", versions["1.29"] + " (1.29)"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("status lacks %q:\n%s", want, r.stdout)
		}
	}
	js := s.status("quickstart", "web")
	if p := channel(t, js, "prod"); p.DisplayName != "1.27" || p.DesiredDisplayName != "1.27" {
		t.Errorf("status -o json, prod: %s", dump(p))
	}
	r = s.ok("alice", "versions", "web", "--app", "quickstart")
	if lines := strings.Split(strings.TrimSpace(r.stdout), "\n"); len(lines) != 6 || !strings.Contains(lines[1], "prod*="+versions["1.27"]+" (1.27)") || !strings.Contains(lines[1], "(active, rollback)") {
		t.Errorf("versions after the rollback:\n%s", r.stdout)
	} else {
		t.Logf("versions after the rollback:\n%s", r.stdout)
	}
	r = s.ok("alice", "events", "web", "--app", "quickstart", "--type", "rollback")
	if !strings.Contains(r.stdout, "prod: rollback to "+versions["1.27"]+" (1.27)") {
		t.Errorf("events lack the rollback:\n%s", r.stdout)
	}
}
