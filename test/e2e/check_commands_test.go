package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apiv1 "github.com/drover-dev/drover/api/v1"
)

// migrationTree is Prodvana's ecs-with-protections flow on custom runtimes
// that run on this host: application app with staging and prod, each on a
// custom runtime whose apply writes the version to a file in dir; prod is
// guarded by the protection migrations (a command, with a parameter) at
// preApproval, postApproval and postDeployment (checkDuration 3s). The
// check passes once the file dir/migrated-<table> exists.
func migrationTree(t *testing.T, app string) (tree, dir string) {
	t.Helper()
	tree, dir = t.TempDir(), t.TempDir()
	writeTree(t, tree, map[string]string{
		"runtimes/staging.pvn.yaml": localRuntime(app+"-staging", dir),
		"runtimes/prod.pvn.yaml":    localRuntime(app+"-prod", dir),
		"protections/migrations.pvn.yaml": fmt.Sprintf(`protection:
  name: migrations
  pollInterval: 1s
  parameters:
    - name: table
      string: {defaultValue: users}
  taskConfig:
    program:
      cmd: ["sh", "-c", "test -f %[1]s/migrated-{{.Params.table}} || { echo \"checking {{.Params.table}} for $PVN_RELEASE_CHANNEL\"; echo \"migrations pending on {{.Params.table}}\" >&2; exit 3; }; echo \"{{.Params.table}} migrated for $DROVER_SERVICE_VERSION\""]
`, dir),
		"app.pvn.yaml": fmt.Sprintf(`application:
  name: %[1]s
  releaseChannels:
    - name: staging
      runtimes:
        - runtime: %[1]s-staging
    - name: prod
      runtimes:
        - runtime: %[1]s-prod
      preconditions:
        - releaseChannelStable:
            releaseChannel: staging
      protections:
        - name: db-migrations
          ref:
            name: migrations
            parameters:
              - name: table
                string: orders
          lifecycle:
            - preApproval: {}
            - postApproval: {}
            - postDeployment:
                checkDuration: 3s
`, app),
		"api.pvn.yaml": fmt.Sprintf("service:\n  name: api\n  application: %s\n  customRuntime: {}\n", app),
	})
	return tree, dir
}

// TestCommandProtections: a protection that runs a command gates prod: it
// runs on the server's host with its parameter rendered and the PVN_*
// variables set; while it fails prod is BLOCKED with the check's last
// output line, rerun every pollInterval (events record the turn, drover
// runs the runs); once it passes prod rolls out, and is CONVERGED only
// after the check held for its checkDuration. It logs the time from the
// passing run to the start of the rollout.
func TestCommandProtections(t *testing.T) {
	requireE2E(t)
	s := newServer(t)
	const app = "migrating"
	tree, dir := migrationTree(t, app)
	s.ok("alice", "apply", tree+"/...")
	v1, _ := s.push("alice", app, "api")
	st := s.waitStatus(app, "api", 30*time.Second, "prod blocked by its failing migration check", func(st *apiv1.ServiceStatus) bool {
		sc, pc := findChannel(st, "staging"), findChannel(st, "prod")
		return sc.Status == "CONVERGED" && pc.Status == "BLOCKED"
	})
	pc := findChannel(st, "prod")
	if want := "blocked by protection migrations (preApproval): exit code 3: migrations pending on orders"; pc.Message != want || pc.Reason != "LIFECYCLE_CHECK_FAILED" {
		t.Errorf("prod: %s %s, want LIFECYCLE_CHECK_FAILED %q", pc.Reason, pc.Message, want)
	}
	var pre *apiv1.CheckStatus
	for i, c := range pc.Checks {
		if c.Phase == "preApproval" {
			pre = &pc.Checks[i]
		}
	}
	if pre == nil || pre.State != "failing" || pre.Attachment != "db-migrations" || pre.Runs < 1 || pre.LastRun.IsZero() || pre.NextChange.IsZero() {
		t.Fatalf("prod's preApproval check in the status: %s", dump(pc.Checks))
	}
	if out := s.ok("alice", "status", "api", "--app", app).stdout; !strings.Contains(out, "prod protection db-migrations (migrations), preApproval: failing: exit code 3: migrations pending on orders (last run ") {
		t.Errorf("drover status does not show the failing check:\n%s", out)
	}

	// It runs again every second while it fails.
	first := pre.Runs
	s.waitStatus(app, "api", 20*time.Second, "the check run again", func(st *apiv1.ServiceStatus) bool {
		for _, c := range findChannel(st, "prod").Checks {
			if c.Phase == "preApproval" && c.Runs >= first+2 {
				return true
			}
		}
		return false
	})
	var runs apiv1.RunList
	if err := json.Unmarshal([]byte(s.ok("alice", "runs", "api", "--app", app, "--release-channel", "prod", "--kind", "check", "-o", "json").stdout), &runs); err != nil {
		t.Fatal(err)
	}
	if len(runs.Runs) < 2 || runs.Runs[0].ExitCode != 3 || runs.Runs[0].Version != v1 {
		t.Fatalf("check runs: %s", dump(runs))
	}
	var run apiv1.Run
	if err := json.Unmarshal([]byte(s.ok("alice", "run", fmt.Sprint(runs.Runs[0].ID), "-o", "json").stdout), &run); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(run.Stdout, "checking orders for prod") || !strings.Contains(run.Stderr, "migrations pending on orders") {
		t.Errorf("check run's output: %s", dump(run))
	}

	// The migration lands: the next run passes, prod rolls out at once and
	// soaks for 3s.
	if err := os.WriteFile(filepath.Join(dir, "migrated-orders"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	s.waitStatus(app, "api", 20*time.Second, "prod soaking after its deployment", func(st *apiv1.ServiceStatus) bool {
		pc := findChannel(st, "prod")
		return pc.Status == "CONVERGING" && pc.Reason == "LIFECYCLE_CHECK_PENDING" && strings.Contains(pc.Message, "postDeployment")
	})
	soakSeen := time.Now()
	st = s.waitStatus(app, "api", 30*time.Second, "prod converged", converged(v1))
	if held := time.Since(soakSeen); held < 2*time.Second {
		t.Errorf("prod converged %v after it was seen soaking: its postDeployment check must hold for 3s", held)
	}
	for _, c := range findChannel(st, "prod").Checks {
		if c.State != "passed" {
			t.Errorf("prod's check after converging: %s", dump(c))
		}
	}

	// The history has the turn from red to green once each, and the time
	// from the passing run's record to the rollout's start (the gate
	// turning green) is logged.
	var failed, passed, started time.Time
	nFailed := 0
	for _, ev := range s.events(app, "api") {
		switch {
		case ev.Type == "check-failed" && ev.ReleaseChannel == "prod":
			nFailed++
			failed = ev.Time
		case ev.Type == "check-passed" && ev.ReleaseChannel == "prod" && passed.IsZero():
			passed = ev.Time
			if !strings.Contains(ev.Message, "prod: protection db-migrations passed: orders migrated for "+v1) {
				t.Errorf("check-passed event: %s", ev.Message)
			}
		case ev.Type == "started" && ev.ReleaseChannel == "prod":
			started = ev.Time
		}
	}
	if nFailed != 1 || failed.IsZero() || passed.IsZero() || started.IsZero() || !passed.After(failed) || started.Before(passed) {
		t.Fatalf("events: %d check-failed, check-passed at %v, started at %v:\n%s", nFailed, passed, started, dump(s.events(app, "api")))
	}
	t.Logf("gate green to rollout start: %v", started.Sub(passed))
}

// localRuntime is a custom runtime running on this host whose apply writes
// the service's version to dir/<runtime>-<service> and whose fetch (every
// second) compares it with the target's.
func localRuntime(name, dir string) string {
	return fmt.Sprintf(`runtime:
  name: %[1]s
  custom:
    apply:
      taskConfig:
        program:
          cmd: ["sh", "-c", "echo \"$DROVER_SERVICE_VERSION\" > %[2]s/%[1]s-$DROVER_SERVICE"]
    fetch:
      fetchMode: EXIT_CODE
      pollInterval: 1s
      taskConfig:
        program:
          cmd: ["sh", "-c", "test \"$(cat %[2]s/%[1]s-$DROVER_SERVICE 2>/dev/null)\" = \"$DROVER_SERVICE_VERSION\" || exit 2"]
`, name, dir)
}
