package alerts

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"

	"github.com/drover-dev/drover/internal/alerts/alertspec"
	"github.com/drover-dev/drover/internal/gates"
)

// Kind is the gate kind of alert gates (alertspec.Kind).
const Kind = alertspec.Kind

// Spec is an alert gate as a check carries it (alertspec.Spec).
type Spec = alertspec.Spec

var _ gates.Evaluator = (*Client)(nil)

// Evaluate runs an alert gate (gates.Evaluator): it passes while no alert
// matching every matcher fires, naming up to three that do.
func (c *Client) Evaluate(ctx context.Context, _ gates.Target, raw json.RawMessage) (gates.Outcome, error) {
	var g Spec
	if err := gates.Decode(raw, &g); err != nil {
		return gates.Outcome{}, err
	}
	firing, err := c.FiringAlerts(ctx, g.URL, g.Matchers)
	if err != nil {
		return gates.Outcome{}, err
	}
	what := strings.Join(g.Matchers, ", ")
	n := len(firing)
	switch {
	case n == 0:
		return gates.Outcome{Passed: true, Message: "no alert firing matching " + what}, nil
	case n > 3:
		firing = append(firing[:3:3], fmt.Sprintf("and %d more", n-3))
	}
	return gates.Outcome{Message: fmt.Sprintf("%d alert(s) firing matching %s: %s", n, what, strings.Join(firing, ", "))}, nil
}

// Describe says which Alertmanager the gate asks (without the credentials
// its URL may carry) and for what (gates.Evaluator).
func (c *Client) Describe(raw json.RawMessage) string {
	var g Spec
	if gates.Decode(raw, &g) != nil {
		return ""
	}
	return fmt.Sprintf("asks %s for alerts matching %s", withoutUserinfo(g.URL), strings.Join(g.Matchers, ", "))
}

// withoutUserinfo is a URL without the credentials it may carry.
func withoutUserinfo(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return raw
	}
	u.User = nil
	return u.String()
}
