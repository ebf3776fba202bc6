package agent_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/agent"
	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/runtimehost"
	"github.com/drover-dev/drover/internal/runtimes"
	"github.com/drover-dev/drover/internal/runtimes/custom"
	"github.com/drover-dev/drover/internal/runtimes/fake"
	"github.com/drover-dev/drover/internal/runtimes/remote"
	"github.com/drover-dev/drover/internal/store"
	"github.com/drover-dev/drover/internal/store/sqlite"
)

// rig is a hub behind a TLS listener, on a real store, with one linked
// runtime "edge".
type rig struct {
	t           *testing.T
	st          *sqlite.Store
	hub         *remote.Hub
	url         string
	fingerprint string
	token       string
	runs        *runLog
	connects    chan string
	srv         *httptest.Server
}

type runLog struct {
	mu   sync.Mutex
	runs []runtimes.Run
}

func (l *runLog) RecordRun(_ context.Context, r runtimes.Run) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.runs = append(l.runs, r)
	return nil
}

func (l *runLog) all() []runtimes.Run {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]runtimes.Run(nil), l.runs...)
}

func newRig(t *testing.T) *rig {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "drover.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	r := &rig{t: t, st: st, token: "drover-agent_TESTTOKEN", runs: &runLog{}, connects: make(chan string, 16)}
	if err := st.LinkRuntime(ctx, store.LinkedRuntime{Name: "edge", TokenHash: remote.HashToken(r.token)}); err != nil {
		t.Fatal(err)
	}
	// An agent keeps its runtime from another for a minute without
	// answering: longer than any pause of a loaded test machine.
	r.hub = remote.NewHub(remote.HubConfig{Store: st, Runs: r.runs, Replica: "test-server", Heartbeat: 100 * time.Millisecond,
		TakeoverAfter: time.Minute, OnConnect: func(name string) { r.connects <- name }})
	srv := httptest.NewUnstartedServer(r.hub)
	srv.StartTLS()
	r.srv = srv
	t.Cleanup(func() { r.hub.Close(); srv.Close() })
	sum := sha256.Sum256(srv.Certificate().Raw)
	r.url, r.fingerprint = srv.URL, "sha256:"+hex.EncodeToString(sum[:])
	return r
}

// startAgent runs an agent until the test ends (or stop is called) and
// returns what Run returned on a channel.
func (r *rig) startAgent(mode, token, fingerprint string) (stop func(), done <-chan error) {
	return r.startAgentWith(agent.Config{Mode: mode, Token: token, Fingerprint: fingerprint})
}

func (r *rig) startAgentWith(cfg agent.Config) (stop func(), done <-chan error) {
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan error, 1)
	cfg.Server = r.url
	cfg.Registry = runtimehost.Registry{"fake": fake.Factory, "custom": custom.Factory}
	cfg.MaxBackoff = 200 * time.Millisecond
	go func() { ch <- agent.Run(ctx, cfg) }()
	r.t.Cleanup(cancel)
	return cancel, ch
}

func (r *rig) waitConnected() {
	r.t.Helper()
	select {
	case <-r.connects:
	case <-time.After(10 * time.Second):
		r.t.Fatal("the agent did not connect")
	}
}

func runtimeConfig(t *testing.T, rt config.Runtime) []byte {
	t.Helper()
	b, err := json.Marshal(config.File{Runtime: &rt})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func target(version string) runtimes.Target {
	return runtimes.Target{InstanceKey: runtimes.InstanceKey{Application: "shop", Service: "web", ReleaseChannel: "prod"},
		Version: version, DesiredStateID: "ds-1", Backend: "kubernetes",
		Objects: []json.RawMessage{json.RawMessage(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"}}`)},
		Env:     map[string]string{"GREETING": "hello"}}
}

// A runtime served by an agent applies, fetches and watches through the
// session the agent opened, and the agent's state is recorded.
func TestAgentServesRuntime(t *testing.T) {
	r := newRig(t)
	r.startAgent(remote.ModeCommands, r.token, r.fingerprint)
	r.waitConnected()
	ctx := context.Background()
	lr, err := r.st.GetLinkedRuntime(ctx, "edge")
	if err != nil {
		t.Fatal(err)
	}
	if a := lr.Agent; !a.Connected || a.Mode != remote.ModeCommands || a.Replica != "test-server" || a.HeartbeatAt.IsZero() {
		t.Fatalf("agent state = %+v", a)
	}
	rt := r.hub.Runtime("edge", "fake", "edge", 1, runtimeConfig(t, config.Runtime{Name: "edge", Fake: &config.FakeRuntime{}}))
	if _, ok := rt.(runtimes.Discoverer); ok {
		t.Error("a fake runtime behind an agent describes a cluster")
	}
	keys := make(chan runtimes.InstanceKey, 16)
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go func() { _ = rt.(runtimes.Watcher).Watch(wctx, func(k runtimes.InstanceKey) { keys <- k }) }()
	time.Sleep(200 * time.Millisecond) // let the watch call open
	if _, err := rt.Apply(ctx, target("v1")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := rt.Fetch(ctx, target("v1"))
		if err != nil {
			t.Fatal(err)
		}
		if st.Version == "v1" && st.Converged {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not converged: %+v", st)
		}
		time.Sleep(50 * time.Millisecond)
	}
	select {
	case k := <-keys:
		if k.Service != "web" {
			t.Errorf("watch reported %v", k)
		}
	case <-time.After(10 * time.Second):
		t.Error("the watch relayed nothing")
	}
}

// Commands of a custom runtime run in a commands-mode agent, get the
// target's environment, and their runs come back to the server.
func TestAgentRunsCommands(t *testing.T) {
	r := newRig(t)
	r.startAgent(remote.ModeCommands, r.token, r.fingerprint)
	r.waitConnected()
	dir := t.TempDir()
	cfg := config.Runtime{Name: "cmds", Custom: &config.CustomRuntime{
		ProxyRuntime: &config.ProxyRuntime{Runtime: "edge"},
		Apply: &config.ApplyCommand{TaskConfig: &config.TaskConfig{Program: &config.Program{
			Cmd: []string{"sh", "-c", `echo "$GREETING" > "` + dir + `/applied"; echo applied`}}}},
	}}
	rt := r.hub.Runtime("edge", "custom", "cmds", 1, runtimeConfig(t, cfg))
	tg := target("v1")
	obj, err := json.Marshal(map[string]any{"kind": "custom", "runtime": "cmds", "custom": cfg.Custom})
	if err != nil {
		t.Fatal(err)
	}
	tg.Backend, tg.Objects = "customRuntime", []json.RawMessage{obj}
	if _, err := rt.Apply(context.Background(), tg); err != nil {
		t.Fatal(err)
	}
	runs := r.runs.all()
	if len(runs) != 1 || runs[0].Kind != "apply" || runs[0].ExitCode != 0 || !strings.Contains(runs[0].Stdout, "applied") {
		t.Fatalf("runs recorded on the server: %+v", runs)
	}

	// A protection's command runs there too, through the same runtime.
	cr, ok := rt.(runtimes.CheckRunner)
	if !ok {
		t.Fatal("a runtime served by an agent does not run protection commands")
	}
	spec := `{"protection":"ready","taskConfig":{"program":{"cmd":["sh","-c","test -f ` + dir + `/applied && echo \"ready on $PVN_RELEASE_CHANNEL\""]}}}`
	out, err := cr.RunCheck(context.Background(), tg, runtimes.CheckCommand{Name: "ready", Spec: json.RawMessage(spec)})
	if err != nil || !out.Passed || out.Message != "ready on "+tg.ReleaseChannel {
		t.Fatalf("check: %+v, %v", out, err)
	}
	if runs := r.runs.all(); len(runs) != 2 || runs[1].Kind != "check" {
		t.Fatalf("runs recorded on the server: %+v", runs)
	}
}

// A Kubernetes runtime cannot be served by a commands agent: the call
// fails permanently, saying so.
func TestAgentRefusesWrongMode(t *testing.T) {
	r := newRig(t)
	r.startAgent(remote.ModeCommands, r.token, r.fingerprint)
	r.waitConnected()
	rt := r.hub.Runtime("edge", "kubernetes", "edge", 1, runtimeConfig(t, config.Runtime{Name: "edge"}))
	_, err := rt.Fetch(context.Background(), target("v1"))
	if err == nil || !runtimes.IsPermanent(err) || !strings.Contains(err.Error(), "runs commands only") {
		t.Fatalf("err = %v", err)
	}
}

// An agent that pins another certificate does not connect; one with an
// unknown token is refused and stops.
func TestAgentTrust(t *testing.T) {
	r := newRig(t)
	_, done := r.startAgent(remote.ModeCommands, "drover-agent_WRONG", r.fingerprint)
	select {
	case err := <-done:
		if !errors.Is(err, remote.ErrRefused) {
			t.Fatalf("unknown token: Run = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("an agent with an unknown token kept running")
	}
	other := "sha256:" + strings.Repeat("ab", 32)
	stop, done := r.startAgent(remote.ModeCommands, r.token, other)
	select {
	case <-r.connects:
		t.Fatal("an agent connected to a server whose certificate is not the pinned one")
	case err := <-done:
		t.Fatalf("Run returned %v; it should keep retrying", err)
	case <-time.After(time.Second):
	}
	stop()
}

// Unlinking cuts the agent off within a heartbeat, its token is refused
// from then on, and the runtime's calls say it is not linked.
func TestAgentUnlinked(t *testing.T) {
	r := newRig(t)
	_, done := r.startAgent(remote.ModeCommands, r.token, r.fingerprint)
	r.waitConnected()
	// A server it also connects to, unreachable, does not keep it running.
	r.hub.SetPeers(remote.Peers{Self: remote.Peer{Name: "one", URL: r.url}, Others: []remote.Peer{{Name: "gone", URL: "https://127.0.0.1:1"}}})
	time.Sleep(200 * time.Millisecond)
	if err := r.st.UnlinkRuntime(context.Background(), "edge"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, remote.ErrRefused) {
			t.Fatalf("Run = %v, want refused", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the unlinked agent kept running")
	}
	rt := r.hub.Runtime("edge", "fake", "edge", 1, runtimeConfig(t, config.Runtime{Name: "edge", Fake: &config.FakeRuntime{}}))
	if _, err := rt.Fetch(context.Background(), target("v1")); err == nil || !strings.Contains(err.Error(), "not linked") {
		t.Fatalf("fetch after unlink: %v", err)
	}
}

// A new token replaces the old one: the agent holding the old one is cut
// off and refused.
func TestAgentTokenRotated(t *testing.T) {
	r := newRig(t)
	_, done := r.startAgent(remote.ModeCommands, r.token, r.fingerprint)
	r.waitConnected()
	if err := r.st.SetLinkToken(context.Background(), "edge", remote.HashToken("drover-agent_NEW")); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, remote.ErrRefused) {
			t.Fatalf("Run = %v, want refused", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the agent with the old token kept running")
	}
	r.startAgent(remote.ModeCommands, "drover-agent_NEW", r.fingerprint)
	r.waitConnected()
}

// An agent that goes away is reported with how long it has been silent,
// and one that comes back serves again.
func TestAgentGoneAndBack(t *testing.T) {
	r := newRig(t)
	stop, done := r.startAgent(remote.ModeCommands, r.token, r.fingerprint)
	r.waitConnected()
	rt := r.hub.Runtime("edge", "fake", "edge", 1, runtimeConfig(t, config.Runtime{Name: "edge", Fake: &config.FakeRuntime{}}))
	stop()
	if err := <-done; err != nil {
		t.Fatalf("agent stopped with %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := rt.Fetch(context.Background(), target("v1"))
		if err != nil && strings.Contains(err.Error(), "agent disconnected, silent for") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("fetch with the agent gone: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	lr, err := r.st.GetLinkedRuntime(context.Background(), "edge")
	if err != nil {
		t.Fatal(err)
	}
	if lr.Agent.Connected || lr.Agent.DisconnectedAt.IsZero() {
		t.Fatalf("agent state after it left: %+v", lr.Agent)
	}
	r.startAgent(remote.ModeCommands, r.token, r.fingerprint)
	r.waitConnected()
	if _, err := rt.Fetch(context.Background(), target("v1")); err != nil {
		t.Fatalf("fetch once the agent is back: %v", err)
	}
}

func TestParseFingerprint(t *testing.T) {
	hexFP := strings.Repeat("0a", 32)
	for _, in := range []string{hexFP, "sha256:" + hexFP, "SHA256:" + strings.ToUpper(hexFP), strings.TrimSuffix(strings.Repeat("0a:", 32), ":")} {
		got, err := agent.ParseFingerprint(in)
		if err != nil || got != hexFP {
			t.Errorf("ParseFingerprint(%q) = %q, %v", in, got, err)
		}
	}
	for _, in := range []string{"", "sha256:", "sha256:abc", strings.Repeat("zz", 32)} {
		if _, err := agent.ParseFingerprint(in); err == nil {
			t.Errorf("ParseFingerprint(%q) accepted", in)
		}
	}
}

// The agent's probes: /livez always, /healthz while connected and for a
// grace after the connection is lost, then 503 saying why.
func TestAgentHealth(t *testing.T) {
	r := newRig(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	stop, _ := r.startAgentWith(agent.Config{Mode: remote.ModeCommands, Token: r.token, Fingerprint: r.fingerprint,
		Health: ln, HealthGrace: 300 * time.Millisecond})
	r.waitConnected()
	get := func(path string) (int, string) {
		resp, err := http.Get(url + path)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/healthz"); code != http.StatusOK || !strings.Contains(body, "connected to") {
		t.Errorf("healthz while connected: %d %s", code, body)
	}
	if code, _ := get("/livez"); code != http.StatusOK {
		t.Errorf("livez: %d", code)
	}
	// The server goes away: the agent keeps trying.
	r.hub.Close()
	r.srv.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, body := get("/healthz")
		if code == http.StatusServiceUnavailable {
			if !strings.Contains(body, "not connected to") {
				t.Errorf("healthz once cut off: %s", body)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("healthz still %d: %s", code, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	stop()
}

// An agent connects to the other servers its server names (remote.Peers),
// serves their calls, hands each the runs of its own calls, and leaves a
// server its server stops naming.
func TestAgentConnectsToPeers(t *testing.T) {
	one, two := newRig(t), newRig(t)
	if one.fingerprint != two.fingerprint {
		t.Fatal("the test servers must share their certificate")
	}
	one.startAgentWith(agent.Config{Mode: remote.ModeCommands, Token: one.token, Fingerprint: one.fingerprint, Log: slog.New(slog.NewTextHandler(t.Output(), nil))})
	one.waitConnected()
	one.hub.SetPeers(remote.Peers{Self: remote.Peer{Name: "one", URL: one.url}, Others: []remote.Peer{{Name: "two", URL: two.url}, {Name: "self-again", URL: one.url}}})
	two.waitConnected()

	dir := t.TempDir()
	cfg := config.Runtime{Name: "cmds", Custom: &config.CustomRuntime{
		ProxyRuntime: &config.ProxyRuntime{Runtime: "edge"},
		Apply: &config.ApplyCommand{TaskConfig: &config.TaskConfig{Program: &config.Program{
			Cmd: []string{"sh", "-c", `echo "$GREETING" > "` + dir + `/applied"; echo applied`}}}},
	}}
	tg := target("v1")
	obj, err := json.Marshal(map[string]any{"kind": "custom", "runtime": "cmds", "custom": cfg.Custom})
	if err != nil {
		t.Fatal(err)
	}
	tg.Backend, tg.Objects = "customRuntime", []json.RawMessage{obj}
	if _, err := two.hub.Runtime("edge", "custom", "cmds", 1, runtimeConfig(t, cfg)).Apply(context.Background(), tg); err != nil {
		t.Fatalf("apply through the second server: %v", err)
	}
	if runs := two.runs.all(); len(runs) != 1 || runs[0].Kind != "apply" {
		t.Errorf("runs recorded by the second server: %+v", runs)
	}
	if runs := one.runs.all(); len(runs) != 0 {
		t.Errorf("runs recorded by the first server, which did not call: %+v", runs)
	}

	one.hub.SetPeers(remote.Peers{Self: remote.Peer{Name: "one", URL: one.url}})
	deadline := time.Now().Add(10 * time.Second)
	for {
		lr, err := two.st.GetLinkedRuntime(context.Background(), "edge")
		if err == nil && !lr.Agent.Connected {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the agent is still connected to the server no longer named: %+v, %v", lr.Agent, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	select {
	case <-two.connects:
		t.Error("the agent connected again to the server no longer named")
	case <-time.After(500 * time.Millisecond):
	}
}

// syncBuffer is an agent's log, read by the tests.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// A second agent on the token of a runtime that an agent serves is
// refused: it says why, keeps trying with backoff and does not disturb the
// first; once the first one is gone, it takes the runtime over.
func TestAgentSecondAgentWaits(t *testing.T) {
	r := newRig(t)
	stopFirst, firstDone := r.startAgent(remote.ModeCommands, r.token, r.fingerprint)
	r.waitConnected()
	logs := &syncBuffer{}
	_, secondDone := r.startAgentWith(agent.Config{Mode: remote.ModeCommands, Token: r.token, Fingerprint: r.fingerprint,
		Log: slog.New(slog.NewTextHandler(logs, nil))})
	deadline := time.Now().Add(10 * time.Second)
	for strings.Count(logs.String(), `msg="another agent serves this runtime; retrying"`) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("the second agent did not say it was refused twice:\n%s", logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(logs.String(), "runtime edge is already served by an agent connected from 127.0.0.1:") {
		t.Errorf("the second agent's log does not name the first one:\n%s", logs)
	}
	select {
	case <-r.connects:
		t.Fatal("the second agent connected while the first serves")
	case err := <-secondDone:
		t.Fatalf("the second agent stopped: %v", err)
	default:
	}
	p := r.hub.Presence("edge")
	if !p.Connected || p.Refused.Count < 2 || p.Refused.Holder != p.RemoteAddr {
		t.Errorf("presence: %+v", p)
	}
	rt := r.hub.Runtime("edge", "fake", "edge", 1, runtimeConfig(t, config.Runtime{Name: "edge", Fake: &config.FakeRuntime{}}))
	if _, err := rt.Fetch(context.Background(), target("v1")); err != nil {
		t.Fatalf("fetch through the first agent: %v", err)
	}

	stopFirst()
	if err := <-firstDone; err != nil {
		t.Fatalf("the first agent stopped with %v", err)
	}
	r.waitConnected()
	if p := r.hub.Presence("edge"); !p.Connected || p.RemoteAddr == p.Refused.Holder {
		t.Errorf("presence once the second agent took over: %+v", p)
	}
	if _, err := rt.Fetch(context.Background(), target("v1")); err != nil {
		t.Fatalf("fetch through the second agent: %v", err)
	}
}
