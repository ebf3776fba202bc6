package auth

import (
	"os/user"
	"testing"
)

// TestS10LocalNameIsNotUnknown: without USER and LOGNAME the local identity
// is the OS account, never a shared "unknown".
func TestS10LocalNameIsNotUnknown(t *testing.T) {
	t.Setenv("USER", "")
	t.Setenv("LOGNAME", "")
	got := LocalName()
	if got == "unknown" || got == "" {
		t.Fatalf("LocalName() = %q", got)
	}
	if u, err := user.Current(); err == nil && got != u.Username {
		t.Errorf("LocalName() = %q, want the OS user %q", got, u.Username)
	}
	t.Setenv("LOGNAME", "fromlogname")
	if _, err := user.Current(); err != nil && LocalName() != "fromlogname" {
		t.Errorf("LocalName() = %q, want LOGNAME when the OS user is unknown", LocalName())
	}
}
