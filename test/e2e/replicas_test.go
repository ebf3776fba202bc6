package e2e

import (
	"context"
	"fmt"
	neturl "net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	apiv1 "github.com/drover-dev/drover/api/v1"
	"github.com/drover-dev/drover/internal/testing/pgtest"
)

// replicaApply is the apply of TestReplicasSIGKILL's custom runtime: it logs
// its start and its end, each with the pid of the server that runs it, to
// one log all servers share, and takes a while in between.
const replicaApply = `set -eu
mkdir -p "$STATE_DIR"
echo "start $PVN_RELEASE_CHANNEL $PVN_SERVICE_VERSION $PPID" >> "$LOG"
sleep "$DELAY"
printf '%s\n' "$PVN_SERVICE_VERSION" > "$STATE_DIR/version"
echo "done $PVN_RELEASE_CHANNEL $PVN_SERVICE_VERSION $PPID" >> "$LOG"
`

// applyLine is one line of the shared apply log.
type applyLine struct {
	what, rc, version string
	pid               int
}

func readApplyLog(t *testing.T, path string) []applyLine {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []applyLine
	for _, l := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		f := strings.Fields(l)
		if len(f) != 4 {
			continue
		}
		pid, _ := strconv.Atoi(f[3])
		out = append(out, applyLine{f[0], f[1], f[2], pid})
	}
	return out
}

// replicaTree writes the configs of the replica tests: a custom runtime
// whose applies log to logPath, and service chain/web on channels staging,
// canary (after an approval) and prod (after another).
func replicaTree(t *testing.T, delay string) (dir, logPath string) {
	tmp := t.TempDir()
	logPath = filepath.Join(tmp, "applies.log")
	canary := crChannel("canary", "shell", "staging")
	canary["preconditions"] = append(canary["preconditions"].([]crObj), crObj{"manualApproval": crObj{}})
	prod := crChannel("prod", "shell", "canary")
	prod["preconditions"] = append(prod["preconditions"].([]crObj), crObj{"manualApproval": crObj{}})
	service := crService("chain", "web", "stateDir", tmp+"/state/{{.Builtins.ReleaseChannel.Name}}")
	service["service"].(crObj)["parameters"] = []crObj{{"name": "image", "required": true, "string": crObj{}}}
	dir = crWriteConfigs(t, filepath.Join(tmp, "config"), map[string]crObj{
		"runtime": crRuntime("shell", []string{"stateDir"}, crObj{
			"apply": crProgram(replicaApply, map[string]string{"STATE_DIR": "{{.Params.stateDir}}", "LOG": logPath, "DELAY": delay}),
			"fetch": crFetch("2s"),
		}),
		"app":     crApp("chain", crChannel("staging", "shell"), canary, prod),
		"service": service,
	})
	return dir, logPath
}

// TestReplicasSIGKILL: three servers share one PostgreSQL database, and
// every command goes to a different one. A three-channel rollout with
// approvals, then a rollback, run on a custom runtime whose applies all
// servers log to one file; one server is killed with SIGKILL at five
// moments (right after a push, mid-apply, right after an approval, idle,
// mid-rollback) and started again. Every rollout ends as it should, no
// approval, desired state or event is lost, and each version is applied to
// each channel once, again only where the server applying it was killed.
func TestReplicasSIGKILL(t *testing.T) {
	requireE2E(t)
	url := pgtest.NewDatabase(t)
	dir, logPath := replicaTree(t, "1.5")
	const app, svc = "chain", "web"
	flags := []string{"--database", url, "--secrets-key-file", sharedKeyring(t), "--poll-interval", "100ms", "--lease-ttl", "2s"}
	rs := []*server{newServer(t, flags...), newServer(t, flags...), newServer(t, flags...)}
	next := 0
	// any is the next replica, round robin: each command goes to another.
	anyReplica := func() *server {
		for range rs {
			s := rs[next%len(rs)]
			next++
			if s.pid() != 0 {
				return s
			}
		}
		t.Fatal("no replica running")
		return nil
	}
	const waitLong = 90 * time.Second
	anyReplica().ok("alice", "apply", dir+"/...")

	// killed lists the pids of the servers killed, whose applies may
	// have been cut short.
	var killed []int
	kill := func(s *server, moment string) time.Time {
		t.Helper()
		killed = append(killed, s.pid())
		at := time.Now()
		s.kill()
		t.Logf("killed %s (pid %d) %s", s.addr, killed[len(killed)-1], moment)
		return at
	}
	byPid := func(pid int) *server {
		for _, s := range rs {
			if s.pid() == pid {
				return s
			}
		}
		return nil
	}
	log := &eventLog{seen: map[int64]apiv1.Event{}}
	approve := func(s *server, rc, dsID string) {
		t.Helper()
		s.ok("alice", "approve", svc, "--app", app, "--release-channel", rc, "--desired-state", dsID)
	}
	waitFor := func(what string, cond func(*apiv1.ServiceStatus) bool) *apiv1.ServiceStatus {
		t.Helper()
		return anyReplica().waitStatus(app, svc, waitLong, what, cond)
	}
	waitingApproval := func(rc string) func(*apiv1.ServiceStatus) bool {
		return func(st *apiv1.ServiceStatus) bool { return findChannel(st, rc).Status == "WAITING_MANUAL_APPROVAL" }
	}

	// v1 everywhere, without kills.
	v1, ds1 := anyReplica().push("alice", app, svc, "image=1.0")
	for _, rc := range []string{"canary", "prod"} {
		waitFor(rc+" waiting for approval of v1", waitingApproval(rc))
		approve(anyReplica(), rc, ds1)
	}
	waitFor("v1 everywhere", converged(v1))
	log.check(t, "after v1", anyReplica().events(app, svc))

	// 1. Right after a push.
	s := anyReplica()
	v2, ds2 := s.push("alice", app, svc, "image=2.0")
	kill(s, "right after the push")
	s.start()
	if st := anyReplica().status(app, svc); st.DesiredStateID != ds2 {
		t.Fatalf("after the kill the desired state is %s, want %s", st.DesiredStateID, ds2)
	}

	// 2. Mid-apply: the server running staging's apply of v2.
	var applier *server
	deadline := time.Now().Add(waitLong)
	for applier == nil {
		for _, l := range readApplyLog(t, logPath) {
			if l.what == "start" && l.rc == "staging" && l.version == v2 {
				applier = byPid(l.pid)
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("staging's apply of v2 never started")
		}
		time.Sleep(20 * time.Millisecond)
	}
	killedAt := kill(applier, "while it applied v2 to staging")
	// Measure the takeover before starting it again (which would end the
	// cut-short apply and could claim the task itself).
	var resumed time.Duration
	for resumed == 0 {
		for _, l := range readApplyLog(t, logPath) {
			if l.what == "start" && l.rc == "staging" && l.version == v2 && l.pid != killed[len(killed)-1] {
				resumed = time.Since(killedAt)
			}
		}
		if time.Since(killedAt) > waitLong {
			t.Fatal("no other server took staging's apply over")
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("another server started staging's apply again %v after the applying server died (lease ttl 2s, claims 4s)", resumed.Round(time.Millisecond))
	applier.start()

	// 3. Right after an approval.
	waitFor("canary waiting for approval of v2", waitingApproval("canary"))
	s = anyReplica()
	approve(s, "canary", ds2)
	kill(s, "right after approving canary")
	s.start()
	st := waitFor("canary on v2", func(st *apiv1.ServiceStatus) bool { return findChannel(st, "canary").Version == v2 })
	if got := approvedBy(findChannel(st, "canary")); !slices.Equal(got, []string{"alice"}) {
		t.Errorf("canary approved by %v after the kill, want [alice]", got)
	}

	// 4. Idle: prod waits for its approval.
	waitFor("prod waiting for approval of v2", waitingApproval("prod"))
	s = anyReplica()
	kill(s, "while idle")
	s.start()
	approve(anyReplica(), "prod", ds2)
	waitFor("v2 everywhere", converged(v2))
	log.check(t, "after v2", anyReplica().events(app, svc))

	// 5. During a rollback of prod to v1.
	anyReplica().ok("alice", "rollback", svc, "--app", app, "--release-channel", "prod")
	applier = nil
	deadline = time.Now().Add(waitLong)
	for applier == nil {
		for _, l := range readApplyLog(t, logPath) {
			if l.what == "start" && l.rc == "prod" && l.version == v1 && slices.ContainsFunc(readApplyLog(t, logPath), func(x applyLine) bool {
				return x.what == "done" && x.rc == "prod" && x.version == v2
			}) {
				applier = byPid(l.pid)
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the rollback's apply never started")
		}
		time.Sleep(20 * time.Millisecond)
	}
	kill(applier, "while it rolled prod back")
	applier.start()
	st = waitFor("prod rolled back to v1", func(st *apiv1.ServiceStatus) bool {
		c := findChannel(st, "prod")
		return c.Version == v1 && c.Status == "ROLLED_BACK" || c.Version == v1 && c.Status == "CONVERGED"
	})
	if c := findChannel(st, "staging"); c.Version != v2 {
		t.Errorf("staging after prod's rollback: %s", dump(c))
	}
	log.check(t, "at the end", anyReplica().events(app, svc))

	// The apply log: each version reached each channel once (the rollback
	// applies v1 to prod a second time); an apply started again only where
	// the server running it was killed before it ended.
	lines := readApplyLog(t, logPath)
	done := map[string]int{}
	for i, l := range lines {
		k := l.rc + "@" + l.version
		if l.what == "done" {
			done[k]++
			continue
		}
		// A start that never ended was cut short: its server was killed.
		ended := slices.ContainsFunc(lines[i+1:], func(x applyLine) bool {
			return x.what == "done" && x.rc == l.rc && x.version == l.version && x.pid == l.pid
		})
		if !ended && !slices.Contains(killed, l.pid) {
			t.Errorf("the apply of %s by pid %d never ended, and that server was not killed", k, l.pid)
		}
	}
	want := map[string]int{"staging@" + v1: 1, "canary@" + v1: 1, "prod@" + v1: 2, "staging@" + v2: 1, "canary@" + v2: 1, "prod@" + v2: 1}
	for k, n := range want {
		if done[k] != n {
			t.Errorf("%s applied to the end %d times, want %d", k, done[k], n)
		}
	}
	if t.Failed() {
		var b strings.Builder
		for _, l := range lines {
			fmt.Fprintf(&b, "%s %s %s %d\n", l.what, l.rc, l.version, l.pid)
		}
		t.Logf("apply log:\n%s", b.String())
	}
}

// pgExec runs statements on the PostgreSQL database at url.
func pgExec(t *testing.T, url string, stmts ...string) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(context.Background()) }()
	for _, q := range stmts {
		if _, err := conn.Exec(t.Context(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// asUser is url with user name instead of its own.
func asUser(t *testing.T, url, name string) string {
	t.Helper()
	u, err := neturl.Parse(url)
	if err != nil {
		t.Fatal(err)
	}
	u.User = neturl.User(name)
	return u.String()
}

// TestReplicaPartitioned: a server cut off from the database mid-apply (its
// role may no longer log in, its connections are ended) stops that apply
// once its claim has lapsed, another server applies again and finishes the
// rollout, and once the cut-off server is back nothing is applied twice.
func TestReplicaPartitioned(t *testing.T) {
	requireE2E(t)
	url := pgtest.NewDatabase(t)
	roleA, roleB := fmt.Sprintf("drover_a_%d", os.Getpid()), fmt.Sprintf("drover_b_%d", os.Getpid())
	pgExec(t, url, "CREATE ROLE "+roleA+" LOGIN SUPERUSER", "CREATE ROLE "+roleB+" LOGIN SUPERUSER")
	t.Cleanup(func() {
		conn, err := pgx.Connect(context.Background(), url)
		if err == nil {
			_, _ = conn.Exec(context.Background(), "ALTER ROLE "+roleA+" LOGIN")
			_ = conn.Close(context.Background())
		}
	})
	// Applies take longer than a claim lasts (2 s), so the cut lands while
	// A's apply still runs after its claim lapsed.
	dir, logPath := replicaTree(t, "5")
	const app, svc = "chain", "web"
	flags := func(role string) []string {
		return []string{"--database", asUser(t, url, role), "--secrets-key-file", sharedKeyring(t), "--poll-interval", "100ms", "--lease-ttl", "1s"}
	}
	a := newServer(t, flags(roleA)...)
	a.ok("alice", "apply", dir+"/...")
	v1, _ := a.push("alice", app, svc, "image=1.0")
	pidA := a.pid()
	deadline := time.Now().Add(60 * time.Second)
	for !slices.ContainsFunc(readApplyLog(t, logPath), func(l applyLine) bool { return l.what == "start" && l.pid == pidA }) {
		if time.Now().After(deadline) {
			t.Fatal("A never started staging's apply")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Cut A off: its role may not log in, and its connections end.
	cutAt := time.Now()
	pgExec(t, url, "ALTER ROLE "+roleA+" NOLOGIN",
		"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '"+roleA+"'")
	b := newServer(t, flags(roleB)...)
	// B applies staging again once A's claim lapsed; A's apply is stopped.
	var resumed time.Duration
	for resumed == 0 {
		if slices.ContainsFunc(readApplyLog(t, logPath), func(l applyLine) bool { return l.what == "start" && l.pid == b.pid() }) {
			resumed = time.Since(cutAt)
		}
		if time.Since(cutAt) > 60*time.Second {
			t.Fatal("B never took staging's apply over")
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("B started staging's apply %v after A was cut off", resumed.Round(time.Millisecond))
	time.Sleep(5 * time.Second) // A's apply would have ended by now, had it run on
	pgExec(t, url, "ALTER ROLE "+roleA+" LOGIN")

	b.waitStatus(app, svc, 60*time.Second, "canary waiting for approval", func(st *apiv1.ServiceStatus) bool {
		return findChannel(st, "canary").Status == "WAITING_MANUAL_APPROVAL"
	})
	for _, rc := range []string{"canary", "prod"} {
		a.waitStatus(app, svc, 60*time.Second, rc+" waiting for approval", func(st *apiv1.ServiceStatus) bool {
			return findChannel(st, rc).Status == "WAITING_MANUAL_APPROVAL"
		})
		a.ok("alice", "approve", svc, "--app", app, "--release-channel", rc)
	}
	b.waitStatus(app, svc, 60*time.Second, "v1 everywhere", converged(v1))

	lines := readApplyLog(t, logPath)
	done := map[string][]int{}
	for _, l := range lines {
		if l.what == "done" {
			done[l.rc] = append(done[l.rc], l.pid)
		}
	}
	for _, rc := range []string{"staging", "canary", "prod"} {
		if len(done[rc]) != 1 {
			t.Errorf("%s applied to the end by %v, want once", rc, done[rc])
		}
	}
	if slices.Contains(done["staging"], pidA) {
		t.Error("A's apply ran to its end while A was cut off from the database")
	}
	if !strings.Contains(crReadFile(t, a.logPath), "task claim lapsed unrenewed") {
		t.Error("A's log does not say it stopped the apply whose claim lapsed")
	}
}

// TestReplicasApplyOnlyOnce: two servers on one PostgreSQL database and an
// apply-only custom runtime (no fetch: what it applied last is all it
// knows). Each of three pushes, made through one server and then the other,
// is applied once per channel, however the servers hand the service to each
// other, including when each is stopped in turn and the other plans it
// (tour 3's B29: the second server to plan a service re-applied every
// push, the record of the last apply being in the other's data directory).
func TestReplicasApplyOnlyOnce(t *testing.T) {
	requireE2E(t)
	url := pgtest.NewDatabase(t)
	tmp := t.TempDir()
	logPath := filepath.Join(tmp, "applies.log")
	service := crService("once", "job", "stateDir", tmp+"/state/{{.Builtins.ReleaseChannel.Name}}")
	service["service"].(crObj)["parameters"] = []crObj{{"name": "image", "required": true, "string": crObj{}}}
	dir := crWriteConfigs(t, filepath.Join(tmp, "config"), map[string]crObj{
		"runtime": crRuntime("applyonly", []string{"stateDir"}, crObj{
			"apply": crProgram(replicaApply, map[string]string{"STATE_DIR": "{{.Params.stateDir}}", "LOG": logPath, "DELAY": "0.5"}),
		}),
		"app":     crApp("once", crChannel("staging", "applyonly"), crChannel("prod", "applyonly", "staging")),
		"service": service,
	})
	const app, svc = "once", "job"
	flags := []string{"--database", url, "--secrets-key-file", sharedKeyring(t), "--poll-interval", "100ms", "--lease-ttl", "2s"}
	rs := []*server{newServer(t, flags...), newServer(t, flags...)}
	rs[0].ok("alice", "apply", dir+"/...")

	var versions []string
	for i, image := range []string{"1.0", "2.0", "3.0"} {
		s := rs[i%2]
		v, _ := s.push("alice", app, svc, "image="+image)
		versions = append(versions, v)
		s.waitStatus(app, svc, 90*time.Second, "converged at "+v, converged(v))
		// Each server in turn stops, so the other one plans the service
		// and looks at what was applied.
		for _, r := range rs {
			r.stop()
			time.Sleep(5 * time.Second)
			other := rs[0]
			if other == r {
				other = rs[1]
			}
			other.waitStatus(app, svc, 60*time.Second, "still converged at "+v, converged(v))
			r.start()
		}
	}
	// Some planning rounds on both servers after the last handover.
	time.Sleep(3 * time.Second)
	count := map[string]int{}
	for _, l := range readApplyLog(t, logPath) {
		if l.what == "start" {
			count[l.rc+" "+l.version]++
		}
	}
	for _, v := range versions {
		for _, rc := range []string{"staging", "prod"} {
			if n := count[rc+" "+v]; n != 1 {
				t.Errorf("%s applied to %s %d times, want once", v, rc, n)
			}
		}
	}
	if t.Failed() {
		for _, ev := range rs[0].events(app, svc) {
			t.Logf("event %s %s: %s", ev.Type, ev.ReleaseChannel, ev.Message)
		}
	}
}
