package usertext

import "testing"

func TestShellQuote(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"hosts.token":     "hosts.token",
		"/etc/drover/a.t": "/etc/drover/a.t",
		"":                "''",
		"my token":        "'my token'",
		"it's":            `'it'\''s'`,
		"$(rm -rf x)":     "'$(rm -rf x)'",
	} {
		if got := ShellQuote(in); got != want {
			t.Errorf("ShellQuote(%q) = %s, want %s", in, got, want)
		}
	}
}
