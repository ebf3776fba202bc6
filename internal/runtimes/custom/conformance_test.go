package custom

import (
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/runtimes"
	"github.com/drover-dev/drover/internal/runtimes/runtimestest"
)

// The conformance scripts keep the "deployed" version in a file of the
// instance's working directory.
const (
	applyScript = `printf '%s' "$PVN_SERVICE_VERSION" > version`
	fetchScript = `[ "$(cat version 2>/dev/null)" = "$PVN_SERVICE_VERSION" ] && exit 0
exit 2`
	structuredScript = `v=$(cat version 2>/dev/null)
if [ -z "$v" ]; then echo '{"objects":[]}'; exit 0; fi
printf '{"objects":[{"name":"%s","objectType":"file","versions":[{"version":"%s","active":true,"replicas":1,"availableReplicas":1,"targetReplicas":1}],"status":"SUCCEEDED"}]}\n' "$PVN_SERVICE" "$v"`
)

func TestConformance(t *testing.T) {
	dir := t.TempDir()
	apply := script(t, dir, "apply.sh", applyScript)
	fetch := script(t, dir, "fetch.sh", fetchScript)
	structured := script(t, dir, "structured.sh", structuredScript)
	tiers := map[string]func() *config.CustomRuntime{
		"ApplyOnly": func() *config.CustomRuntime {
			return &config.CustomRuntime{Apply: &config.ApplyCommand{TaskConfig: task(apply)}}
		},
		"ExitCode": func() *config.CustomRuntime {
			return &config.CustomRuntime{
				Apply: &config.ApplyCommand{TaskConfig: task(apply)},
				Fetch: &config.FetchCommand{TaskConfig: task(fetch), PollInterval: dur("1s"), SteadyStatePollInterval: dur("5s")},
			}
		},
		"Structured": func() *config.CustomRuntime {
			return &config.CustomRuntime{
				Apply: &config.ApplyCommand{TaskConfig: task(apply)},
				Fetch: &config.FetchCommand{TaskConfig: task(structured), FetchMode: config.FetchModeStructuredOutput, PollInterval: dur("1s"), SteadyStatePollInterval: dur("5s")},
			}
		},
	}
	for name, cr := range tiers {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			runtimestest.Run(t, runtimestest.Harness{
				// Every apply and fetch is a process: fewer keys than the
				// default keep the concurrency case about concurrency, and a
				// longer bound lets it finish on a loaded machine (-race, two
				// tiers in parallel).
				Goroutines: 8, KeysPerGoroutine: 4, Timeout: 2 * time.Minute,
				New: func(t *testing.T) runtimes.Runtime {
					return newRuntime(t, runtimes.Options{DataDir: t.TempDir()})
				},
				Target: func(key runtimes.InstanceKey, version string) runtimes.Target {
					return target(key, version, cr())
				},
			})
		})
	}
}
