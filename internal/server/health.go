package server

import (
	"context"
	"io"
	"net/http"
	"time"

	apiv1 "github.com/drover-dev/drover/api/v1"
	"github.com/drover-dev/drover/internal/auth"
	"github.com/drover-dev/drover/internal/version"
)

// healthTimeout bounds the store check of one health request.
const healthTimeout = 5 * time.Second

// storeCheckInterval is how often the server checks its store on its own,
// so that a data directory removed under it is logged even when nobody asks.
const storeCheckInterval = 5 * time.Second

// health answers GET /v1/health: 200 and "ok" when the store works, 503 and
// the store's error otherwise (B25).
func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), healthTimeout)
	defer cancel()
	// Probes without a credential learn only whether the server and its store
	// work; the version and the store's error (which names files) need one.
	_, known := auth.FromContext(r.Context())
	h := apiv1.Health{Status: "ok", Store: "ok"}
	if known {
		h.Version, h.StoreKind, h.Replica = version.Version, s.storeKind, s.replica
	}
	code := http.StatusOK
	if err := s.store.Check(ctx); err != nil {
		h.Status, h.Store = "unhealthy", "error"
		if known {
			h.StoreError = err.Error()
		}
		code = http.StatusServiceUnavailable
	}
	writeJSON(w, code, h)
}

// Probe paths: for a kubelet or load balancer that sends no credential and
// reads only the status code.
const (
	// LivezPath answers 200 while the process serves HTTP.
	LivezPath = "/livez"
	// ReadyzPath answers 200 when the store is usable (as /v1/health
	// decides), 503 otherwise.
	ReadyzPath = "/readyz"
)

// isProbe reports whether path is a probe path.
func isProbe(path string) bool { return path == LivezPath || path == ReadyzPath }

// livez answers GET /livez: "ok" as long as the server answers at all.
func (s *Server) livez(w http.ResponseWriter, _ *http.Request) {
	writeProbe(w, http.StatusOK)
}

// readyz answers GET /readyz: "ok" when the store works (the check of
// /v1/health), "not ok" and 503 otherwise, and nothing more: a caller
// without a credential learns no detail.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), healthTimeout)
	defer cancel()
	code := http.StatusOK
	if err := s.store.Check(ctx); err != nil {
		code = http.StatusServiceUnavailable
	}
	writeProbe(w, code)
}

// writeProbe writes a probe's answer: "ok" or "not ok", as plain text.
func writeProbe(w http.ResponseWriter, code int) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	if code == http.StatusOK {
		_, _ = io.WriteString(w, "ok\n")
		return
	}
	_, _ = io.WriteString(w, "not ok\n")
}

// monitorStore checks the store every storeCheckInterval until ctx ends and
// logs when it becomes unhealthy and when it recovers. A data directory
// removed or replaced under the server (B4) stays unhealthy: the server keeps
// serving reads from the database it has open, refuses every write, and
// health answers 503 until it is restarted.
func (s *Server) monitorStore(ctx context.Context) {
	t := time.NewTicker(storeCheckInterval)
	defer t.Stop()
	var failing bool
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := s.store.Check(ctx)
		switch {
		case err != nil && ctx.Err() != nil:
			return
		case err != nil && !failing:
			s.log.Error("store unhealthy", "error", err)
		case err == nil && failing:
			s.log.Info("store healthy again")
		}
		failing = err != nil
	}
}

// storeCause is the store's own check, run when a request failed for a
// reason the server did not expect; nil when the store looks healthy. It is
// bounded by healthTimeout and runs only on failures, so it costs nothing on
// the paths that work.
func (s *Server) storeCause() error {
	ctx, cancel := context.WithTimeout(context.Background(), healthTimeout)
	defer cancel()
	return s.store.Check(ctx)
}
