package compiler

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// verbRecorder records the verbs fmt passes to its Format method.
type verbRecorder struct{ verbs *[]rune }

func (r verbRecorder) Format(f fmt.State, verb rune) {
	*r.verbs = append(*r.verbs, verb)
	fmt.Fprint(f, "rec")
}

// TestS19UnknownVerbMatchesFmt: a format unknownVerb accepts is one in
// which fmt reads only verbs it documents: every argument's Format method
// gets a known verb and nothing is printed as a bad verb (the path that
// bypasses Format), whatever the arguments.
func TestS19UnknownVerbMatchesFmt(t *testing.T) {
	t.Parallel()
	check := func(format string) {
		t.Helper()
		if _, bad := unknownVerb(format); bad {
			return
		}
		for n := range 4 {
			var verbs []rune
			args := make([]any, n)
			for i := range args {
				args[i] = verbRecorder{&verbs}
			}
			out := fmt.Sprintf(format, args...)
			for _, v := range verbs {
				if !strings.ContainsRune(fmtVerbs, v) {
					t.Errorf("%q with %d arguments: accepted, but fmt read the verb %q", format, n, v)
				}
			}
			if strings.Contains(out, "%!w(") {
				t.Errorf("%q with %d arguments: accepted, but fmt printed %q", format, n, out)
			}
		}
	}
	for _, f := range boundFormats {
		check(f)
	}
	pieces := []string{"%", "%", "w", "d", "s", "v", "z", "!", "#", "+", "-", " ", "0", "*", ".", "[", "]", "1", "2", "9", "a", "é", "\xff"}
	rng := rand.New(rand.NewPCG(19, 19))
	for range 50000 {
		var b strings.Builder
		for range 1 + rng.IntN(10) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		check(b.String())
	}
}

// TestS19PrintfUnknownVerbRefused: printf refuses %w and every verb fmt
// does not know, with a constant format as the template is parsed (also in
// a branch that does not run), with a computed one when it runs; the known
// verbs, with flags, widths and indexes, work as before.
func TestS19PrintfUnknownVerbRefused(t *testing.T) {
	t.Parallel()
	data := &Data{Params: map[string]any{"token": Secret{raw: fuzzSecret}, "w": "%w", "v": "%v"}}
	for _, text := range []string{
		`{{printf "%w" $}}`, `{{printf "%w" .Params.token}}`, `{{printf "%[1]w" .}}`, `{{printf "%-10.3w" .}}`,
		`{{printf "%z" .}}`, `{{printf "%!" .}}`, `{{printf "x%%%y" .}}`, `{{. | printf "%w"}}`,
		`{{if false}}{{printf "%w" .}}{{end}}`, `{{define "t"}}{{printf "%w" .}}{{end}}`,
		`{{print (printf "%w" .)}}`, `{{with $x := printf "%w" .}}{{end}}`,
		`{{printf .Params.w .Params.token}}`, `{{printf (print "%" "w") .}}`,
	} {
		out, err := render(t.Context(), "t", text, data)
		if err == nil {
			t.Errorf("%s rendered %q", text, out)
			continue
		}
		line, msg := templateError(err)
		if strings.Contains(msg, fuzzSecret) || !strings.Contains(msg, "which printf does not support") || line != 1 {
			t.Errorf("%s: line %d %q", text, line, msg)
		}
	}
	_, msg := templateError(must(render(t.Context(), "t", "a\n{{printf \"%w\" .}}", data)))
	if !strings.Contains(msg, `printf format "%w" has the verb %w`) || !strings.Contains(msg, "use %v") {
		t.Errorf("the %%w error: %q", msg)
	}
	for text, want := range map[string]string{
		`{{printf "%v|%5s|%-3d|%x|%q|%%|%T" "a" "b" 7 "hi" "q" 1}}`: `a|    b|7  |6869|"q"|%|int`,
		`{{printf "%[2]s %[1]s" "a" "b"}}`:                          "b a",
		`{{printf "%*d" 3 1}}`:                                      "  1",
		`{{printf .Params.v .Params.token}}`:                        "(secret)",
		`{{printf "100%"}}`:                                         "100%!(NOVERB)",
	} {
		if out, err := render(t.Context(), "t", text, data); err != nil || out != want {
			t.Errorf("%s = %q, %v; want %q", text, out, err, want)
		}
	}
}

// must returns err of a call that must fail.
func must(_ string, err error) error {
	if err == nil {
		return fmt.Errorf("no error")
	}
	return err
}
