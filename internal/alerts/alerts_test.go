package alerts_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/alerts"
	"github.com/drover-dev/drover/internal/testing/amtest"
)

// TestFiringAgainstAlertmanager asks a real Alertmanager: an alert posted
// to it fires for matching filters only, and stops once resolved.
func TestFiringAgainstAlertmanager(t *testing.T) {
	t.Parallel()
	am := amtest.Start(t)
	c := &alerts.Client{}
	ctx := context.Background()
	sev1 := map[string]string{"alertname": "HighErrorRate", "severity": "sev1", "team": "payments"}
	am.Fire(sev1)
	am.Fire(map[string]string{"alertname": "DiskFilling", "severity": "sev3", "team": "payments"})
	got, err := c.FiringAlerts(ctx, am.URL, []string{`severity=~"sev1|sev2"`, `team="payments"`})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != `HighErrorRate{severity="sev1", team="payments"}` {
		t.Fatalf("firing: %q", got)
	}
	if got, err := c.FiringAlerts(ctx, am.URL, []string{`team="search"`}); err != nil || len(got) != 0 {
		t.Fatalf("another team: %q, %v", got, err)
	}
	am.Resolve(sev1)
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := c.FiringAlerts(ctx, am.URL, []string{`severity="sev1"`})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still firing after it was resolved: %q", got)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := c.FiringAlerts(ctx, am.URL, []string{`!!`}); err == nil || !strings.Contains(err.Error(), "400") {
		t.Errorf("a bad matcher: %v", err)
	}
	if _, err := c.FiringAlerts(ctx, "http://127.0.0.1:1", nil); err == nil || !strings.Contains(err.Error(), "alertmanager http://127.0.0.1:1") {
		t.Errorf("nobody there: %v", err)
	}
}
