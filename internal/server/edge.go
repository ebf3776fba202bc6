package server

import (
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"golang.org/x/net/netutil"

	apiv1 "github.com/drover-dev/drover/api/v1"
	"github.com/drover-dev/drover/internal/auth"
)

// Limits of the HTTP edge (Config overrides the first and the last).
const (
	// defaultBodyTimeout bounds reading a request: headers and body.
	defaultBodyTimeout = 2 * time.Minute
	// idleTimeout closes keep-alive connections that send nothing.
	idleTimeout = 2 * time.Minute
	// readHeaderTimeout bounds reading the request headers.
	readHeaderTimeout = 10 * time.Second
	// defaultMaxConns bounds open connections (event streams included).
	defaultMaxConns = 1024
)

// edge returns the API behind the guard (Host, Origin, Content-Type,
// credential) for a server listening on addr, with a deadline for reading
// each request's body, and ln limited to the connection bound.
func (s *Server) edge(ln net.Listener) (http.Handler, net.Listener, error) {
	hosts, err := auth.NewHosts(ln.Addr(), s.edgeCfg.PublicNames...)
	if err != nil {
		return nil, nil, err
	}
	g := &auth.Guard{
		Hosts: hosts, Authenticator: s.edgeCfg.Auth, Log: s.log, OnRefuse: s.auditRefusal,
		Open: s.open,
		// A provider sends a browser back from its own site; a link on
		// another site may open the UI's page or start a sign-in.
		CrossSite: func(r *http.Request) bool {
			return r.Method == http.MethodGet && (r.URL.Path == "/" || r.URL.Path == "/v1/auth/callback" || r.URL.Path == "/v1/auth/login")
		},
		// Slack posts its button clicks as a form, signed.
		Form: func(r *http.Request) bool { return r.Method == http.MethodPost && r.URL.Path == slackInteractionsPath },
	}
	bodyTimeout := s.edgeCfg.BodyTimeout
	if bodyTimeout <= 0 {
		bodyTimeout = defaultBodyTimeout
	}
	guarded := g.Wrap(s.mux)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A body trickled in slowly would hold a connection: bound reading
		// it. Handlers lift the deadline once the body is read (bodyRead),
		// as its expiry would cancel the request.
		if r.ContentLength != 0 {
			_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(bodyTimeout))
		}
		guarded.ServeHTTP(w, r)
	})
	maxConns := s.edgeCfg.MaxConns
	if maxConns <= 0 {
		maxConns = defaultMaxConns
	}
	ln = netutil.LimitListener(ln, maxConns)
	if s.edgeCfg.TLS != nil {
		ln = tls.NewListener(ln, s.edgeCfg.TLS)
	}
	return h, ln, nil
}

// EdgeConfig configures the HTTP edge of a Server.
type EdgeConfig struct {
	// Auth authenticates requests; nil refuses every request but health.
	Auth auth.Authenticator
	// PublicNames are further Host names the server answers to (host or
	// host:port), besides its listen address.
	PublicNames []string
	// BodyTimeout bounds reading one request (0 = 2 minutes).
	BodyTimeout time.Duration
	// MaxConns bounds open connections (0 = 1024).
	MaxConns int
	// ForbidSelfApproval bars whoever pushed a desired state from approving
	// it (a drover setting; off by default).
	ForbidSelfApproval bool
	// Metrics counts requests and serves GET /metrics (nil: no metrics).
	Metrics Metrics
	// MutationRate and MutationBurst limit the changes one identity may
	// ask per second (0 = DefaultMutationRate, DefaultMutationBurst);
	// MaxStreams the event streams it may hold open (0 =
	// DefaultMaxStreams). The local token is not limited.
	MutationRate  float64
	MutationBurst int
	MaxStreams    int
	// MaxBody bounds request bodies (0 = 64 MiB); a larger one is refused
	// with 413.
	MaxBody int64
	// TLS serves the API over TLS (nil: plain HTTP).
	TLS *tls.Config
	// SSO signs people in through an OpenID provider (nil: API tokens
	// only).
	SSO *SSOConfig
}

// Metrics is what the server needs of its metrics.
type Metrics interface {
	// Request counts a request to route answered with code in d (d < 0:
	// an event stream).
	Request(route string, code int, d time.Duration)
	// Handler serves the metrics in Prometheus's format.
	Handler() http.Handler
	// AuditFailed counts an audit record that could not be written.
	AuditFailed()
}

// requireEOF refuses anything but white space after the request's JSON value.
func requireEOF(dec *json.Decoder) error {
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errorf(apiv1.CodeInvalidArgument, "invalid request body: unexpected data after the JSON value")
	}
	return nil
}

// bodyRead lifts the read deadline of a request whose body was read whole.
func bodyRead(w http.ResponseWriter) {
	_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
}

// open reports whether r is for a route that needs no credential (the
// table's scopeOpen routes).
func (s *Server) open(r *http.Request) bool {
	if r.Method == http.MethodGet && (r.URL.Path == "/" || strings.HasPrefix(r.URL.Path, "/ui/")) {
		return true // the web UI's page and assets
	}
	return s.openRoutes[r.Method+" "+r.URL.Path]
}
