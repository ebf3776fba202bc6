package remote

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/drover-dev/drover/internal/runtimes"
	"github.com/drover-dev/drover/internal/store"
	"github.com/drover-dev/drover/internal/store/sqlite"
	"github.com/drover-dev/drover/internal/tlspin"
)

// hubRig is a hub behind a TLS listener, on a real store, whose agents the
// tests play by hand: Dial, then an HTTP server on the session, as drover
// agent does (ServeSession), or a hostile one.
type hubRig struct {
	t   *testing.T
	st  *sqlite.Store
	hub *Hub
	url string
	// fingerprint pins the hub's certificate.
	fingerprint string
	logs        *syncBuffer
	connects    chan string
}

// syncBuffer is the hub's log, read by the tests.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
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

// newHubRig starts a hub; edit changes its config.
func newHubRig(t *testing.T, edit func(*HubConfig)) *hubRig {
	t.Helper()
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "drover.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	r := &hubRig{t: t, st: st, logs: &syncBuffer{}, connects: make(chan string, 16)}
	cfg := HubConfig{Store: st, Replica: "test-server", Heartbeat: 100 * time.Millisecond,
		Log:       slog.New(slog.NewTextHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		OnConnect: func(name string) { r.connects <- name }}
	if edit != nil {
		edit(&cfg)
	}
	r.hub = NewHub(cfg)
	srv := httptest.NewUnstartedServer(r.hub)
	srv.StartTLS()
	t.Cleanup(func() {
		r.hub.Close()
		srv.Close()
		if t.Failed() {
			t.Logf("hub log:\n%s", r.logs)
		}
	})
	sum := sha256.Sum256(srv.Certificate().Raw)
	r.url, r.fingerprint = srv.URL, hex.EncodeToString(sum[:])
	return r
}

// link links runtime name and returns its token.
func (r *hubRig) link(name string) string {
	r.t.Helper()
	token := "drover-agent_" + strings.ToUpper(name)
	if err := r.st.LinkRuntime(context.Background(), store.LinkedRuntime{Name: name, TokenHash: HashToken(token), CreatedAt: time.Now()}); err != nil {
		r.t.Fatal(err)
	}
	return token
}

// dial connects as an agent with token and instance id and serves h on the
// session until the test ends.
func (r *hubRig) dial(token, instance string, h http.Handler) (*yamux.Session, error) {
	r.t.Helper()
	tc, err := tlspin.Config(r.fingerprint, "")
	if err != nil {
		r.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := Dial(ctx, DialConfig{Server: r.url, Token: token, TLS: tc, UserAgent: "drover-agent/test", Instance: instance})
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(s) }()
	r.t.Cleanup(func() { _ = s.Close(); _ = srv.Close() })
	return s, nil
}

// goodAgent connects as a conforming agent (ServeSession) serving runtimes
// that always converge, and waits until the hub registered it.
func (r *hubRig) goodAgent(token, instance string) *yamux.Session {
	r.t.Helper()
	tc, err := tlspin.Config(r.fingerprint, "")
	if err != nil {
		r.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := Dial(ctx, DialConfig{Server: r.url, Token: token, TLS: tc, UserAgent: "drover-agent/test", Instance: instance})
	if err != nil {
		r.t.Fatal(err)
	}
	sctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		build := func(RuntimeRef) (runtimes.Runtime, func(), error) { return steady{}, func() {}, nil }
		_ = ServeSession(sctx, s, Hello{Version: "test", Mode: ModeCommands, Host: "good-host"}, build, nil, slog.New(slog.DiscardHandler))
	}()
	r.t.Cleanup(func() { stop(); <-done })
	r.waitConnected()
	return s
}

func (r *hubRig) waitConnected() {
	r.t.Helper()
	select {
	case <-r.connects:
	case <-time.After(10 * time.Second):
		r.t.Fatal("the agent did not connect")
	}
}

// waitClosed waits for the hub to close an agent's session.
func waitClosed(t *testing.T, s *yamux.Session, what string) {
	t.Helper()
	select {
	case <-s.CloseChan():
	case <-time.After(30 * time.Second):
		t.Fatalf("the hub did not disconnect %s", what)
	}
}

// runtimeOf is a runtime served by the agent of linked runtime agent.
func (r *hubRig) runtimeOf(agent string) runtimes.Runtime {
	cfg, err := json.Marshal(map[string]any{"runtime": map[string]any{"name": agent, "fake": map[string]any{}}})
	if err != nil {
		r.t.Fatal(err)
	}
	return r.hub.Runtime(agent, "fake", agent, 1, cfg)
}

func testTarget() runtimes.Target {
	return runtimes.Target{InstanceKey: runtimes.InstanceKey{Application: "shop", Service: "web", ReleaseChannel: "prod"}, Version: "v1"}
}

// steady is a runtime that has always converged.
type steady struct{}

func (steady) Fetch(context.Context, runtimes.Target) (runtimes.State, error) {
	return runtimes.State{Version: "v1", Converged: true}, nil
}

func (steady) Apply(context.Context, runtimes.Target) (runtimes.ApplyResult, error) {
	return runtimes.ApplyResult{}, nil
}
