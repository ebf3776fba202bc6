package daemon

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"time"

	apiv1 "github.com/drover-dev/drover/api/v1"
	"github.com/drover-dev/drover/internal/engine"
	"github.com/drover-dev/drover/internal/eventretention"
	"github.com/drover-dev/drover/internal/metrics"
	"github.com/drover-dev/drover/internal/runtimehost"
	"github.com/drover-dev/drover/internal/runtimehost/builtin"
	"github.com/drover-dev/drover/internal/runtimes"
	"github.com/drover-dev/drover/internal/runtimes/remote"
	"github.com/drover-dev/drover/internal/server"
	"github.com/drover-dev/drover/internal/store"
)

// Config configures a Node.
type Config struct {
	Store store.Store
	// DataDir is where runtimes may keep state (the fake runtime does).
	DataDir string
	// Registry of runtime kinds; nil means the built-in ones.
	Registry runtimehost.Registry
	Settings engine.Settings
	// Workers is the number of engine workers.
	Workers int
	// ShutdownGrace is how long applies in flight may finish once Run's
	// context ends (see engine.Config.ShutdownGrace).
	ShutdownGrace time.Duration
	// Edge is who may call the API and the limits of its HTTP edge.
	Edge server.EdgeConfig
	Log  *slog.Logger
	// Now is the clock (nil = time.Now).
	Now func() time.Time
	// APIOnly serves the API from the store alone: no engine, no runtime
	// (nothing converges; what is pushed, approved or paused is recorded and
	// acted on by the next node that runs the engine).
	APIOnly bool
	// Metrics are the server's series (nil: none).
	Metrics *metrics.Metrics
	// StoreKind names the store for /v1/health: "sqlite" (default) or
	// "postgres".
	StoreKind string
	// Shared says other servers use the store too (PostgreSQL): claims left
	// in it at start may be theirs, so only expiry ends them. Otherwise the
	// store is the data directory's, which this process alone holds.
	Shared bool
	// LeaseTTL is how long the engine's leases last without renewal (0 =
	// the engine's default); its task claims last twice as long.
	LeaseTTL time.Duration
	// Agents accepts agents (drover agent) on its listener; nil: none.
	Agents *AgentsConfig
	// Processes keeps the records of the commands this server runs (to end
	// what a crash left running), when they must not go to Store: a shared
	// store would hand one server's records to another, which would end
	// processes that are not its own. nil = Store.
	Processes ProcessRecords
	// EventRetention is how long events are kept (0: for good); older
	// ones are archived into EventArchive, then deleted (package
	// eventretention).
	EventRetention time.Duration
	EventArchive   string
	// Notify configures the delivery of notifications.
	Notify server.NotifyConfig
}

// AgentsConfig is where a server accepts agents.
type AgentsConfig struct {
	// Listener is the agents' TLS listener.
	Listener net.Listener
	// URL is the address agents are told to dial (https://HOST:PORT), and
	// Fingerprint the SHA-256 of the listener's certificate (hex).
	URL, Fingerprint string
	// Advertise is this server's own address for agents, announced to
	// the servers sharing the store ("" = none).
	Advertise string
}

// ProcessRecords is where a server records the commands it runs.
type ProcessRecords interface {
	AddProcess(ctx context.Context, p store.Process) (int64, error)
	RemoveProcess(ctx context.Context, id int64) error
	ListProcesses(ctx context.Context) ([]store.Process, error)
}

// hostStore is the store a runtime host uses: Store, with the process
// records kept apart.
type hostStore struct {
	store.Store
	procs ProcessRecords
}

func (h hostStore) AddProcess(ctx context.Context, p store.Process) (int64, error) {
	return h.procs.AddProcess(ctx, p)
}

func (h hostStore) RemoveProcess(ctx context.Context, id int64) error {
	return h.procs.RemoveProcess(ctx, id)
}

func (h hostStore) ListProcesses(ctx context.Context) ([]store.Process, error) {
	return h.procs.ListProcesses(ctx)
}

// Node is one drover server process: the runtime host, the engine that
// applies through it, and the API server in front of both (or the API
// server alone).
type Node struct {
	host *runtimehost.Host
	loop *engine.Loop
	srv  *server.Server
	// feed reports what other servers sharing the store commit (nil: the
	// store is this server's alone).
	feed store.Feed
	log  *slog.Logger
	// hub holds the agents' sessions; agents their listener (nil: none).
	hub    *remote.Hub
	agents *AgentsConfig
	store  store.Store
	// retention is the event retention's configuration (Horizon 0: off).
	retention eventretention.Config
}

// New wires a node on cfg.Store. Call Run to start it.
func New(cfg Config) *Node {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Registry == nil {
		cfg.Registry = builtin.Registry()
	}
	if cfg.StoreKind == "" {
		cfg.StoreKind = "sqlite"
	}
	var feed store.Feed
	if f, ok := cfg.Store.(store.Feed); ok && cfg.Shared {
		feed = f
	}
	kinds := gateKinds(cfg.DataDir)
	if cfg.APIOnly {
		return &Node{feed: feed, log: cfg.Log, srv: server.New(server.Config{Store: cfg.Store, Engine: noEngine{}, Runtimes: noEngine{}, Log: cfg.Log, Now: cfg.Now,
			Edge: cfg.Edge, StoreKind: cfg.StoreKind, Gates: kinds, Notify: cfg.Notify})}
	}
	var hs runtimehost.Store = cfg.Store
	if cfg.Processes != nil {
		hs = hostStore{Store: cfg.Store, procs: cfg.Processes}
	}
	n := &Node{feed: feed, log: cfg.Log, agents: cfg.Agents, store: cfg.Store}
	hostCfg := runtimehost.Config{Store: hs, Registry: cfg.Registry, DataDir: cfg.DataDir, Log: cfg.Log, Now: cfg.Now}
	// Every server knows linked runtimes, with an agent listener or not:
	// without one, its runtimes say which server their agent is connected
	// to, and services on them are handed over to that server.
	n.hub = remote.NewHub(remote.HubConfig{Store: cfg.Store, Log: cfg.Log, Now: cfg.Now,
		OnConnect: n.agentConnected, OnDisconnect: n.agentDisconnected})
	hostCfg.Agents = n.hub
	n.host = runtimehost.New(hostCfg)
	n.hub.SetRuns(n.host.Runs())
	// One cache of decoded desired states for the engine and the API.
	states := engine.NewStateCache(cfg.Store)
	n.loop = engine.NewLoop(engine.Config{
		States: states, Store: cfg.Store, Runtimes: n.host, Settings: cfg.Settings, Now: cfg.Now, Gates: kinds,
		Log: cfg.Log, Workers: cfg.Workers, OnWrite: n.changed, ShutdownGrace: cfg.ShutdownGrace,
		// An unshared store is the data directory's SQLite database, which
		// the directory's lock gives to this process alone: claims left in
		// it are a dead process's.
		Exclusive: !cfg.Shared,
		// A shared store's services may be pushed through another server:
		// look for those now and then, so this engine takes them over if
		// that server dies.
		Resync:   sharedResync(cfg.Shared),
		LeaseTTL: sharedTTL(cfg.Shared, cfg.LeaseTTL), TaskTTL: sharedTTL(cfg.Shared, 2*cfg.LeaseTTL),
		Observer: observer(cfg.Metrics),
	})
	if cfg.Metrics != nil {
		cfg.Metrics.QueueDepth(n.loop.QueueLen)
	}
	n.hub.SetReplica(n.loop.Owner())
	n.retention = eventretention.Config{Horizon: cfg.EventRetention, ArchiveDir: cfg.EventArchive, Owner: n.loop.Owner(), Now: cfg.Now, Log: cfg.Log}
	n.srv = server.New(server.Config{Store: cfg.Store, States: states, Engine: n.loop, Runtimes: n.host, Log: cfg.Log, Now: cfg.Now, Edge: cfg.Edge,
		StoreKind: cfg.StoreKind, Replica: n.loop.Owner(), Agents: n.agentsInfo(), Gates: kinds, Notify: cfg.Notify})
	return n
}

// observer is the engine's observer: m, or none.
func observer(m *metrics.Metrics) engine.Observer {
	if m == nil {
		return nil
	}
	return m
}

// agentsInfo is what the API tells of the agent listener.
func (n *Node) agentsInfo() server.Agents {
	if n.agents == nil {
		return server.Agents{}
	}
	return server.Agents{URL: n.agents.URL, Fingerprint: n.agents.Fingerprint, Disconnect: n.hub.Disconnect, Presence: n.agentPresence}
}

// agentPresence is what the hub holds of a linked runtime's agent: where
// the connected one is, and the last agent refused because another served
// the runtime.
func (n *Node) agentPresence(name string) server.AgentPresence {
	p := n.hub.Presence(name)
	var out server.AgentPresence
	if p.Connected {
		out.RemoteAddr = p.RemoteAddr
	}
	if a := p.Refused; !a.At.IsZero() {
		out.Refused = &apiv1.AgentAttempt{At: a.At, RemoteAddr: a.RemoteAddr, Version: a.Version, Count: a.Count}
	}
	return out
}

// agentDisconnected has the engine look at every service again, so the
// channels on the agent's runtime say at once that it is gone.
func (n *Node) agentDisconnected(string) { n.lookAgain("agent disconnected") }

// agentConnected has the engine look at every service again (what runs on
// the agent's runtime may have changed while it was away) and the host
// ask the runtimes about their backends.
func (n *Node) agentConnected(string) {
	n.host.Invalidate()
	n.lookAgain("agent connected")
}

// lookAgain queues every service with a desired state, in the background.
func (n *Node) lookAgain(why string) {
	go func() {
		if err := n.loop.EnqueueAll(context.Background()); err != nil {
			n.log.Warn("services not queued to be looked at again", "why", why, "error", err)
		}
	}()
}

// sharedTTL is d for a shared store; 0 (the engine's long default for a
// store of its own) otherwise: --lease-ttl is about other servers.
func sharedTTL(shared bool, d time.Duration) time.Duration {
	if shared {
		return d
	}
	return 0
}

// sharedResync is how often an engine on a shared store looks for services
// pushed through other servers.
func sharedResync(shared bool) time.Duration {
	if shared {
		return 5 * time.Second
	}
	return 0
}

// changed tells the server about each write of the engine (event streams,
// answers waiting for a plan).
func (n *Node) changed() { n.srv.Changed() }

// Run ends what commands of a crashed earlier run left, then serves the API
// on ln and runs the engine until ctx ends (or either stops with an error).
// It returns once the engine has stopped (applies in flight finished or were
// interrupted, and recorded), after which the runtimes are closed.
func (n *Node) Run(ctx context.Context, ln net.Listener) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if n.feed != nil {
		feedDone := make(chan struct{})
		defer func() { cancel(); <-feedDone }()
		go func() {
			defer close(feedDone)
			_ = n.feed.Listen(ctx, n.heard)
		}()
	}
	if n.loop == nil {
		return n.srv.Run(ctx, ln)
	}
	if err := n.host.Start(ctx, func(k runtimes.InstanceKey) { n.loop.Enqueue(k.Application, k.Service) }); err != nil {
		return err
	}
	defer n.host.Close()
	defer n.hub.Close()
	if n.agents != nil {
		agentSrv := &http.Server{Handler: n.hub, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(n.log.Handler(), slog.LevelDebug)}
		go func() { _ = agentSrv.Serve(n.agents.Listener) }()
		defer func() { _ = agentSrv.Close() }()
		n.log.Info("accepting agents", "addr", n.agents.Listener.Addr().String(), "url", n.agents.URL, "fingerprint", "sha256:"+n.agents.Fingerprint)
	}
	if n.feed != nil {
		// The announcement outlives the first signal: agents stay
		// connected while applies in flight finish; it is withdrawn once
		// the engine stopped, before the hub closes.
		actx, stopAnnounce := context.WithCancel(context.WithoutCancel(ctx))
		announced := make(chan struct{})
		go func() { defer close(announced); n.announce(actx) }()
		defer func() { stopAnnounce(); <-announced }()
	}
	if n.retention.Horizon > 0 {
		retained := make(chan struct{})
		go func() { defer close(retained); eventretention.Run(ctx, n.store, n.retention) }()
		defer func() { cancel(); <-retained }()
	}
	loopDone := make(chan error, 1)
	srvDone := make(chan error, 1)
	go func() { loopDone <- n.loop.Run(ctx) }()
	go func() { srvDone <- n.srv.Run(ctx, ln) }()
	var err, other error
	select {
	case err = <-srvDone:
		cancel()
		other = <-loopDone
	case err = <-loopDone:
		cancel()
		other = <-srvDone
	}
	if err == nil {
		err = other
	}
	return err
}

// heard acts on a change another server (or this one) committed to a
// shared store: event streams read on, runners look for tasks, and the
// engine plans a service a request changed (if another engine holds the
// service, the pass ends at once).
func (n *Node) heard(c store.Change) {
	if c.Lost {
		n.log.Warn("store change feed was lost and is back: changes made meanwhile are seen at the next poll or resync")
	}
	if c.Events || c.Lost || c.Service != "" {
		n.srv.Changed()
	}
	if n.loop == nil {
		return
	}
	if c.Tasks {
		n.loop.WakeRunner()
	}
	if c.Runtimes || c.Lost {
		// A runtime config or link changed (through any server): build
		// runtimes again, and check the links of the agents connected here.
		n.host.Invalidate()
		n.hub.CheckLinks()
	}
	if c.Freezes || c.Lost {
		n.loop.FreezesChanged()
	}
	if c.Service != "" {
		n.loop.Enqueue(c.Application, c.Service)
	}
}

// noEngine stands for the engine and runtimes of an API-only node: what the
// API records waits for a node that runs them.
type noEngine struct{}

func (noEngine) Enqueue(string, string) {}
func (noEngine) FreezesChanged()        {}
func (noEngine) Invalidate()            {}
