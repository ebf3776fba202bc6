package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apiv1 "github.com/drover-dev/drover/api/v1"
)

// analysisTree is Prodvana's ecs-with-analysis flow on custom runtimes that
// run on this host: staging, then prod-us and prod-eu, each on its own
// runtime; a schema migration (a convergenceExtensionInstance, PRE_APPROVAL)
// that fails until dir/ready exists, and a canary analysis shared by both
// production channels (sharedInstanceKey) at POST_DEPLOYMENT. Each run of
// an extension appends a line to dir/<name>.log.
func analysisTree(t *testing.T, app string) (tree, dir string) {
	t.Helper()
	tree, dir = t.TempDir(), t.TempDir()
	channel := func(name string) string {
		return fmt.Sprintf("    - name: %[1]s\n      runtimes:\n        - runtime: %[2]s-%[1]s\n      preconditions:\n        - releaseChannelStable:\n            releaseChannel: staging\n", name, app)
	}
	writeTree(t, tree, map[string]string{
		"runtimes/staging.pvn.yaml": localRuntime(app+"-staging", dir),
		"runtimes/prod-us.pvn.yaml": localRuntime(app+"-prod-us", dir),
		"runtimes/prod-eu.pvn.yaml": localRuntime(app+"-prod-eu", dir),
		"analysis.pvn.yaml": fmt.Sprintf(`deliveryExtension:
  name: canary-analysis
  sharedInstanceKey: production
  retryPolicy:
    baseInterval: 1s
  taskConfig:
    program:
      cmd: ["sh", "-c", "echo \"$PVN_RELEASE_CHANNEL $DROVER_SERVICE_VERSION\" >> %s/analysis.log; echo canary healthy"]
`, dir),
		"app.pvn.yaml": fmt.Sprintf("application:\n  name: %[1]s\n  releaseChannels:\n    - name: staging\n      runtimes:\n        - runtime: %[1]s-staging\n", app) +
			channel("prod-us") + channel("prod-eu"),
		"api.pvn.yaml": fmt.Sprintf(`service:
  name: api
  application: %[1]s
  customRuntime: {}
  convergenceExtensionInstances:
    - name: schema
      inlined:
        retryPolicy:
          baseInterval: 1s
          maxInterval: 1s
        taskConfig:
          program:
            cmd: ["sh", "-c", "echo \"$PVN_RELEASE_CHANNEL\" >> %[2]s/schema.log; test -f %[2]s/ready || { echo 'schema lock held' >&2; exit 1; }; echo migrated"]
  convergenceExtensions:
    - instance: schema
      lifecycle: PRE_APPROVAL
  perReleaseChannel:
    - releaseChannel: prod-us
      convergenceExtensions:
        - ref: {name: canary-analysis}
          lifecycle: POST_DEPLOYMENT
    - releaseChannel: prod-eu
      convergenceExtensions:
        - ref: {name: canary-analysis}
          lifecycle: POST_DEPLOYMENT
`, app, dir),
	})
	return tree, dir
}

// TestConvergenceExtensions: a PRE_APPROVAL extension that fails is retried
// (every channel BLOCKED, saying why) until it succeeds, once for all three
// channels (an instance is shared); the canary analysis shared by the two
// production channels runs once, after both converged, and both are
// CONVERGED only then.
func TestConvergenceExtensions(t *testing.T) {
	requireE2E(t)
	s := newServer(t)
	const app = "analyzed"
	tree, dir := analysisTree(t, app)
	s.ok("alice", "apply", tree+"/...")
	v1, _ := s.push("alice", app, "api")
	st := s.waitStatus(app, "api", 30*time.Second, "staging blocked by the failing schema migration", func(st *apiv1.ServiceStatus) bool {
		return findChannel(st, "staging").Status == "BLOCKED"
	})
	if msg := findChannel(st, "staging").Message; !strings.Contains(msg, "convergence extension schema (PRE_APPROVAL): exit code 1: schema lock held") {
		t.Errorf("staging's message: %q", msg)
	}
	// It is retried (every second here).
	deadline := time.Now().Add(20 * time.Second)
	for lines(t, filepath.Join(dir, "schema.log")) < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("the schema migration was not retried: %d runs", lines(t, filepath.Join(dir, "schema.log")))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := os.WriteFile(filepath.Join(dir, "ready"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	before := lines(t, filepath.Join(dir, "schema.log"))
	st = s.waitStatus(app, "api", 60*time.Second, "every channel converged", func(st *apiv1.ServiceStatus) bool {
		for _, c := range st.ReleaseChannels {
			if c.Status != "CONVERGED" || c.Version != v1 {
				return false
			}
		}
		return true
	})
	if n := lines(t, filepath.Join(dir, "schema.log")); n > before+1 {
		t.Errorf("the schema migration ran %d times after it could succeed: it is shared by the three channels and succeeds once", n-before)
	}
	runs := strings.Split(strings.TrimSpace(readFile(t, filepath.Join(dir, "analysis.log"))), "\n")
	if len(runs) != 1 || !strings.HasSuffix(runs[0], " "+v1) {
		t.Fatalf("the canary analysis ran %d times for two channels sharing it: %q", len(runs), runs)
	}
	for _, name := range []string{"prod-us", "prod-eu"} {
		for _, c := range findChannel(st, name).Checks {
			if c.State != "passed" {
				t.Errorf("%s's %s after converging: %s", name, c.Name, dump(c))
			}
		}
	}
}

func lines(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return 0
	}
	return len(strings.Split(s, "\n"))
}
