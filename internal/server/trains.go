package server

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	apiv1 "github.com/drover-dev/drover/api/v1"
	ds "github.com/drover-dev/drover/internal/desiredstate"
	"github.com/drover-dev/drover/internal/store"
)

// Release trains (maestro.strategy RELEASE_TRAIN, reference.md §4.9): a push
// of such a service made while its active desired state is still in flight
// (a channel that has neither converged at its version nor failed or rolled
// back) waits in the service's queue instead of replacing it, so a newer
// release never overtakes an older one. The queued push is a record in the
// config store (kind queued-push, named APP/SVC/ID, sealed at rest like
// every config) holding the desired state as it will be stored, with its id
// chosen already: the promoter (promoteTrains) makes the oldest one active
// once the one before it finished. Any server may promote; the chosen id
// makes a second promotion of the same push a conflict, not a duplicate.
// IMMEDIATE (or a push's immediate) replaces at once, as without a train.

// queuedKind is the config store kind of queued pushes.
const queuedKind = "queued-push"

// trainPoll is how often the promoter looks without being woken.
const trainPoll = 2 * time.Second

// queuedPush is the stored body of a queued push.
type queuedPush struct {
	Record  store.DesiredState `json:"record"`
	Event   string             `json:"event"`
	Release string             `json:"release,omitempty"`
	// Promoted is set once the push left the queue (the record then
	// keeps no compiled form): it became a desired state, or, with
	// Superseded, a later push made directly (--immediate) replaced it.
	Promoted   bool `json:"promoted,omitempty"`
	Superseded bool `json:"superseded,omitempty"`
}

// trainBusy reports whether a push of app/svc must queue: its active
// desired state is in flight, or pushes wait already.
func (s *Server) trainBusy(ctx context.Context, app, svc string) (bool, error) {
	queued, err := s.queuedPushes(ctx, app, svc)
	if err != nil || len(queued) > 0 {
		return len(queued) > 0, err
	}
	return s.inFlight(ctx, app, svc)
}

// inFlight reports whether the active desired state of app/svc is still
// on its way: a channel not converged at its version, while none failed or
// rolled back (a failure ends that rollout: its other channels would wait
// for a person, and the train does not; a paused channel holds it).
func (s *Server) inFlight(ctx context.Context, app, svc string) (bool, error) {
	rec, err := s.store.ActiveDesiredState(ctx, app, svc)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	d, err := s.states.Decode(ctx, rec)
	if err != nil {
		return false, err
	}
	list, err := s.store.ListInstances(ctx, app, svc)
	if err != nil {
		return false, err
	}
	busy := false
	for _, ch := range d.Channels {
		i := slices.IndexFunc(list, func(in store.Instance) bool { return in.ReleaseChannel == ch.Name })
		if i < 0 || list[i].DesiredStateID != rec.ID {
			busy = true // not planned for it yet
			continue
		}
		switch in := list[i]; in.Status {
		case ds.StatusFailed, ds.StatusRollingBack, ds.StatusRolledBack, ds.StatusFailedRollback:
			return false, nil
		case ds.StatusConverged:
			busy = busy || in.CurrentVersion != ch.Version
		default:
			busy = true
		}
	}
	return busy, nil
}

// queue stores a push in its service's train.
func (s *Server) queue(ctx context.Context, rec store.DesiredState, event, release string) error {
	body, err := json.Marshal(queuedPush{Record: rec, Event: event, Release: release})
	if err != nil {
		return err
	}
	sum := sha256.Sum256(body)
	s.trainsWaiting.Store(true)
	_, err = s.store.PutConfigs(ctx, []store.ConfigObject{{Kind: queuedKind, Name: rec.Application + "/" + rec.Service + "/" + rec.ID, Body: body, Hash: hex.EncodeToString(sum[:])}},
		func(store.ConfigObject) store.Event {
			return store.Event{Time: rec.CreatedAt, Application: rec.Application, Service: rec.Service, DesiredStateID: rec.ID, Type: ds.EventPushed, Actor: rec.CreatedBy,
				Message: "queued in the release train: " + event}
		})
	return err
}

// queuedEntry is a queued push as stored, with when it was queued.
type queuedEntry struct {
	queuedPush
	at time.Time
}

// queuedPushes are the pushes of app/svc waiting in its train, oldest first
// (svc "": of every service of app; app "": of every application).
func (s *Server) queuedPushes(ctx context.Context, app, svc string) ([]queuedEntry, error) {
	objs, err := s.store.ListConfigs(ctx, queuedKind)
	if err != nil {
		return nil, err
	}
	prefix := ""
	switch {
	case svc != "":
		prefix = app + "/" + svc + "/"
	case app != "":
		prefix = app + "/"
	}
	var out []queuedEntry
	for _, obj := range objs {
		if !strings.HasPrefix(obj.Name, prefix) {
			continue
		}
		var q queuedPush
		if err := json.Unmarshal(obj.Body, &q); err != nil {
			return nil, fmt.Errorf("queued push %s: %w", obj.Name, err)
		}
		if !q.Promoted {
			out = append(out, queuedEntry{queuedPush: q, at: q.Record.CreatedAt})
		}
	}
	slices.SortStableFunc(out, func(a, b queuedEntry) int {
		return cmp.Or(a.at.Compare(b.at), cmp.Compare(a.Record.ID, b.Record.ID))
	})
	return out, nil
}

// promoteTrains makes the oldest queued push of each service active once
// the rollout before it finished, every trainPoll and, while pushes are
// known to wait (trainsWaiting), whenever something was written, until ctx
// ends. (A write does not make the promoter read the store when nothing
// waits: the engine writes often.)
func (s *Server) promoteTrains(ctx context.Context) {
	t := time.NewTicker(trainPoll)
	defer t.Stop()
	for {
		if err := s.promoteOnce(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("release trains: promote", "error", err)
		}
		changed := s.changed.wait()
		if !s.trainsWaiting.Load() {
			changed = nil
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-t.C:
		}
	}
}

// promoteOnce promotes, for each service with queued pushes, the oldest
// one if the service's rollout is no longer in flight.
func (s *Server) promoteOnce(ctx context.Context) error {
	queued, err := s.queuedPushes(ctx, "", "")
	if err != nil {
		return err
	}
	s.trainsWaiting.Store(len(queued) > 0)
	if len(queued) == 0 {
		return nil
	}
	done := map[string]bool{}
	var errs []error
	for _, q := range queued {
		key := q.Record.Application + "/" + q.Record.Service
		if done[key] {
			continue // only the oldest of each service
		}
		done[key] = true
		if err := s.promote(ctx, q); err != nil {
			// One service's trouble holds no other's train.
			errs = append(errs, fmt.Errorf("%s: %w", key, err))
		}
	}
	return errors.Join(errs...)
}

// promote makes queued push q the service's desired state if the rollout
// before it finished.
func (s *Server) promote(ctx context.Context, q queuedEntry) error {
	app, svc := q.Record.Application, q.Record.Service
	defer s.pushMu.lock(app + "/" + svc)()
	busy, err := s.inFlight(ctx, app, svc)
	if err != nil || busy {
		return err
	}
	rec := q.Record
	prev := ""
	active, err := s.store.ActiveDesiredState(ctx, app, svc)
	switch {
	case err == nil:
		prev = active.ID
	case !errors.Is(err, store.ErrNotFound):
		return err
	}
	if prev != "" && prev != rec.ID && active.CreatedAt.After(rec.CreatedAt) {
		// A push made directly (--immediate) after this one was queued
		// replaced the rollout it waited for: it would now overtake a
		// newer one. It leaves the queue unapplied.
		q.Superseded = true
		ev := store.Event{Time: s.now(), Application: app, Service: svc, DesiredStateID: rec.ID, Type: ds.EventReplaced, Actor: "engine",
			Message: fmt.Sprintf("%s left the release train unapplied: desired state %s, pushed after it, replaced the rollout it waited for", rec.ID, prev)}
		if err := s.store.AppendEvents(ctx, ev); err != nil {
			return err
		}
	} else {
		msg := q.Event + " (from the release train)"
		if prev != "" {
			msg += ", replacing " + prev
		}
		ev := store.Event{Time: s.now(), Application: app, Service: svc, DesiredStateID: rec.ID, Type: ds.EventPushed, Actor: rec.CreatedBy, Message: msg}
		switch err := s.store.CreateDesiredState(ctx, rec, ev); {
		case errors.Is(err, store.ErrConflict):
			// Another server promoted it: only the record is left to mark.
		case err != nil:
			return err
		}
	}
	q.Record.Compiled, q.Record.Params, q.Promoted = nil, nil, true
	body, err := json.Marshal(q.queuedPush)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(body)
	if _, _, err := s.store.PutConfig(ctx, store.ConfigObject{Kind: queuedKind, Name: app + "/" + svc + "/" + rec.ID, Body: body, Hash: hex.EncodeToString(sum[:])}); err != nil {
		return err
	}
	s.engine.Enqueue(app, svc)
	s.changed.notify()
	return nil
}

// supersededInTrain reports whether release member m left its service's
// release train unapplied (a later push made directly replaced it).
func (s *Server) supersededInTrain(ctx context.Context, app string, m ds.ReleaseService) bool {
	obj, err := s.store.GetConfig(ctx, queuedKind, app+"/"+m.Service+"/"+m.DesiredStateID)
	if err != nil {
		return false
	}
	var q queuedPush
	return json.Unmarshal(obj.Body, &q) == nil && q.Superseded
}

// queuedStatus lists the pushes waiting in app/svc's train.
func (s *Server) queuedStatus(ctx context.Context, app, svc string) ([]apiv1.QueuedPush, error) {
	queued, err := s.queuedPushes(ctx, app, svc)
	if err != nil {
		return nil, err
	}
	out := make([]apiv1.QueuedPush, 0, len(queued))
	for _, q := range queued {
		var name string
		if c, err := ds.DecodeWithoutGraph(q.Record.Compiled); err == nil {
			name = c.DisplayName
		}
		out = append(out, apiv1.QueuedPush{DesiredStateID: q.Record.ID, Version: q.Record.Version, DisplayName: name, Release: q.Release,
			CreatedBy: q.Record.CreatedBy, CreatedAt: q.Record.CreatedAt})
	}
	return out, nil
}
