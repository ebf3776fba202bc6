package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apiv1 "github.com/drover-dev/drover/api/v1"
)

// protectionTree is twoChannelTree with protections attached: staging's
// deployment needs a window that is always open, prod's postApproval one
// that opens only the day after tomorrow (UTC), or prodProtection instead.
func protectionTree(t *testing.T, app, prodProtection string) string {
	t.Helper()
	dir := twoChannelTree(t, app, "1s")
	later := time.Now().UTC().AddDate(0, 0, 2).Weekday().String()[:3]
	writeTree(t, dir, map[string]string{
		"protections/always-open.pvn.yaml": "protection:\n  name: always-open\n  builtin:\n    allowedTimes:\n      windows:\n        - {hours: 0-23}\n",
		"protections/later.pvn.yaml":       fmt.Sprintf("protection:\n  name: later\n  builtin:\n    allowedTimes:\n      windows:\n        - {days: %s, tz: UTC}\n", strings.ToLower(later)),
		"protections/green.pvn.yaml":       "protection:\n  name: green\n  builtin:\n    alwaysPassing: {}\n",
	})
	p := filepath.Join(dir, "app.pvn.yaml")
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Replace(string(data), "        - runtime: staging\n", `        - runtime: staging
      protections:
        - ref: {name: always-open}
          lifecycle:
            - deployment: {failureBehavior: FAIL}
`, 1)
	s = strings.Replace(s, "        - runtime: prod\n", fmt.Sprintf(`        - runtime: prod
      protections:
        - name: window
          ref: {name: %s}
          lifecycle:
            - postApproval: {}
`, prodProtection), 1)
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestProtectionsGate: builtin protections gate a real server's rollout:
// staging passes its always-open window; prod, approved, is BLOCKED by a
// window that opens only later, saying until when; bypassed (with a trace
// in the history), it rolls out; a push whose prod protection passes rolls
// out once approved.
func TestProtectionsGate(t *testing.T) {
	requireE2E(t)
	s := newServer(t)
	const app = "gated"
	s.ok("alice", "apply", protectionTree(t, app, "later")+"/...")
	v1, _ := s.push("alice", app, "web", "image=1.0")
	s.waitStatus(app, "web", 30*time.Second, "staging converged, prod waiting for approval", func(st *apiv1.ServiceStatus) bool {
		sc, pc := findChannel(st, "staging"), findChannel(st, "prod")
		return sc != nil && sc.Status == "CONVERGED" && sc.Version == v1 && pc != nil && pc.Status == "WAITING_MANUAL_APPROVAL"
	})
	s.ok("bob", "approve", "web", "--app", app, "--release-channel", "prod")
	st := s.waitStatus(app, "web", 30*time.Second, "prod blocked by its window", func(st *apiv1.ServiceStatus) bool {
		return findChannel(st, "prod").Status == "BLOCKED"
	})
	msg := findChannel(st, "prod").Message
	if !strings.Contains(msg, "blocked by protection later (postApproval): outside the allowed times") || !strings.Contains(msg, " until ") {
		t.Errorf("prod's message: %q", msg)
	}
	if st.Status != "BLOCKED" {
		t.Errorf("service status %s, want BLOCKED", st.Status)
	}
	if out := s.ok("alice", "status", "web", "--app", app).stdout; !strings.Contains(out, "BLOCKED") || !strings.Contains(out, "outside the allowed times") {
		t.Errorf("drover status does not say why prod is held:\n%s", out)
	}

	checks := findChannel(st, "prod").Checks
	if len(checks) != 1 || checks[0].Attachment != "window" || checks[0].Name != "later" || checks[0].Phase != "postApproval" ||
		checks[0].State != "failing" || checks[0].NextChange.IsZero() {
		t.Errorf("prod's checks in the status: %s", dump(checks))
	}
	if sc := findChannel(st, "staging").Checks; len(sc) != 1 || sc[0].State != "passed" {
		t.Errorf("staging's checks in the status: %s", dump(sc))
	}

	// Bypassed with a trace, the window no longer holds this push.
	r := s.as("carol", "bypass", "web", "--app", app, "--release-channel", "prod", "--protection", "nosuch")
	if r.code == 0 || !strings.Contains(r.stderr, `has no protection "nosuch" (it has: window)`) {
		t.Errorf("bypass of an unknown protection: %s", r)
	}
	s.ok("carol", "bypass", "web", "--app", app, "--release-channel", "prod", "--protection", "window", "--comment", "hotfix INC-42")
	s.waitStatus(app, "web", 30*time.Second, "prod converged past its bypassed window", func(st *apiv1.ServiceStatus) bool {
		pc := findChannel(st, "prod")
		return pc.Status == "CONVERGED" && pc.Version == v1
	})
	if pc := findChannel(s.status(app, "web"), "prod").Checks; len(pc) != 1 || pc[0].State != "bypassed" || pc[0].BypassedBy != "carol" {
		t.Errorf("prod's checks after the bypass: %s", dump(pc))
	}
	found := false
	for _, ev := range s.events(app, "web") {
		if ev.Type == "bypassed" && ev.Actor == "carol" && strings.Contains(ev.Message, "window (postApproval) bypassed for "+v1+" by carol: hotfix INC-42") {
			found = true
		}
	}
	if !found {
		t.Errorf("no bypassed event by carol in the history: %s", dump(s.events(app, "web")))
	}
	if r := s.as("carol", "bypass", "web", "--app", app, "--release-channel", "prod", "--protection", "window"); r.code == 0 || !strings.Contains(r.stderr, "already bypassed") {
		t.Errorf("second bypass: %s", r)
	}

	s.ok("alice", "apply", protectionTree(t, app, "green")+"/...")
	v2, _ := s.push("alice", app, "web", "image=1.1")
	if v2 == v1 {
		t.Fatal("the second push has the same version")
	}
	s.waitStatus(app, "web", 30*time.Second, "prod waiting for the new approval", func(st *apiv1.ServiceStatus) bool {
		return findChannel(st, "prod").Status == "WAITING_MANUAL_APPROVAL"
	})
	s.ok("bob", "approve", "web", "--app", app, "--release-channel", "prod")
	s.waitStatus(app, "web", 30*time.Second, "both converged", converged(v2))
}

// TestDeployWindows: a release channel's deployWindows (drover's) hold a
// new deployment outside them, BLOCKED until the next opening; a bypass of
// deployWindows lets the desired state through.
func TestDeployWindows(t *testing.T) {
	requireE2E(t)
	s := newServer(t)
	const app = "windowed"
	dir := twoChannelTree(t, app, "1s")
	p := filepath.Join(dir, "app.pvn.yaml")
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	later := strings.ToLower(time.Now().UTC().AddDate(0, 0, 2).Weekday().String()[:3])
	text := strings.Replace(string(data), "        - runtime: staging\n", "        - runtime: staging\n      deployWindows:\n        - {days: "+later+", hours: 9-17, tz: Europe/Berlin}\n", 1)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	s.ok("alice", "apply", dir+"/...")
	v, _ := s.push("alice", app, "web", "image=1.0")
	st := s.waitStatus(app, "web", 30*time.Second, "staging blocked outside its deploy windows", func(st *apiv1.ServiceStatus) bool {
		return findChannel(st, "staging").Status == "BLOCKED"
	})
	if msg := findChannel(st, "staging").Message; !strings.Contains(msg, "blocked by deployWindows (deployment): outside the allowed times ("+later+" hours 9-17 Europe/Berlin) until ") {
		t.Errorf("staging's message: %q", msg)
	}
	s.ok("carol", "bypass", "web", "--app", app, "--release-channel", "staging", "--protection", "deployWindows", "--comment", "urgent")
	s.waitStatus(app, "web", 30*time.Second, "staging converged past its windows", func(st *apiv1.ServiceStatus) bool {
		sc := findChannel(st, "staging")
		return sc.Status == "CONVERGED" && sc.Version == v
	})
}
