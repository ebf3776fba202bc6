package cli

import (
	"os/user"
	"testing"
)

// TestS10DefaultUserIsNotUnknown: without DROVER_USER, USER and LOGNAME the
// default identity is the OS account, never a shared "unknown".
func TestS10DefaultUserIsNotUnknown(t *testing.T) {
	t.Setenv("DROVER_USER", "")
	t.Setenv("USER", "")
	t.Setenv("LOGNAME", "")
	got := defaultUser()
	if got == "unknown" {
		t.Fatalf("defaultUser() = %q", got)
	}
	if u, err := user.Current(); err == nil && got != u.Username {
		t.Errorf("defaultUser() = %q, want the OS user %q", got, u.Username)
	}
	t.Setenv("LOGNAME", "fromlogname")
	if _, err := user.Current(); err != nil && defaultUser() != "fromlogname" {
		t.Errorf("defaultUser() = %q, want LOGNAME when the OS user is unknown", defaultUser())
	}
	t.Setenv("DROVER_USER", "Alice")
	if got := defaultUser(); got != "Alice" {
		t.Errorf("defaultUser() with DROVER_USER = %q", got)
	}
}
