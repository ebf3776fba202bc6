package engine

import (
	"context"
	"fmt"
	"sync"

	ds "github.com/drover-dev/drover/internal/desiredstate"
	"github.com/drover-dev/drover/internal/runtimes"
	"github.com/drover-dev/drover/internal/store"
)

// compiledState is a stored desired state decoded once: desired states are
// immutable, so the decoded form is cached by id.
type compiledState struct {
	desired *Desired
	targets map[string]runtimes.Target // by release channel
	// gated says a channel has approval gates (only then does a pass read
	// the approvals).
	gated bool
}

type stateCache struct {
	mu sync.Mutex
	m  map[string]*compiledState
}

// peek returns the decoded desired state id if it is cached, else nil.
func (c *stateCache) peek(id string) *compiledState {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[id]
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
	if c.m == nil {
		c.m = map[string]*compiledState{}
	}
	if len(c.m) > 100000 {
		clear(c.m) // crude bound; entries are rebuilt on demand
	}
	c.m[rec.ID] = cs
	c.mu.Unlock()
	return cs, nil
}

// decodeState turns a stored desired state into the engine's model.
func decodeState(rec store.DesiredState) (*compiledState, error) {
	c, err := ds.Decode(rec.Compiled)
	if err != nil {
		return nil, fmt.Errorf("desired state %s: %w", rec.ID, err)
	}
	cs := &compiledState{
		desired: &Desired{ID: rec.ID, Application: rec.Application, Service: rec.Service, Version: rec.Version},
		targets: make(map[string]runtimes.Target, len(c.Channels)),
	}
	for _, rc := range c.Channels {
		cs.desired.Channels = append(cs.desired.Channels, Channel{Channel: rc, Version: c.Version, StateID: rec.ID})
		cs.gated = cs.gated || len(rc.Approvals) > 0
		cs.targets[rc.Name] = runtimes.Target{
			InstanceKey:    runtimes.InstanceKey{Application: rec.Application, Service: rec.Service, ReleaseChannel: rc.Name},
			Version:        c.Version,
			DesiredStateID: rec.ID,
			Namespace:      rc.Namespace,
			Backend:        rc.Backend,
			Env:            rc.Env,
			Secrets:        rc.Secrets(),
			Objects:        rc.Objects,
		}
	}
	return cs, nil
}
