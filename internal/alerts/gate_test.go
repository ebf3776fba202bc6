package alerts_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/drover-dev/drover/internal/alerts"
	"github.com/drover-dev/drover/internal/gates"
	"github.com/drover-dev/drover/internal/testing/amtest"
)

// TestGateEvaluator: an alert gate passes while nothing matching fires and
// fails naming what does, asked of a real Alertmanager; its description
// carries no credentials of the URL.
func TestGateEvaluator(t *testing.T) {
	t.Parallel()
	am := amtest.Start(t)
	c := &alerts.Client{}
	spec := func(matchers ...string) json.RawMessage {
		b, err := json.Marshal(alerts.Spec{URL: am.URL, Matchers: matchers})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	out, err := c.Evaluate(t.Context(), gates.Target{}, spec(`team="gates"`))
	if err != nil || !out.Passed || out.Message != `no alert firing matching team="gates"` {
		t.Fatalf("nothing firing: %+v, %v", out, err)
	}
	am.Fire(map[string]string{"alertname": "Down", "team": "gates"})
	out, err = c.Evaluate(t.Context(), gates.Target{}, spec(`team="gates"`))
	if err != nil || out.Passed || out.Message != `1 alert(s) firing matching team="gates": Down{team="gates"}` {
		t.Fatalf("one firing: %+v, %v", out, err)
	}
	if _, err := c.Evaluate(t.Context(), gates.Target{}, json.RawMessage(`{"url":"x","matcher":[]}`)); err == nil || !strings.Contains(err.Error(), "matcher") {
		t.Errorf("a misspelt spec: %v", err)
	}
	desc := c.Describe(json.RawMessage(`{"url":"http://me:secret@am:9093","matchers":["a=\"b\"","c=\"d\""]}`))
	if desc != `asks http://am:9093 for alerts matching a="b", c="d"` {
		t.Errorf("describe: %q", desc)
	}
}
