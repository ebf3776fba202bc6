package custom

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/runtimes"
)

// A protection command that outlives its timeout fails (it ran: the
// check did not pass), saying so; one that cannot start is an error.
func TestRunCheckTimeoutAndStart(t *testing.T) {
	t.Parallel()
	r, err := New(&config.Runtime{Name: "checks", Custom: &config.CustomRuntime{}}, runtimes.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	tg := runtimes.Target{InstanceKey: runtimes.InstanceKey{Application: "a", Service: "s", ReleaseChannel: "prod"}, Version: "v1"}
	slow := json.RawMessage(`{"protection":"slow","timeout":"1s","taskConfig":{"program":{"cmd":["sh","-c","echo waiting; sleep 30"]}}}`)
	out, err := r.RunCheck(context.Background(), tg, runtimes.CheckCommand{Name: "slow", Spec: slow})
	if err != nil || out.Passed || !strings.Contains(out.Message, "check timed out after 1s") {
		t.Fatalf("timed out: %+v, %v", out, err)
	}
	missing := json.RawMessage(`{"protection":"gone","taskConfig":{"program":{"cmd":["/nonexistent/check"]}}}`)
	if out, err := r.RunCheck(context.Background(), tg, runtimes.CheckCommand{Name: "gone", Spec: missing}); err == nil || !strings.Contains(err.Error(), "protection gone: check could not start") {
		t.Fatalf("not started: %+v, %v", out, err)
	}
}
