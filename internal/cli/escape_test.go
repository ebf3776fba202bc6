package cli

import "testing"

// TestS9TerminalEscapes: text from other people cannot forge lines, restyle
// the terminal or reorder what is shown.
func TestS9TerminalEscapes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, line, text string }{
		{"approved by alice", "approved by alice", "approved by alice"},
		{"lgtm\n2026-11-24 10:39:01  approved     prod", `lgtm\n2026-11-24 10:39:01  approved     prod`, "lgtm\n2026-11-24 10:39:01  approved     prod"},
		{"eve\u202egnp.exe", `eve\u202egnp.exe`, `eve\u202egnp.exe`},
		{"a\x00b\x1b[31mred\x1b[0m", `a\x00b\x1b[31mred\x1b[0m`, `a\x00b\x1b[31mred\x1b[0m`},
		{"col\tumn\r", `col\tumn\r`, "col\tumn\\r"},
		{"zero\u200bwidth", `zero\u200bwidth`, `zero\u200bwidth`},
		{"bad \xff utf-8", `bad \xff utf-8`, `bad \xff utf-8`},
		{"naïve 日本 ✓", "naïve 日本 ✓", "naïve 日本 ✓"},
	} {
		if got := clean(tc.in); got != tc.line {
			t.Errorf("clean(%q) = %q, want %q", tc.in, got, tc.line)
		}
		if got := cleanText(tc.in); got != tc.text {
			t.Errorf("cleanText(%q) = %q, want %q", tc.in, got, tc.text)
		}
	}
}
