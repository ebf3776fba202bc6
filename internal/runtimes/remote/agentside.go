package remote

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/drover-dev/drover/internal/runtimes"
)

// Builder returns the runtime a call names (built from ref.Config, kept
// while ref.Version stays the same) and release, called once the call is
// done with it (a runtime replaced by a newer config is closed only when
// the calls using it are done). Its errors are returned to the server;
// wrap them with runtimes.Permanent when retrying cannot help.
type Builder func(ref RuntimeRef) (rt runtimes.Runtime, release func(), err error)

// ErrRefused is returned by Dial when the server refuses the join token.
var ErrRefused = errors.New("the server refused this agent's join token")

// ErrInUse is returned by Dial when another agent serves the runtime of the
// token (it answers the server's pings): the server's message says which.
var ErrInUse = errors.New("another agent serves this runtime")

// DialConfig is how an agent connects.
type DialConfig struct {
	// Server is the server's agent address (https://HOST:PORT).
	Server string
	Token  string
	TLS    *tls.Config
	// UserAgent is drover-agent/VERSION.
	UserAgent string
	// Instance is the id the agent's process chose at start
	// (InstanceHeader).
	Instance string
}

// Dial opens an agent's connection to the server and returns its session:
// the agent accepts the server's calls on it (Session.Accept) and opens its
// own (Session.Open).
func Dial(ctx context.Context, dc DialConfig) (*yamux.Session, error) {
	serverURL, tlsCfg := dc.Server, dc.TLS
	u, err := url.Parse(serverURL)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("server URL %q: want https://HOST:PORT", serverURL)
	}
	if u.Scheme != "https" {
		return nil, fmt.Errorf("server URL %q: agents connect over TLS only (https://)", serverURL)
	}
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), "443")
	}
	cfg := tlsCfg.Clone()
	if cfg.ServerName == "" && !cfg.InsecureSkipVerify {
		cfg.ServerName = u.Hostname()
	}
	d := tls.Dialer{NetDialer: &net.Dialer{Timeout: 15 * time.Second, KeepAlive: 15 * time.Second}, Config: cfg}
	conn, err := d.DialContext(ctx, "tcp", host)
	if err != nil {
		return nil, err
	}
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+u.Host+ConnectPath, nil)
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", Protocol)
	req.Header.Set("Authorization", "Bearer "+dc.Token)
	req.Header.Set("User-Agent", dc.UserAgent)
	if dc.Instance != "" {
		req.Header.Set(InstanceHeader, dc.Instance)
	}
	if err := req.Write(conn); err != nil {
		_ = conn.Close()
		return nil, err
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("read the server's answer: %w", err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		_ = resp.Body.Close()
		_ = conn.Close()
		text := strings.TrimSpace(string(msg))
		switch resp.StatusCode {
		case http.StatusUnauthorized, http.StatusForbidden:
			return nil, fmt.Errorf("%w: %s", ErrRefused, text)
		case http.StatusConflict:
			return nil, fmt.Errorf("%w: %s", ErrInUse, text)
		}
		return nil, fmt.Errorf("the server answered %s: %s", resp.Status, text)
	}
	_ = conn.SetDeadline(time.Time{})
	var rw io.ReadWriteCloser = conn
	if br.Buffered() > 0 {
		rw = bufferedConn{Reader: io.MultiReader(io.LimitReader(br, int64(br.Buffered())), conn), Conn: conn}
	}
	return yamux.Server(rw, muxConfig())
}

// ServeSession answers the server's calls on an agent's session until it
// ends. onPeers, when not nil, is called with what the server says of the
// servers sharing its store (after the hello, and when that changes).
func ServeSession(ctx context.Context, s *yamux.Session, hello Hello, build Builder, onPeers func(Peers), log *slog.Logger) error {
	a := &agentHandler{hello: hello, build: build, log: log}
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+pathHello, a.handleHello)
	mux.HandleFunc("POST "+pathPeers, func(w http.ResponseWriter, r *http.Request) {
		var p Peers
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&p); err != nil {
			writeError(w, http.StatusBadRequest, fmt.Errorf("agent: bad peers: %w", err))
			return
		}
		if onPeers != nil {
			onPeers(p)
		}
		writeJSON(w, struct{}{})
	})
	mux.HandleFunc("POST "+pathFetch, a.handleFetch)
	mux.HandleFunc("POST "+pathApply, a.handleApply)
	mux.HandleFunc("POST "+pathCheck, a.handleCheck)
	mux.HandleFunc("POST "+pathInfo, a.handleInfo)
	mux.HandleFunc("POST "+pathDiscover, a.handleDiscover)
	mux.HandleFunc("POST "+pathWatch, a.handleWatch)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 30 * time.Second, BaseContext: func(net.Listener) context.Context { return ctx }}
	stop := context.AfterFunc(ctx, func() { _ = s.Close() })
	defer stop()
	err := srv.Serve(s)
	_ = srv.Close()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if errors.Is(err, yamux.ErrSessionShutdown) || s.IsClosed() {
		return errors.New("the connection to the server ended")
	}
	return err
}

// RunSink sends the runs an agent's runtimes record to the server over the
// session's streams.
type RunSink struct {
	client *http.Client
}

// NewRunSink returns a recorder of runs sent over s.
func NewRunSink(s *yamux.Session) *RunSink {
	return &RunSink{client: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		DialContext:     func(context.Context, string, string) (net.Conn, error) { return s.Open() },
		IdleConnTimeout: time.Minute,
	}}}
}

// RecordRun implements runtimes.RunRecorder.
func (r *RunSink) RecordRun(ctx context.Context, run runtimes.Run) error {
	b, err := json.Marshal(run)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://server"+pathRuns, strings.NewReader(string(b)))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := r.client.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusNoContent {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return fmt.Errorf("the server did not record the run: %s: %s", resp.Status, strings.TrimSpace(string(msg)))
	}
	return nil
}

type agentHandler struct {
	hello Hello
	build Builder
	log   *slog.Logger
}

func (a *agentHandler) handleHello(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, a.hello)
}

// decode reads a call and builds its runtime; it answers the failure
// itself. release is to be called once the call is done (a no-op when it
// failed).
func (a *agentHandler) decode(w http.ResponseWriter, r *http.Request) (c call, rt runtimes.Runtime, release func(), ok bool) {
	release = func() {}
	if err := json.NewDecoder(io.LimitReader(r.Body, 64<<20)).Decode(&c); err != nil {
		writeError(w, http.StatusBadRequest, runtimes.Permanent(fmt.Errorf("agent: bad call: %w", err)))
		return c, nil, release, false
	}
	rt, rel, err := a.build(c.Runtime)
	if err != nil {
		writeError(w, http.StatusUnprocessableEntity, err)
		return c, nil, release, false
	}
	return c, rt, rel, true
}

func (a *agentHandler) handleFetch(w http.ResponseWriter, r *http.Request) {
	c, rt, release, ok := a.decode(w, r)
	defer release()
	if !ok {
		return
	}
	if c.Target == nil {
		writeError(w, http.StatusBadRequest, runtimes.Permanent(errors.New("agent: fetch without a target")))
		return
	}
	st, err := rt.Fetch(r.Context(), c.Target.runtimeTarget())
	if err != nil {
		writeError(w, http.StatusUnprocessableEntity, err)
		return
	}
	writeJSON(w, st)
}

func (a *agentHandler) handleApply(w http.ResponseWriter, r *http.Request) {
	c, rt, release, ok := a.decode(w, r)
	defer release()
	if !ok {
		return
	}
	if c.Target == nil {
		writeError(w, http.StatusBadRequest, runtimes.Permanent(errors.New("agent: apply without a target")))
		return
	}
	a.log.Info("apply", "runtime", c.Runtime.Name, "instance", c.Target.String(), "version", c.Target.Version)
	res, err := rt.Apply(r.Context(), c.Target.runtimeTarget())
	if err != nil {
		a.log.Warn("apply failed", "runtime", c.Runtime.Name, "instance", c.Target.String(), "error", err)
		writeError(w, http.StatusUnprocessableEntity, err)
		return
	}
	writeJSON(w, res)
}

func (a *agentHandler) handleCheck(w http.ResponseWriter, r *http.Request) {
	c, rt, release, ok := a.decode(w, r)
	defer release()
	if !ok {
		return
	}
	if c.Target == nil || c.Check == nil {
		writeError(w, http.StatusBadRequest, runtimes.Permanent(errors.New("agent: check without a target or a check")))
		return
	}
	cr, isCR := rt.(runtimes.CheckRunner)
	if !isCR {
		writeError(w, http.StatusUnprocessableEntity, runtimes.Permanent(fmt.Errorf("runtime %s cannot run protection commands", c.Runtime.Name)))
		return
	}
	out, err := cr.RunCheck(r.Context(), c.Target.runtimeTarget(), runtimes.CheckCommand{Name: c.Check.Name, Spec: c.Check.Spec})
	if err != nil {
		writeError(w, http.StatusUnprocessableEntity, err)
		return
	}
	writeJSON(w, checkOutcome(out))
}

func (a *agentHandler) handleInfo(w http.ResponseWriter, r *http.Request) {
	c, rt, release, ok := a.decode(w, r)
	defer release()
	if !ok {
		return
	}
	ig, isInfo := rt.(runtimes.InfoGetter)
	if !isInfo || c.Key == nil {
		writeJSON(w, []runtimes.InfoOutput{})
		return
	}
	out, err := ig.Info(r.Context(), *c.Key)
	if err != nil {
		writeError(w, http.StatusUnprocessableEntity, err)
		return
	}
	writeJSON(w, out)
}

func (a *agentHandler) handleDiscover(w http.ResponseWriter, r *http.Request) {
	_, rt, release, ok := a.decode(w, r)
	defer release()
	if !ok {
		return
	}
	d, isD := rt.(runtimes.Discoverer)
	if !isD {
		writeJSON(w, facts{})
		return
	}
	f, err := d.Discover(r.Context())
	if err != nil {
		writeError(w, http.StatusUnprocessableEntity, err)
		return
	}
	writeJSON(w, facts(f))
}

// handleWatch streams the keys the runtime's watch reports, one JSON
// object per line, until the call ends. A runtime that does not watch
// keeps the call open and reports nothing.
func (a *agentHandler) handleWatch(w http.ResponseWriter, r *http.Request) {
	_, rt, release, ok := a.decode(w, r)
	defer release()
	if !ok {
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	wt, isW := rt.(runtimes.Watcher)
	if !isW {
		<-r.Context().Done()
		return
	}
	keys := make(chan runtimes.InstanceKey, 256)
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- wt.Watch(ctx, func(k runtimes.InstanceKey) {
			select {
			case keys <- k:
			case <-ctx.Done():
			}
		})
	}()
	enc := json.NewEncoder(w)
	for {
		select {
		case k := <-keys:
			if enc.Encode(k) != nil || rc.Flush() != nil {
				return
			}
		case err := <-done:
			if err != nil && ctx.Err() == nil {
				a.log.Warn("runtime watch stopped", "error", err)
			}
			return
		case <-ctx.Done():
			return
		}
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, err error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(callError{Error: err.Error(), Permanent: runtimes.IsPermanent(err)})
}
