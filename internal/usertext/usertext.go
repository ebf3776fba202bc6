// Package usertext checks and normalizes the text people put in requests:
// the user names recorded with approvals, pushes and other actions, and the
// comments kept with approvals.
//
// A user name is normalized so that one person cannot count twice toward a
// quorum by spelling their name differently ("alice", "ALICE", " alice",
// "alice" with a zero-width space): it is trimmed, its inner runs of spaces
// become one space, it is put in Unicode NFKC form and case-folded, until
// normalizing it again changes nothing (User(User(x)) == User(x)). Names
// holding control or format characters (line breaks, escape sequences,
// zero-width and bidirectional controls) are refused, not cleaned, so what is
// recorded is what the person typed. This is not authentication: it only
// keeps one spelling per name until the identity comes from the server.
package usertext

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"
)

// MaxUserLen bounds a user name, in characters after normalization.
const MaxUserLen = 128

// MaxCommentLen bounds a comment, in characters.
const MaxCommentLen = 1000

// ErrInvalid is wrapped by every error of this package.
var ErrInvalid = errors.New("invalid text")

// fold is the case folding of user names; a cases.Caser is not safe for
// concurrent use, so each call makes its own (they are cheap).
func fold() cases.Caser { return cases.Fold() }

// User returns the normalized form of a user name: trimmed, inner spaces
// collapsed, NFKC, case-folded. It refuses an empty name, invalid UTF-8,
// control and format characters, and names longer than MaxUserLen.
func User(name string) (string, error) {
	if !utf8.ValidString(name) {
		return "", fmt.Errorf("user name %q is not valid UTF-8: %w", name, ErrInvalid)
	}
	if err := refuse("user name", name, false); err != nil {
		return "", err
	}
	n, ok := stable(name)
	switch {
	case !ok:
		return "", fmt.Errorf("user name has no stable normalized form (its case folding does not settle): spell it another way: %w", ErrInvalid)
	case n == "":
		return "", fmt.Errorf("user name is empty: set --user or DROVER_USER: %w", ErrInvalid)
	case utf8.RuneCountInString(n) > MaxUserLen:
		return "", fmt.Errorf("user name is longer than %d characters: %w", MaxUserLen, ErrInvalid)
	}
	if err := refuse("user name", n, false); err != nil {
		return "", err
	}
	return n, nil
}

// maxRounds bounds the rounds of normalize in stable; names seen so far
// need at most two (one to normalize, one to confirm).
const maxRounds = 4

// stable applies normalize until its result no longer changes, so that
// User(User(x)) == User(x) holds by construction and not only for the
// spellings tried; ok is false for a name that does not settle within
// maxRounds, which User refuses rather than record an unstable spelling.
func stable(name string) (n string, ok bool) {
	n = normalize(name)
	for range maxRounds {
		next := normalize(n)
		if next == n {
			return n, true
		}
		n = next
	}
	return "", false
}

// normalize is one round of user name normalization: NFKC, case folding,
// NFKC again and spaces collapsed. NFKC maps compatibility forms
// (full-width letters, no-break and other spaces) to their plain form;
// folding after it can leave a string that is not NFKC, so it normalizes
// once more.
func normalize(name string) string {
	n := norm.NFKC.String(foldCherokee(fold().String(norm.NFKC.String(name))))
	return strings.Join(strings.Fields(n), " ")
}

// foldCherokee puts Cherokee letters in the case Unicode folds them to: the
// capital one. Cherokee was written in capitals only until Unicode 8 added
// small letters, and case folding must not change for letters already
// encoded, so CaseFolding.txt maps the small letters (U+AB70-U+ABBF,
// U+13F8-U+13FD) to the capitals. cases.Fold maps each to the other
// instead, so that folding twice gives back the first spelling (S18).
func foldCherokee(s string) string {
	if !strings.ContainsFunc(s, isCherokeeSmall) {
		return s
	}
	return strings.Map(func(r rune) rune {
		if isCherokeeSmall(r) {
			return unicode.ToUpper(r)
		}
		return r
	}, s)
}

func isCherokeeSmall(r rune) bool {
	return (r >= 0xAB70 && r <= 0xABBF) || (r >= 0x13F8 && r <= 0x13FD)
}

// Comment returns a comment trimmed of surrounding white space. It may span
// lines (newlines and tabs are kept) but may hold no other control or format
// characters, and at most MaxCommentLen characters.
func Comment(c string) (string, error) {
	if !utf8.ValidString(c) {
		return "", fmt.Errorf("comment is not valid UTF-8: %w", ErrInvalid)
	}
	c = strings.TrimSpace(c)
	if n := utf8.RuneCountInString(c); n > MaxCommentLen {
		return "", fmt.Errorf("comment has %d characters, more than %d: %w", n, MaxCommentLen, ErrInvalid)
	}
	if err := refuse("comment", c, true); err != nil {
		return "", err
	}
	return c, nil
}

// refuse reports the first character of s that may not appear in what:
// control characters (Cc; newline and tab when multiline allows them),
// format characters (Cf: zero-width, bidirectional controls, soft hyphen),
// line and paragraph separators, private use and unassigned code points.
func refuse(what, s string, multiline bool) error {
	for i, r := range s {
		if multiline && (r == '\n' || r == '\t') {
			continue
		}
		if r == ' ' || unicode.In(r, unicode.L, unicode.M, unicode.N, unicode.P, unicode.S, unicode.Zs) {
			continue
		}
		return fmt.Errorf("%s has the control or invisible character %U at byte %d: %w", what, r, i, ErrInvalid)
	}
	return nil
}
