package archtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
)

// Module is drover's module path; rules name packages below it relative to it.
const Module = "github.com/drover-dev/drover"

// Rule is an import arrow that must never exist: no package of From may
// import, directly or through others, a package of Deny.
type Rule struct {
	// Name names the rule in failures.
	Name string
	// From are the packages the rule holds for: an import path, relative to
	// Module for drover's own ("internal/engine"), ending in "/..." for a
	// package and every package below it.
	From []string
	// Deny are the packages From must not reach; each also denies the
	// packages below it ("internal/runtimes" denies internal/runtimes/fake).
	// drover's own are relative to Module; the standard library's are not
	// ("net/http").
	Deny []string
	// Allow are exceptions to Deny: packages below a denied one that From
	// may import (an import path, or a pattern ending in "/..."), such as
	// the interface package internal/runtimes below a denied
	// "internal/runtimes/..." of its implementations.
	Allow []string
	// Why is what the rule protects, for the failure message.
	Why string
	// Direct rules deny only From's own imports: a denied package reached
	// through another package is allowed.
	Direct bool
	// Pending rules are reported but do not fail: they describe where the
	// code is going, not yet where it is. A violation of another rule whose
	// every chain passes through a package a pending rule of the same
	// package denies is pending too (it goes away with that import).
	Pending bool
}

// Graph maps each package's import path to the import paths it imports
// directly (its non-test imports).
type Graph map[string][]string

// Violation is one package of a rule's From reaching one of its Deny.
type Violation struct {
	Rule *Rule
	// Chain runs from the importing package to the denied one.
	Chain []string
	// Pending says the violation does not fail: its rule is pending, or
	// every chain passes through Through, which a pending rule denies.
	Pending bool
	Through string
}

func (v Violation) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "rule %q: %s must not import %s (%s), but it does: %s",
		v.Rule.Name, short(v.Chain[0]), short(v.Chain[len(v.Chain)-1]), v.Rule.Why, shortChain(v.Chain))
	switch {
	case v.Rule.Pending:
		b.WriteString(" [pending rule]")
	case v.Through != "":
		fmt.Fprintf(&b, " [pending: only through %s, which a pending rule denies]", short(v.Through))
	}
	return b.String()
}

func short(p string) string { return strings.TrimPrefix(p, Module+"/") }

func shortChain(chain []string) string {
	s := make([]string, len(chain))
	for i, p := range chain {
		s[i] = short(p)
	}
	return strings.Join(s, " -> ")
}

// full turns a rule's package pattern into an import path (pattern).
func full(p string) string {
	if isStd(p) {
		return p
	}
	return Module + "/" + p
}

// isStd reports whether pattern p names a standard library package: its
// first element has no dot and is not one of drover's top directories.
func isStd(p string) bool {
	first, _, _ := strings.Cut(p, "/")
	switch first {
	case "internal", "api", "cmd", "test", "examples":
		return false
	}
	return !strings.Contains(first, ".")
}

// matches reports whether pkg is p or below it ("/..." is the same).
func matches(pkg, p string) bool {
	p = strings.TrimSuffix(full(p), "/...")
	return pkg == p || strings.HasPrefix(pkg, p+"/")
}

// fromMatches reports whether pkg is one of the packages pattern names: p
// itself, or p and below for a pattern ending in "/...".
func fromMatches(pkg, p string) bool {
	if strings.HasSuffix(p, "/...") {
		return matches(pkg, p)
	}
	return pkg == full(p)
}

// Patterns returns the go list patterns of every rule's From.
func Patterns(rules []Rule) []string {
	var out []string
	for _, r := range rules {
		for _, f := range r.From {
			if p := full(f); !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	return out
}

// Check returns every violation of rules in g: for each package of a rule's
// From and each entry of its Deny it reaches, one chain of imports, the
// shortest, preferring one that avoids what pending rules deny.
func Check(g Graph, rules []Rule) []Violation {
	var out []Violation
	pkgs := make([]string, 0, len(g))
	for p := range g {
		pkgs = append(pkgs, p)
	}
	slices.Sort(pkgs)
	for i := range rules {
		r := &rules[i]
		for _, pkg := range pkgs {
			if !slices.ContainsFunc(r.From, func(f string) bool { return fromMatches(pkg, f) }) {
				continue
			}
			// What pending rules for pkg deny: a chain through it fails
			// only once those rules are enabled.
			var pendingDeny []string
			for _, o := range rules {
				if o.Pending && o.Name != r.Name && slices.ContainsFunc(o.From, func(f string) bool { return fromMatches(pkg, f) }) {
					pendingDeny = append(pendingDeny, o.Deny...)
				}
			}
			for _, d := range r.Deny {
				denied := func(p string) bool {
					return matches(p, d) && !slices.ContainsFunc(r.Allow, func(a string) bool { return fromMatches(p, a) })
				}
				if r.Direct {
					if i := slices.IndexFunc(g[pkg], denied); i >= 0 {
						out = append(out, Violation{Rule: r, Chain: []string{pkg, g[pkg][i]}, Pending: r.Pending})
					}
					continue
				}
				if chain := path(g, pkg, denied, func(p string) bool {
					return slices.ContainsFunc(pendingDeny, func(pd string) bool { return matches(p, pd) })
				}); chain != nil {
					out = append(out, Violation{Rule: r, Chain: chain, Pending: r.Pending})
					continue
				}
				if chain := path(g, pkg, denied, nil); chain != nil {
					v := Violation{Rule: r, Chain: chain, Pending: true}
					for _, p := range chain[1:] {
						if slices.ContainsFunc(pendingDeny, func(pd string) bool { return matches(p, pd) }) {
							v.Through = p
							break
						}
					}
					out = append(out, v)
				}
			}
		}
	}
	return out
}

// path returns the shortest chain of imports from pkg to a package target
// accepts, not entering packages skip accepts (nil skips none), or nil.
func path(g Graph, pkg string, target, skip func(string) bool) []string {
	prev := map[string]string{pkg: ""}
	queue := []string{pkg}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		imports := slices.Clone(g[cur])
		slices.Sort(imports)
		for _, next := range imports {
			if _, seen := prev[next]; seen {
				continue
			}
			prev[next] = cur
			if target(next) {
				var chain []string
				for p := next; p != ""; p = prev[p] {
					chain = append(chain, p)
				}
				slices.Reverse(chain)
				return chain
			}
			if skip != nil && skip(next) {
				continue
			}
			queue = append(queue, next)
		}
	}
	return nil
}

// Load runs `go list -deps -json` on patterns in dir and returns the import
// graph of those packages and everything they import.
func Load(dir string, patterns ...string) (Graph, error) {
	//nolint:gosec // G204: the patterns come from the rule table, not from input
	cmd := exec.Command("go", append([]string{"list", "-deps", "-json=ImportPath,Imports,Error"}, patterns...)...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %w: %s", err, stderr.String())
	}
	g := Graph{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct {
			ImportPath string
			Imports    []string
			Error      *struct{ Err string }
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("decode go list output: %w", err)
		}
		if p.Error != nil {
			return nil, fmt.Errorf("go list: %s: %s", p.ImportPath, p.Error.Err)
		}
		g[p.ImportPath] = p.Imports
	}
	return g, nil
}
