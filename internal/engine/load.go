package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
	"unique"

	ds "github.com/drover-dev/drover/internal/desiredstate"
	"github.com/drover-dev/drover/internal/runtimes"
	"github.com/drover-dev/drover/internal/store"
)

// compiledState is a stored desired state decoded once: desired states are
// immutable, so the decoded form is cached by id.
type compiledState struct {
	desired *Desired
	// gated says a channel has approval gates or checks (only then does a
	// pass read the approvals, which hold bypasses too).
	gated bool
	// services are the services its channels wait for (service.dependsOn).
	services []string
	// shared says a channel has a sharedManualApproval: a pass reads the
	// approvals of the release's other desired states too.
	shared bool

	mu sync.Mutex
	// graced is desired with the runtimes' convergence graces, which were
	// graces (see withGraces).
	graced *Desired
	graces []time.Duration
}

// stateCache keeps the decoded desired states in use, in two generations:
// an entry found in the old one moves to the current one, and when the
// current one is full it becomes the old one (the old one is dropped). What
// passes use (active and target states) stays; states no longer read go
// within two generations. It holds at most 2*limit entries.
type stateCache struct {
	mu       sync.Mutex
	cur, old map[string]*compiledState
	// limit is the size of a generation (0 = stateCacheLimit).
	limit int
}

// stateCacheLimit bounds a generation of the shared cache: the active
// desired states of 16,384 services stay decoded.
const stateCacheLimit = 16384

// peek returns the decoded desired state id if it is cached, else nil.
func (c *stateCache) peek(id string) *compiledState {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cs, ok := c.cur[id]; ok {
		return cs
	}
	cs, ok := c.old[id]
	if ok {
		c.putLocked(id, cs)
	}
	return cs
}

func (c *stateCache) putLocked(id string, cs *compiledState) {
	limit := c.limit
	if limit <= 0 {
		limit = stateCacheLimit
	}
	if c.cur == nil || len(c.cur) >= limit {
		c.old, c.cur = c.cur, make(map[string]*compiledState, min(limit, 1024))
	}
	c.cur[id] = cs
}

// StateCache holds decoded desired states by id, for the engine and the
// readers beside it (the API's status): desired states are immutable, so
// each is decoded once per process. The composition root makes one and
// gives it to both (Config.States and the server's); what it returns must
// not be modified.
type StateCache struct {
	store DesiredStates
	cache stateCache
}

// NewStateCache returns an empty cache that reads desired states it lacks
// with st.
func NewStateCache(st DesiredStates) *StateCache { return &StateCache{store: st} }

// Decode decodes a stored desired state into the engine's model, reading
// its compiled form when rec lacks it.
func (c *StateCache) Decode(ctx context.Context, rec store.DesiredState) (*Desired, error) {
	cs, err := c.get(ctx, rec)
	if err != nil {
		return nil, err
	}
	return cs.desired, nil
}

// Cached is the decoded desired state id when the cache has it at hand,
// else nil: for readers that must not load desired states (the service
// summaries).
func (c *StateCache) Cached(id string) *Desired {
	if cs := c.cache.peek(id); cs != nil {
		return cs.desired
	}
	return nil
}

// Target returns what the engine applies to release channel rc for the
// stored desired state rec (read when rec lacks its compiled form).
func (c *StateCache) Target(ctx context.Context, rec store.DesiredState, rc string) (runtimes.Target, error) {
	cs, err := c.get(ctx, rec)
	if err != nil {
		return runtimes.Target{}, err
	}
	return cs.target(rc)
}

func (c *StateCache) get(ctx context.Context, rec store.DesiredState) (*compiledState, error) {
	return c.cache.get(ctx, c.store, rec)
}

// DesiredStates reads stored desired states by id; a store.Store is one.
type DesiredStates interface {
	GetDesiredState(ctx context.Context, id string) (store.DesiredState, error)
}

// get returns rec decoded. rec may come without its compiled form (the
// store's active desired states do): on a miss it is then read with st.
func (c *stateCache) get(ctx context.Context, st DesiredStates, rec store.DesiredState) (*compiledState, error) {
	if cs := c.peek(rec.ID); cs != nil {
		return cs, nil
	}
	if rec.Compiled == nil && rec.PrunedAt.IsZero() {
		full, err := st.GetDesiredState(ctx, rec.ID)
		if err != nil {
			return nil, fmt.Errorf("load desired state %s: %w", rec.ID, err)
		}
		rec = full
	}
	cs, err := decodeState(rec)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.putLocked(rec.ID, cs)
	c.mu.Unlock()
	return cs, nil
}

// ErrUndecodable is what decoding a stored desired state that this engine
// cannot read wraps (not a failure to read it from the store).
var ErrUndecodable = errors.New("cannot be decoded")

// decodeState turns a stored desired state into the engine's model.
func decodeState(rec store.DesiredState) (*compiledState, error) {
	c, err := ds.DecodeWithoutGraph(rec.Compiled)
	if err != nil {
		return nil, fmt.Errorf("desired state %s %w: %w", rec.ID, ErrUndecodable, err)
	}
	compact(c.Channels)
	cs := &compiledState{
		desired: &Desired{ID: rec.ID, Application: rec.Application, Service: rec.Service, Version: rec.Version,
			DisplayName: c.DisplayName, Channels: make([]Channel, 0, len(c.Channels)), Release: c.Release},
	}
	for _, rc := range c.Channels {
		ch := Channel{Channel: rc, Version: c.Version, StateID: rec.ID, DisplayName: c.DisplayName}
		if h := rc.Held; h != nil {
			// A rollback's channel: it converges to the version another
			// desired state holds.
			ch.Version, ch.StateID, ch.DisplayName = h.Version, h.StateID, h.DisplayName
		}
		cs.desired.Channels = append(cs.desired.Channels, ch)
		cs.gated = cs.gated || len(rc.Approvals) > 0 || len(rc.Checks) > 0
		cs.shared = cs.shared || slices.ContainsFunc(rc.Approvals, func(a ds.Approval) bool { return a.Shared })
	}
	cs.services = dependencyServices(cs.desired)
	return cs, nil
}

// compact makes decoded channels cheap to keep in the cache, which holds
// the active desired state of every service and which the garbage
// collector walks at each cycle: the names every service repeats (channel,
// runtime, kind, backend, group, namespace, labels, dependencies) are
// interned, and the channels' dependency lists, object lists and object
// bytes each share one backing array. A state of ten channels is then a
// handful of heap objects instead of about a hundred. Each shared slice is
// capped at its own length, so an append copies instead of writing into
// the next channel's part.
func compact(chs []ds.Channel) {
	var nDeps, nObjs, nBytes int
	for i := range chs {
		nDeps += len(chs[i].DependsOn)
		nObjs += len(chs[i].Objects)
		for _, o := range chs[i].Objects {
			nBytes += len(o)
		}
	}
	deps := make([]string, 0, nDeps)
	objs := make([]json.RawMessage, 0, nObjs)
	buf := make([]byte, 0, nBytes)
	for i := range chs {
		ch := &chs[i]
		ch.Name, ch.Runtime, ch.RuntimeKind = intern(ch.Name), intern(ch.Runtime), intern(ch.RuntimeKind)
		ch.Namespace, ch.Backend, ch.Group = intern(ch.Namespace), intern(ch.Backend), intern(ch.Group)
		if len(ch.Labels) > 0 {
			labels := make(map[string]string, len(ch.Labels))
			for k, v := range ch.Labels {
				labels[intern(k)] = intern(v)
			}
			ch.Labels = labels
		}
		if len(ch.DependsOn) > 0 {
			start := len(deps)
			for _, d := range ch.DependsOn {
				deps = append(deps, intern(d))
			}
			ch.DependsOn = deps[start:len(deps):len(deps)]
		}
		if len(ch.Objects) > 0 {
			start := len(objs)
			for _, o := range ch.Objects {
				at := len(buf)
				buf = append(buf, o...)
				objs = append(objs, buf[at:len(buf):len(buf)])
			}
			ch.Objects = objs[start:len(objs):len(objs)]
		}
	}
}

// intern returns the process's one copy of s.
func intern(s string) string {
	if s == "" {
		return s
	}
	return unique.Make(s).Value()
}

// withGraces returns cs's desired state with the convergence graces its
// channels' runtimes report (a GraceReporter), for the channels that set
// none (Desired.Graces). The result is kept with cs for as long as the
// runtimes report the same.
func (l *Loop) withGraces(ctx context.Context, cs *compiledState) *Desired {
	var graces []time.Duration
	for i, ch := range cs.desired.Channels {
		if !ch.ConvergenceGrace.IsZero() {
			continue
		}
		rt, err := l.runtimes.Runtime(ctx, ch.Runtime)
		if err != nil {
			continue
		}
		if gr, ok := rt.(runtimes.GraceReporter); ok {
			if graces == nil {
				graces = make([]time.Duration, len(cs.desired.Channels))
			}
			graces[i] = gr.ConvergenceGrace()
		}
	}
	if graces == nil {
		return cs.desired
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.graced != nil && slices.Equal(cs.graces, graces) {
		return cs.graced
	}
	// The cached state is shared: the graces go beside its channels.
	cp := *cs.desired
	cp.Graces = graces
	cs.graced, cs.graces = &cp, graces
	return cs.graced
}

// target returns what the engine applies to release channel rc. It is
// built on each call rather than kept: a cached state is small that way.
func (cs *compiledState) target(rc string) (runtimes.Target, error) {
	d := cs.desired
	for i := range d.Channels {
		ch := &d.Channels[i]
		if ch.Name != rc {
			continue
		}
		return runtimes.Target{
			InstanceKey:    runtimes.InstanceKey{Application: d.Application, Service: d.Service, ReleaseChannel: rc},
			Version:        ch.Version,
			DesiredStateID: d.ID,
			Namespace:      ch.Namespace,
			Backend:        ch.Backend,
			Env:            ch.Env,
			Secrets:        ch.Secrets(),
			Objects:        ch.Objects,
		}, nil
	}
	return runtimes.Target{}, fmt.Errorf("desired state %s has no release channel %s", d.ID, rc)
}
