package config

import (
	"fmt"
	"net/url"
	"regexp"
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
