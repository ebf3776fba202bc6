package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apiv1 "github.com/drover-dev/drover/api/v1"
	"github.com/drover-dev/drover/internal/testing/amtest"
)

// TestAlertGate: prod's alertGate (drover's) asks a real Alertmanager on
// 127.0.0.1: while a matching alert fires prod is BLOCKED, naming it; an
// alert of another team holds nothing; once it is resolved prod rolls out
// at its next poll.
func TestAlertGate(t *testing.T) {
	requireE2E(t)
	am := amtest.Start(t)
	s := newServer(t)
	const app = "alerted"
	dir := twoChannelTree(t, app, "1s")
	p := filepath.Join(dir, "app.pvn.yaml")
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	cfg := strings.Replace(string(data), "        - manualApproval: {}\n", fmt.Sprintf(`      alertGate:
        alertmanager: %s
        matchers: ['severity=~"sev1|sev2"', 'team="payments"']
        pollInterval: 1s
`, am.URL), 1)
	if err := os.WriteFile(p, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	s.ok("alice", "apply", dir+"/...")

	sev1 := map[string]string{"alertname": "HighErrorRate", "severity": "sev1", "team": "payments"}
	am.Fire(sev1)
	am.Fire(map[string]string{"alertname": "SlowSearch", "severity": "sev1", "team": "search"})
	v1, _ := s.push("alice", app, "web", "image=1.0")
	st := s.waitStatus(app, "web", 30*time.Second, "prod held by the alert", func(st *apiv1.ServiceStatus) bool {
		return findChannel(st, "staging").Status == "CONVERGED" && findChannel(st, "prod").Status == "BLOCKED"
	})
	want := `blocked by alertGate (deployment): 1 alert(s) firing matching severity=~"sev1|sev2", team="payments": HighErrorRate{severity="sev1", team="payments"}`
	if msg := findChannel(st, "prod").Message; msg != want {
		t.Errorf("prod's message:\n%s\nwant:\n%s", msg, want)
	}
	time.Sleep(1500 * time.Millisecond)
	if pc := findChannel(s.status(app, "web"), "prod"); pc.Status != "BLOCKED" {
		t.Fatalf("prod moved while the alert fires: %s", dump(pc))
	}

	resolved := time.Now()
	am.Resolve(sev1)
	s.waitStatus(app, "web", 30*time.Second, "prod converged once the alert resolved", converged(v1))
	var started time.Time
	for _, ev := range s.events(app, "web") {
		if ev.Type == "started" && ev.ReleaseChannel == "prod" {
			started = ev.Time
		}
	}
	if started.IsZero() {
		t.Fatal("no started event for prod")
	}
	t.Logf("alert resolved to prod's rollout start: %v (pollInterval 1s)", started.Sub(resolved))
}
