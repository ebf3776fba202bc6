package usertext

import "strings"

// ShellQuote quotes s as one word for a POSIX shell when it needs it, for
// commands drover prints for people to run (a token file's path, say).
func ShellQuote(s string) string {
	if s != "" && !strings.ContainsFunc(s, shellSpecial) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// shellSpecial reports whether r means something to a shell outside quotes.
func shellSpecial(r rune) bool {
	plain := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:@%+=,", r)
	return !plain
}
