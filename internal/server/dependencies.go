package server

import (
	"context"
	"errors"

	apiv1 "github.com/drover-dev/drover/api/v1"
	ds "github.com/drover-dev/drover/internal/desiredstate"
	"github.com/drover-dev/drover/internal/engine"
	"github.com/drover-dev/drover/internal/store"
)

// chainMax bounds the chain of services a status follows (validate refuses
// cycles; a bound keeps a status cheap whatever is stored).
const chainMax = 16

// blockingChain follows the services holding channel ch of a service of app:
// the first dependency not running converged, then the first one that one
// waits for, and so on, each with its status and message.
func (s *Server) blockingChain(ctx context.Context, app string, rel *ds.Release, ch engine.Channel) ([]apiv1.BlockingLink, error) {
	var chain []apiv1.BlockingLink
	seen := map[string]bool{}
	deps := ch.Services
	for len(chain) < chainMax {
		next, inst, ok, err := s.firstUnmet(ctx, app, rel, deps)
		if err != nil || next == nil {
			return chain, err
		}
		key := next.Service + "/" + next.ReleaseChannel
		if seen[key] {
			return chain, nil
		}
		seen[key] = true
		link := apiv1.BlockingLink{Service: next.Service, ReleaseChannel: next.ReleaseChannel, Status: string(ds.StatusPending), Message: "no rollout there yet"}
		if ok {
			link.Status, link.Reason, link.Message = string(inst.Status), string(inst.Reason), inst.Message
		}
		chain = append(chain, link)
		if !ok || inst.Reason != ds.ReasonServiceDependencyUnmet {
			return chain, nil
		}
		rec, err := s.store.ActiveDesiredState(ctx, app, next.Service)
		if errors.Is(err, store.ErrNotFound) {
			return chain, nil
		}
		if err != nil {
			return nil, err
		}
		d, err := s.states.Decode(ctx, rec)
		if err != nil {
			return chain, nil //nolint:nilerr // the chain ends where a desired state does not decode; its status says why
		}
		dc := channelNamed(d, next.ReleaseChannel)
		if dc == nil {
			return chain, nil
		}
		deps, rel = dc.Services, d.Release
	}
	return chain, nil
}

// firstUnmet returns the first of deps whose instance does not run
// converged (at the version of release rel the engine waits for, as
// engine.ReleaseVersion says), with that instance (ok false: it has none).
func (s *Server) firstUnmet(ctx context.Context, app string, rel *ds.Release, deps []ds.ServiceDependency) (*ds.ServiceDependency, store.Instance, bool, error) {
	for i, d := range deps {
		var active engine.ActiveStates
		if _, member := rel.Member(d.Service); member {
			rec, err := s.store.ActiveDesiredState(ctx, app, d.Service)
			switch {
			case errors.Is(err, store.ErrNotFound):
			case err != nil:
				return nil, store.Instance{}, false, err
			default:
				active = engine.ActiveStates{d.Service: {ID: rec.ID, CreatedAt: rec.CreatedAt, Rollback: rec.Rollback}}
			}
		}
		want := engine.ReleaseVersion(rel, d.Service, active)
		list, err := s.store.ListInstances(ctx, app, d.Service)
		if err != nil {
			return nil, store.Instance{}, false, err
		}
		found := false
		for _, inst := range list {
			if inst.ReleaseChannel != d.ReleaseChannel {
				continue
			}
			found = true
			if inst.Status != ds.StatusConverged || want != "" && inst.CurrentVersion != want {
				return &deps[i], inst, true, nil
			}
		}
		if !found {
			return &deps[i], store.Instance{}, false, nil
		}
	}
	return nil, store.Instance{}, false, nil
}
