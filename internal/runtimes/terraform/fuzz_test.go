package terraform

import (
	"slices"
	"strings"
	"testing"
)

// FuzzInitArgs feeds extraInitArgs (a service parameter) to the shell-like
// splitter and the init flag parser: no panic, and quoting the words back
// splits to the same words.
func FuzzInitArgs(f *testing.F) {
	for _, seed := range []string{
		"-upgrade", "-reconfigure -backend=false", `-backend-config="key=a b"`, `-plugin-dir='/x y'`,
		`a\ b "c\"d" 'e'`, `"unterminated`, `trailing\`, "-get=false -lock-timeout=5s", "", "   ", "-from-module=x",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		words, err := splitWords(s)
		if err == nil {
			quoted := make([]string, len(words))
			for i, w := range words {
				quoted[i] = quoteWord(w)
			}
			again, err := splitWords(strings.Join(quoted, " "))
			if err != nil || !slices.Equal(again, words) {
				t.Fatalf("%q: words %q quote back to %q (%v)", s, words, again, err)
			}
		}
		_, _ = parseInitArgs(s)
	})
}
