package runtimehost

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/runtimes"
	"github.com/drover-dev/drover/internal/store"
)

// Store is what a Host needs of the store: runtime configs to build from,
// and records of runs, process groups and the events ending them. A
// store.Store is one; an agent would answer these over its stream.
type Store interface {
	GetConfig(ctx context.Context, kind, name string) (store.ConfigObject, error)
	RecordRun(ctx context.Context, r store.TaskRun) (int64, error)
	AddProcess(ctx context.Context, p store.Process) (int64, error)
	RemoveProcess(ctx context.Context, id int64) error
	ListProcesses(ctx context.Context) ([]store.Process, error)
	AppendEvents(ctx context.Context, events ...store.Event) error
	ListConfigs(ctx context.Context, kinds ...string) ([]store.ConfigObject, error)
	PutRuntimeFacts(ctx context.Context, f store.RuntimeFacts) error
	GetLinkedRuntime(ctx context.Context, name string) (store.LinkedRuntime, error)
	ListLinkedRuntimes(ctx context.Context) ([]store.LinkedRuntime, error)
}

// Agents builds the runtimes that agents serve (remote.Hub in drover): a
// linked Kubernetes runtime is served by its own agent; a custom or
// Terraform runtime with a proxyRuntime by that runtime's agent.
type Agents interface {
	// Runtime forwards the calls of runtime name of kind (its stored
	// config, at version) to the agent of linked runtime agent.
	Runtime(agent, kind, name string, version int64, config []byte) runtimes.Runtime
}

// Config configures a Host.
type Config struct {
	Store Store
	// Registry holds the runtime kinds the host can build (builtin.Registry
	// in drover).
	Registry Registry
	// DataDir is where runtimes may keep state (the fake runtime does).
	DataDir string
	// Log is the host's and the runtimes' logger (nil = discard).
	Log *slog.Logger
	// Now is the clock (nil = time.Now).
	Now func() time.Time
	// DiscoverEvery is how often the host asks its runtimes about their
	// backends (runtimes.Discoverer); 0 = DefaultDiscoverEvery.
	DiscoverEvery time.Duration
	// Agents serves linked runtimes (nil: runtimes are only built here,
	// and a linked one is refused).
	Agents Agents
}

// DefaultDiscoverEvery is how often a host asks a cluster for its version
// and API versions when Config does not say.
const DefaultDiscoverEvery = 10 * time.Minute

// discoverTimeout bounds one runtime's discovery.
const discoverTimeout = 30 * time.Second

// Host builds runtimes from their stored configs on first use, rebuilds one
// when its config version changes, and starts a watch on those that push
// changes, so the engine hears about them without polling. It is safe for
// concurrent use.
type Host struct {
	store    Store
	registry Registry
	agents   Agents
	opts     runtimes.Options
	log      *slog.Logger
	now      func() time.Time
	// spool keeps runs the store did not take (nil without a data dir).
	spool *runSpool
	// discoverEvery paces discovery; rediscover asks for a round now.
	discoverEvery time.Duration
	rediscover    chan struct{}

	// load serializes the slow path of Runtime (read the config, build),
	// so a lookup that read an older version cannot replace a newer build.
	load sync.Mutex
	mu   sync.Mutex
	// gen counts Invalidates: a config read before one does not mark its
	// runtime checked.
	gen uint64
	// ctx is the parent of every watch (Start's); notify hears of changes.
	ctx     context.Context
	notify  func(runtimes.InstanceKey)
	entries map[string]*entry
	// checked marks runtimes whose config was read since the last
	// Invalidate, so the hot path does not query the store every time.
	checked map[string]bool
	// stopDiscover ends the discovery loop Start began; discoverDone is
	// closed once it has returned (both nil before Start).
	stopDiscover context.CancelFunc
	discoverDone chan struct{}
}

type entry struct {
	version int64
	// linked is whether the runtime was linked when it was built: linking
	// or unlinking rebuilds it (local or through its agent).
	linked bool
	rt     runtimes.Runtime
	cancel context.CancelFunc
}

// New builds a host; it builds no runtime yet. Call Start before the first
// Runtime, and Close at the end.
func New(cfg Config) *Host {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.DiscoverEvery <= 0 {
		cfg.DiscoverEvery = DefaultDiscoverEvery
	}
	spool := newRunSpool(cfg.DataDir, cfg.Store, cfg.Log)
	opts := runtimes.Options{DataDir: cfg.DataDir, Now: cfg.Now, Log: cfg.Log,
		Runs: runRecorder{store: cfg.Store, spool: spool, log: cfg.Log}, Processes: processRecorder{store: cfg.Store, log: cfg.Log}}
	if sg, ok := cfg.Store.(secretStore); ok {
		opts.Secret = storedSecret(sg)
	}
	return &Host{
		store: cfg.Store, registry: cfg.Registry, agents: cfg.Agents, log: cfg.Log, now: cfg.Now,
		discoverEvery: cfg.DiscoverEvery, rediscover: make(chan struct{}, 1),
		ctx: context.Background(), notify: func(runtimes.InstanceKey) {}, spool: spool,
		opts: opts,
	}
}

// Start ends what commands of a crashed earlier process left running (see
// endLeftovers), then lets runtimes be built: their watches run until ctx
// ends or Close, and report every instance whose state changed to notify
// (nil = nobody listens). Until ctx ends it also asks the configured
// runtimes about their backends (see discover). Call it once, before
// anything applies.
func (h *Host) Start(ctx context.Context, notify func(runtimes.InstanceKey)) error {
	if err := h.endLeftovers(ctx, 0); err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ctx = ctx
	if notify != nil {
		h.notify = notify
	}
	dctx, stop := context.WithCancel(ctx)
	h.stopDiscover, h.discoverDone = stop, make(chan struct{})
	go func(done chan struct{}) {
		defer close(done)
		// Runs kept while the store was away are recorded from now on.
		var wg sync.WaitGroup
		if h.spool != nil {
			wg.Go(func() { h.spool.loop(dctx) })
		}
		h.discoverLoop(dctx)
		wg.Wait()
	}(h.discoverDone)
	return nil
}

// Invalidate makes the next lookups re-read runtime configs (after configs
// were applied), and asks the runtimes about their backends again.
func (h *Host) Invalidate() {
	h.mu.Lock()
	h.checked = nil
	h.gen++
	h.mu.Unlock()
	select {
	case h.rediscover <- struct{}{}:
	default: // a round is asked for already
	}
}

// discoverLoop runs discover at start, after each Invalidate and every
// discoverEvery, until ctx ends.
func (h *Host) discoverLoop(ctx context.Context) {
	t := time.NewTicker(h.discoverEvery)
	defer t.Stop()
	for {
		h.discover(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-h.rediscover:
		}
	}
}

// discover asks every configured runtime that can describe its backend (a
// runtimes.Discoverer: a Kubernetes cluster's version and API versions) and
// stores the answers, which pushes render Helm charts against. A runtime
// that does not answer keeps what it said last; the failure is logged.
func (h *Host) discover(ctx context.Context) {
	names, err := h.names(ctx)
	if err != nil {
		if ctx.Err() == nil {
			h.log.Warn("list runtimes to discover", "error", err)
		}
		return
	}
	for _, name := range names {
		rt, err := h.Runtime(ctx, name)
		if err != nil {
			continue // said when something uses it
		}
		d, ok := rt.(runtimes.Discoverer)
		if !ok {
			continue
		}
		dctx, cancel := context.WithTimeout(ctx, discoverTimeout)
		facts, err := d.Discover(dctx)
		cancel()
		if errors.Is(err, runtimes.ErrUnavailable) {
			h.log.Debug("runtime discovery skipped", "runtime", name, "error", err)
			continue // asked again when it is back (Invalidate)
		}
		if err == nil && facts.KubeVersion == "" && len(facts.APIVersions) == 0 {
			continue // nothing to say
		}
		if err == nil {
			err = h.store.PutRuntimeFacts(ctx, store.RuntimeFacts{Runtime: name, KubeVersion: facts.KubeVersion,
				APIVersions: facts.APIVersions, ObservedAt: h.now()})
		}
		if err != nil && ctx.Err() == nil {
			h.log.Warn("runtime discovery failed; pushes use what it said before, or the defaults", "runtime", name, "error", err)
		}
	}
}

// Runtime returns the runtime named name, built from its stored config (or
// rebuilt when the config changed since it was built).
func (h *Host) Runtime(ctx context.Context, name string) (runtimes.Runtime, error) {
	if rt, ok := h.current(name); ok {
		return rt, nil
	}
	h.load.Lock()
	defer h.load.Unlock()
	if rt, ok := h.current(name); ok {
		return rt, nil // another lookup loaded it meanwhile
	}
	h.mu.Lock()
	gen := h.gen
	h.mu.Unlock()
	obj, err := h.store.GetConfig(ctx, "runtime", name)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	linked := false
	if h.agents != nil {
		_, lerr := h.store.GetLinkedRuntime(ctx, name)
		if lerr != nil && !errors.Is(lerr, store.ErrNotFound) {
			return nil, lerr
		}
		linked = lerr == nil
	}
	if errors.Is(err, store.ErrNotFound) {
		if !linked {
			return nil, fmt.Errorf("runtime %q is not configured (drover apply its config) nor linked (drover runtimes link)", name)
		}
		// A linked runtime needs no config: it is a Kubernetes runtime.
		obj = store.ConfigObject{Kind: "runtime", Name: name, Body: linkedBody(name)}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.checked == nil {
		h.checked = map[string]bool{}
	}
	if e, ok := h.entries[name]; ok && e.version == obj.Version && e.linked == linked {
		h.markChecked(name, gen)
		return e.rt, nil
	}
	var f config.File
	if err := json.Unmarshal(obj.Body, &f); err != nil || f.Runtime == nil {
		return nil, fmt.Errorf("runtime %q: stored config is not a runtime", name)
	}
	rt, err := h.build(name, linked, obj, f.Runtime)
	if err != nil {
		return nil, err
	}
	if old, ok := h.entries[name]; ok {
		old.close()
	}
	e := &entry{version: obj.Version, linked: linked, rt: rt}
	if w, ok := rt.(runtimes.Watcher); ok {
		wctx, cancel := context.WithCancel(h.ctx)
		e.cancel = cancel
		notify := h.notify
		go func() {
			if err := w.Watch(wctx, notify); err != nil && wctx.Err() == nil {
				h.log.Error("runtime watch stopped", "runtime", name, "error", err)
			}
		}()
	}
	if h.entries == nil {
		h.entries = map[string]*entry{}
	}
	h.entries[name] = e
	h.markChecked(name, gen)
	return rt, nil
}

// current returns the runtime named name when its config was read since the
// last Invalidate.
func (h *Host) current(name string) (runtimes.Runtime, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if e, ok := h.entries[name]; ok && h.checked[name] {
		return e.rt, true
	}
	return nil, false
}

// markChecked marks name's config read, unless an Invalidate came since the
// read began (gen): then the next lookup reads it again. h.mu is held.
func (h *Host) markChecked(name string, gen uint64) {
	if h.gen == gen {
		h.checked[name] = true
	}
}

// build builds a runtime here, or the one forwarding to the agent that
// serves it.
func (h *Host) build(name string, linked bool, obj store.ConfigObject, cfg *config.Runtime) (runtimes.Runtime, error) {
	kind := cfg.KindFacts()
	agent := ""
	if kind.Proxy != nil {
		agent = kind.Proxy(cfg, linked)
	}
	if agent == "" {
		return h.registry.New(kind.Name, cfg, h.opts)
	}
	if h.agents == nil {
		return nil, fmt.Errorf("runtime %s is served by the agent of %s, and this server accepts no agents (start it with --agent-listen)", name, agent)
	}
	return h.agents.Runtime(agent, kind.Name, name, obj.Version, obj.Body), nil
}

// linkedBody is the stored form of a linked runtime that has no config.
func linkedBody(name string) []byte {
	b, _ := json.Marshal(config.File{Runtime: &config.Runtime{Name: name}})
	return b
}

// names lists the runtimes the host can build: configured and linked.
func (h *Host) names(ctx context.Context) ([]string, error) {
	objs, err := h.store.ListConfigs(ctx, "runtime")
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var out []string
	for _, o := range objs {
		seen[o.Name] = true
		out = append(out, o.Name)
	}
	if h.agents != nil {
		linked, err := h.store.ListLinkedRuntimes(ctx)
		if err != nil {
			return nil, err
		}
		for _, l := range linked {
			if !seen[l.Name] {
				out = append(out, l.Name)
			}
		}
	}
	return out, nil
}

// Runs is the recorder the host's runtimes record their runs with (agents
// hand theirs to it too).
func (h *Host) Runs() runtimes.RunRecorder { return h.opts.Runs }

func (e *entry) close() {
	if e.cancel != nil {
		e.cancel()
	}
	if c, ok := e.rt.(runtimes.Closer); ok {
		_ = c.Close()
	}
}

// Close stops discovery and waits for it to end (so it builds no runtime
// after Close), then stops every watch and closes every runtime. Call it
// once nothing applies any more; a later Runtime builds anew.
func (h *Host) Close() {
	h.mu.Lock()
	stop, done := h.stopDiscover, h.discoverDone
	h.stopDiscover, h.discoverDone = nil, nil
	h.mu.Unlock()
	if stop != nil {
		stop()
		<-done
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, e := range h.entries {
		e.close()
	}
	h.entries = nil
}
