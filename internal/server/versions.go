package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	apiv1 "github.com/drover-dev/drover/api/v1"
	ds "github.com/drover-dev/drover/internal/desiredstate"
	"github.com/drover-dev/drover/internal/engine"
	"github.com/drover-dev/drover/internal/engine/requests"
	"github.com/drover-dev/drover/internal/store"
)

// versionsDefault and versionsMax bound a versions listing (and how far
// back a rollback target is looked for).
const (
	versionsDefault = 20
	versionsMax     = 200
)

// rollback rolls the request's channels back to their last converged
// version (engine.Rollback), or one channel to the version req.To names
// (rollbackTo).
func (s *Server) rollback(ctx context.Context, app, svc, user string, req apiv1.RollbackRequest) (*apiv1.RollbackResponse, error) {
	if req.To != "" {
		return s.rollbackTo(ctx, app, svc, user, req)
	}
	var moved []apiv1.RollbackTarget
	st, err := s.instanceAction(ctx, app, svc, apiv1.ChannelRequest{ReleaseChannel: req.ReleaseChannel, User: user}, func(inst store.Instance) (store.Instance, store.Event, bool, error) {
		next, ev, err := requests.Rollback(inst, user, s.now())
		if err == nil {
			moved = append(moved, apiv1.RollbackTarget{ReleaseChannel: next.ReleaseChannel, DesiredStateID: next.TargetStateID, Version: next.TargetVersion})
		}
		return next, ev, err == nil, err
	})
	if err != nil {
		return nil, err
	}
	out := &apiv1.RollbackResponse{ServiceStatus: *st, Rollbacks: []apiv1.RollbackTarget{}}
	// A conflict retried the action: keep each channel's last answer.
	seen := map[string]bool{}
	for i := len(moved) - 1; i >= 0; i-- {
		m := moved[i]
		if seen[m.ReleaseChannel] {
			continue
		}
		seen[m.ReleaseChannel] = true
		m.DisplayName = s.versionName(ctx, m.DesiredStateID, m.Version)
		out.Rollbacks = append([]apiv1.RollbackTarget{m}, out.Rollbacks...)
	}
	return out, nil
}

// rollbackTo makes a new desired state that rolls one release channel back
// to an earlier version of the service (engine.RollbackTo): the engine
// then gates and rolls it out like any push.
func (s *Server) rollbackTo(ctx context.Context, app, svc, user string, req apiv1.RollbackRequest) (*apiv1.RollbackResponse, error) {
	if req.ReleaseChannel == "" {
		return nil, errorf(apiv1.CodeInvalidArgument, "rollback to %q: name the release channel to roll back (--release-channel)", req.To)
	}
	defer s.pushMu.lock(app + "/" + svc)()
	rec, activeD, _, err := s.channelOf(ctx, app, svc, req.ReleaseChannel)
	if err != nil {
		return nil, err
	}
	full, err := s.store.GetDesiredState(ctx, rec.ID)
	if err != nil {
		return nil, fmt.Errorf("rollback: read desired state %s: %w", rec.ID, err)
	}
	active, err := ds.Decode(full.Compiled)
	if err != nil {
		return nil, fmt.Errorf("rollback: desired state %s: %w", rec.ID, err)
	}
	target, targetD, err := s.findVersion(ctx, app, svc, req.ReleaseChannel, req.To)
	if err != nil {
		return nil, err
	}
	list, err := s.store.ListInstances(ctx, app, svc)
	if err != nil {
		return nil, err
	}
	insts := make(map[string]store.Instance, len(list))
	for _, i := range list {
		insts[i.ReleaseChannel] = i
	}
	composed, err := engine.RollbackTo(active, activeD, targetD, req.ReleaseChannel, insts)
	if errors.Is(err, engine.ErrNotAVersionOf) {
		return nil, statusError(apiv1.CodeFailedPrecondition, err)
	}
	if err != nil {
		return nil, err
	}
	compiled, err := ds.Encode(composed)
	if err != nil {
		return nil, err
	}
	var to engine.Channel
	for _, c := range targetD.Channels {
		if c.Name == req.ReleaseChannel {
			to = c
		}
	}
	now := s.now()
	next := store.DesiredState{
		ID: newID("ds", now), Application: app, Service: svc, Version: full.Version, ConfigVersion: full.ConfigVersion,
		Compiled: compiled, Params: target.Params, Rollback: true, ReleaseChannels: []string{req.ReleaseChannel},
		CreatedBy: user, CreatedAt: now,
	}
	label := ds.VersionLabel(to.Version, to.DisplayName)
	ev := store.Event{Time: now, Application: app, Service: svc, ReleaseChannel: req.ReleaseChannel, DesiredStateID: next.ID,
		Type: ds.EventRollback, Actor: user,
		Message: fmt.Sprintf("%s: rollback to %s (of desired state %s) requested by %s: desired state %s, replacing %s",
			req.ReleaseChannel, label, target.ID, user, next.ID, rec.ID)}
	if audit, ok := auditOK(ctx); ok {
		if _, err := s.store.PushDesiredState(ctx, next, audit, ev); err != nil {
			return nil, err
		}
		auditWritten(ctx)
	} else if err := s.store.CreateDesiredState(ctx, next, ev); err != nil {
		return nil, err
	}
	s.engine.Enqueue(app, svc)
	s.changed.notify()
	st, err := s.statusOf(ctx, next)
	if err != nil {
		return nil, err
	}
	return &apiv1.RollbackResponse{ServiceStatus: *st, Rollbacks: []apiv1.RollbackTarget{{
		ReleaseChannel: req.ReleaseChannel, DesiredStateID: to.StateID, Version: to.Version, DisplayName: to.DisplayName,
	}}}, nil
}

// findVersion finds the desired state that holds the version to for
// release channel rc: to is a desired state id, a version id or a display
// name (of which the newest push counts). It fails with not_found, naming
// recent versions, when none does.
func (s *Server) findVersion(ctx context.Context, app, svc, rc, to string) (store.DesiredState, *engine.Desired, error) {
	recs, err := s.store.ListDesiredStates(ctx, app, svc, versionsMax)
	if err != nil {
		return store.DesiredState{}, nil, err
	}
	if strings.HasPrefix(to, "ds-") && !slices.ContainsFunc(recs, func(r store.DesiredState) bool { return r.ID == to }) {
		// An older one than the listing reaches.
		if rec, err := s.store.GetDesiredState(ctx, to); err == nil && rec.Application == app && rec.Service == svc {
			recs = append(recs, rec)
		}
	}
	var recent []string
	var byName []string // versions the display name matched
	var found *store.DesiredState
	var foundD *engine.Desired
	for i := range recs {
		rec := &recs[i]
		if !rec.PrunedAt.IsZero() {
			if rec.ID == to || rec.Version == to {
				return store.DesiredState{}, nil, errorf(apiv1.CodeFailedPrecondition, "desired state %s (version %s) was pruned at %s: only recent versions keep their compiled config and can be rolled back to",
					rec.ID, rec.Version, rec.PrunedAt.UTC().Format("2006-01-02 15:04:05Z"))
			}
			continue
		}
		d, err := s.states.Decode(ctx, *rec)
		if err != nil {
			return store.DesiredState{}, nil, err
		}
		ch := channelNamed(d, rc)
		if ch != nil && len(recent) < 5 && !slices.Contains(recent, ds.VersionLabel(ch.Version, ch.DisplayName)) {
			recent = append(recent, ds.VersionLabel(ch.Version, ch.DisplayName))
		}
		matched := rec.ID == to || ch != nil && ch.Version == to
		if !matched && ch != nil && ch.DisplayName == to {
			if !slices.Contains(byName, ch.Version) {
				byName = append(byName, ch.Version)
			}
			matched = len(byName) == 1 // the newest version of that name
		}
		if matched && found == nil {
			if ch == nil {
				return store.DesiredState{}, nil, errorf(apiv1.CodeFailedPrecondition, "version %s (desired state %s) never had release channel %s",
					ds.VersionLabel(d.Version, d.DisplayName), rec.ID, rc)
			}
			found, foundD = rec, d
		}
	}
	if found == nil {
		hint := "it has no versions yet"
		if len(recent) > 0 {
			hint = "recent versions there: " + strings.Join(recent, ", ")
		}
		return store.DesiredState{}, nil, errorf(apiv1.CodeNotFound, "service %s of %s has no version %q in release channel %s (%s; drover versions %s --app %s lists them)",
			svc, app, to, rc, hint, svc, app)
	}
	return *found, foundD, nil
}

// versions lists a service's desired states, newest first, with what each
// holds per release channel and where that ran.
func (s *Server) versions(ctx context.Context, app, svc string, limit int) (*apiv1.VersionList, error) {
	if limit <= 0 {
		limit = versionsDefault
	}
	limit = min(limit, versionsMax)
	recs, err := s.store.ListDesiredStates(ctx, app, svc, limit)
	if err != nil {
		return nil, err
	}
	if len(recs) == 0 {
		if _, err := s.store.GetConfig(ctx, "service", app+"/"+svc); err == nil {
			return &apiv1.VersionList{Versions: []apiv1.ServiceVersion{}}, nil
		}
		return nil, errorf(apiv1.CodeNotFound, "no service %q in application %q", svc, app)
	}
	list, err := s.store.ListInstances(ctx, app, svc)
	if err != nil {
		return nil, err
	}
	running := map[string]string{} // channel -> version converged now
	for _, i := range list {
		if i.CurrentVersion != "" {
			running[i.ReleaseChannel] = i.CurrentVersion
		}
	}
	evs, err := s.store.ListEvents(ctx, store.EventFilter{Application: app, Service: svc, Types: []ds.EventType{ds.EventConverged}})
	if err != nil {
		return nil, err
	}
	decoded := map[string]*engine.Desired{}
	out := &apiv1.VersionList{Versions: make([]apiv1.ServiceVersion, 0, len(recs))}
	for _, rec := range recs {
		v := apiv1.ServiceVersion{DesiredStateID: rec.ID, Version: rec.Version, CreatedAt: rec.CreatedAt, CreatedBy: rec.CreatedBy,
			Active: rec.ReplacedBy == "", Rollback: rec.Rollback, Pruned: !rec.PrunedAt.IsZero()}
		if !v.Pruned {
			d, err := s.states.Decode(ctx, rec)
			if err != nil {
				return nil, err
			}
			decoded[rec.ID] = d
			v.DisplayName = d.DisplayName
		}
		out.Versions = append(out.Versions, v)
	}
	ran := map[string]bool{} // channel + " " + version
	for _, e := range evs {
		if d := decoded[e.DesiredStateID]; d != nil {
			if ch := channelNamed(d, e.ReleaseChannel); ch != nil {
				ran[e.ReleaseChannel+" "+ch.Version] = true
			}
		}
	}
	for i := range out.Versions {
		v := &out.Versions[i]
		d := decoded[v.DesiredStateID]
		if d == nil {
			continue
		}
		for _, ch := range d.Channels {
			v.ReleaseChannels = append(v.ReleaseChannels, apiv1.VersionChannel{Name: ch.Name, Version: ch.Version, DisplayName: ch.DisplayName,
				Running: running[ch.Name] == ch.Version, Ran: ran[ch.Name+" "+ch.Version]})
		}
	}
	return out, nil
}

// versionName is the display name of version as desired state stateID
// holds it ("" when it has none or the state is gone or pruned).
func (s *Server) versionName(ctx context.Context, stateID, version string) string {
	if stateID == "" || version == "" {
		return ""
	}
	d, err := s.states.Decode(ctx, store.DesiredState{ID: stateID})
	if err != nil {
		return ""
	}
	for _, ch := range d.Channels {
		if ch.Version == version {
			return ch.DisplayName
		}
	}
	if d.Version == version {
		return d.DisplayName
	}
	return ""
}

// channelVersionName is versionName, read from ch when version is its own.
func (s *Server) channelVersionName(ctx context.Context, ch engine.Channel, stateID, version string) string {
	if version == ch.Version {
		return ch.DisplayName
	}
	return s.versionName(ctx, stateID, version)
}

// channelNamed is d's release channel rc, or nil.
func channelNamed(d *engine.Desired, rc string) *engine.Channel {
	for i := range d.Channels {
		if d.Channels[i].Name == rc {
			return &d.Channels[i]
		}
	}
	return nil
}
