package engine

import (
	"encoding/json"
	"fmt"
	"sync"

	"github.com/drover-dev/drover/internal/compiler"
	ds "github.com/drover-dev/drover/internal/desiredstate"
	"github.com/drover-dev/drover/internal/runtimes"
	"github.com/drover-dev/drover/internal/store"
)

// compiledState is a stored desired state decoded once: desired states are
// immutable, so the decoded form is cached by id.
type compiledState struct {
	desired *Desired
	targets map[string]runtimes.Target // by release channel
}

type stateCache struct {
	mu sync.Mutex
	m  map[string]*compiledState
}

func (c *stateCache) get(rec store.DesiredState) (*compiledState, error) {
	c.mu.Lock()
	cs, ok := c.m[rec.ID]
	c.mu.Unlock()
	if ok {
		return cs, nil
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
	var res compiler.Result
	if err := json.Unmarshal(rec.Compiled, &res); err != nil {
		return nil, fmt.Errorf("decode desired state %s: %w", rec.ID, err)
	}
	var raw struct {
		ReleaseChannels []struct {
			Objects []json.RawMessage `json:"objects"`
		} `json:"releaseChannels"`
	}
	if err := json.Unmarshal(rec.Compiled, &raw); err != nil {
		return nil, fmt.Errorf("decode desired state %s: %w", rec.ID, err)
	}
	approvals := map[string][]Gate{}
	if res.DesiredState != nil {
		for _, e := range res.DesiredState.Entities {
			if e.ID.Type == ds.TypeManualApproval && e.ManualApproval != nil {
				approvals[e.ReleaseChannel] = append(approvals[e.ReleaseChannel], Gate{
					Topic: e.ManualApproval.Topic, Description: e.ManualApproval.Description, MinApprovers: int(e.ManualApproval.MinApprovers),
				})
			}
		}
	}
	cs := &compiledState{
		desired: &Desired{ID: rec.ID, Application: rec.Application, Service: rec.Service, Version: rec.Version},
		targets: map[string]runtimes.Target{},
	}
	for i, rc := range res.ReleaseChannels {
		ch := Channel{
			Name:         rc.Name,
			Version:      res.BundleVersion,
			StateID:      rec.ID,
			Runtime:      rc.Runtime.Name,
			DependsOn:    rc.DependsOn,
			Approvals:    approvals[rc.Name],
			AutoRollback: !rc.AutoRollbackDisabled,
		}
		if rc.ProgressDeadline != nil {
			ch.ProgressDeadline = rc.ProgressDeadline.Duration
		}
		cs.desired.Channels = append(cs.desired.Channels, ch)
		t := runtimes.Target{
			InstanceKey:    runtimes.InstanceKey{Application: rec.Application, Service: rec.Service, ReleaseChannel: rc.Name},
			Version:        res.BundleVersion,
			DesiredStateID: rec.ID,
			Namespace:      rc.Runtime.Namespace,
			Backend:        rc.Backend,
		}
		if i < len(raw.ReleaseChannels) {
			t.Objects = raw.ReleaseChannels[i].Objects
		}
		cs.targets[rc.Name] = t
	}
	return cs, nil
}
