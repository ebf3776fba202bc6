package archtest

import (
	"slices"
	"strings"
	"testing"
)

// TestImportRules fails for every arrow Rules forbids that exists, naming
// the rule and one chain of imports; pending rules are logged only.
func TestImportRules(t *testing.T) {
	t.Parallel()
	g, err := Load(".", Patterns(Rules)...)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range Rules {
		for _, f := range r.From {
			if !slices.ContainsFunc(keys(g), func(p string) bool { return fromMatches(p, f) }) {
				t.Errorf("rule %q: no package %s: rename the rule's packages along with the code", r.Name, f)
			}
		}
	}
	for _, v := range Check(g, Rules) {
		if v.Pending {
			t.Logf("not enforced yet: %s", v)
			continue
		}
		t.Error(v)
	}
}

func keys(g Graph) []string {
	out := make([]string, 0, len(g))
	for k := range g {
		out = append(out, k)
	}
	return out
}

// TestCheckReportsViolations: a violation names its rule and one chain; a
// chain only through what a pending rule denies is pending.
func TestCheckReportsViolations(t *testing.T) {
	t.Parallel()
	m := func(p string) string { return Module + "/" + p }
	g := Graph{
		m("internal/engine"):          {m("internal/helper"), m("internal/compiler"), "fmt"},
		m("internal/helper"):          {m("internal/runtimes/fake")},
		m("internal/runtimes/fake"):   {"os/exec"},
		m("internal/compiler"):        {"net/http"},
		m("internal/engine/sub"):      {"fmt"},
		m("internal/store"):           {"fmt"},
		m("internal/store/sqlite"):    {m("internal/store")},
		m("internal/store/storetest"): {m("internal/engine")},
		m("internal/server"):          {m("internal/engine"), "fmt"},
		m("internal/server/sub"):      {m("internal/runtimes/fake")},
		"fmt":                         nil, "os/exec": nil, "net/http": nil,
	}
	rules := []Rule{
		{Name: "pure", From: []string{"internal/engine/..."}, Deny: []string{"internal/runtimes", "os/exec", "net/http"}, Why: "pure"},
		{Name: "no-compiler", From: []string{"internal/engine"}, Deny: []string{"internal/compiler"}, Why: "model", Pending: true},
		{Name: "store-below-engine", From: []string{"internal/store/..."}, Deny: []string{"internal/engine"}, Why: "below"},
		{Name: "direct", From: []string{"internal/server/..."}, Deny: []string{"internal/runtimes"}, Why: "own imports", Direct: true},
	}
	var got []string
	for _, v := range Check(g, rules) {
		got = append(got, v.String())
	}
	want := []string{
		`rule "pure": internal/engine must not import internal/runtimes/fake (pure), but it does: internal/engine -> internal/helper -> internal/runtimes/fake`,
		`rule "pure": internal/engine must not import os/exec (pure), but it does: internal/engine -> internal/helper -> internal/runtimes/fake -> os/exec`,
		`rule "pure": internal/engine must not import net/http (pure), but it does: internal/engine -> internal/compiler -> net/http [pending: only through internal/compiler, which a pending rule denies]`,
		`rule "no-compiler": internal/engine must not import internal/compiler (model), but it does: internal/engine -> internal/compiler [pending rule]`,
		`rule "store-below-engine": internal/store/storetest must not import internal/engine (below), but it does: internal/store/storetest -> internal/engine`,
		`rule "direct": internal/server/sub must not import internal/runtimes/fake (own imports), but it does: internal/server/sub -> internal/runtimes/fake`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("violations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	failing := 0
	for _, v := range Check(g, rules) {
		if !v.Pending {
			failing++
		}
	}
	if failing != 4 {
		t.Errorf("%d failing violations, want 4", failing)
	}
}

// TestAllowExempts: a rule denying everything below a package allows what
// its Allow names, and denies a new package below it.
func TestAllowExempts(t *testing.T) {
	t.Parallel()
	m := func(p string) string { return Module + "/" + p }
	g := Graph{
		m("internal/engine"):              {m("internal/runtimes"), m("internal/runtimes/helper")},
		m("internal/runtimes"):            {"fmt"},
		m("internal/runtimes/helper"):     {m("internal/runtimes/newbackend")},
		m("internal/runtimes/newbackend"): {"fmt"},
		"fmt":                             nil,
	}
	rules := []Rule{{Name: "engine", From: []string{"internal/engine"}, Deny: []string{"internal/runtimes"},
		Allow: []string{"internal/runtimes", "internal/runtimes/helper"}, Why: "pure"}}
	var got []string
	for _, v := range Check(g, rules) {
		got = append(got, v.String())
	}
	want := `rule "engine": internal/engine must not import internal/runtimes/newbackend (pure), but it does: internal/engine -> internal/runtimes/helper -> internal/runtimes/newbackend`
	if strings.Join(got, "\n") != want {
		t.Errorf("violations:\n%s\nwant:\n%s", strings.Join(got, "\n"), want)
	}
}
