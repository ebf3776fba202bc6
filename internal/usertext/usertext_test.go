package usertext

import (
	"errors"
	"strings"
	"testing"
	"unicode"

	"golang.org/x/text/unicode/norm"
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

// TestS18CherokeeFoldsToCapitals: a Cherokee name folds to its capital
// letters, as Unicode's case folding says, whichever case it was typed in,
// and stays so when normalized again.
func TestS18CherokeeFoldsToCapitals(t *testing.T) {
	t.Parallel()
	for _, in := range []string{"\uab81", "\u13b1", "\uab70\u13a1 \u13f8", "\u13a0\uab71 \u13f0"} {
		got, err := User(in)
		if err != nil {
			t.Fatalf("User(%q): %v", in, err)
		}
		if want := strings.ToUpper(in); got != want {
			t.Errorf("User(%q) = %q (%U), want %q (%U)", in, got, []rune(got), want, []rune(want))
		}
	}
}

// TestS18UserIdempotentForEveryCasedRune: every character that has another
// case or another NFKC form, alone and between letters, normalizes to a name
// that normalizes to itself.
func TestS18UserIdempotentForEveryCasedRune(t *testing.T) {
	t.Parallel()
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if unicode.SimpleFold(r) == r && norm.NFKC.String(string(r)) == string(r) {
			continue
		}
		for _, s := range []string{string(r), "a" + string(r) + "\u0301", "\u03a3" + string(r)} {
			n, err := User(s)
			if err != nil {
				continue
			}
			if again, err := User(n); err != nil || again != n {
				t.Errorf("%q (%U) -> %q -> %q, %v", s, []rune(s), n, again, err)
			}
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
