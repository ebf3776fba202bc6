package engine

import (
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/drover-dev/drover/internal/compiler"
	"github.com/drover-dev/drover/internal/config"
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
	everyAction := map[string]bool{}
	unenforced := map[string][]string{}
	if res.DesiredState != nil {
		for _, e := range res.DesiredState.Entities {
			switch {
			case e.ProtectionLink != nil:
				unenforced[e.ReleaseChannel] = append(unenforced[e.ReleaseChannel], fmt.Sprintf("protection %s (%s)", e.ProtectionLink.Protection, e.ProtectionLink.Lifecycle))
			case e.DeliveryExtension != nil:
				unenforced[e.ReleaseChannel] = append(unenforced[e.ReleaseChannel], fmt.Sprintf("convergence extension %s (%s)", e.DeliveryExtension.Name, e.DeliveryExtension.Lifecycle))
			}
			if e.ID.Type == ds.TypeManualApproval && e.ManualApproval != nil {
				approvals[e.ReleaseChannel] = append(approvals[e.ReleaseChannel], Gate{
					Topic: e.ManualApproval.Topic, Description: e.ManualApproval.Description, MinApprovers: int(e.ManualApproval.MinApprovers),
				})
				everyAction[e.ReleaseChannel] = everyAction[e.ReleaseChannel] || e.ManualApproval.EveryAction
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
			Unenforced:   unenforced[rc.Name],
			AutoRollback: !rc.AutoRollbackDisabled,
		}
		if rc.ProgressDeadline != nil {
			ch.ProgressDeadline = rc.ProgressDeadline.Duration
		}
		if i < len(raw.ReleaseChannels) {
			var approveEach bool
			ch.ConvergenceGrace, approveEach = runnerSettings(raw.ReleaseChannels[i].Objects)
			ch.EveryAction = everyAction[rc.Name] || approveEach
		}
		cs.desired.Channels = append(cs.desired.Channels, ch)
		t := runtimes.Target{
			InstanceKey:    runtimes.InstanceKey{Application: rec.Application, Service: rec.Service, ReleaseChannel: rc.Name},
			Version:        res.BundleVersion,
			DesiredStateID: rec.ID,
			Namespace:      rc.Runtime.Namespace,
			Backend:        rc.Backend,
			Env:            plainEnv(rc.Env),
			Secrets:        rawSecrets(rc.Env),
		}
		if i < len(raw.ReleaseChannels) {
			t.Objects = raw.ReleaseChannels[i].Objects
		}
		cs.targets[rc.Name] = t
	}
	return cs, nil
}

// runnerSettings reads a custom runtime's (or terraform runner's)
// convergenceGracePeriod and requireApprovalBeforeApply from its compiled object.
func runnerSettings(objects []json.RawMessage) (time.Duration, bool) {
	if len(objects) != 1 {
		return 0, false
	}
	type settings struct {
		Grace   config.Duration `json:"convergenceGracePeriod"`
		Approve bool            `json:"requireApprovalBeforeApply"`
	}
	var obj struct {
		Custom          *settings `json:"custom"`
		TerraformRunner *settings `json:"terraformRunner"`
	}
	if json.Unmarshal(objects[0], &obj) != nil {
		return 0, false
	}
	switch {
	case obj.Custom != nil:
		return obj.Custom.Grace.Duration, obj.Custom.Approve
	case obj.TerraformRunner != nil:
		return obj.TerraformRunner.Grace.Duration, obj.TerraformRunner.Approve
	}
	return 0, false
}

// rawSecrets are the raw secret values of env, for runtimes to redact.
func rawSecrets(env map[string]config.EnvValue) []string {
	var out []string
	for _, v := range env {
		if v.RawSecret != "" {
			out = append(out, v.RawSecret)
		}
	}
	return out
}

// plainEnv keeps the values a runtime can pass on: plain values and raw
// secrets. References to stored or Kubernetes secrets are resolved by the
// runtimes that support them.
func plainEnv(env map[string]config.EnvValue) map[string]string {
	if len(env) == 0 {
		return nil
	}
	out := make(map[string]string, len(env))
	for k, v := range env {
		switch {
		case v.RawSecret != "":
			out[k] = v.RawSecret
		case v.Secret == nil && v.KubernetesSecret == nil:
			out[k] = v.Value
		}
	}
	return out
}
