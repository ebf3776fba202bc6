package e2e

import (
	"strings"
	"testing"
)

// TestB15EventsOfUnknownServiceRefused: events for a service or application
// that does not exist is an error (exit 1), like status; a configured service
// that was never pushed has its history (exit 0).
func TestB15EventsOfUnknownServiceRefused(t *testing.T) {
	requireE2E(t)
	dir := copyQuickstart(t, "1s")
	s := newServer(t)
	s.ok("alice", "apply", dir+"/...")
	for _, args := range [][]string{
		{"events", "nosuch", "--app", "quickstart"},
		{"events", "web", "--app", "nosuchapp"},
		{"events", "nosuch", "--app", "quickstart", "--follow"},
	} {
		r := s.as("alice", args...)
		if r.code != 1 || !strings.Contains(r.stderr, "no service") || r.stdout != "" {
			t.Errorf("want exit 1 with no service ..., got %s", r)
		}
	}
	if r := s.ok("alice", "events", "web", "--app", "quickstart"); !strings.Contains(r.stdout, "service/quickstart/web created") {
		t.Errorf("a service never pushed: %s", r)
	}
}
