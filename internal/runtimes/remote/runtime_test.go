package remote

import (
	"testing"

	"github.com/drover-dev/drover/internal/ecsspec"
	"github.com/drover-dev/drover/internal/runtimes"
)

// An ECS runtime served by an agent keeps the ECS runtime's convergence
// grace; a custom runtime's is the engine's default, as on the server.
func TestRuntimeGrace(t *testing.T) {
	t.Parallel()
	var h Hub
	g, ok := h.Runtime("aws-account", ecsspec.Kind, "ecs-prod", 1, nil).(runtimes.GraceReporter)
	if !ok || g.ConvergenceGrace() != ecsspec.ConvergenceGrace {
		t.Errorf("ECS through an agent: grace reporter %v", ok)
	}
	if _, ok := h.Runtime("hosts", "custom", "cmds", 1, nil).(runtimes.GraceReporter); ok {
		t.Error("a custom runtime through an agent reports a grace of its own")
	}
	if _, ok := h.Runtime("hosts", ecsspec.Kind, "ecs", 1, nil).(runtimes.Watcher); !ok {
		t.Error("the ECS runtime through an agent lost its watcher")
	}
}
