package kubernetes

import (
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/runtimes"
	"github.com/drover-dev/drover/internal/runtimes/runtimestest"
)

// TestConformance runs the runtime conformance suite on the shared cluster.
// Every case gets a runtime with its own managed-namespace prefix, so the
// cases (which reuse instance keys) do not see each other's objects.
func TestConformance(t *testing.T) {
	t.Parallel()
	runtimestest.Run(t, runtimestest.Harness{
		New: func(t *testing.T) runtimes.Runtime { return newRuntime(t, Settings{}) },
		Target: func(k runtimes.InstanceKey, version string) runtimes.Target {
			return target(t, k, version, deploymentObject(k.Service, version, 1))
		},
		Timeout: 60 * time.Second,
		// 16 instances applied three times each from 4 goroutines: enough
		// to race, few enough for 2 simulated nodes and a 2-core machine.
		Goroutines:       4,
		KeysPerGoroutine: 4,
	})
}
