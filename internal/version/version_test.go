package version

import (
	"fmt"
	"testing"
)

func TestBuildString(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		b    Build
		want string
	}{
		{Build{Version: "dev"}, "dev (commit unknown)"},
		{Build{Version: "v1.2.0", Commit: "0123456789abcdef0123", Date: "2026-12-01T10:00:00Z"}, "v1.2.0 (commit 0123456789ab, 2026-12-01T10:00:00Z)"},
		{Build{Version: "dev", Commit: "abc", Modified: true}, "dev (commit abc, modified)"},
	} {
		if got := tc.b.String(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.b, got, tc.want)
		}
	}
}

// TestInfoFallsBackToTheStamp: without the toolchain's VCS stamp (a test
// binary has none), the ldflags stamp is what Info reports.
func TestInfoFallsBackToTheStamp(t *testing.T) {
	old := [3]string{Version, Commit, Date}
	t.Cleanup(func() { Version, Commit, Date = old[0], old[1], old[2] })
	Version, Commit, Date = "v9.9.9", "feedface", "2026-01-02T03:04:05Z"
	b := Info()
	if b.Version != "v9.9.9" || b.Commit != "feedface" || b.Date != "2026-01-02T03:04:05Z" {
		t.Errorf("Info() = %+v, want the stamp", b)
	}
}

func TestDescribedCommit(t *testing.T) {
	t.Parallel()
	for v, want := range map[string]string{
		"185edbc":                       "185edbc false",
		"185edbc-dirty":                 "185edbc true",
		"v1.2.0-3-g185edbc":             "185edbc false",
		"v1.2.0-rc1-12-g185edbcf-dirty": "185edbcf true",
		"v1.2.0":                        " false",
		"dev":                           " false",
		"deadbeefcafe-extra":            " false",
	} {
		c, m := describedCommit(v)
		if got := fmt.Sprintf("%s %v", c, m); got != want {
			t.Errorf("describedCommit(%q) = %q, want %q", v, got, want)
		}
	}
}
