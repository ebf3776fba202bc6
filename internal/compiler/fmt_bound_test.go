package compiler

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"text/template"
)

// boundArgs are arguments of every kind a template passes to printf: strings
// (the only ones a template can make large), numbers, data values.
func boundArgs() []any {
	bin := string([]byte{0, 0xff, 0xfe, '\n', '"', 0x80})
	return []any{
		"abc", "", strings.Repeat("é\x01<", 50), bin, strings.Repeat("\xff\x01", 10000), int64(-42), 7, uint8(200), 3.5, -1e308, complex(1e300, -2), true, nil,
		[]byte("bytes\xff"), []string{"", "", ""}, []int{1, 2, 3},
		map[string]any{"k": "v", "n": int64(1), "nested": map[string]any{"": ""}},
		DockerImage{Registry: "docker.io", Repository: "library/nginx", Tag: "1.25"},
		Secret{Key: "k", Version: "1"}, Secret{raw: "raw-secret-value", param: "p"},
		&Data{Params: map[string]any{"a": "b"}, Constants: map[string]string{"c": "d"}, Builtins: Builtins{ReleaseChannel: NameOnly{"prod"}}},
		struct{}{}, &struct{ A, b string }{"x", "y"}, []any{nil, "x", 1.5},
	}
}

// boundFormats are formats that exercise fmt's parsing: flags, widths,
// precisions, * from arguments, [n] indexes, bad verbs and missing,
// extra or bad arguments.
var boundFormats = []string{
	"", "plain", "%", "%%", "%d", "%s%s%s", "%v %+v %#v", "%q %#q %+q", "%x % x % #x %X %#X",
	"%10s|%-10s|%010d|%.3s|%.0f|%8.3f|%e|%g|%#g|%b|%o|%O|%U|%#U|%c|%t|%p|%T",
	"%*d", "%-*d", "%.*f", "%*.*f", "%[2]d %[1]d", "%[3]*.[2]*[1]f", "%[5]d", "%[0]d", "%[x]d", "%[2]2d",
	"%!", "%z", "%w", "%.", "%3", "%[", "%[1", "%10000009d", "%1000001d", "%99999999999d", "%.1000000f",
	"%#v%#v%#v%#v", "%d %d", "%s", "% 5x", "%+.3v", "%#-8.2x", "%ä", "%[1]s%s%s",
}

// TestB2PrintfBoundCoversOutput: the bound computed before formatting is
// never below what fmt produces, for every format and argument kind; and
// likewise for print, println, html, js and urlquery.
func TestB2PrintfBoundCoversOutput(t *testing.T) {
	t.Parallel()
	args := boundArgs()
	check := func(format string, a []any) {
		t.Helper()
		got := len(fmt.Sprintf(format, a...))
		if b := sprintfBound(format, a, math.MaxInt); b < got {
			t.Errorf("printf %q %#v: bound %d < %d", format, a, b, got)
		}
	}
	for _, f := range boundFormats {
		check(f, nil)
		for i := range args {
			check(f, args[i:i+1])
			// Rotations give every position every kind.
			check(f, append(append([]any{}, args[i:]...), args[:i]...))
		}
	}
	// Random formats built from the pieces fmt parses.
	pieces := []string{"%", "%", "d", "s", "v", "q", "x", "f", "#", "+", "-", " ", "0", "*", ".", "[", "]", "1", "2", "3", "9", "00", "a", "é"}
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		var b strings.Builder
		for range r.IntN(12) {
			b.WriteString(pieces[r.IntN(len(pieces))])
		}
		n := r.IntN(5)
		a := make([]any, n)
		for j := range a {
			a[j] = args[r.IntN(len(args))]
			if r.IntN(4) == 0 {
				a[j] = r.IntN(40) - 20 // widths and precisions from arguments
			}
		}
		check(b.String(), a)
	}
	for i := range args {
		a := append(append([]any{}, args[i:]...), args[:i]...)
		for _, c := range []struct {
			name  string
			got   int
			bound int
		}{
			{"print", len(fmt.Sprint(a...)), sprintBound(a, math.MaxInt)},
			{"println", len(fmt.Sprintln(a...)), sprintBound(a, math.MaxInt)},
			{"html", len(template.HTMLEscaper(a...)), escapeBound(a, htmlGrowth, math.MaxInt)},
			{"js", len(template.JSEscaper(a...)), escapeBound(a, jsGrowth, math.MaxInt)},
			{"urlquery", len(template.URLQueryEscaper(a...)), escapeBound(a, urlqueryGrowth, math.MaxInt)},
			{"html1", len(template.HTMLEscaper(args[i])), escapeBound(args[i:i+1], htmlGrowth, math.MaxInt)},
			{"js1", len(template.JSEscaper(args[i])), escapeBound(args[i:i+1], jsGrowth, math.MaxInt)},
			{"urlquery1", len(template.URLQueryEscaper(args[i])), escapeBound(args[i:i+1], urlqueryGrowth, math.MaxInt)},
		} {
			if c.bound < c.got {
				t.Errorf("%s %#v: bound %d < %d", c.name, a, c.bound, c.got)
			}
		}
	}
}

// TestB2PrintfBoundRefusesBombs: the bound of the reviewer's repros passes the
// output limit, so they are refused before fmt builds anything; ordinary
// calls stay far below it.
func TestB2PrintfBoundRefusesBombs(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("0", 16_000_000)
	limit := MaxTemplateOutput
	for name, c := range map[string]struct {
		format string
		args   []any
	}{
		"doubling":     {strings.Repeat("%s", 1000), repeatArg(big, 1000)},
		"wide-format":  {strings.Repeat("%01000000d", 1700), repeatArg(0, 1700)},
		"star-width":   {strings.Repeat("%*d", 100), repeatArgs([]any{1000000, 0}, 100)},
		"indexed":      {strings.Repeat("%[1]s", 100), []any{big}},
		"precision":    {strings.Repeat("%.1000000f", 100), repeatArg(1.5, 100)},
		"quoted-small": {"%q", []any{strings.Repeat("\xff", 5_000_000)}},
	} {
		if b := sprintfBound(c.format, c.args, limit); b <= limit {
			t.Errorf("%s: bound %d is within the limit %d", name, b, limit)
		}
	}
	if b := sprintfBound("%s-%05d", []any{"web", 7}, limit); b > 10_000 {
		t.Errorf("an ordinary printf is bounded at %d bytes", b)
	}
}

func repeatArg(a any, n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = a
	}
	return out
}

func repeatArgs(a []any, n int) []any {
	var out []any
	for range n {
		out = append(out, a...)
	}
	return out
}
