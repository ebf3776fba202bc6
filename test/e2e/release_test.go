package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apiv1 "github.com/drover-dev/drover/api/v1"
)

// sharedTree is orderedTree whose prod asks one sharedManualApproval of
// every service instead of one manual approval each.
func sharedTree(t *testing.T, app string) string {
	t.Helper()
	dir := orderedTree(t, app, "")
	p := filepath.Join(dir, "app.pvn.yaml")
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	data = []byte(strings.Replace(string(data), "- manualApproval: {}", "- sharedManualApproval: {name: go-live}", 1))
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// release creates a release and returns it.
func (s *server) release(user, app string, args ...string) apiv1.Release {
	s.t.Helper()
	r := s.ok(user, append([]string{"release", "create", "--app", app, "-o", "json"}, args...)...)
	var rel apiv1.Release
	if err := json.Unmarshal([]byte(r.stdout), &rel); err != nil || rel.ID == "" {
		s.t.Fatalf("release create: %v: %s", err, r)
	}
	return rel
}

// eventAt returns the time of the first event of svc of type typ in rc
// for desired state id.
func (s *server) eventAt(app, svc, rc, typ, id string) time.Time {
	s.t.Helper()
	for _, e := range s.events(app, svc) {
		if e.Type == typ && e.ReleaseChannel == rc && e.DesiredStateID == id {
			return e.Time
		}
	}
	s.t.Fatalf("no %s event of %s in %s for %s", typ, svc, rc, id)
	return time.Time{}
}

// TestReleaseSharedApproval: one command releases db, api and web; each
// waits in staging for the release's version of the one before it (not
// the version it ran before), and in prod one shared approval, given once,
// lets all three through.
func TestReleaseSharedApproval(t *testing.T) {
	requireE2E(t)
	dir := sharedTree(t, "shop")
	s := newServer(t)
	s.ok("alice", "apply", dir+"/...")
	// db runs 0.9 converged in staging before the release.
	s.push("dev", "shop", "db", "image=0.9")
	s.waitStatus("shop", "db", 30*time.Second, "db 0.9 in staging", func(st *apiv1.ServiceStatus) bool {
		return findChannel(st, "staging").Status == "CONVERGED"
	})

	dry := s.ok("dev", "release", "create", "--app", "shop", "--param", "db.image=1.0", "--param", "api.image=1.0", "--param", "web.image=1.0", "--dry-run").stdout
	for _, want := range []string{"dry run: nothing pushed", "1. staging: db", "2. staging: api", "3. prod: db", "4. staging: web", "6. prod: web"} {
		if !strings.Contains(dry, want) {
			t.Errorf("release create --dry-run lacks %q:\n%s", want, dry)
		}
	}
	rel := s.release("dev", "shop", "--param", "db.image=1.0", "--param", "api.image=1.0", "--param", "web.image=1.0")
	if len(rel.Services) != 3 || rel.Status == "" {
		t.Fatalf("release %+v", rel)
	}
	ids := map[string]string{}
	for _, m := range rel.Services {
		ids[m.Service] = m.DesiredStateID
	}
	for _, svc := range []string{"db", "api", "web"} {
		s.waitStatus("shop", svc, 60*time.Second, svc+" in staging", func(st *apiv1.ServiceStatus) bool {
			return st.DesiredStateID == ids[svc] && findChannel(st, "staging").Status == "CONVERGED"
		})
	}
	for _, pair := range [][2]string{{"db", "api"}, {"api", "web"}} {
		dep := s.eventAt("shop", pair[0], "staging", "converged", ids[pair[0]])
		started := s.eventAt("shop", pair[1], "staging", "started", ids[pair[1]])
		if started.Before(dep) {
			t.Errorf("%s started in staging at %v, before %s 1.0 converged there at %v", pair[1], started, pair[0], dep)
		}
		t.Logf("%s 1.0 converged in staging -> %s started: %v", pair[0], pair[1], started.Sub(dep))
	}
	// In prod everything waits for the one shared approval.
	st := s.waitStatus("shop", "web", 30*time.Second, "web in prod waiting", func(st *apiv1.ServiceStatus) bool {
		c := findChannel(st, "prod")
		return c.Reason == "SERVICE_DEPENDENCY_UNMET" && strings.Contains(c.Message, "shared/go-live")
	})
	if a := channel(t, st, "prod").Approvals; len(a) != 1 || a[0].Topic != "shared/go-live" {
		t.Errorf("web's prod approvals %+v, want the shared one", a)
	}
	s.ok("alice", "approve", "db", "--app", "shop", "--release-channel", "prod")
	for _, svc := range []string{"db", "api", "web"} {
		st := s.waitStatus("shop", svc, 60*time.Second, svc+" in prod", func(st *apiv1.ServiceStatus) bool {
			return findChannel(st, "prod").Status == "CONVERGED" && st.DesiredStateID == ids[svc]
		})
		if got := approvedBy(channel(t, st, "prod")); len(got) != 1 || got[0] != "alice" {
			t.Errorf("%s's prod approved by %v, want alice's one shared approval", svc, got)
		}
	}
	got := s.ok("dev", "release", "get", rel.ID, "--app", "shop").stdout
	if !strings.Contains(got, "release "+rel.ID+": SUCCEEDED (staging SUCCEEDED, prod SUCCEEDED)") {
		t.Errorf("release get:\n%s", got)
	}
	var full apiv1.Release
	if err := s.getJSON("/v1/apps/shop/releases/"+rel.ID, &full); err != nil {
		t.Fatal(err)
	}
	if len(full.Events) < 9 {
		t.Errorf("release events: %d, want every step of every service", len(full.Events))
	}
	if list := s.ok("dev", "release", "list", "--app", "shop").stdout; !strings.Contains(list, rel.ID) || !strings.Contains(list, "SUCCEEDED") {
		t.Errorf("release list:\n%s", list)
	}
}

// TestReleaseApproveAll: drover approve --release answers the manual
// approval of every service of the release in prod in one command, one
// answer recorded per service.
func TestReleaseApproveAll(t *testing.T) {
	requireE2E(t)
	dir := orderedTree(t, "shop", "")
	writeTree(t, dir, map[string]string{"release.yaml": "services:\n  - service: db\n    params: {image: \"2.0\"}\n  - service: api\n    params: {image: \"2.0\"}\n  - service: web\n    params: {image: \"2.0\"}\n"})
	s := newServer(t)
	s.ok("alice", "apply", dir+"/...")
	rel := s.release("dev", "shop", "-f", filepath.Join(dir, "release.yaml"))
	s.waitStatus("shop", "db", 60*time.Second, "db waiting for approval in prod", prodWaitsForApproval)
	out := s.ok("alice", "approve", "--release", rel.ID, "--app", "shop", "--release-channel", "prod").stdout
	for _, svc := range []string{"db", "api", "web"} {
		if !strings.Contains(out, svc+": approved prod") {
			t.Errorf("approve --release does not say %s was approved:\n%s", svc, out)
		}
	}
	for _, m := range rel.Services {
		s.waitStatus("shop", m.Service, 60*time.Second, m.Service+" in prod", channelIs("prod", "CONVERGED", m.Version))
	}
	// Each answer is the service's own.
	for _, svc := range []string{"api", "web"} {
		found := false
		for _, e := range s.events("shop", svc) {
			found = found || e.Type == "approved" && e.ReleaseChannel == "prod" && e.Actor == "alice"
		}
		if !found {
			t.Errorf("no approval of %s recorded", svc)
		}
	}
}

// TestReleaseRollback: rolling back one service of a release leaves the
// others and names the dependants that wait for it; rollback --release
// rolls every service of the release back in a channel.
func TestReleaseRollback(t *testing.T) {
	requireE2E(t)
	dir := orderedTree(t, "shop", "")
	s := newServer(t)
	s.ok("alice", "apply", dir+"/...")
	one := s.release("dev", "shop", "--param", "db.image=1.0", "--param", "api.image=1.0", "--param", "web.image=1.0")
	s.waitStatus("shop", "web", 60*time.Second, "release 1 in staging", channelIs("staging", "CONVERGED", one.Services[2].Version))
	s.ok("alice", "approve", "--release", one.ID, "--app", "shop", "--release-channel", "prod")
	s.waitStatus("shop", "web", 60*time.Second, "release 1 in prod", channelIs("prod", "CONVERGED", one.Services[2].Version))

	two := s.release("dev", "shop", "--param", "db.image=2.0", "--param", "api.image=2.0", "--param", "web.image=2.0")
	s.waitStatus("shop", "web", 60*time.Second, "release 2 in staging", channelIs("staging", "CONVERGED", two.Services[2].Version))
	s.waitStatus("shop", "db", 30*time.Second, "db waiting for approval in prod", prodWaitsForApproval)
	s.ok("alice", "approve", "db", "--app", "shop", "--release-channel", "prod")
	s.waitStatus("shop", "db", 60*time.Second, "db 2.0 in prod", channelIs("prod", "CONVERGED", two.Services[0].Version))
	// Rolling db back in prod holds api there (it waits for its approval
	// and for db 2.0), and says so.
	var rb struct {
		DependantsWaiting []apiv1.BlockingLink `json:"dependantsWaiting"`
	}
	r := s.ok("alice", "rollback", "db", "--app", "shop", "--release-channel", "prod", "-o", "json")
	if err := json.Unmarshal([]byte(r.stdout), &rb); err != nil {
		t.Fatal(err)
	}
	if len(rb.DependantsWaiting) != 1 || rb.DependantsWaiting[0].Service != "api" || rb.DependantsWaiting[0].ReleaseChannel != "prod" {
		t.Errorf("rollback of db names %+v as waiting, want api in prod", rb.DependantsWaiting)
	}
	st := s.status("shop", "api")
	if c := channel(t, st, "staging"); c.Version != two.Services[1].Version {
		t.Errorf("rolling db back moved api in staging to %s", c.Version)
	}
	// The whole release back in staging.
	out := s.ok("alice", "rollback", "--release", two.ID, "--app", "shop", "--release-channel", "staging").stdout
	for _, m := range one.Services {
		if !strings.Contains(out, m.Service+": staging rolling back to "+m.Version) {
			t.Errorf("rollback --release does not roll %s back to %s:\n%s", m.Service, m.Version, out)
		}
		s.waitStatus("shop", m.Service, 60*time.Second, m.Service+" rolled back in staging", channelIs("staging", "ROLLED_BACK", m.Version))
	}
}
