// Package server is drover's API server: it stores configs, compiles pushes
// into desired states, accepts approvals and other requests, and streams
// events. It holds routes and use cases, not the wiring: the composition root
// (internal/daemon) builds the store, the runtime host and the engine and
// hands them to New.
package server

//go:generate go run ./openapigen ../../api/openapi.json

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	apiv1 "github.com/drover-dev/drover/api/v1"
	"github.com/drover-dev/drover/internal/engine"
	"github.com/drover-dev/drover/internal/gates"
	"github.com/drover-dev/drover/internal/web"
)

// Engine is what the server needs of the convergence engine.
type Engine interface {
	// Enqueue asks the engine to look at a service again.
	Enqueue(app, svc string)
	// FreezesChanged says a freeze was made or lifted.
	FreezesChanged()
}

// Runtimes is what the server needs of the runtime host: to say that
// runtime configs changed. Nothing a person asks reaches a runtime: status
// reads the observations the engine recorded.
type Runtimes interface {
	// Invalidate makes the next lookups re-read runtime configs.
	Invalidate()
}

// Config configures a Server.
type Config struct {
	Store Store
	// Engine is woken after every write that may change a plan.
	Engine Engine
	// Runtimes is told when runtime configs change.
	Runtimes Runtimes
	Log      *slog.Logger
	// Now is the clock (nil = time.Now).
	Now func() time.Time
	// Edge is who may call the API and the limits of its HTTP edge.
	Edge EdgeConfig
	// Agents is the agent listener, for linking runtimes.
	Agents Agents
	// StoreKind ("sqlite", "postgres") and Replica (this server's name in
	// leases and task claims) are reported by /v1/health.
	StoreKind, Replica string
	// Gates describes the checks of gate kinds in previews (nil: by kind).
	Gates *gates.Registry
	// States decodes desired states: the engine's cache, shared (nil: one
	// of the server's own).
	States *engine.StateCache
	// Notify configures the delivery of notifications.
	Notify NotifyConfig
}

// Server is the API.
type Server struct {
	store    Store
	engine   Engine
	runtimes Runtimes
	gateKind *gates.Registry // describes gates in previews
	log      *slog.Logger
	now      func() time.Time
	changed  *broadcaster
	cache    decodeCache
	states   *engine.StateCache
	mux      *http.ServeMux
	// openapi is the API's document, made once (OpenAPI).
	openapiOnce sync.Once
	openapi     []byte
	openapiErr  error
	limits      *limiter
	// streamRecheck is how often an event stream's credential is checked
	// again.
	streamRecheck time.Duration
	table         []route
	// openRoutes are the routes that need no credential ("GET /v1/health").
	openRoutes map[string]bool
	// polls bounds the device sign-in polls of each source address.
	polls pollGate
	// ui serves the web UI at / and /ui/.
	ui      *web.Handler
	edgeCfg EdgeConfig
	agents  Agents
	// storeKind and replica are reported by health.
	storeKind, replica string
	// pushMu serializes the pushes of each service, so the desired state a
	// push reports as replaced is exactly the one it replaced (the store is
	// atomic either way). Pushes of different services run at once, and
	// their writes commit together.
	pushMu stripedMutex
	// trainsWaiting is set while pushes are known to wait in release
	// trains (trains.go).
	trainsWaiting atomic.Bool
	notifyCfg     NotifyConfig
	// slack takes the clicks of Slack's buttons (slack.go).
	slack http.Handler
}

// stripedMutex is a set of mutexes picked by a key's hash: one key always
// gets the same mutex; different keys rarely share one.
type stripedMutex [64]sync.Mutex

// lock locks key's mutex and returns its unlock.
func (m *stripedMutex) lock(key string) func() {
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	mu := &m[h.Sum32()%uint32(len(m))]
	mu.Lock()
	return mu.Unlock
}

// New builds a server. Call Run to serve.
func New(cfg Config) *Server {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.States == nil {
		cfg.States = engine.NewStateCache(cfg.Store)
	}
	s := &Server{store: cfg.Store, engine: cfg.Engine, states: cfg.States, runtimes: cfg.Runtimes, gateKind: cfg.Gates, log: cfg.Log, now: cfg.Now,
		changed: newBroadcaster(), edgeCfg: cfg.Edge, agents: cfg.Agents, storeKind: cfg.StoreKind, replica: cfg.Replica,
		limits: newLimiter(cfg.Edge.MutationRate, cfg.Edge.MutationBurst, cfg.Edge.MaxStreams), streamRecheck: streamRecheck, ui: web.New(), notifyCfg: cfg.Notify}
	s.slack = s.newSlackInteractions()
	s.routes()
	return s
}

// Changed tells the server that something was written (the engine calls it
// after each of its writes): event streams and answers waiting for the
// engine look again.
func (s *Server) Changed() { s.changed.notify() }

// Handler is the HTTP API without its edge (Host, Origin, Content-Type and
// credential checks, timeouts), which Run adds: for tests only.
func (s *Server) Handler() http.Handler { return s.mux }

// Run serves the API on ln and checks the store now and then until ctx ends,
// then shuts the HTTP server down (requests in flight get a few seconds).
func (s *Server) Run(ctx context.Context, ln net.Listener) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	handler, ln, err := s.edge(ln)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: readHeaderTimeout, IdleTimeout: idleTimeout, BaseContext: func(net.Listener) context.Context { return ctx }}
	errc := make(chan error, 1)
	go s.monitorStore(ctx)
	go s.sweepSessions(ctx)
	go s.promoteTrains(ctx)
	go s.runNotifications(ctx)
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errc <- err
			return
		}
		errc <- nil
	}()
	s.log.Info("drover server started", "addr", ln.Addr().String())
	select {
	case <-ctx.Done():
	case err = <-errc:
		cancel()
	}
	shutdownCtx, stop := context.WithTimeout(context.Background(), 5*time.Second)
	defer stop()
	_ = srv.Shutdown(shutdownCtx)
	return err
}

// newID returns a sortable unique id with a prefix: ds-20261122t101500-3f9a2c1b.
func newID(prefix string, now time.Time) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return prefix + "-" + now.UTC().Format("20060102t150405") + "-" + hex.EncodeToString(b[:])
}

// broadcaster wakes every waiter when something was written.
type broadcaster struct {
	mu sync.Mutex
	ch chan struct{}
}

func newBroadcaster() *broadcaster { return &broadcaster{ch: make(chan struct{})} }

func (b *broadcaster) notify() {
	b.mu.Lock()
	close(b.ch)
	b.ch = make(chan struct{})
	b.mu.Unlock()
}

func (b *broadcaster) wait() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ch
}

// statusError gives err the API error code the client receives with it.
func statusError(code apiv1.ErrorCode, err error) error {
	return &apiError{code: code, err: err}
}

// apiError is an error with its API error code. It wraps both, so that
// errors.Is finds the code as well as the causes err wraps.
type apiError struct {
	code apiv1.ErrorCode
	err  error
}

func (e *apiError) Error() string   { return e.err.Error() }
func (e *apiError) Unwrap() []error { return []error{e.code, e.err} }

// errorf is statusError of a new error formatted as fmt.Errorf does.
func errorf(code apiv1.ErrorCode, format string, args ...any) error {
	return &apiError{code: code, err: fmt.Errorf(format, args...)}
}
