package config

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"
)

// matcherRE is an Alertmanager label matcher: name, operator, value
// (quoted or not).
var matcherRE = regexp.MustCompile(`^\s*[a-zA-Z_][a-zA-Z0-9_]*\s*(=~|!~|!=|=)\s*("([^"\\]|\\.)*"|[^"\s]*)\s*$`)

// alertGate checks a release channel's alertGate (drover extension).
func (v *validator) alertGate(src *Source, path string, g *AlertGate) {
	if g == nil {
		return
	}
	switch u, err := url.Parse(g.Alertmanager); {
	case g.Alertmanager == "":
		v.add(src, path+".alertmanager", "alertmanager is required: the Alertmanager's URL, such as http://alertmanager:9093")
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		v.add(src, path+".alertmanager", "%q is not an http or https URL", g.Alertmanager)
	}
	if len(g.Matchers) == 0 {
		v.add(src, path+".matchers", `at least one matcher is required, such as severity="sev1"`)
	}
	for i, m := range g.Matchers {
		if !matcherRE.MatchString(m) {
			v.add(src, fmt.Sprintf("%s.matchers[%d]", path, i), `%q is not a label matcher: name, then =, !=, =~ or !~, then a value (severity="sev1")`, m)
		}
	}
	v.interval(src, path+".pollInterval", g.PollInterval)
}

// shaRE is a commit SHA, full or abbreviated (at least 7 hex digits).
var shaRE = regexp.MustCompile(`^[0-9a-fA-F]{7,64}$`)

// commitDenylist checks a commitDenylist's commits and ranges: SHAs, and
// a repository that cannot be taken for an option.
func (v *validator) commitDenylist(src *Source, cd *CommitDenylist) {
	if strings.HasPrefix(cd.Repository, "-") {
		v.add(src, "protection.builtin.commitDenylist.repository", "%q is not a repository", cd.Repository)
	}
	for i, c := range cd.Commits {
		p := fmt.Sprintf("protection.builtin.commitDenylist.commits[%d]", i)
		switch {
		case (c.Commit == "") == (c.Range == nil):
			v.add(src, p, "set exactly one of commit, range")
		case c.Range != nil:
			for _, e := range []struct{ field, sha string }{{"startCommit", c.Range.StartCommit}, {"endCommit", c.Range.EndCommit}} {
				if !shaRE.MatchString(e.sha) {
					v.add(src, p+".range."+e.field, "%q is not a commit SHA (7 to 64 hex digits)", e.sha)
				}
			}
		case !shaRE.MatchString(c.Commit):
			v.add(src, p+".commit", "%q is not a commit SHA (7 to 64 hex digits)", c.Commit)
		}
	}
}
