// Package agent is drover's agent: it runs inside the user's network (in a
// cluster, or on a host with the tools a custom runtime needs), dials out to
// the server over TLS with its join token, and serves the server's calls for
// its linked runtime with its own credentials: the server never holds them
// and never reaches anything but the agent's session.
package agent

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/runtimehost"
	"github.com/drover-dev/drover/internal/runtimes"
	"github.com/drover-dev/drover/internal/runtimes/remote"
	"github.com/drover-dev/drover/internal/tlspin"
	"github.com/drover-dev/drover/internal/version"
)

// Config configures an agent.
type Config struct {
	// Server is the server's agent address (https://HOST:PORT).
	Server string
	// Token is the join token drover runtimes link printed.
	Token string
	// Fingerprint pins the server's certificate: the hex SHA-256 of its
	// DER form (a "sha256:" prefix and colons are allowed). With it, a
	// self-signed server certificate is accepted; without, the certificate
	// must be valid for the server's name (CAFile or the system's roots).
	Fingerprint string
	CAFile      string
	// Mode is ModeKubernetes or ModeCommands (see remote).
	Mode string
	// Kubeconfig and Context name the cluster in kubernetes mode; with
	// neither, the in-cluster service account is used.
	Kubeconfig, Context string
	// Registry builds runtimes (builtin.Registry in drover).
	Registry runtimehost.Registry
	// Jobs builds, in kubernetes mode, the runtimes of a kind ("custom",
	// "terraformRunner") whose commands run as Kubernetes Jobs in the
	// cluster of the kubeconfig and context ("" and "": in-cluster);
	// custom.JobsFactory and terraform.JobsFactory in drover. A kind
	// without one is refused in kubernetes mode.
	Jobs map[string]func(kubeconfig, kubeContext string) runtimehost.Factory
	// DataDir is where runtimes may keep state ("" = none).
	DataDir string
	Log     *slog.Logger
	// MaxBackoff bounds the wait between reconnections (0 = 30 s).
	MaxBackoff time.Duration
	// Health, when set, serves GET /healthz (200 once the agent was
	// connected in the last HealthGrace, else 503, with why) and
	// GET /livez (200 while the process runs) on this listener.
	Health net.Listener
	// HealthGrace is how long /healthz stays 200 after the connection
	// was lost (0 = 2 minutes): short network blips do not fail it.
	HealthGrace time.Duration
}

// Run connects to the server and serves its calls until ctx ends,
// reconnecting with backoff when the connection is lost. It returns
// remote.ErrRefused (wrapped) when the server refuses the token: the
// runtime was unlinked or its token replaced. While another agent serves
// the runtime (remote.ErrInUse) it says so and keeps trying, with backoff:
// it takes the runtime over once that agent is gone.
func Run(ctx context.Context, cfg Config) error {
	a, err := newAgent(cfg)
	if err != nil {
		return err
	}
	defer a.close()
	defer a.peers.wait()
	// Peer connections end with the run, also when it ends by itself
	// (the token was refused).
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if cfg.Health != nil {
		srv := &http.Server{Handler: a.healthHandler(), ReadHeaderTimeout: 5 * time.Second}
		go func() { _ = srv.Serve(cfg.Health) }()
		defer func() { _ = srv.Close() }()
	}
	return a.run(ctx)
}

// healthHandler serves the agent's probes.
func (a *agent) healthHandler() http.Handler {
	grace := a.cfg.HealthGrace
	if grace <= 0 {
		grace = 2 * time.Minute
	}
	started := time.Now()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /livez", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		a.stateMu.Lock()
		connected, lost, why := a.connected, a.lost, a.lastErr
		a.stateMu.Unlock()
		switch {
		case !connected.IsZero():
			_, _ = fmt.Fprintf(w, "connected to %s since %s\n", a.cfg.Server, connected.UTC().Format(time.RFC3339))
		case lost.IsZero() && time.Since(started) < grace:
			_, _ = fmt.Fprintf(w, "connecting to %s\n", a.cfg.Server)
		case !lost.IsZero() && time.Since(lost) < grace:
			_, _ = fmt.Fprintf(w, "reconnecting to %s (lost %s ago: %s)\n", a.cfg.Server, time.Since(lost).Round(time.Second), why)
		default:
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = fmt.Fprintf(w, "not connected to %s: %s\n", a.cfg.Server, why)
		}
	})
	return mux
}

func (a *agent) setConnected(up bool, err error) {
	a.stateMu.Lock()
	defer a.stateMu.Unlock()
	switch {
	case up:
		a.connected, a.lastErr = time.Now(), ""
	default:
		if !a.connected.IsZero() {
			a.lost = time.Now()
		}
		a.connected = time.Time{}
		if err != nil {
			a.lastErr = err.Error()
		}
	}
}

type agent struct {
	cfg Config
	log *slog.Logger
	tls *tls.Config
	// instance tells this process's connections from another agent's on
	// the same token (remote.InstanceHeader).
	instance string
	hello    remote.Hello
	runs     runSink
	peers    *peerPool
	mu       sync.Mutex
	built    map[string]*built
	closed   bool

	// connected is when the current session opened (zero: none), lost
	// when the last one ended, lastErr why it is not connected.
	stateMu   sync.Mutex
	connected time.Time
	lost      time.Time
	lastErr   string
}

type built struct {
	version int64
	rt      runtimes.Runtime
	// inUse counts the calls using rt; a replaced runtime is closed once
	// they are done.
	inUse sync.WaitGroup
}

func newAgent(cfg Config) (*agent, error) {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = 30 * time.Second
	}
	if strings.TrimSpace(cfg.Token) == "" {
		return nil, errors.New("no join token: pass --token (or --token-file), as drover runtimes link printed it")
	}
	switch cfg.Mode {
	case remote.ModeKubernetes, remote.ModeCommands:
	default:
		return nil, fmt.Errorf("mode %q: want %s or %s", cfg.Mode, remote.ModeKubernetes, remote.ModeCommands)
	}
	tc, err := tlspin.Config(cfg.Fingerprint, cfg.CAFile)
	if err != nil {
		return nil, err
	}
	host, _ := os.Hostname()
	a := &agent{cfg: cfg, log: cfg.Log, tls: tc, built: map[string]*built{}, instance: rand.Text(),
		hello: remote.Hello{Version: version.Version, Mode: cfg.Mode, Host: host}}
	a.peers = &peerPool{a: a, conns: map[string]*peerConn{}}
	return a, nil
}

// ParseFingerprint returns a certificate fingerprint as lower-case hex:
// it accepts "sha256:" in front and colons between bytes.
func ParseFingerprint(s string) (string, error) { return tlspin.ParseFingerprint(s) }

func (a *agent) run(ctx context.Context) error {
	backoff := time.Second
	for {
		started := time.Now()
		err := a.session(ctx)
		if ctx.Err() != nil {
			return nil //nolint:nilerr // told to stop: the session's end is no failure
		}
		if errors.Is(err, remote.ErrRefused) {
			a.log.Error("the server refused this agent; stopping", "error", err)
			return err
		}
		if time.Since(started) > time.Minute {
			backoff = time.Second // it worked for a while: retry soon
		}
		wait := backoff/2 + mrand.N(backoff/2+1) //nolint:gosec // jitter, not security
		if errors.Is(err, remote.ErrInUse) {
			// Not this agent's to serve while the other one lives: say
			// so each time, and take over once it is gone.
			a.log.Error("another agent serves this runtime; retrying", "error", err, "in", wait.Round(time.Millisecond))
		} else {
			a.log.Warn("not connected to the server; retrying", "error", err, "in", wait.Round(time.Millisecond))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		backoff = min(2*backoff, a.cfg.MaxBackoff)
	}
}

// session connects once and serves until the connection ends.
func (a *agent) session(ctx context.Context) error {
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	s, err := remote.Dial(dctx, a.dialConfig(a.cfg.Server))
	cancel()
	if err != nil {
		a.setConnected(false, err)
		return err
	}
	defer func() { _ = s.Close() }()
	sink := remote.NewRunSink(s)
	a.runs.set(mainSession, sink)
	defer a.runs.unset(mainSession, sink)
	a.log.Info("connected to the server", "server", a.cfg.Server, "mode", a.cfg.Mode)
	a.setConnected(true, nil)
	err = remote.ServeSession(ctx, s, a.hello, a.build, func(p remote.Peers) { a.peers.update(ctx, p) }, a.log)
	a.setConnected(false, err)
	return err
}

// dialConfig is how the agent connects to server.
func (a *agent) dialConfig(server string) remote.DialConfig {
	return remote.DialConfig{Server: server, Token: a.cfg.Token, TLS: a.tls, UserAgent: "drover-agent/" + version.Version, Instance: a.instance}
}

// build returns the runtime a call names, built on first use and again
// when its config changes (a call still carrying an older config than the
// one built gets the newer runtime), and its release.
func (a *agent) build(ref remote.RuntimeRef) (runtimes.Runtime, func(), error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return nil, nil, errors.New("agent: stopping")
	}
	b, ok := a.built[ref.Name]
	if !ok || b.version < ref.Version {
		var err error
		if b, err = a.buildLocked(ref); err != nil {
			return nil, nil, err
		}
	}
	b.inUse.Add(1)
	return b.rt, b.inUse.Done, nil
}

// buildLocked builds ref's runtime and keeps it, replacing (and closing
// once unused) an older one. a.mu is held.
func (a *agent) buildLocked(ref remote.RuntimeRef) (*built, error) {
	var f config.File
	if err := json.Unmarshal(ref.Config, &f); err != nil || f.Runtime == nil {
		return nil, runtimes.Permanent(fmt.Errorf("agent: the config of runtime %s is not a runtime", ref.Name))
	}
	cfg := f.Runtime
	kind := cfg.KindFacts()
	switch {
	case kind.Cluster:
		if a.cfg.Mode != remote.ModeKubernetes {
			return nil, runtimes.Permanent(fmt.Errorf("runtime %s is a Kubernetes runtime, but its agent runs commands only (start it with --mode kubernetes, in the cluster or with --kubeconfig)", ref.Name))
		}
		k := config.KubernetesRuntime{}
		if cfg.Kubernetes != nil {
			k = *cfg.Kubernetes
		}
		// The agent's own credentials, never the server's.
		k.Kubeconfig, k.Context = a.cfg.Kubeconfig, a.cfg.Context
		cp := *cfg
		cp.Kubernetes = &k
		cfg = &cp
	case kind.RunsCommands && a.cfg.Mode == remote.ModeKubernetes:
		jobs := a.cfg.Jobs[kind.Name]
		if jobs == nil {
			return nil, runtimes.Permanent(fmt.Errorf("runtime %s: this agent cannot run %s commands as Kubernetes Jobs", ref.Name, kind.Name))
		}
		// The proxy runtime's namespace (containerOrchestration) stays:
		// the Jobs run there.
		return a.keep(ref, kind.Name, jobs(a.cfg.Kubeconfig, a.cfg.Context), cfg)
	case kind.Unproxied != nil:
		// This agent does the work the server sent here: with this
		// environment's credentials (ECS), on this host (commands).
		cfg = kind.Unproxied(cfg)
	}
	return a.keep(ref, kind.Name, func(c *config.Runtime, opts runtimes.Options) (runtimes.Runtime, error) {
		return a.cfg.Registry.New(kind.Name, c, opts)
	}, cfg)
}

// keep builds a runtime with factory and keeps it for ref's name and
// version; the one it replaces is closed once the calls using it are done.
// a.mu is held.
func (a *agent) keep(ref remote.RuntimeRef, kind string, factory runtimehost.Factory, cfg *config.Runtime) (*built, error) {
	dir := ""
	if a.cfg.DataDir != "" {
		dir = filepath.Join(a.cfg.DataDir, "runtimes")
	}
	rt, err := factory(cfg, runtimes.Options{DataDir: dir, Log: a.log, Runs: &a.runs})
	if err != nil {
		return nil, err
	}
	if old, ok := a.built[ref.Name]; ok {
		go func() {
			old.inUse.Wait()
			closeRuntime(old.rt)
		}()
	}
	b := &built{version: ref.Version, rt: rt}
	a.built[ref.Name] = b
	a.log.Info("runtime ready", "runtime", ref.Name, "kind", kind, "config_version", ref.Version)
	return b, nil
}

// close closes every runtime (the session has ended: no call runs).
func (a *agent) close() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.closed = true
	for _, b := range a.built {
		closeRuntime(b.rt)
	}
	a.built = map[string]*built{}
}

func closeRuntime(rt runtimes.Runtime) {
	if c, ok := rt.(runtimes.Closer); ok {
		_ = c.Close()
	}
}

// runSink hands runs to the sessions' sinks: the main session's first,
// then the others', until one records it (a server records only runs of the
// runtimes it called on that session). With no session the run is logged
// and dropped.
type runSink struct {
	mu    sync.Mutex
	sinks map[string]*remote.RunSink // by session: mainSession or a peer URL
}

// mainSession keys the sink of the connection to --server.
const mainSession = ""

func (r *runSink) set(key string, s *remote.RunSink) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sinks == nil {
		r.sinks = map[string]*remote.RunSink{}
	}
	r.sinks[key] = s
}

// unset removes the sink of key if it is still s (a newer session of the
// same key may have replaced it).
func (r *runSink) unset(key string, s *remote.RunSink) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sinks[key] == s {
		delete(r.sinks, key)
	}
}

func (r *runSink) RecordRun(ctx context.Context, run runtimes.Run) error {
	r.mu.Lock()
	var order []*remote.RunSink
	if s := r.sinks[mainSession]; s != nil {
		order = append(order, s)
	}
	for _, k := range slices.Sorted(maps.Keys(r.sinks)) {
		if k != mainSession {
			order = append(order, r.sinks[k])
		}
	}
	r.mu.Unlock()
	if len(order) == 0 {
		return errors.New("not connected to the server: the run was not recorded")
	}
	var errs []error
	for _, s := range order {
		err := s.RecordRun(ctx, run)
		if err == nil {
			return nil
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
