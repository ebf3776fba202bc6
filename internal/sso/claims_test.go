package sso

import (
	"strings"
	"testing"
)

// TestPersonFromClaims: the name claim alone names a person (no other
// claim stands in for a missing one), an e-mail only when verified, and
// groups come as a list or one string.
func TestPersonFromClaims(t *testing.T) {
	t.Parallel()
	rp, err := New(Config{Issuer: "https://idp.example.com", ClientID: "drover"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		claims map[string]any
		want   string // the name, or the error's words
		ok     bool
	}{
		{"verified e-mail", map[string]any{"email": "Ann@Example.com", "email_verified": true, "groups": []any{"b", "a"}}, "ann@example.com", true},
		{"verified as a string", map[string]any{"email": "ann@example.com", "email_verified": "true"}, "ann@example.com", true},
		{"unverified e-mail", map[string]any{"email": "ann@example.com", "email_verified": false}, "does not vouch", false},
		{"no verification", map[string]any{"email": "ann@example.com"}, "does not vouch", false},
		{"no e-mail, a user name", map[string]any{"preferred_username": "ann"}, "carry no email claim", false},
		{"an empty e-mail", map[string]any{"email": " ", "email_verified": true}, "carry no email claim", false},
		{"a control character", map[string]any{"email": "ann\x00@example.com", "email_verified": true}, "cannot name", false},
	} {
		p, err := rp.personFrom("https://idp.example.com", "sub-1", tc.claims)
		switch {
		case tc.ok && (err != nil || p.Name != tc.want || p.Subject != "https://idp.example.com#sub-1"):
			t.Errorf("%s: %+v %v, want %s", tc.name, p, err, tc.want)
		case !tc.ok && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %+v %v, want an error saying %q", tc.name, p, err, tc.want)
		}
	}
	p, _ := rp.personFrom("i", "s", map[string]any{"email": "a@b.c", "email_verified": true, "groups": "solo"})
	if len(p.Groups) != 1 || p.Groups[0] != "solo" {
		t.Errorf("one group as a string: %v", p.Groups)
	}
	bySub, err := New(Config{Issuer: "https://idp.example.com", ClientID: "drover", NameClaim: "sub"})
	if err != nil {
		t.Fatal(err)
	}
	if p, err := bySub.personFrom("i", "U123", map[string]any{}); err != nil || p.Name != "u123" {
		t.Errorf("named by sub: %+v %v", p, err)
	}
}
