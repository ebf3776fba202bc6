// Package alerts asks a Prometheus Alertmanager which alerts fire, for
// drover's alert gates (a release channel's alertGate): GET /api/v2/alerts
// with the gate's label matchers as filters, counting active alerts that
// are neither silenced nor inhibited.
package alerts

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"
)

// Client asks Alertmanagers. The zero value is ready to use.
type Client struct {
	// HTTP is the client to ask with (nil: one with a 10 s timeout).
	HTTP *http.Client
}

// Alert is a firing alert, as much of it as people need.
type Alert struct {
	Labels   map[string]string `json:"labels"`
	StartsAt time.Time         `json:"startsAt"`
}

// String names the alert: its alertname and its other labels, sorted.
func (a Alert) String() string {
	keys := make([]string, 0, len(a.Labels))
	for k := range a.Labels {
		if k != "alertname" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%q", k, a.Labels[k])
	}
	return a.Labels["alertname"] + "{" + strings.Join(parts, ", ") + "}"
}

// Firing returns the alerts that fire in the Alertmanager at base (active,
// not silenced, not inhibited) and match every matcher.
func (c *Client) Firing(ctx context.Context, base string, matchers []string) ([]Alert, error) {
	u, err := url.Parse(strings.TrimSuffix(base, "/") + "/api/v2/alerts")
	if err != nil {
		return nil, fmt.Errorf("alertmanager %s: %w", base, err)
	}
	q := url.Values{"active": {"true"}, "silenced": {"false"}, "inhibited": {"false"}}
	for _, m := range matchers {
		q.Add("filter", m)
	}
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("alertmanager %s: %w", base, err)
	}
	req.Header.Set("Accept", "application/json")
	hc := c.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 10 * time.Second}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("alertmanager %s: %w", base, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("alertmanager %s: %w", base, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("alertmanager %s: %s: %s", base, resp.Status, strings.TrimSpace(string(body[:min(len(body), 300)])))
	}
	var got []struct {
		Alert
		Status struct {
			State string `json:"state"`
		} `json:"status"`
	}
	if err := json.Unmarshal(body, &got); err != nil {
		return nil, fmt.Errorf("alertmanager %s: undecodable answer: %w", base, err)
	}
	out := make([]Alert, 0, len(got))
	for _, a := range got {
		// unprocessed: just received, not yet routed; it fires all the same.
		if st := a.Status.State; st == "" || st == "active" || st == "unprocessed" {
			out = append(out, a.Alert)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out, nil
}

// FiringAlerts is Firing, naming each alert (engine.AlertQuerier).
func (c *Client) FiringAlerts(ctx context.Context, base string, matchers []string) ([]string, error) {
	list, err := c.Firing(ctx, base, matchers)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(list))
	for i, a := range list {
		out[i] = a.String()
	}
	return out, nil
}
