package remote

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/runtimes"
)

// Runtime forwards every call for one runtime to the agent serving it: a
// linked Kubernetes runtime's own agent, or the agent of the runtime a
// custom or Terraform runtime names as its proxyRuntime.
type Runtime struct {
	hub *Hub
	// agent is the linked runtime whose agent does the work.
	agent string
	ref   RuntimeRef
}

var (
	_ runtimes.Runtime     = (*Runtime)(nil)
	_ runtimes.Watcher     = (*Runtime)(nil)
	_ runtimes.InfoGetter  = (*Runtime)(nil)
	_ runtimes.CheckRunner = (*Runtime)(nil)
	_ runtimes.Discoverer  = cluster{}
)

// Runtime returns the runtime named name, of kind (kubernetes, custom,
// terraformRunner, awsEcs; body is its stored config as a config.File in JSON,
// at version), served by the agent of linked runtime agent. A Kubernetes
// runtime also describes its cluster (runtimes.Discoverer).
func (h *Hub) Runtime(agent, kind, name string, version int64, body []byte) runtimes.Runtime {
	r := &Runtime{hub: h, agent: agent, ref: RuntimeRef{Name: name, Version: version, Config: body}}
	k, _ := config.LookupRuntimeKind(kind)
	switch {
	case k.Cluster:
		return cluster{r}
	case k.ConvergenceGrace > 0:
		// The engine's grace after an apply is the kind's, as when the
		// server reaches the backend itself.
		return graced{r, k.ConvergenceGrace}
	}
	return r
}

// graced is a runtime served by an agent whose convergence grace is known
// from its kind.
type graced struct {
	*Runtime
	grace time.Duration
}

// ConvergenceGrace implements runtimes.GraceReporter.
func (g graced) ConvergenceGrace() time.Duration { return g.grace }

// cluster is a Kubernetes runtime served by an agent.
type cluster struct{ *Runtime }

// Agent is the linked runtime whose agent serves r.
func (r *Runtime) Agent() string { return r.agent }

// Fetch implements runtimes.Runtime.
func (r *Runtime) Fetch(ctx context.Context, target runtimes.Target) (runtimes.State, error) {
	var st runtimes.State
	err := r.call(ctx, pathFetch, call{Runtime: r.ref, Target: ptr(wireTarget(target))}, &st)
	return st, err
}

// Apply implements runtimes.Runtime. An apply whose session is lost midway
// fails (not permanently): the engine applies again once the agent is
// back, which the runtimes' idempotent applies make safe.
func (r *Runtime) Apply(ctx context.Context, target runtimes.Target) (runtimes.ApplyResult, error) {
	var res runtimes.ApplyResult
	err := r.call(ctx, pathApply, call{Runtime: r.ref, Target: ptr(wireTarget(target))}, &res)
	return res, err
}

// RunCheck implements runtimes.CheckRunner: the agent runs the protection
// command through the runtime it serves (a custom runtime).
func (r *Runtime) RunCheck(ctx context.Context, target runtimes.Target, chk runtimes.CheckCommand) (runtimes.CheckOutcome, error) {
	var out checkOutcome
	err := r.call(ctx, pathCheck, call{Runtime: r.ref, Target: ptr(wireTarget(target)), Check: &checkCall{Name: chk.Name, Spec: chk.Spec}}, &out)
	return runtimes.CheckOutcome(out), err
}

// Info implements runtimes.InfoGetter.
func (r *Runtime) Info(ctx context.Context, key runtimes.InstanceKey) ([]runtimes.InfoOutput, error) {
	var out []runtimes.InfoOutput
	err := r.call(ctx, pathInfo, call{Runtime: r.ref, Key: &key}, &out)
	return out, err
}

// Discover implements runtimes.Discoverer.
func (r cluster) Discover(ctx context.Context) (runtimes.Facts, error) {
	s, err := r.hub.session(ctx, r.agent)
	if err != nil {
		return runtimes.Facts{}, err
	}
	s.allow(r.ref.Name)
	if s.hello.Mode != ModeKubernetes {
		return runtimes.Facts{}, nil // a host that runs commands: no cluster to describe
	}
	var f facts
	if err := r.call(ctx, pathDiscover, call{Runtime: r.ref}, &f); err != nil {
		return runtimes.Facts{}, err
	}
	return runtimes.Facts(f), nil
}

func (r *Runtime) call(ctx context.Context, path string, in call, out any) error {
	s, err := r.hub.session(ctx, r.agent)
	if err != nil {
		return err
	}
	s.allow(r.ref.Name)
	return s.do(ctx, path, in, out)
}

// Watch implements runtimes.Watcher: while the agent is connected, it
// relays what the runtime's own watch reports there; each time the agent
// (re)connects it reports nothing by itself (the hub's OnConnect has the
// engine look at everything again).
func (r *Runtime) Watch(ctx context.Context, notify func(runtimes.InstanceKey)) error {
	for {
		changed := r.hub.waitChange()
		if s, err := r.hub.session(ctx, r.agent); err == nil {
			err := r.watchOn(ctx, s, notify)
			if ctx.Err() != nil {
				return nil //nolint:nilerr // told to stop: the watch's end is no failure
			}
			if err != nil {
				r.hub.log.Debug("agent watch ended", "runtime", r.ref.Name, "agent", r.agent, "error", err)
			}
			select {
			case <-s.done: // wait for the next session
			case <-ctx.Done():
				return nil
			case <-time.After(time.Second): // the watch failed, the session lives: again
				continue
			}
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil
		}
	}
}

// watchOn relays one watch call until it or the session ends.
func (r *Runtime) watchOn(ctx context.Context, s *session, notify func(runtimes.InstanceKey)) error {
	s.allow(r.ref.Name)
	resp, err := s.post(ctx, pathWatch, call{Runtime: r.ref})
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	stop := context.AfterFunc(ctx, func() { _ = resp.Body.Close() })
	defer stop()
	err = readLines(resp.Body, pathWatch, watchLineLimit, func(line []byte) {
		var k runtimes.InstanceKey
		if json.Unmarshal(line, &k) == nil && k.Application != "" {
			notify(k)
		}
	})
	if cut := s.cutIfTooLarge(err); cut != nil {
		return cut
	}
	if err == nil {
		err = errors.New("the agent ended the watch")
	}
	return err
}

func ptr[T any](v T) *T { return &v }
