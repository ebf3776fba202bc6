package terraform

import (
	"strings"
	"unicode/utf8"
)

// errorExcerpt is the part of a command's stderr worth putting in an error
// message: from terraform's first "Error:" on, or else the end, at most
// about 1 KiB, on one line per paragraph.
func errorExcerpt(stderr string) string {
	const limit = 1024
	s := stderr
	if i := strings.Index(s, "Error: "); i >= 0 {
		s = s[i:]
	} else if len(s) > limit {
		s = s[len(s)-limit:]
	}
	var lines []string
	for line := range strings.SplitSeq(s, "\n") {
		line = strings.TrimSpace(strings.Trim(line, "│╷╵"))
		if line != "" {
			lines = append(lines, line)
		}
	}
	s = strings.Join(lines, " ")
	if len(s) > limit {
		s = s[:limit]
		for len(s) > 0 && !utf8.ValidString(s) {
			s = s[:len(s)-1]
		}
		s += "…"
	}
	return s
}
