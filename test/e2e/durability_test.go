package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	apiv1 "github.com/drover-dev/drover/api/v1"
)

// The chain application: staging -> canary -> prod, canary and prod each
// behind the previous channel being stable and one approval. Every channel
// has 4 replicas, so a rollout's progress shows in quarters.
var chain = []struct {
	name    string
	dep     string // the channel that must be stable first
	gated   bool   // behind a manual approval
	rollout string
	runtime string
}{
	// staging is the longest so that two kills fit in its rollout.
	{name: "staging", rollout: "3s", runtime: "rt-staging"},
	{name: "canary", dep: "staging", gated: true, rollout: "2s", runtime: "rt-canary"},
	{name: "prod", dep: "canary", gated: true, rollout: "2s", runtime: "rt-prod"},
}

func chainTree(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "chain")
	files := webService("chain")
	var app strings.Builder
	app.WriteString("application:\n  name: chain\n  releaseChannels:\n")
	for _, c := range chain {
		files["runtimes/"+c.runtime+".pvn.yaml"] = fakeRuntime(c.runtime, c.rollout, "")
		fmt.Fprintf(&app, "    - name: %s\n      runtimes:\n        - runtime: %s\n      constants:\n        - name: replicas\n          string:\n            value: \"4\"\n", c.name, c.runtime)
		if c.dep != "" {
			fmt.Fprintf(&app, "      preconditions:\n        - releaseChannelStable:\n            releaseChannel: %s\n", c.dep)
			if c.gated {
				app.WriteString("        - manualApproval: {}\n")
			}
		}
	}
	files["app.pvn.yaml"] = app.String()
	writeTree(t, dir, files)
	return dir
}

// monitor samples the service's status over HTTP every few milliseconds for
// the whole run, across kills, and checks the ordering invariant on every
// sample: a channel's running or target version is the new version only
// after its dependency ran it converged and (for gated channels) after an
// approval was sent.
type monitor struct {
	t      *testing.T
	url    string
	token  string
	newV   string
	client *http.Client

	mu           sync.Mutex
	phase        string
	phases       []string
	samples      map[string]int // successful samples per phase
	failures     int            // samples that failed (server down)
	dsID         string         // the desired state every sample must show, once set
	dsSetAt      time.Time      // when dsID was set: samples sent before may show the previous one
	approvalSent map[string]bool
	approvedAt   map[string]time.Time // approval confirmed: later samples must show it
	approver     map[string]string
	seenNew      map[string]bool
	exercised    map[string]int // samples in which the invariant had a new version to check
	violations   []string

	stop, done chan struct{}
	stopOnce   sync.Once
}

func startMonitor(t *testing.T, s *server, newV string) *monitor {
	m := &monitor{
		t: t, url: s.url + "/v1/apps/chain/services/web", token: s.token(), newV: newV,
		client:       &http.Client{Timeout: 2 * time.Second},
		samples:      map[string]int{},
		approvalSent: map[string]bool{}, approvedAt: map[string]time.Time{}, approver: map[string]string{},
		seenNew: map[string]bool{}, exercised: map[string]int{},
		stop: make(chan struct{}), done: make(chan struct{}),
	}
	m.setPhase("before push")
	go m.run()
	t.Cleanup(m.halt) // when the test ends early
	return m
}

func (m *monitor) setPhase(p string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.phase = p
	m.phases = append(m.phases, p)
}

func (m *monitor) setDesiredState(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.dsID, m.dsSetAt = id, time.Now()
}

// waitSamples waits until the current phase has n samples.
func (m *monitor) waitSamples(n int) {
	m.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		m.mu.Lock()
		got := m.samples[m.phase]
		m.mu.Unlock()
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			m.t.Fatalf("the status monitor got only %d samples in 10s", got)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// approving must be called before the approve request is sent.
func (m *monitor) approving(ch string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.approvalSent[ch] = true
}

// approved is called once the approve request succeeded.
func (m *monitor) approved(ch, user string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.approvedAt[ch], m.approver[ch] = time.Now(), user
}

func (m *monitor) run() {
	defer close(m.done)
	for {
		select {
		case <-m.stop:
			return
		case <-time.After(15 * time.Millisecond):
		}
		start := time.Now()
		st, err := m.fetch()
		if err != nil {
			m.mu.Lock()
			m.failures++
			m.mu.Unlock()
			continue
		}
		m.check(start, st)
	}
}

func (m *monitor) fetch() (*apiv1.ServiceStatus, error) {
	req, err := newAPIRequest(http.MethodGet, m.url, m.token, nil)
	if err != nil {
		return nil, err
	}
	resp, err := m.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status %s", resp.Status)
	}
	var st apiv1.ServiceStatus
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return nil, err
	}
	return &st, nil
}

func (m *monitor) check(start time.Time, st *apiv1.ServiceStatus) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.samples[m.phase]++
	violate := func(format string, args ...any) {
		if len(m.violations) < 20 {
			m.violations = append(m.violations, fmt.Sprintf("[%s] ", m.phase)+fmt.Sprintf(format, args...)+"\n"+dump(st))
		}
	}
	if m.dsID != "" && start.After(m.dsSetAt) && st.DesiredStateID != m.dsID {
		violate("desired state %s, want %s", st.DesiredStateID, m.dsID)
	}
	before := map[string]bool{}
	for k, v := range m.seenNew {
		before[k] = v
	}
	for _, c := range chain {
		ch := findChannel(st, c.name)
		if ch == nil {
			violate("no channel %s", c.name)
			return
		}
		if ch.Version == m.newV {
			m.seenNew[c.name] = true
		}
	}
	for _, c := range chain {
		ch := findChannel(st, c.name)
		if before[c.name] && ch.Version != m.newV {
			violate("%s ran %s converged before, now runs %q", c.name, m.newV, ch.Version)
		}
		if at, ok := m.approvedAt[c.name]; ok && start.After(at) && !slices.Contains(approvedBy(ch), m.approver[c.name]) {
			violate("%s's approval by %s is no longer listed", c.name, m.approver[c.name])
		}
		if ch.Version != m.newV && ch.TargetVersion != m.newV {
			continue
		}
		m.exercised[c.name]++
		if c.dep != "" && !m.seenNew[c.dep] {
			violate("%s has version %q / target %q = the new version before %s ran it converged", c.name, ch.Version, ch.TargetVersion, c.dep)
		}
		if c.gated && !m.approvalSent[c.name] {
			violate("%s has version %q / target %q = the new version before anyone approved it", c.name, ch.Version, ch.TargetVersion)
		}
	}
}

// halt stops sampling and waits for the sampler to be done.
func (m *monitor) halt() {
	m.stopOnce.Do(func() { close(m.stop) })
	<-m.done
}

// finish stops sampling and checks that the invariant was really exercised:
// every phase but those exempt (and those while the server was down) had at
// least minPerPhase samples.
func (m *monitor) finish(minPerPhase int, exempt ...string) {
	m.t.Helper()
	m.halt()
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, v := range m.violations {
		m.t.Errorf("invariant violated: %s", v)
	}
	var counts []string
	for _, p := range m.phases {
		counts = append(counts, fmt.Sprintf("%s=%d", p, m.samples[p]))
		if m.samples[p] < minPerPhase && !strings.HasPrefix(p, "down: ") && !slices.Contains(exempt, p) {
			m.t.Errorf("phase %q: only %d status samples, want at least %d (the check would be vacuous)", p, m.samples[p], minPerPhase)
		}
	}
	m.t.Logf("status samples per phase: %s; failed samples (server down): %d; samples checking the new version: %v",
		strings.Join(counts, ", "), m.failures, m.exercised)
	for _, c := range chain {
		if m.exercised[c.name] == 0 {
			m.t.Errorf("no sample ever showed %s with the new version: the invariant was never exercised for it", c.name)
		}
	}
}

// eventLog accumulates every event seen during the run; each new listing
// must contain every event seen before, unchanged, in strictly increasing
// seq order.
type eventLog struct {
	seen map[int64]apiv1.Event
}

func (l *eventLog) check(t *testing.T, when string, evs []apiv1.Event) {
	t.Helper()
	checkSeqs(t, evs)
	got := map[int64]apiv1.Event{}
	for _, e := range evs {
		got[e.Seq] = e
	}
	for seq, e := range l.seen {
		g, ok := got[seq]
		if !ok {
			t.Errorf("%s: event %d (%s %s) was lost", when, seq, e.Type, e.Message)
			continue
		}
		if g.Type != e.Type || g.Message != e.Message || !g.Time.Equal(e.Time) || g.Actor != e.Actor {
			t.Errorf("%s: event %d changed: %+v -> %+v", when, seq, e, g)
		}
	}
	for _, e := range evs {
		l.seen[e.Seq] = e
	}
}

var progressRE = regexp.MustCompile(`rolling out (\S+): (\d+)/(\d+) replicas available`)

// rollingOut reports whether channel ch rolls out version with at least
// quarters/4 of its replicas available (so the rollout is well under way and
// the runtime has long recorded it).
func rollingOut(ch, version string, quarters int) func(*apiv1.ServiceStatus) bool {
	return inRollout(ch, "CONVERGING", version, quarters)
}

// inRollout reports whether channel ch has status and rolls out version with
// at least n replicas available.
func inRollout(ch, status, version string, n int) func(*apiv1.ServiceStatus) bool {
	return func(st *apiv1.ServiceStatus) bool {
		c := findChannel(st, ch)
		if c == nil || c.Status != status || c.TargetVersion != version {
			return false
		}
		m := progressRE.FindStringSubmatch(c.Message)
		if m == nil || m[1] != version {
			return false
		}
		got, _ := strconv.Atoi(m[2])
		return got >= n
	}
}

// TestDurabilitySIGKILL is the core acceptance test: the server is killed
// with SIGKILL at several moments of a 3-channel rollout (right after the
// push, during staging's rollout, right after the approval that releases
// canary, right after approving prod, during prod's rollout) and restarted
// on the same data directory and address. After every restart the desired
// state is the same, approvals given before the kill still count, no event
// is lost, the rollout continues, and no channel ever receives the new
// version before its preconditions held.
func TestDurabilitySIGKILL(t *testing.T) {
	requireE2E(t)
	runDurability(t, true)
}

// TestDurabilitySIGKILLEarlyApprovals is the same journey with every kill
// away from an apply: during rollouts (a quarter or more done) and right
// after approvals given while the channel still waits for the previous one.
func TestDurabilitySIGKILLEarlyApprovals(t *testing.T) {
	requireE2E(t)
	runDurability(t, false)
}

func runDurability(t *testing.T, immediate bool) {
	dir := chainTree(t)
	s := newServer(t, "--poll-interval", "100ms")
	s.ok("alice", "apply", dir+"/...")
	const waitLong = 60 * time.Second

	// A first version everywhere, without kills.
	v1, _ := s.push("alice", "chain", "web", "image=1.0")
	for _, c := range chain[1:] {
		s.waitStatus("chain", "web", waitLong, c.name+" waiting for approval of v1", func(st *apiv1.ServiceStatus) bool {
			return findChannel(st, c.name).Status == "WAITING_MANUAL_APPROVAL"
		})
		s.ok("alice", "approve", "web", "--app", "chain", "--release-channel", c.name)
	}
	s.waitStatus("chain", "web", waitLong, "v1 everywhere", converged(v1))

	v2 := compiledVersion(t, dir, "chain", "web", "image=2.0")
	m := startMonitor(t, s, v2)
	log := &eventLog{seen: map[int64]apiv1.Event{}}
	log.check(t, "before the push", s.events("chain", "web"))
	var dsID string
	kills := 0
	// restart kills the server, starts it again, and checks what must have
	// survived. An immediate kill follows the last command at once, without
	// listing the events first (the listing checks the history then).
	restart := func(moment string, now bool) {
		t.Helper()
		if !now {
			log.check(t, "before kill "+moment, s.events("chain", "web"))
		}
		m.setPhase("down: " + moment)
		s.kill()
		kills++
		s.start()
		m.setPhase("after kill " + moment)
		st := s.status("chain", "web")
		if st.DesiredStateID != dsID || st.DesiredVersion != v2 {
			t.Fatalf("after kill %s: desired state %s (%s), want %s (%s)", moment, st.DesiredStateID, st.DesiredVersion, dsID, v2)
		}
		log.check(t, "after kill "+moment, s.events("chain", "web"))
	}
	// acknowledged checks that an event the last command wrote survived.
	acknowledged := func(typ, rc string) {
		t.Helper()
		for _, e := range log.seen {
			if e.Type == typ && e.ReleaseChannel == rc && e.DesiredStateID == dsID {
				return
			}
		}
		t.Errorf("the %s event (%s) of an acknowledged request was lost", typ, rc)
	}
	approve := func(ch string) {
		t.Helper()
		m.approving(ch)
		s.ok("alice", "approve", "web", "--app", "chain", "--release-channel", ch)
		m.approved(ch, "alice")
	}

	m.waitSamples(5)
	m.setPhase("pushed")
	r := s.ok("alice", "push", "web", "--app", "chain", "--param", "image=2.0")
	match := pushedRE.FindStringSubmatch(r.stdout)
	if match == nil || match[1] != v2 {
		t.Fatalf("push: want version %s: %s", v2, r)
	}
	dsID = match[2]
	m.setDesiredState(dsID)
	if immediate {
		restart("right after the push", true)
		acknowledged("pushed", "")
	}

	s.waitStatus("chain", "web", waitLong, "staging rolling out v2", rollingOut("staging", v2, 1))
	if !immediate {
		// canary waits for staging: the approval is recorded, nothing is applied.
		approve("canary")
		restart("right after approving canary (staging still rolling out)", true)
		acknowledged("approved", "canary")
		s.waitStatus("chain", "web", waitLong, "staging further in its rollout or done", func(st *apiv1.ServiceStatus) bool {
			return rollingOut("staging", v2, 2)(st) || findChannel(st, "staging").Version == v2
		})
	}
	restart("during staging's rollout", false)

	if immediate {
		s.waitStatus("chain", "web", waitLong, "canary waiting for approval", func(st *apiv1.ServiceStatus) bool {
			return findChannel(st, "canary").Status == "WAITING_MANUAL_APPROVAL"
		})
		approve("canary")
		restart("right after approving canary (which releases it)", true)
		acknowledged("approved", "canary")
	}

	// canary proceeds on the approval given before a kill. Sampling may
	// miss its rollout on a loaded machine (it converged between two
	// samples): converged at v2 counts too.
	st := s.waitStatus("chain", "web", waitLong, "canary rolling out v2 (or done)", func(st *apiv1.ServiceStatus) bool {
		c := findChannel(st, "canary")
		return rollingOut("canary", v2, 1)(st) || c != nil && c.Status == "CONVERGED" && c.Version == v2
	})
	if got := approvedBy(channel(t, st, "canary")); !slices.Equal(got, []string{"alice"}) {
		t.Errorf("canary approved by %v after the restarts, want [alice]", got)
	}
	if c := channel(t, st, "prod"); c.Version != v1 || c.TargetVersion != v1 {
		t.Errorf("prod moved while canary rolls out: %s", dump(c))
	}
	// prod waits for canary: the approval is recorded, nothing is applied.
	approve("prod")
	restart("right after approving prod, during canary's rollout", true)
	acknowledged("approved", "prod")

	s.waitStatus("chain", "web", waitLong, "prod rolling out v2", rollingOut("prod", v2, 1))
	restart("during prod's rollout", false)

	st = s.waitStatus("chain", "web", waitLong, "v2 everywhere", converged(v2))
	if r := s.as("alice", "wait", "web", "--app", "chain", "--timeout", "30s"); r.code != 0 {
		t.Errorf("wait after the restarts: %s", r)
	}
	for _, c := range chain[1:] {
		if got := approvedBy(channel(t, st, c.name)); !slices.Equal(got, []string{"alice"}) {
			t.Errorf("%s approved by %v, want [alice] (nobody approved twice)", c.name, got)
		}
	}
	if immediate {
		m.finish(3, "pushed") // killed at once
	} else {
		m.finish(3)
	}

	evs := s.events("chain", "web")
	log.check(t, "at the end", evs)
	// One approval per gated channel for v2, each before the channel started v2.
	for _, c := range chain[1:] {
		var approvals, starts []int
		for i, e := range evs {
			if e.DesiredStateID != dsID || e.ReleaseChannel != c.name {
				continue
			}
			switch e.Type {
			case "approved":
				approvals = append(approvals, i)
			case "started":
				starts = append(starts, i)
			}
		}
		if len(approvals) != 1 || len(starts) == 0 || starts[0] < approvals[0] {
			t.Errorf("%s: approvals at %v, starts at %v: want one approval before the start", c.name, approvals, starts)
		}
	}
	if kills < 4 {
		t.Errorf("only %d kills", kills)
	}
}

// TestKillRightAfterRequestDoesNotStall repeats the two kills that land
// between the engine's durable "applying" record and the runtime's apply:
// right after a push (staging is applied at once) and right after the
// approval that releases prod. After each restart the channel must converge
// within a few rollout durations. One round may miss the window; several
// rounds hit it reliably. (A kill before the runtime was called is handled
// since the engine detects interrupted applies; a kill after it returned
// is the known bug.)
func TestKillRightAfterRequestDoesNotStall(t *testing.T) {
	requireE2E(t)
	dir := twoChannelTree(t, "shop", "1s")
	s := newServer(t)
	s.ok("alice", "apply", dir+"/...")
	const within = 15 * time.Second
	for round := 1; round <= 4; round++ {
		image := fmt.Sprintf("image=%d.0", round)
		v, _ := s.push("alice", "shop", "web", image)
		s.restart()
		s.waitStatus("shop", "web", within, fmt.Sprintf("round %d: staging converged after a kill right after the push", round), func(st *apiv1.ServiceStatus) bool {
			return channelIs("staging", "CONVERGED", v)(st) && findChannel(st, "prod").Status == "WAITING_MANUAL_APPROVAL"
		})
		s.ok("alice", "approve", "web", "--app", "shop", "--release-channel", "prod")
		s.restart()
		s.waitStatus("shop", "web", within, fmt.Sprintf("round %d: prod converged after a kill right after its approval", round), converged(v))
	}
}

// TestKillAfterAppliesToOneRuntime: two services share a fake runtime. The
// second service's apply returns (and the engine records it as applied)
// while the runtime still coalesces its state saves; the server is killed at
// once. After the restart both services must converge soon: the runtime
// lost the apply, and the engine must notice and apply again.
func TestKillAfterAppliesToOneRuntime(t *testing.T) {
	requireE2E(t)
	dir := oneChannelTree(t, "shop", "1s")
	writeTree(t, dir, serviceFiles("shop", "api"))
	s := newServer(t)
	s.ok("alice", "apply", dir+"/...")
	const within = 15 * time.Second
	for round := 1; round <= 3; round++ {
		image := fmt.Sprintf("image=%d.0", round)
		vWeb, dsWeb := s.push("alice", "shop", "web", image)
		// web's apply has just been saved by the runtime; the next save of
		// the same runtime waits for the coalescing interval.
		waitEvent(t, s, "web", dsWeb, "applied")
		vAPI, dsAPI := pushHTTP(t, s, "shop", "api", fmt.Sprintf("%d.0", round))
		waitEvent(t, s, "api", dsAPI, "applied")
		s.restart()
		s.waitStatus("shop", "web", within, fmt.Sprintf("round %d: web converged", round), converged(vWeb))
		s.waitStatus("shop", "api", within, fmt.Sprintf("round %d: api converged after a kill right after its apply", round), converged(vAPI))
	}
}

// waitEvent polls the events API (no CLI, to be fast) until svc has an
// event of type typ for desired state dsID.
func waitEvent(t *testing.T, s *server, svc, dsID, typ string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		var list apiv1.EventList
		if err := s.getJSON("/v1/apps/shop/services/"+svc+"/events", &list); err != nil {
			t.Fatal(err)
		}
		for _, e := range list.Events {
			if e.Type == typ && e.DesiredStateID == dsID {
				return
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatalf("no %s event for %s of %s within 10s", typ, dsID, svc)
}

// pushHTTP pushes through the API directly (faster than the CLI).
func pushHTTP(t *testing.T, s *server, app, svc, image string) (version, dsID string) {
	t.Helper()
	body, _ := json.Marshal(apiv1.PushRequest{Params: []apiv1.Param{{Name: "image", Value: image}}})
	req, err := newAPIRequest(http.MethodPost, s.url+"/v1/apps/"+app+"/services/"+svc+":push", s.token(), strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	var out apiv1.PushResponse
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("push %s: %s (%v)", svc, resp.Status, err)
	}
	return out.BundleVersion, out.DesiredStateID
}
