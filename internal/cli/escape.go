package cli

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// clean makes text that came from other people (user names, comments, event
// and status messages, runtime output) safe to print on one terminal line:
// control characters (line breaks, escape sequences, NUL), format characters
// (zero-width, bidirectional overrides), line separators and invalid UTF-8
// are shown as Go escapes (\n, \x1b, \u202e), so the text cannot forge a line
// or restyle the terminal. -o json shows the exact text.
func clean(s string) string { return escape(s, false) }

// cleanText is clean for multi-line text (run output, error lists): newlines
// and tabs are kept, everything else clean escapes is escaped.
func cleanText(s string) string { return escape(s, true) }

func escape(s string, multiline bool) string {
	if !needsEscape(s, multiline) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case shown(r, multiline):
			b.WriteRune(r)
		default:
			q := fmt.Sprintf("%+q", string(r)) // "\x1b", "\u202e", "\n"
			b.WriteString(q[1 : len(q)-1])
		}
		i += size
	}
	return b.String()
}

func needsEscape(s string, multiline bool) bool {
	if !utf8.ValidString(s) {
		return true
	}
	for _, r := range s {
		if !shown(r, multiline) {
			return true
		}
	}
	return false
}

// shown reports whether r is printed as itself: see printable; newlines and
// tabs too in multi-line text.
func shown(r rune, multiline bool) bool {
	return printable(r) || multiline && (r == '\n' || r == '\t')
}

// printable reports whether r shows as itself: letters, marks, numbers,
// punctuation, symbols and spaces; not control (Cc), format (Cf), line or
// paragraph separators, private use or unassigned code points.
func printable(r rune) bool {
	return r == ' ' || unicode.In(r, unicode.L, unicode.M, unicode.N, unicode.P, unicode.S, unicode.Zs)
}
