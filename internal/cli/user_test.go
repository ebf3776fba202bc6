package cli

import (
	"errors"
	"testing"
)

// TestUserFieldIsOptional: without --user (or DROVER_USER) requests name no
// user, and the server records the credential's identity; a given one is
// normalized as the server compares names, and a bad one is a usage error.
func TestUserFieldIsOptional(t *testing.T) {
	t.Setenv("DROVER_USER", "")
	if got := defaultUser(); got != "" {
		t.Errorf("defaultUser() = %q, want none", got)
	}
	t.Setenv("DROVER_USER", "Alice")
	if got := defaultUser(); got != "Alice" {
		t.Errorf("defaultUser() with DROVER_USER = %q", got)
	}
	g := &globals{}
	if u, err := g.userField(); u != "" || err != nil {
		t.Errorf("no --user: %q %v", u, err)
	}
	g.user = " ALICE "
	if u, err := g.userField(); u != "alice" || err != nil {
		t.Errorf("--user ' ALICE ': %q %v", u, err)
	}
	g.user = "bob\n"
	var ee *ExitError
	if _, err := g.userField(); !errors.As(err, &ee) || ee.Code != exitUsage {
		t.Errorf("--user 'bob\\n': %v, want a usage error", err)
	}
}
