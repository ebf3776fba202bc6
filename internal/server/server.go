// Package server is drover's API server: it stores configs, compiles pushes
// into desired states, accepts approvals and other requests, streams events,
// and runs the convergence engine, all in one process.
package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/drover-dev/drover/internal/engine"
	"github.com/drover-dev/drover/internal/runtimes"
	"github.com/drover-dev/drover/internal/runtimes/custom"
	"github.com/drover-dev/drover/internal/runtimes/fake"
	"github.com/drover-dev/drover/internal/runtimes/kubernetes"
	"github.com/drover-dev/drover/internal/runtimes/terraform"
	"github.com/drover-dev/drover/internal/store"
)

// Config configures a Server.
type Config struct {
	Store store.Store
	// DataDir is where runtimes may keep state (the fake runtime does).
	DataDir  string
	Settings engine.Settings
	Log      *slog.Logger
	// Registry of runtime kinds; nil means the built-in ones.
	Registry runtimes.Registry
	// Now is the clock (nil = time.Now).
	Now func() time.Time
	// Workers is the number of engine workers.
	Workers int
	// Edge is who may call the API and the limits of its HTTP edge.
	Edge EdgeConfig
	// ShutdownGrace is how long applies in flight may finish once Run's
	// context ends (see engine.Config.ShutdownGrace).
	ShutdownGrace time.Duration
}

// Server is the API and the engine.
type Server struct {
	store    store.Store
	loop     *engine.Loop
	runtimes *runtimeSet
	log      *slog.Logger
	now      func() time.Time
	changed  *broadcaster
	cache    decodeCache
	mux      *http.ServeMux
	edgeCfg  EdgeConfig
	// pushMu serializes pushes, so the desired state a push reports as
	// replaced is exactly the one it replaced (the store is atomic either way).
	pushMu sync.Mutex
}

// DefaultRegistry returns the runtime kinds built into drover.
func DefaultRegistry() runtimes.Registry {
	return runtimes.Registry{
		"fake":            fake.Factory,
		"custom":          custom.Factory,
		"terraformRunner": terraform.Factory,
		"kubernetes":      kubernetes.Factory,
	}
}

// New builds a server. Call Run to start the engine and serve.
func New(cfg Config) *Server {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Registry == nil {
		cfg.Registry = DefaultRegistry()
	}
	s := &Server{store: cfg.Store, log: cfg.Log, now: cfg.Now, changed: newBroadcaster(), edgeCfg: cfg.Edge}
	s.runtimes = &runtimeSet{
		store: cfg.Store, registry: cfg.Registry, log: cfg.Log,
		opts: runtimes.Options{DataDir: cfg.DataDir, Now: cfg.Now, Runs: runRecorder{store: cfg.Store}, Log: cfg.Log,
			Processes: processRecorder{store: cfg.Store, log: cfg.Log}},
	}
	s.loop = engine.NewLoop(engine.Config{
		Store: cfg.Store, Runtimes: s.runtimes, Settings: cfg.Settings, Now: cfg.Now,
		Log: cfg.Log, Workers: cfg.Workers, OnWrite: s.changed.notify, ShutdownGrace: cfg.ShutdownGrace,
	})
	s.runtimes.notify = func(k runtimes.InstanceKey) { s.loop.Enqueue(k.Application, k.Service) }
	s.routes()
	return s
}

// Handler is the HTTP API without its edge (Host, Origin, Content-Type and
// credential checks, timeouts), which Run adds: for tests only.
func (s *Server) Handler() http.Handler { return s.mux }

// Run ends what commands of a crashed earlier run left, then serves the API
// on ln and runs the engine until ctx ends. It returns once the engine has
// stopped (applies in flight finished or were interrupted, and recorded).
func (s *Server) Run(ctx context.Context, ln net.Listener) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := s.endLeftovers(ctx, 0); err != nil {
		return err
	}
	s.runtimes.ctx = ctx
	defer s.runtimes.Close()
	handler, ln, err := s.edge(ln)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: readHeaderTimeout, IdleTimeout: idleTimeout, BaseContext: func(net.Listener) context.Context { return ctx }}
	errc := make(chan error, 2)
	loopDone := make(chan error, 1)
	go func() { loopDone <- s.loop.Run(ctx) }()
	go s.monitorStore(ctx)
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
	case err = <-loopDone:
		loopDone <- err
		cancel()
	}
	shutdownCtx, stop := context.WithTimeout(context.Background(), 5*time.Second)
	defer stop()
	_ = srv.Shutdown(shutdownCtx)
	// The runtimes are closed (deferred above) only once the engine's
	// applies are over.
	if lerr := <-loopDone; err == nil {
		err = lerr
	}
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

func statusError(code string, err error) error {
	return &apiError{code: code, err: err}
}

type apiError struct {
	code string
	err  error
}

func (e *apiError) Error() string { return e.err.Error() }
func (e *apiError) Unwrap() error { return e.err }

func errorf(code, format string, args ...any) error {
	return &apiError{code: code, err: fmt.Errorf(format, args...)}
}
