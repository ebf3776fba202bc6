package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apiv1 "github.com/drover-dev/drover/api/v1"
)

// TestReleaseTrain: a service whose pushes queue (maestro.strategy
// RELEASE_TRAIN): a second push waits while the first is still on its way
// to prod, and rolls out only once the first converged there; --immediate
// replaces at once.
func TestReleaseTrain(t *testing.T) {
	requireE2E(t)
	dir := twoChannelTree(t, "shop", "1s")
	p := filepath.Join(dir, "services/web/web.pvn.yaml")
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, append(data, []byte("  maestro:\n    strategy: RELEASE_TRAIN\n")...), 0o644); err != nil {
		t.Fatal(err)
	}
	s := newServer(t)
	s.ok("alice", "apply", dir+"/...")
	v1, ds1 := s.push("dev", "shop", "web", "image=1.0")
	s.waitStatus("shop", "web", 30*time.Second, "1.0 waiting for approval in prod", prodWaitsForApproval)

	out := s.ok("dev", "push", "web", "--app", "shop", "--param", "image=2.0").stdout
	if !strings.Contains(out, "queued web") {
		t.Fatalf("the second push was not queued:\n%s", out)
	}
	st := s.status("shop", "web")
	if st.DesiredStateID != ds1 || len(st.Queued) != 1 || st.Queued[0].DisplayName != "2.0" {
		t.Fatalf("status while 2.0 is queued: desired state %s, queued %+v", st.DesiredStateID, st.Queued)
	}
	if txt := s.ok("dev", "status", "web", "--app", "shop").stdout; !strings.Contains(txt, "queued 1: ") {
		t.Errorf("drover status does not list the queue:\n%s", txt)
	}
	// Some time later 1.0 still owns staging: 2.0 does not overtake it.
	time.Sleep(2 * time.Second)
	if c := channel(t, s.status("shop", "web"), "staging"); c.Version != v1 || c.DesiredVersion != v1 {
		t.Fatalf("staging moved on while 1.0 is on its way to prod: runs %s, desired %s", c.Version, c.DesiredVersion)
	}
	s.ok("alice", "approve", "web", "--app", "shop", "--release-channel", "prod", "--desired-state", ds1)
	s.waitStatus("shop", "web", 60*time.Second, "2.0 active once 1.0 converged in prod", func(st *apiv1.ServiceStatus) bool {
		return st.DesiredStateID != ds1 && st.DisplayName == "2.0" && len(st.Queued) == 0 && findChannel(st, "staging").Status == "CONVERGED"
	})
	var promoted bool
	for _, e := range s.events("shop", "web") {
		promoted = promoted || e.Type == "pushed" && strings.Contains(e.Message, "(from the release train), replacing "+ds1)
	}
	if !promoted {
		t.Errorf("no event says 2.0 came from the release train")
	}
	// --immediate replaces at once.
	out = s.ok("dev", "push", "web", "--app", "shop", "--param", "image=3.0", "--immediate").stdout
	if strings.Contains(out, "queued") {
		t.Fatalf("--immediate queued:\n%s", out)
	}
	st = s.status("shop", "web")
	if st.DisplayName != "3.0" {
		t.Fatalf("after --immediate the active desired state is %s", st.DisplayName)
	}
	// 4.0 queues behind 3.0; 5.0 --immediate replaces 3.0: once 5.0 is
	// done, 4.0 leaves the queue unapplied rather than overtake it.
	if out := s.ok("dev", "push", "web", "--app", "shop", "--param", "image=4.0").stdout; !strings.Contains(out, "queued web") {
		t.Fatalf("4.0 was not queued behind 3.0:\n%s", out)
	}
	m := pushedRE.FindStringSubmatch(s.ok("dev", "push", "web", "--app", "shop", "--param", "image=5.0", "--immediate").stdout)
	if m == nil {
		t.Fatal("cannot parse the push of 5.0")
	}
	ds5 := m[2]
	s.waitStatus("shop", "web", 30*time.Second, "5.0 waiting for approval in prod", prodWaitsForApproval)
	s.ok("alice", "approve", "web", "--app", "shop", "--release-channel", "prod", "--desired-state", ds5)
	s.waitStatus("shop", "web", 60*time.Second, "4.0 out of the queue", func(st *apiv1.ServiceStatus) bool { return len(st.Queued) == 0 })
	time.Sleep(trainSettle)
	if st := s.status("shop", "web"); st.DesiredStateID != ds5 {
		t.Fatalf("the queued 4.0 overtook 5.0: active %s (%s)", st.DesiredStateID, st.DisplayName)
	}
	left := false
	for _, e := range s.events("shop", "web") {
		left = left || strings.Contains(e.Message, "left the release train unapplied")
	}
	if !left {
		t.Errorf("no event says 4.0 left the queue unapplied")
	}
}

// trainSettle is longer than the promoter's poll (2s): what it would do
// is done by then.
const trainSettle = 3 * time.Second
