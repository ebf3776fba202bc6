package config

import (
	"fmt"
	"unicode/utf8"
)

// MaxEcho is how many bytes of a user's value an error message quotes.
const MaxEcho = 256

// Clip returns s, or when it is longer than MaxEcho bytes its first bytes
// (cut on a rune boundary) and a note of its length, so that an error
// about a 10 MB name is not itself 10 MB long.
func Clip(s string) string {
	if len(s) <= MaxEcho {
		return s
	}
	cut := MaxEcho
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s... (%d bytes)", s[:cut], len(s))
}

// clipArgs clips the string arguments of an error message.
func clipArgs(args []any) []any {
	var out []any
	for i, a := range args {
		s, ok := a.(string)
		if !ok || len(s) <= MaxEcho {
			continue
		}
		if out == nil {
			out = append([]any(nil), args...)
		}
		out[i] = Clip(s)
	}
	if out == nil {
		return args
	}
	return out
}
