package labelquery

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
)

func TestMatch(t *testing.T) {
	t.Parallel()
	prodStartup := Labels{"@type": "runtime", "env": "production", "tier": "startup"}
	prodTeams := Labels{"@type": "runtime", "env": "production", "tier": "teams"}
	prodEnterprise := Labels{"@type": "runtime", "env": "production", "tier": "enterprise"}
	staging := Labels{"@type": "runtime", "env": "staging", "region": "us-east-1"}
	channel := Labels{"@type": "release-channel", "@group": "staging", "@name": "prod-eu", "team": "a b", "empty": ""}
	none := Labels{}

	tests := []struct {
		query string
		yes   []Labels
		no    []Labels
	}{
		{"env=staging", []Labels{staging}, []Labels{prodStartup, channel, none}},
		{"@type=runtime env=staging", []Labels{staging}, []Labels{prodStartup, channel}},
		{"tier=startup +tier=teams", []Labels{prodStartup, prodTeams}, []Labels{prodEnterprise, staging}},
		{"env=production -tier=enterprise", []Labels{prodStartup, prodTeams}, []Labels{prodEnterprise, staging}},
		{"env=production (tier=startup +tier=teams)", []Labels{prodStartup, prodTeams}, []Labels{prodEnterprise, staging, channel}},
		{"@group=staging", []Labels{channel}, []Labels{staging}},
		{"region=us-east-1", []Labels{staging}, []Labels{prodStartup}},
		{"@name=prod-eu", []Labels{channel}, []Labels{staging}},
		{`team="a b"`, []Labels{channel}, []Labels{staging}},
		{`empty=""`, []Labels{channel}, []Labels{staging, none}},
		{`empty!=""`, []Labels{staging, none}, []Labels{channel}},
		{"tier!=enterprise", []Labels{prodStartup, staging, none}, []Labels{prodEnterprise}},
		{"tier", []Labels{prodStartup, prodEnterprise}, []Labels{staging, none}},
		{"@type=runtime -tier", []Labels{staging}, []Labels{prodStartup, channel}},
		// Left-to-right folding, no precedence.
		{"env=staging tier=startup +tier=teams", []Labels{prodTeams}, []Labels{staging, prodStartup}},
		{"env=staging +tier=teams env=production", []Labels{prodTeams}, []Labels{staging, prodStartup}},
		{"env=production -tier=teams +env=staging", []Labels{prodStartup, prodEnterprise, staging}, []Labels{prodTeams}},
		// Prefixed groups.
		{"env=staging +(env=production tier=teams)", []Labels{staging, prodTeams}, []Labels{prodStartup}},
		{"env=production -(tier=startup +tier=teams)", []Labels{prodEnterprise}, []Labels{prodStartup, prodTeams, staging}},
		{"(+tier=startup +tier=teams)", []Labels{prodStartup, prodTeams}, []Labels{prodEnterprise}},
		{"  ((env=staging))\n", []Labels{staging}, []Labels{prodStartup}},
		{"\tenv=production\t( tier=teams )", []Labels{prodTeams}, []Labels{prodStartup}},
		{`quote="a\"b\\c"`, []Labels{{"quote": `a"b\c`}}, []Labels{{"quote": `a"b`}}},
		{"k=-1 +k=+2", []Labels{{"k": "-1"}, {"k": "+2"}}, []Labels{{"k": "1"}}},
		{"a+b", []Labels{{"a+b": "x"}}, []Labels{{"a": "x", "b": "x"}}},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			t.Parallel()
			q, err := Parse(tt.query)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			for _, l := range tt.yes {
				if !q.Match(l) {
					t.Errorf("Match(%v) = false, want true", l)
				}
			}
			for _, l := range tt.no {
				if q.Match(l) {
					t.Errorf("Match(%v) = true, want false", l)
				}
			}
		})
	}
}

func TestString(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"env=staging", "env=staging"},
		{"  a   b\t+c\n-d ", "a b +c -d"},
		{"(a b)", "a b"},
		{"((a))", "a"},
		{"a (b)", "a b"},
		{"a -(b)", "a -b"},
		{"(a +b) c", "a +b c"},
		{"a (b +c)", "a (b +c)"},
		{"a -(b +(c d))", "a -(b +(c d))"},
		{"+a +b", "a +b"},
		{"a (+b +c)", "a (b +c)"},
		{`k="plain"`, "k=plain"},
		{`k="a b"`, `k="a b"`},
		{`k=""`, `k=""`},
		{`k!="x\"y\\z"`, `k!="x\"y\\z"`},
		{`k="ünï"`, `k="ünï"`},
		{"k=-1", "k=-1"},
		{"@type=runtime", "@type=runtime"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			if got := MustParse(tt.in).String(); got != tt.want {
				t.Errorf("String() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		query  string
		offset int
		msg    string // substring of SyntaxError.Msg
	}{
		{"env=prod (a", 9, `unclosed "("`},
		{"((a)", 0, `unclosed "("`},
		{"a)", 1, `unexpected ")" without a matching "("`},
		{"(a))", 3, `unexpected ")"`},
		{")", 0, `unexpected ")"`},
		{"()", 0, `empty group "()"`},
		{"a ( )", 2, `empty group "()"`},
		{"a +", 3, `expected a label term right after "+", found end of query`},
		{"a -", 3, `expected a label term right after "-", found end of query`},
		{"a + b", 3, `right after "+", found whitespace`},
		{"a (b +)", 6, `right after "+", found ")"`},
		{"a +-b", 3, `expected a label key or "(", found "-"`},
		{"a ++b", 3, `found "+"`},
		{"-a", 0, `"-" at the start of a group`},
		{"a (-b c)", 3, `"-" at the start of a group`},
		{"=value", 0, `expected a label key before "="`},
		{"a !=value", 2, `expected a label key before "!="`},
		{"key=", 4, `expected a value after "=", found end of query; to match an empty value write key=""`},
		{"key!= b", 5, `expected a value after "!=", found whitespace`},
		{"key=(a)", 4, `expected a value after "="`},
		{"key!value", 3, `expected "!=" after label key "key", found "!"`},
		{"a=b=c", 3, `unexpected "=" after term`},
		{"env=prod,staging", 8, `unexpected "," after term; separate terms with whitespace`},
		{"a(b)", 1, `unexpected "(" after term`},
		{"(a)(b)", 3, `unexpected "(" after term`},
		{`a="x"b`, 5, `unexpected "b" after term`},
		{`a="x`, 2, "unterminated quoted value"},
		{`a="x\`, 2, "unterminated quoted value"},
		{`a="x\n"`, 4, "invalid escape"},
		{`"a"=b`, 0, "only values may be quoted"},
		{"a !b", 2, `expected a label key or "(", found "!"`},
		{"env=prod\u00a0tier=x", 8, `unexpected "\u00a0" after term`},
		{"a \xff", 2, "found byte 0xff"},
		{"a \ufffd", 2, `found "\ufffd"`},
		{strings.Repeat("(", maxDepth+1) + "a" + strings.Repeat(")", maxDepth+1), maxDepth, "nested more than"},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			t.Parallel()
			q, err := Parse(tt.query)
			if err == nil {
				t.Fatalf("Parse succeeded with %q, want error", q)
			}
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("error %v (%T) is not a *SyntaxError", err, err)
			}
			if se.Query != tt.query {
				t.Errorf("Query = %q, want %q", se.Query, tt.query)
			}
			if se.Offset != tt.offset {
				t.Errorf("Offset = %d, want %d (%v)", se.Offset, tt.offset, err)
			}
			if !strings.Contains(se.Msg, tt.msg) {
				t.Errorf("Msg = %q, want it to contain %q", se.Msg, tt.msg)
			}
		})
	}
}

func TestParseDepthLimit(t *testing.T) {
	t.Parallel()
	deep := strings.Repeat("(", maxDepth) + "a b" + strings.Repeat(")", maxDepth)
	if _, err := Parse(deep); err != nil {
		t.Errorf("Parse at the depth limit: %v", err)
	}
}

func TestSyntaxErrorMessage(t *testing.T) {
	t.Parallel()
	_, err := Parse("env=prod (a")
	want := `label query "env=prod (a": offset 9: unclosed "(": expected ")" before end of query`
	if err == nil || err.Error() != want {
		t.Errorf("error = %v, want %s", err, want)
	}
}

func TestEmpty(t *testing.T) {
	t.Parallel()
	for _, q := range []string{"", " ", "\t\n\r "} {
		_, err := Parse(q)
		if !errors.Is(err, ErrEmpty) {
			t.Errorf("Parse(%q) error = %v, want ErrEmpty", q, err)
		}
	}
}

func TestKeys(t *testing.T) {
	t.Parallel()
	got := MustParse("env=production (tier=startup +tier=teams) -@type=release-channel region").Keys()
	want := []string{"@type", "env", "region", "tier"}
	if !slices.Equal(got, want) {
		t.Errorf("Keys() = %q, want %q", got, want)
	}
	// Callers must not be able to mutate the query through the result.
	got[0] = "mutated"
	if k := MustParse("b a").Keys(); k[0] != "a" {
		t.Errorf("Keys()[0] = %q, want a", k[0])
	}
}

func TestSelect(t *testing.T) {
	t.Parallel()
	items := []Labels{
		{"env": "production", "tier": "startup"},
		{"env": "staging"},
		{"env": "production", "tier": "enterprise"},
		{"env": "production", "tier": "teams"},
	}
	if got, want := MustParse("env=production -tier=enterprise").Select(items), []int{0, 3}; !slices.Equal(got, want) {
		t.Errorf("Select = %v, want %v", got, want)
	}
	if got := MustParse("env=dev").Select(items); got != nil {
		t.Errorf("Select with no match = %v, want nil", got)
	}
}

func TestZeroQuery(t *testing.T) {
	t.Parallel()
	var zero Query
	if zero.Match(Labels{"a": "b"}) || zero.String() != "" || len(zero.Keys()) != 0 {
		t.Errorf("zero Query should match nothing and print as empty")
	}
	var nilQuery *Query
	if nilQuery.Match(Labels{}) || nilQuery.Select([]Labels{{}}) != nil {
		t.Errorf("nil *Query should match nothing")
	}
}

func TestMustParsePanics(t *testing.T) {
	t.Parallel()
	defer func() {
		if recover() == nil {
			t.Error("MustParse did not panic on invalid input")
		}
	}()
	MustParse("(")
}

func TestConcurrentMatch(t *testing.T) {
	t.Parallel()
	q := MustParse("env=production (tier=startup +tier=teams)")
	l := Labels{"env": "production", "tier": "teams"}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				if !q.Match(l) || q.String() == "" || len(q.Keys()) != 2 {
					t.Error("concurrent use gave a wrong answer")
					return
				}
			}
		})
	}
	wg.Wait()
}

// genQuery builds a random query text together with an independent reference
// evaluator, so the round-trip test checks the parser against a model rather
// than only against itself.
type genQuery struct {
	r *rand.Rand
}

var (
	genKeys   = []string{"a", "b", "@type", "x-y"}
	genValues = []string{"1", "2", "", "s p", `q"\`}
)

func (g genQuery) space() string {
	return []string{" ", "  ", "\t", "\n "}[g.r.IntN(4)]
}

func (g genQuery) atom() (string, func(Labels) bool) {
	k := genKeys[g.r.IntN(len(genKeys))]
	v := genValues[g.r.IntN(len(genValues))]
	quoted := v
	if g.r.IntN(2) == 0 || !isWord(v) {
		quoted = `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(v) + `"`
	}
	switch g.r.IntN(3) {
	case 0:
		return k, func(l Labels) bool { _, ok := l[k]; return ok }
	case 1:
		return k + "=" + quoted, func(l Labels) bool { lv, ok := l[k]; return ok && lv == v }
	default:
		return k + "!=" + quoted, func(l Labels) bool { lv, ok := l[k]; return !ok || lv != v }
	}
}

func (g genQuery) group(depth int) (string, func(Labels) bool) {
	n := 1 + g.r.IntN(4)
	var b strings.Builder
	var fns []func(Labels) bool
	var ops []byte
	for i := range n {
		var text string
		var fn func(Labels) bool
		if depth > 0 && g.r.IntN(3) == 0 {
			text, fn = g.group(depth - 1)
			text = "(" + text + ")"
		} else {
			text, fn = g.atom()
		}
		op := byte(' ')
		if i > 0 {
			b.WriteString(g.space())
			op = " +-"[g.r.IntN(3)]
		} else if g.r.IntN(5) == 0 {
			op = '+' // a leading "+" is a no-op union with the empty set
		}
		if op != ' ' {
			b.WriteByte(op)
		}
		b.WriteString(text)
		fns = append(fns, fn)
		ops = append(ops, op)
	}
	return b.String(), func(l Labels) bool {
		acc := false
		for i, fn := range fns {
			switch ops[i] {
			case ' ':
				acc = (i == 0 || acc) && fn(l)
			case '+':
				acc = acc || fn(l)
			case '-':
				acc = acc && !fn(l)
			}
		}
		return acc
	}
}

// allLabelSets enumerates every assignment of genKeys to absent or one of
// genValues (plus an unrelated value), which covers every atom outcome.
func allLabelSets() []Labels {
	choices := append([]string{"<absent>", "other"}, genValues...)
	sets := []Labels{{}}
	for _, k := range genKeys {
		var next []Labels
		for _, base := range sets {
			for _, v := range choices {
				l := Labels{}
				for bk, bv := range base {
					l[bk] = bv
				}
				if v != "<absent>" {
					l[k] = v
				}
				next = append(next, l)
			}
		}
		sets = next
	}
	return sets
}

func TestRoundTripRandom(t *testing.T) {
	t.Parallel()
	sets := allLabelSets()
	g := genQuery{r: rand.New(rand.NewPCG(1, 2))}
	for i := range 300 {
		text, want := g.group(3)
		q, err := Parse(text)
		if err != nil {
			t.Fatalf("#%d Parse(%q): %v", i, text, err)
		}
		canon := q.String()
		q2, err := Parse(canon)
		if err != nil {
			t.Fatalf("#%d Parse(String()=%q) of %q: %v", i, canon, text, err)
		}
		if s2 := q2.String(); s2 != canon {
			t.Fatalf("#%d String not canonical: %q then %q", i, canon, s2)
		}
		for _, l := range sets {
			w := want(l)
			if got := q.Match(l); got != w {
				t.Fatalf("#%d %q.Match(%v) = %v, model says %v", i, text, l, got, w)
			}
			if got := q2.Match(l); got != w {
				t.Fatalf("#%d reparsed %q.Match(%v) = %v, model says %v", i, canon, l, got, w)
			}
		}
	}
}

// sampleLabelSets derives label sets from the atoms of q so that the fuzzer's
// equivalence check exercises both outcomes of each atom.
func sampleLabelSets(q *Query) []Labels {
	var atoms []*atom
	var walk func(node)
	walk = func(n node) {
		switch n := n.(type) {
		case *atom:
			atoms = append(atoms, n)
		case *group:
			for _, t := range n.terms {
				walk(t.node)
			}
		}
	}
	walk(q.root)

	all, other := Labels{}, Labels{}
	sets := []Labels{{}, all, other}
	for i, a := range atoms {
		all[a.key] = a.value
		other[a.key] = a.value + "~"
		sets = append(sets, Labels{a.key: a.value})
		if i%2 == 0 {
			sets = append(sets, Labels{a.key: a.value, fmt.Sprint(i): "x"})
		}
	}
	return sets
}

func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"env=production (tier=startup +tier=teams)",
		"@type=runtime env=staging",
		"env=prod -tier=enterprise",
		`team="a b" +k=""`,
		"a -(b +c) +(d e)",
		"region=us-east-1 @name=prod-eu",
		"a +",
		"((a)",
		`k="\"\\"`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		q, err := Parse(s)
		if err != nil {
			var se *SyntaxError
			if !errors.As(err, &se) && !errors.Is(err, ErrEmpty) {
				t.Fatalf("Parse(%q) error %v (%T) is neither *SyntaxError nor ErrEmpty", s, err, err)
			}
			if se != nil && (se.Offset < 0 || se.Offset > len(s)) {
				t.Fatalf("Parse(%q) offset %d out of range", s, se.Offset)
			}
			return
		}
		canon := q.String()
		q2, err := Parse(canon)
		if err != nil {
			t.Fatalf("Parse(%q).String() = %q does not parse: %v", s, canon, err)
		}
		if !reflect.DeepEqual(q.root, q2.root) {
			t.Fatalf("Parse(%q) and Parse(String()=%q) differ", s, canon)
		}
		if !slices.Equal(q.Keys(), q2.Keys()) {
			t.Fatalf("Keys differ: %q vs %q", q.Keys(), q2.Keys())
		}
		for _, l := range sampleLabelSets(q) {
			if q.Match(l) != q2.Match(l) {
				t.Fatalf("Parse(%q) and Parse(%q) disagree on %v", s, canon, l)
			}
		}
	})
}
