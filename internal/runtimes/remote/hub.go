package remote

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/drover-dev/drover/internal/auth"
	"github.com/drover-dev/drover/internal/runtimes"
	"github.com/drover-dev/drover/internal/store"
)

// Store is what a Hub needs of the store.
type Store interface {
	LinkedRuntimeByToken(ctx context.Context, tokenHash string) (store.LinkedRuntime, error)
	GetLinkedRuntime(ctx context.Context, name string) (store.LinkedRuntime, error)
	PutAgentState(ctx context.Context, name string, st store.AgentState) error
}

// HubConfig configures a Hub.
type HubConfig struct {
	Store Store
	// Runs records the command runs agents hand back (nil = keep none).
	Runs runtimes.RunRecorder
	// Replica is this server's name, recorded with each connection.
	Replica string
	// OnConnect is called with a runtime's name when its agent connects
	// (the engine looks at what runs there again); nil = nobody.
	OnConnect func(name string)
	// OnDisconnect is called with a runtime's name when its agent's
	// session ends (status says so at once); nil = nobody.
	OnDisconnect func(name string)
	Log          *slog.Logger
	// Now is the clock (nil = time.Now).
	Now func() time.Time
	// Heartbeat is how often agents are pinged (0 = HeartbeatEvery).
	Heartbeat time.Duration
	// TakeoverAfter is how long a connected agent may go without
	// answering a ping before another agent on its token may take its
	// runtime over (0 = 3 heartbeats). Until then the other is refused.
	TakeoverAfter time.Duration
}

// Hub holds the sessions of the agents connected to this server.
type Hub struct {
	cfg HubConfig
	log *slog.Logger

	mu       sync.Mutex
	sessions map[string]*session
	// closing is set by Close: no session registers after it, and
	// sessions ending then are not reported.
	closing bool
	// running counts the sessions being served (Close waits for them).
	running sync.WaitGroup
	// changed is closed and replaced whenever a session opens or closes,
	// so that watches can wait for their agent.
	changed chan struct{}
	// peers is what agents are told of the servers sharing the store,
	// once known (SetPeers was called): until then agents are told nothing.
	peers      Peers
	peersKnown bool
	// refused is, by runtime, the last attempt of an agent refused because
	// another one served the runtime.
	refused map[string]Attempt
}

// session is one agent's connection.
type session struct {
	name      string
	tokenHash string
	// remote is the address the agent connected from; instance the id
	// the agent process sent (InstanceHeader; "" from older agents).
	remote, instance string
	hello            Hello
	mux              *yamux.Session
	client           *http.Client
	opened           time.Time
	log              *slog.Logger
	// beat is when the agent last answered a ping.
	beatMu sync.Mutex
	beat   time.Time
	// done is closed when the session ended; reason says why.
	done    chan struct{}
	endOnce sync.Once
	reason  string
	// check asks the heartbeat for a check of the link now.
	check chan struct{}
	// peersMu serializes telling the agent of the other servers.
	peersMu sync.Mutex

	// runtimes are the names of the runtimes the server made calls for on
	// this session: the only ones whose runs the agent may hand back.
	runtimesMu sync.Mutex
	runtimes   map[string]bool
}

// allow records that runtime name is served on s.
func (s *session) allow(name string) {
	s.runtimesMu.Lock()
	defer s.runtimesMu.Unlock()
	if s.runtimes == nil {
		s.runtimes = map[string]bool{}
	}
	s.runtimes[name] = true
}

func (s *session) serves(name string) bool {
	s.runtimesMu.Lock()
	defer s.runtimesMu.Unlock()
	return s.runtimes[name]
}

// NewHub returns a hub with no session.
func NewHub(cfg HubConfig) *Hub {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = HeartbeatEvery
	}
	if cfg.TakeoverAfter <= 0 {
		cfg.TakeoverAfter = 3 * cfg.Heartbeat
	}
	return &Hub{cfg: cfg, log: cfg.Log, sessions: map[string]*session{}, changed: make(chan struct{}), refused: map[string]Attempt{}}
}

// SetRuns sets the recorder of the runs agents hand back (before the first
// agent connects).
func (h *Hub) SetRuns(r runtimes.RunRecorder) { h.cfg.Runs = r }

// SetReplica sets this server's name (before the first agent connects).
func (h *Hub) SetReplica(name string) { h.cfg.Replica = name }

// HashToken is how a join token is kept (auth.HashToken).
func HashToken(token string) string { return auth.HashToken(token) }

// ServeHTTP accepts an agent's connection on ConnectPath: it checks the
// join token, upgrades the connection to a session and serves it until it
// ends (the agent goes away, the runtime is unlinked, or ctx of the
// request ends).
func (h *Hub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != ConnectPath {
		http.Error(w, "not found: agents connect to "+ConnectPath, http.StatusNotFound)
		return
	}
	if r.Method != http.MethodGet || !strings.EqualFold(r.Header.Get("Upgrade"), Protocol) {
		http.Error(w, "agents connect with GET and Upgrade: "+Protocol, http.StatusBadRequest)
		return
	}
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || strings.TrimSpace(token) == "" {
		h.log.Warn("agent refused: no token", "remote_addr", r.RemoteAddr)
		http.Error(w, "no join token: start the agent with --token", http.StatusUnauthorized)
		return
	}
	hash := HashToken(token)
	lr, err := h.cfg.Store.LinkedRuntimeByToken(r.Context(), hash)
	if errors.Is(err, store.ErrNotFound) {
		h.log.Warn("agent refused: unknown token", "remote_addr", r.RemoteAddr)
		http.Error(w, "the join token is not valid: the runtime was unlinked or its token replaced", http.StatusUnauthorized)
		return
	}
	if err != nil {
		h.log.Error("agent connect: read linked runtime", "error", err)
		http.Error(w, "the server could not read its store; try again", http.StatusServiceUnavailable)
		return
	}
	instance := r.Header.Get(InstanceHeader)
	if len(instance) > 64 {
		instance = instance[:64]
	}
	if holder := h.holder(lr.Name, instance); holder != nil {
		h.refuse(lr.Name, r.RemoteAddr, agentVersion(r.UserAgent()), holder)
		http.Error(w, holder.busy(), http.StatusConflict)
		return
	}
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		http.Error(w, "cannot upgrade this connection", http.StatusInternalServerError)
		return
	}
	_ = conn.SetDeadline(time.Time{})
	if _, err := brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " + Protocol + "\r\n\r\n"); err != nil {
		_ = conn.Close()
		return
	}
	if err := brw.Flush(); err != nil {
		_ = conn.Close()
		return
	}
	// Bytes the agent sent right after its request belong to the session.
	var rw io.ReadWriteCloser = conn
	if n := brw.Reader.Buffered(); n > 0 {
		rw = bufferedConn{Reader: io.MultiReader(io.LimitReader(brw.Reader, int64(n)), conn), Conn: conn}
	}
	h.serve(context.WithoutCancel(r.Context()), lr, hash, rw, r.RemoteAddr, instance, agentVersion(r.UserAgent()))
}

// bufferedConn reads what was buffered before the connection.
type bufferedConn struct {
	io.Reader
	net.Conn
}

func (c bufferedConn) Read(p []byte) (int, error) { return c.Reader.Read(p) }

func muxConfig() *yamux.Config {
	c := yamux.DefaultConfig()
	c.EnableKeepAlive = true
	c.KeepAliveInterval = keepAlive
	c.ConnectionWriteTimeout = writeTimeout
	c.StreamCloseTimeout = time.Minute
	c.LogOutput = io.Discard
	return c
}

// serve runs one agent's session until it ends.
func (h *Hub) serve(ctx context.Context, lr store.LinkedRuntime, hash string, conn io.ReadWriteCloser, remote, instance, version string) {
	h.mu.Lock()
	if h.closing {
		h.mu.Unlock()
		_ = conn.Close()
		return
	}
	h.running.Add(1)
	h.mu.Unlock()
	defer h.running.Done()
	// The server opens the calls (yamux client); the agent serves them.
	// Streams the agent opens wait in a backlog no longer than the
	// streams it may have open (each holds up to a window of data).
	cfg := muxConfig()
	cfg.AcceptBacklog = agentStreamsLimit
	mux, err := yamux.Client(conn, cfg)
	if err != nil {
		_ = conn.Close()
		return
	}
	now := h.cfg.Now()
	s := &session{name: lr.Name, tokenHash: hash, remote: remote, instance: instance, mux: mux, opened: now, beat: now,
		log: h.log, done: make(chan struct{}), check: make(chan struct{}, 1)}
	s.client = &http.Client{Transport: &http.Transport{
		DialContext:            func(context.Context, string, string) (net.Conn, error) { return mux.Open() },
		MaxIdleConnsPerHost:    16,
		IdleConnTimeout:        time.Minute,
		MaxResponseHeaderBytes: headerLimit,
	}}
	hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	err = s.do(hctx, pathHello, nil, &s.hello)
	cancel()
	if err != nil {
		if !errors.As(err, new(*tooLargeError)) { // else logged as it was cut
			h.log.Warn("agent did not say hello; closing its connection", "runtime", lr.Name, "remote_addr", remote, "error", err)
		}
		s.end("the agent did not say hello")
		return
	}
	if s.hello.Version == "" {
		s.hello.Version = version
	}
	// The agent opens streams to hand back runs.
	go h.acceptFromAgent(s)
	switch ok, holder := h.register(ctx, s); {
	case holder != nil:
		s.end("refused: " + holder.busy())
		return
	case !ok:
		s.end("the server is stopping")
		return
	}
	h.log.Info("agent connected", "runtime", lr.Name, "remote_addr", remote, "version", s.hello.Version, "mode", s.hello.Mode, "host", s.hello.Host)
	go h.tellPeers(ctx, s)
	h.heartbeat(ctx, s)
	h.unregister(ctx, s)
	h.log.Info("agent disconnected", "runtime", lr.Name, "reason", s.reason)
}

// register makes s the session of its runtime, ending an older one of the
// same agent, or of an agent that stopped answering; it reports false once
// the hub is closing, and the session of another agent that serves the
// runtime (s is refused) when there is one.
func (h *Hub) register(ctx context.Context, s *session) (bool, *session) {
	h.mu.Lock()
	if h.closing {
		h.mu.Unlock()
		return false, nil
	}
	old := h.sessions[s.name]
	if old != nil && h.serves(old, s.instance) {
		h.mu.Unlock()
		// Another agent connected while this one said hello.
		h.refuse(s.name, s.remote, s.hello.Version, old)
		return false, old
	}
	h.sessions[s.name] = s
	close(h.changed)
	h.changed = make(chan struct{})
	h.mu.Unlock()
	switch {
	case old == nil:
	case old.instance != "" && old.instance == s.instance:
		old.end("a new connection of the same agent replaced it")
	default:
		h.log.Info("agent took over the runtime of an agent that stopped answering", "runtime", s.name, "remote_addr", s.remote,
			"previous_addr", old.remote, "previous_heartbeat", old.lastBeat())
		old.end("another agent took the runtime over: this one had not answered for " + roundAgo(h.cfg.Now().Sub(old.lastBeat())))
	}
	h.putState(ctx, s.name, store.AgentState{Connected: true, Replica: h.cfg.Replica, Version: s.hello.Version,
		Mode: s.hello.Mode, Host: s.hello.Host, ConnectedAt: s.opened, HeartbeatAt: s.opened})
	if h.cfg.OnConnect != nil {
		h.cfg.OnConnect(s.name)
	}
	return true, nil
}

// unregister forgets s and records that its agent is gone.
func (h *Hub) unregister(ctx context.Context, s *session) {
	h.mu.Lock()
	current := h.sessions[s.name] == s
	if current {
		delete(h.sessions, s.name)
		close(h.changed)
		h.changed = make(chan struct{})
	}
	h.mu.Unlock()
	s.client.CloseIdleConnections()
	if !current {
		return // replaced: the new session records the state
	}
	// The agent may have connected again meanwhile, here or to another
	// server: then its state is that connection's.
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	lr, err := h.cfg.Store.GetLinkedRuntime(rctx, s.name)
	cancel()
	if err == nil && lr.Agent.Connected && !lr.Agent.ConnectedAt.Equal(s.opened) {
		return
	}
	now := h.cfg.Now()
	h.putState(ctx, s.name, store.AgentState{Connected: false, Replica: h.cfg.Replica, Version: s.hello.Version,
		Mode: s.hello.Mode, Host: s.hello.Host, ConnectedAt: s.opened, HeartbeatAt: s.lastBeat(), DisconnectedAt: now, Error: s.reason})
	h.mu.Lock()
	closing := h.closing
	h.mu.Unlock()
	if h.cfg.OnDisconnect != nil && !closing {
		h.cfg.OnDisconnect(s.name)
	}
}

const reasonUnreachable = "the agent stopped answering"

// peersEvery is how many heartbeats pass between two repeats of what an
// agent is told of the other servers.
const peersEvery = 6

func (h *Hub) putState(ctx context.Context, name string, st store.AgentState) {
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err := h.cfg.Store.PutAgentState(wctx, name, st)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		h.log.Warn("record agent state", "runtime", name, "error", err)
	}
}

// SetPeers sets what agents are told of the servers sharing this server's
// store (this one, and those they should also connect to) and tells the
// connected agents when it changed.
func (h *Hub) SetPeers(p Peers) {
	h.mu.Lock()
	if h.peersKnown && samePeers(h.peers, p) {
		h.mu.Unlock()
		return
	}
	h.peers, h.peersKnown = p, true
	all := make([]*session, 0, len(h.sessions))
	for _, s := range h.sessions {
		all = append(all, s)
	}
	h.mu.Unlock()
	for _, s := range all {
		go h.tellPeers(context.Background(), s)
	}
}

func samePeers(a, b Peers) bool {
	if a.Self != b.Self || len(a.Others) != len(b.Others) {
		return false
	}
	for i := range a.Others {
		if a.Others[i] != b.Others[i] {
			return false
		}
	}
	return true
}

// tellPeers sends s's agent what the hub holds of the servers sharing the
// store, once the hub knows it. The sends of a session are serialized and
// each reads the hub's latest value, so the last one an agent hears is the
// latest; the heartbeat sends it again now and then, in case a send was
// lost. Agents older
// than this call answer 404: they keep their one connection.
func (h *Hub) tellPeers(ctx context.Context, s *session) {
	s.peersMu.Lock()
	defer s.peersMu.Unlock()
	h.mu.Lock()
	p, known := h.peers, h.peersKnown
	h.mu.Unlock()
	if !known {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := s.do(ctx, pathPeers, p, nil); err != nil {
		select {
		case <-s.done:
		default:
			h.log.Debug("could not tell the agent of the other servers", "runtime", s.name, "error", err)
		}
	}
}

// CheckLinks has every session check at once that its runtime is still
// linked with the same token (a link changed through another server).
func (h *Hub) CheckLinks() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, s := range h.sessions {
		select {
		case s.check <- struct{}{}:
		default: // a check is due already
		}
	}
}

// heartbeat pings the agent and checks its link until the session ends.
func (h *Hub) heartbeat(ctx context.Context, s *session) {
	t := time.NewTicker(h.cfg.Heartbeat)
	defer t.Stop()
	beats := 0
	for {
		select {
		case <-ctx.Done():
			s.end("the server is stopping")
			return
		case <-s.mux.CloseChan():
			s.end(reasonUnreachable)
			return
		case <-s.done:
			return
		case <-t.C:
		case <-s.check:
		}
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		lr, err := h.cfg.Store.GetLinkedRuntime(rctx, s.name)
		cancel()
		switch {
		case errors.Is(err, store.ErrNotFound):
			s.end("the runtime was unlinked")
			return
		case err == nil && lr.TokenHash != s.tokenHash:
			s.end("the runtime's join token was replaced")
			return
		}
		if _, err := s.mux.Ping(); err != nil {
			s.end(reasonUnreachable)
			return
		}
		beat := h.cfg.Now()
		s.setBeat(beat)
		if beats++; beats%peersEvery == 0 {
			go h.tellPeers(ctx, s)
		}
		h.putState(ctx, s.name, store.AgentState{Connected: true, Replica: h.cfg.Replica, Version: s.hello.Version,
			Mode: s.hello.Mode, Host: s.hello.Host, ConnectedAt: s.opened, HeartbeatAt: beat})
	}
}

// end closes the session once, saying why.
func (s *session) end(reason string) { s.endSaying(reason, nil) }

// endSaying closes the session once, saying why, and calls say first when
// this call is the one that closes it.
func (s *session) endSaying(reason string, say func()) {
	s.endOnce.Do(func() {
		if say != nil {
			say()
		}
		s.reason = reason
		close(s.done)
		_ = s.mux.Close()
	})
}

// ended reports whether the session ended.
func (s *session) ended() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

func (s *session) setBeat(t time.Time) {
	s.beatMu.Lock()
	defer s.beatMu.Unlock()
	s.beat = t
}

// lastBeat is when the agent last answered a ping (or connected).
func (s *session) lastBeat() time.Time {
	s.beatMu.Lock()
	defer s.beatMu.Unlock()
	return s.beat
}

// exceeded ends s because its agent sent more than a message's limit, and
// says so once in the log: such an agent is broken or hostile, and what it
// sends is not read further.
func (s *session) exceeded(e *tooLargeError) {
	s.endSaying("the agent sent a message over its size limit: "+e.Error(), func() {
		s.log.Error("agent sent a message over its size limit; disconnecting it", "runtime", s.name, "remote_addr", s.remote,
			"call", e.call, "limit_bytes", e.limit, "error", e.Error())
	})
}

// cutIfTooLarge disconnects the agent of s when err says it passed a
// message's limit, and returns the error to report then; nil when err is
// another error (or none).
func (s *session) cutIfTooLarge(err error) error {
	var e *tooLargeError
	if !errors.As(err, &e) {
		return nil
	}
	s.exceeded(e)
	return fmt.Errorf("runtime %s: %w; the agent was disconnected%w", s.name, e, unavailable)
}

// Disconnect ends the session of a runtime's agent, if connected here
// (unlink: the agent's token stops working at once).
func (h *Hub) Disconnect(name, reason string) {
	h.mu.Lock()
	s := h.sessions[name]
	h.mu.Unlock()
	if s != nil {
		s.end(reason)
	}
}

// Close ends every session.
func (h *Hub) Close() {
	h.mu.Lock()
	h.closing = true
	all := make([]*session, 0, len(h.sessions))
	for _, s := range h.sessions {
		all = append(all, s)
	}
	h.mu.Unlock()
	for _, s := range all {
		s.end("the server is stopping")
	}
	// Let the sessions record that they ended before the store closes.
	done := make(chan struct{})
	go func() { h.running.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		h.log.Warn("agent sessions did not end within 10s of stopping")
	}
}

// session returns the session of a runtime's agent, or why there is none.
func (h *Hub) session(ctx context.Context, name string) (*session, error) {
	h.mu.Lock()
	s := h.sessions[name]
	h.mu.Unlock()
	if s != nil {
		return s, nil
	}
	return nil, h.disconnected(ctx, name)
}

// disconnected says why a runtime's agent cannot be reached, with how long
// it has been silent.
func (h *Hub) disconnected(ctx context.Context, name string) error {
	lr, err := h.cfg.Store.GetLinkedRuntime(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("runtime %s is not linked: link it (drover runtimes link %s) and start its agent%w", name, name, unavailable)
	}
	if err != nil {
		return fmt.Errorf("runtime %s: agent not connected to this server%w", name, unavailable)
	}
	a := lr.Agent
	now := h.cfg.Now()
	switch {
	case a.Connected && a.Replica != "" && a.Replica != h.cfg.Replica && now.Sub(a.HeartbeatAt) < StaleAfter:
		return fmt.Errorf("runtime %s: its agent is connected to server %s, not this one%w", name, a.Replica, quiet{runtimes.ErrElsewhere})
	case a.HeartbeatAt.IsZero():
		return fmt.Errorf("runtime %s: its agent has never connected (linked %s ago; start drover agent with its token)%w", name, roundAgo(now.Sub(lr.CreatedAt)), unavailable)
	default:
		why := ""
		switch {
		case a.Connected: // its server stopped recording heartbeats
			why = fmt.Sprintf(": no heartbeat recorded by server %s", a.Replica)
		case a.Error != "":
			why = ": " + a.Error
		}
		return fmt.Errorf("runtime %s: agent disconnected, silent for %s%s%w", name, roundAgo(now.Sub(a.HeartbeatAt)), why, unavailable)
	}
}

// unavailable marks an error as runtimes.ErrUnavailable without changing
// its text.
var unavailable = quiet{runtimes.ErrUnavailable}

type quiet struct{ err error }

func (q quiet) Error() string { return "" }
func (q quiet) Unwrap() error { return q.err }

func roundAgo(d time.Duration) string {
	switch {
	case d < time.Second:
		return "less than a second"
	case d < time.Minute:
		return d.Round(time.Second).String()
	default:
		return d.Round(time.Minute).String()
	}
}

// waitChange returns a channel closed at the next session change.
func (h *Hub) waitChange() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.changed
}

// do makes one call on the session: POST path with in as JSON, decoding
// the answer into out.
func (s *session) do(ctx context.Context, path string, in, out any) error {
	resp, err := s.post(ctx, path, in)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if err := decodeAnswer(resp.Body, path, out); err != nil {
		if cut := s.cutIfTooLarge(err); cut != nil {
			return cut
		}
		return fmt.Errorf("runtime %s: agent's answer to %s: %w", s.name, path, err)
	}
	return nil
}

// post sends a call and returns the response of a successful one.
func (s *session) post(ctx context.Context, path string, in any) (*http.Response, error) {
	var body io.Reader = http.NoBody
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return nil, err
		}
		body = strings.NewReader(string(b))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://agent"+path, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		select {
		case <-s.done:
			return nil, fmt.Errorf("runtime %s: lost the agent's connection (%s)%w", s.name, s.reason, unavailable)
		default:
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if s.mux.IsClosed() || errors.Is(err, yamux.ErrSessionShutdown) {
			return nil, fmt.Errorf("runtime %s: lost the agent's connection: %w%w", s.name, err, unavailable)
		}
		// net/http says so in words only.
		if strings.Contains(err.Error(), "response headers exceeded") {
			return nil, s.cutIfTooLarge(&tooLargeError{what: "the header of the answer to " + path, call: path, limit: headerLimit})
		}
		return nil, fmt.Errorf("runtime %s: call to the agent failed: %w", s.name, err)
	}
	if resp.StatusCode == http.StatusOK {
		return resp, nil
	}
	defer func() { _ = resp.Body.Close() }()
	err = answerError(resp.Status, resp.Body, path)
	if cut := s.cutIfTooLarge(err); cut != nil {
		return nil, cut
	}
	return nil, err
}

// acceptFromAgent serves the streams the agent opens (runs to record).
func (h *Hub) acceptFromAgent(s *session) {
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+pathRuns, func(w http.ResponseWriter, r *http.Request) {
		var run runtimes.Run
		err := decodeLimited(r.Body, &tooLargeError{what: "a run handed back on " + pathRuns, call: pathRuns, limit: runLimit}, &run)
		if big := (*tooLargeError)(nil); errors.As(err, &big) {
			http.Error(w, big.Error()+": disconnecting this agent", http.StatusRequestEntityTooLarge)
			_ = http.NewResponseController(w).Flush()
			s.exceeded(big)
			return
		}
		if err != nil {
			http.Error(w, "bad run: "+err.Error(), http.StatusBadRequest)
			return
		}
		// An agent records runs only of the runtimes the server asked it
		// to serve on this session.
		if !s.serves(run.Runtime) {
			http.Error(w, "runtime "+run.Runtime+" is not served on this connection", http.StatusForbidden)
			return
		}
		if h.cfg.Runs != nil {
			if err := h.cfg.Runs.RecordRun(r.Context(), run); err != nil {
				http.Error(w, "record run: "+err.Error(), http.StatusServiceUnavailable)
				return
			}
		}
		w.WriteHeader(http.StatusNoContent)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute, MaxHeaderBytes: headerLimit}
	_ = srv.Serve(limitStreams(s.mux, agentStreamsLimit, s.done))
}
