package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apiv1 "github.com/drover-dev/drover/api/v1"
)

// orderedTree is the quickstart's application with three services, db ->
// api -> web: api waits for db and web for api, in each release channel.
// The fake runtimes fail the rollouts of versions failing matches (none when
// empty).
func orderedTree(t *testing.T, app, failing string) string {
	t.Helper()
	dir := twoChannelTree(t, app, "1s")
	files := map[string]string{}
	for svc, dep := range map[string]string{"db": "", "api": "db"} {
		for name, body := range serviceFiles(app, svc) {
			files[name] = body
		}
		if dep != "" {
			name := "services/" + svc + "/" + svc + ".pvn.yaml"
			files[name] += "  dependsOn:\n    - service: " + dep + "\n"
		}
	}
	writeTree(t, dir, files)
	web := filepath.Join(dir, "services/web/web.pvn.yaml")
	data, err := os.ReadFile(web)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(web, append(data, []byte("  dependsOn:\n    - service: api\n")...), 0o644); err != nil {
		t.Fatal(err)
	}
	if failing != "" {
		writeTree(t, dir, map[string]string{"runtimes/staging.pvn.yaml": fakeRuntime("staging", "1s", failing)})
	}
	return dir
}

// TestServiceOrdering: web and api pushed first wait for db, saying so
// through the whole chain; db, then api, then web roll out to staging in
// that order, and each service's prod waits for its approval and for the
// service before it in prod.
func TestServiceOrdering(t *testing.T) {
	requireE2E(t)
	dir := orderedTree(t, "shop", "")
	s := newServer(t)
	s.ok("alice", "apply", dir+"/...")
	webV, _ := s.push("dev", "shop", "web", "image=1.0")
	s.push("dev", "shop", "api", "image=1.0")
	st := s.waitStatus("shop", "web", 30*time.Second, "web waiting for api", func(st *apiv1.ServiceStatus) bool {
		c := findChannel(st, "staging")
		return c != nil && c.Reason == "SERVICE_DEPENDENCY_UNMET" && strings.Contains(c.Message, "(db has no rollout there yet")
	})
	staging := channel(t, st, "staging")
	if !strings.HasPrefix(staging.Message, "waiting for api in staging (api: WAITING_PRECONDITIONS: waiting for db in staging") {
		t.Errorf("web in staging says %q, want the chain through api to db", staging.Message)
	}
	if len(staging.BlockedBy) != 2 || staging.BlockedBy[0].Service != "api" || staging.BlockedBy[1].Service != "db" || staging.BlockedBy[1].Message != "no rollout there yet" {
		t.Errorf("web in staging blockedBy %+v, want api then db", staging.BlockedBy)
	}
	if len(staging.ServiceDependsOn) != 1 || staging.ServiceDependsOn[0] != (apiv1.ServiceDependency{Service: "api", ReleaseChannel: "staging"}) {
		t.Errorf("web in staging serviceDependsOn %+v", staging.ServiceDependsOn)
	}
	// The CLI shows the chain on one line.
	if out := s.ok("dev", "status", "web", "--app", "shop").stdout; !strings.Contains(out, "waiting for api in staging (api: WAITING_PRECONDITIONS: waiting for db in staging") {
		t.Errorf("drover status web does not show the chain:\n%s", out)
	}

	s.push("dev", "shop", "db", "image=1.0")
	s.waitStatus("shop", "web", 60*time.Second, "web converged in staging", channelIs("staging", "CONVERGED", webV))
	// Each one started after the one it depends on converged.
	started := func(svc string) time.Time {
		for _, e := range s.events("shop", svc) {
			if e.Type == "started" && e.ReleaseChannel == "staging" {
				return e.Time
			}
		}
		t.Fatalf("no STARTED event of %s in staging", svc)
		return time.Time{}
	}
	convergedAt := func(svc string) time.Time {
		for _, e := range s.events("shop", svc) {
			if e.Type == "converged" && e.ReleaseChannel == "staging" {
				return e.Time
			}
		}
		t.Fatalf("no CONVERGED event of %s in staging", svc)
		return time.Time{}
	}
	for _, pair := range [][2]string{{"db", "api"}, {"api", "web"}} {
		if dep, svc := convergedAt(pair[0]), started(pair[1]); svc.Before(dep) {
			t.Errorf("%s started in staging at %v, before %s converged there at %v", pair[1], svc, pair[0], dep)
		} else {
			t.Logf("%s converged in staging -> %s started there: %v", pair[0], pair[1], svc.Sub(dep))
		}
	}
	// In prod web waits for its approval and for api, which waits for db's approval.
	s.ok("alice", "approve", "web", "--app", "shop", "--release-channel", "prod")
	s.waitStatus("shop", "web", 30*time.Second, "web in prod waiting for api", func(st *apiv1.ServiceStatus) bool {
		c := findChannel(st, "prod")
		return c != nil && c.Reason == "SERVICE_DEPENDENCY_UNMET" && strings.Contains(c.Message, "db in prod (db: WAITING_MANUAL_APPROVAL")
	})
	s.ok("alice", "approve", "db", "--app", "shop", "--release-channel", "prod")
	s.ok("alice", "approve", "api", "--app", "shop", "--release-channel", "prod")
	s.waitStatus("shop", "web", 60*time.Second, "web converged in prod", channelIs("prod", "CONVERGED", webV))
}

// TestServiceOrderingHeldByFailure: a db version that fails holds api and
// web, and both say why.
func TestServiceOrderingHeldByFailure(t *testing.T) {
	requireE2E(t)
	dir := orderedTree(t, "shop", ".")
	s := newServer(t)
	s.ok("alice", "apply", dir+"/...")
	s.push("dev", "shop", "db", "image=1.0")
	s.push("dev", "shop", "api", "image=1.0")
	s.push("dev", "shop", "web", "image=1.0")
	st := s.waitStatus("shop", "api", 60*time.Second, "api held by the failed db", func(st *apiv1.ServiceStatus) bool {
		c := findChannel(st, "staging")
		return c != nil && c.Reason == "SERVICE_DEPENDENCY_UNMET" && strings.Contains(c.Message, "db in staging (db: FAILED")
	})
	if c := channel(t, st, "staging"); c.TargetVersion != "" {
		t.Errorf("api was applied in staging (%s) although db failed", c.TargetVersion)
	}
	st = s.waitStatus("shop", "web", 30*time.Second, "web held too", func(st *apiv1.ServiceStatus) bool {
		c := findChannel(st, "staging")
		return c != nil && strings.Contains(c.Message, "api in staging (api: WAITING_PRECONDITIONS: waiting for db in staging (db: FAILED")
	})
	if b := channel(t, st, "staging").BlockedBy; len(b) != 2 || b[1].Service != "db" || b[1].Status != "FAILED" {
		t.Errorf("web blockedBy %+v, want api then a FAILED db", b)
	}
}

// TestServiceCycleRefused: a cycle of dependencies is refused at validate
// and at apply, at every edge of it, and nothing is stored.
func TestServiceCycleRefused(t *testing.T) {
	requireE2E(t)
	dir := orderedTree(t, "shop", "")
	db := filepath.Join(dir, "services/db/db.pvn.yaml")
	data, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(db, append(data, []byte("  dependsOn:\n    - service: web\n")...), 0o644); err != nil {
		t.Fatal(err)
	}
	r := runDrover(t, "validate", dir+"/...")
	if r.code == 0 {
		t.Fatalf("validate accepted a cycle: %s", r)
	}
	for _, want := range []string{"services/db/db.pvn.yaml:", "services/api/api.pvn.yaml:", "services/web/web.pvn.yaml:", "services wait for each other in a cycle: api in prod -> db in prod -> web in prod -> api in prod"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("validate output lacks %q:\n%s", want, r.stderr)
		}
	}
	s := newServer(t)
	if r := s.as("alice", "apply", dir+"/..."); r.code == 0 || !strings.Contains(r.stderr, "cycle") {
		t.Fatalf("apply of a cycle: %s", r)
	}
	if r := s.as("alice", "status", "--app", "shop"); strings.Contains(r.stdout, "db") {
		t.Errorf("a refused apply stored something: %s", r)
	}
}
