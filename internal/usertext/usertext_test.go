package usertext

import (
	"errors"
	"strings"
	"testing"
)

// TestS2UserNamesNormalized: spellings of one name are one name.
func TestS2UserNamesNormalized(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		"alice", "ALICE", " alice", "alice ", "\u00a0Alice\u3000", "ＡＬＩＣＥ", // full-width
		"AlIcE",
	} {
		got, err := User(in)
		if err != nil || got != "alice" {
			t.Errorf("User(%q) = %q, %v; want alice", in, got, err)
		}
	}
	for in, want := range map[string]string{
		"Alice  Smith":   "alice smith",
		"STRAßE":         "strasse",
		"ﬁona":           "fiona",
		"dev@example.IO": "dev@example.io",
		"Ὀδυσσεύς":       "ὀδυσσεύσ", // case folding maps the final sigma
	} {
		if got, err := User(in); err != nil || got != want {
			t.Errorf("User(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

// TestS2UserNamesRefused: empty, invisible and control characters, overlong.
func TestS2UserNamesRefused(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		"", " ", "\t", "\u3000",
		"ali\u200bce",      // zero-width space
		"eve\u202egnp.exe", // right-to-left override
		"alice\n",          // a line break
		"alice\x1b[31m",    // an escape sequence
		"a\x00b",
		"\xff\xfe",
		"\ufeffalice", // byte order mark
		strings.Repeat("a", MaxUserLen+1),
	} {
		if got, err := User(in); !errors.Is(err, ErrInvalid) {
			t.Errorf("User(%q) = %q, %v; want ErrInvalid", in, got, err)
		}
	}
	if _, err := User(strings.Repeat("é", MaxUserLen)); err != nil {
		t.Errorf("a name of %d characters: %v", MaxUserLen, err)
	}
}

// TestS9CommentControlCharactersRefused: newlines and tabs pass, other
// control and format characters do not.
func TestS9CommentControlCharactersRefused(t *testing.T) {
	t.Parallel()
	if got, err := Comment("  lgtm\n\tchecked the dashboards  "); err != nil || got != "lgtm\n\tchecked the dashboards" {
		t.Errorf("Comment = %q, %v", got, err)
	}
	for _, in := range []string{
		"lgtm\x1b[31m", "a\x00b", "lgtm\r2026-11-24 approved", "x\u202ey", "x\u2028y", "\xff",
		strings.Repeat("x", MaxCommentLen+1),
	} {
		if got, err := Comment(in); !errors.Is(err, ErrInvalid) {
			t.Errorf("Comment(%q) = %q, %v; want ErrInvalid", in, got, err)
		}
	}
}

func FuzzUser(f *testing.F) {
	for _, s := range []string{"alice", " ALICE ", "ali\u200bce", "ﬁ"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := User(s)
		if err != nil {
			return
		}
		again, err := User(n)
		if err != nil || again != n {
			t.Fatalf("User is not idempotent: %q -> %q -> %q, %v", s, n, again, err)
		}
	})
}
