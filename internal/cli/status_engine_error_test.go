package cli

import (
	"strings"
	"testing"

	apiv1 "github.com/drover-dev/drover/api/v1"
)

// TestStatusShowsEngineError: drover status shows an engine error's reason
// and message whatever the status beside it (CONVERGED included: the last
// status planned).
func TestStatusShowsEngineError(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	printStatus(&b, &apiv1.ServiceStatus{Application: "shop", Service: "web", Status: "CONVERGED", ReleaseChannels: []apiv1.ChannelStatus{
		{Name: "prod", Status: "CONVERGED", Reason: "ENGINE_ERROR", Message: "the engine cannot plan this service: desired state ds-2: format 99"},
		{Name: "staging", Status: "CONVERGED", Reason: "UPDATING_PODS", Message: "v1 converged"},
	}})
	out := b.String()
	if !strings.Contains(out, "ENGINE_ERROR: the engine cannot plan this service: desired state ds-2: format 99") {
		t.Errorf("the engine error is not shown:\n%s", out)
	}
	if strings.Contains(out, "UPDATING_PODS") {
		t.Errorf("a converged channel's other reason is shown:\n%s", out)
	}
}
