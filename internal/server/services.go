package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	apiv1 "github.com/drover-dev/drover/api/v1"
	"github.com/drover-dev/drover/internal/compiler"
	ds "github.com/drover-dev/drover/internal/desiredstate"
	"github.com/drover-dev/drover/internal/engine"
	"github.com/drover-dev/drover/internal/store"
)

// push compiles the service's latest config with the request's parameters
// and makes the result the service's desired state, replacing the previous one.
// compilePush compiles the service's stored configs with the parameters
// of a push, as a push (or a preview of one) does.
func (s *Server) compilePush(ctx context.Context, app, svc string, req apiv1.PushRequest) (compiler.Input, int64, *compiler.Result, *ds.Compiled, error) {
	in, configVersion, err := s.compileInput(ctx, app, svc)
	if err != nil {
		return in, 0, nil, nil, err
	}
	for _, p := range req.Params {
		if p.Name == "" {
			return in, 0, nil, nil, errorf(apiv1.CodeInvalidArgument, "parameter without a name")
		}
		in.Params = append(in.Params, compiler.ParamValue{Name: p.Name, Value: p.Value, ReleaseChannel: p.ReleaseChannel})
	}
	res, err := compiler.CompileContext(ctx, in)
	if err != nil {
		var cerrs compiler.Errors
		if errors.As(err, &cerrs) {
			details := make([]apiv1.ConfigError, len(cerrs))
			for i, e := range cerrs {
				details[i] = apiv1.ConfigError{File: e.File, Line: e.Line, Field: e.Field, Message: e.Error()}
			}
			return in, 0, nil, nil, &validationError{details: details}
		}
		return in, 0, nil, nil, err
	}
	form, err := res.Engine()
	if err != nil {
		return in, 0, nil, nil, err
	}
	// Stored secrets referenced (secret{key, version}) become raw secrets
	// here, before the engine form is stored (secretref.go).
	if err := s.resolveSecrets(ctx, in, res, form); err != nil {
		return in, 0, nil, nil, err
	}
	return in, configVersion, res, form, nil
}

func (s *Server) push(ctx context.Context, app, svc string, req apiv1.PushRequest) (*apiv1.PushResponse, error) {
	user, err := requestUser(ctx, req.User)
	if err != nil {
		return nil, err
	}
	req.User = user
	in, configVersion, res, form, err := s.compilePush(ctx, app, svc, req)
	if err != nil {
		return nil, err
	}
	return s.storePush(ctx, compiledPush{app: app, svc: svc, req: req, in: in, configVersion: configVersion, res: res, form: form, id: newID("ds", s.now())})
}

// compiledPush is a push compiled and not yet stored: its service, request,
// compiler input and result, and the id its desired state gets.
type compiledPush struct {
	app, svc      string
	req           apiv1.PushRequest
	in            compiler.Input
	configVersion int64
	res           *compiler.Result
	form          *ds.Compiled
	id            string
	// release names the release it is one of ("" for a push of its own).
	release string
}

// storePush stores a compiled push as the service's desired state, replacing
// the previous one, with its event (and the request's audit record).
func (s *Server) storePush(ctx context.Context, cp compiledPush) (*apiv1.PushResponse, error) {
	app, svc, req, res := cp.app, cp.svc, cp.req, cp.res
	compiled, err := ds.Encode(cp.form)
	if err != nil {
		return nil, err
	}
	params, err := json.Marshal(redactParams(cp.in, req.Params))
	if err != nil {
		return nil, err
	}
	defer s.pushMu.lock(app + "/" + svc)()
	now := s.now()
	rec := store.DesiredState{
		ID: cp.id, Application: app, Service: svc, Version: res.BundleVersion,
		ConfigVersion: cp.configVersion, Compiled: compiled, Params: params, CreatedBy: req.User, CreatedAt: now,
	}
	if cp.in.Service.Train() && !req.Immediate {
		busy, err := s.trainBusy(ctx, app, svc)
		if err != nil {
			return nil, err
		}
		if busy {
			what := ds.VersionLabel(res.BundleVersion, res.DisplayName)
			if cp.release != "" {
				what += " in release " + cp.release
			}
			if err := s.queue(ctx, rec, fmt.Sprintf("pushed %s (desired state %s)", what, rec.ID), cp.release); err != nil {
				return nil, err
			}
			s.changed.notify()
			return &apiv1.PushResponse{DesiredStateID: rec.ID, BundleVersion: res.BundleVersion, BundleName: res.BundleName, Queued: true}, nil
		}
	}
	replaced := ""
	if prev, err := s.store.ActiveDesiredState(ctx, app, svc); err == nil {
		replaced = prev.ID
	} else if !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	msg := fmt.Sprintf("pushed %s (desired state %s)", res.BundleVersion, rec.ID)
	if res.DisplayName != "" {
		msg = fmt.Sprintf("pushed %s (desired state %s)", ds.VersionLabel(res.BundleVersion, res.DisplayName), rec.ID)
	}
	if cp.release != "" {
		msg += " in release " + cp.release
	}
	if replaced != "" {
		msg += ", replacing " + replaced
	}
	ev := store.Event{Time: now, Application: app, Service: svc, DesiredStateID: rec.ID, Type: ds.EventPushed, Actor: req.User, Message: msg}
	if audit, ok := auditOK(ctx); ok && cp.release == "" {
		// The push and its audit record are written together: one
		// durable commit rather than two in a row.
		if _, err := s.store.PushDesiredState(ctx, rec, audit, ev); err != nil {
			return nil, err
		}
		auditWritten(ctx)
	} else if err := s.store.CreateDesiredState(ctx, rec, ev); err != nil {
		return nil, err
	}
	s.engine.Enqueue(app, svc)
	s.changed.notify()
	return &apiv1.PushResponse{DesiredStateID: rec.ID, BundleVersion: res.BundleVersion, BundleName: res.BundleName, Replaced: replaced}, nil
}

// redactedValue stands for a secret's value wherever it would be shown.
const redactedValue = "(redacted)"

// redactParams keeps parameter values for the record, minus secrets.
func redactParams(in compiler.Input, params []apiv1.Param) []apiv1.Param {
	out := make([]apiv1.Param, len(params))
	for i, p := range params {
		for _, def := range in.Service.Parameters {
			if def.Name == p.Name && def.Secret != nil {
				p.Value = redactedValue
			}
		}
		out[i] = p
	}
	return out
}

// status builds the service status from the active desired state and instances.
func (s *Server) status(ctx context.Context, app, svc string) (*apiv1.ServiceStatus, error) {
	rec, err := s.store.ActiveDesiredState(ctx, app, svc)
	if errors.Is(err, store.ErrNotFound) {
		if _, cerr := s.store.GetConfig(ctx, "service", app+"/"+svc); cerr == nil {
			return nil, errorf(apiv1.CodeNotFound, "service %s of %s has not been pushed yet: drover push %s --app %s", svc, app, svc, app)
		}
		return nil, errorf(apiv1.CodeNotFound, "no service %q in application %q", svc, app)
	}
	if err != nil {
		return nil, err
	}
	st, err := s.statusOf(ctx, rec)
	if err != nil {
		return nil, err
	}
	if st.Queued, err = s.queuedStatus(ctx, app, svc); err != nil {
		return nil, err
	}
	return st, nil
}

func (s *Server) statusOf(ctx context.Context, rec store.DesiredState) (*apiv1.ServiceStatus, error) {
	return s.statusDetail(ctx, rec, true)
}

// statusDetail builds a service's status; detail adds the runtime objects.
func (s *Server) statusDetail(ctx context.Context, rec store.DesiredState, detail bool) (*apiv1.ServiceStatus, error) {
	list, err := s.store.ListInstances(ctx, rec.Application, rec.Service)
	if err != nil {
		return nil, err
	}
	obs, err := s.store.ListObservations(ctx, rec.Application, rec.Service)
	if err != nil {
		return nil, err
	}
	return s.buildStatus(ctx, rec, list, obs, detail)
}

// buildStatus builds a service's status from its active desired state, its
// instances and the engine's observations of them (approvals are read when
// a channel has gates).
func (s *Server) buildStatus(ctx context.Context, rec store.DesiredState, list []store.Instance, obs []store.Observation, detail bool) (*apiv1.ServiceStatus, error) {
	d, err := s.states.Decode(ctx, rec)
	if errors.Is(err, engine.ErrUndecodable) && len(list) > 0 {
		// The engine cannot decode it either, and says so on the
		// instances (ENGINE_ERROR): show them as they are.
		s.log.Warn("status: decode desired state", "desired_state", rec.ID, "error", err)
		return instancesStatus(rec, list), nil
	}
	if err != nil {
		return nil, err
	}
	var approvals []store.Approval
	if slices.ContainsFunc(d.Channels, func(c engine.Channel) bool { return len(c.Approvals) > 0 || len(c.Checks) > 0 || c.EveryAction }) {
		if approvals, err = s.store.ListApprovals(ctx, rec.ID); err != nil {
			return nil, err
		}
		if approvals, err = engine.SharedApprovals(ctx, s.store, d, approvals); err != nil {
			return nil, err
		}
	}
	observed := make(map[string]store.Observation, len(obs))
	for _, o := range obs {
		observed[o.ReleaseChannel] = o
	}
	insts := map[string]store.Instance{}
	for _, i := range list {
		insts[i.ReleaseChannel] = i
	}
	out := &apiv1.ServiceStatus{Application: rec.Application, Service: rec.Service, DesiredStateID: rec.ID, DesiredVersion: rec.Version, ReleaseChannels: []apiv1.ChannelStatus{},
		DisplayName: d.DisplayName}
	var was func(string) []apiv1.Param // previews' parameters before, read once per state
	for _, ch := range d.Channels {
		inst, ok := insts[ch.Name]
		cs := apiv1.ChannelStatus{Name: ch.Name, DesiredVersion: ch.Version, Runtime: ch.Runtime, Status: string(ds.StatusPending), Message: "waiting for the engine",
			Group: ch.Group, DependsOn: ch.DependsOn, DesiredDisplayName: ch.DisplayName}
		for _, d := range ch.Services {
			cs.ServiceDependsOn = append(cs.ServiceDependsOn, apiv1.ServiceDependency{Service: d.Service, ReleaseChannel: d.ReleaseChannel})
		}
		if ok {
			cs.Status, cs.Reason, cs.Message = string(inst.Status), string(inst.Reason), inst.Message
			cs.Version, cs.TargetVersion, cs.Paused, cs.UpdatedAt = inst.CurrentVersion, inst.TargetVersion, inst.Paused, inst.UpdatedAt
			cs.DisplayName = s.channelVersionName(ctx, ch, inst.CurrentStateID, inst.CurrentVersion)
			cs.TargetDisplayName = s.channelVersionName(ctx, ch, inst.TargetStateID, inst.TargetVersion)
			if inst.DesiredStateID != rec.ID {
				cs.Status, cs.Reason, cs.Message = string(ds.StatusPending), "", "new desired state not yet planned"
			}
		}
		gates := ch.Approvals
		if ok && inst.ActionPending && inst.DesiredStateID == rec.ID {
			// An everyAction channel waits for an approval of the apply
			// that heals drift: a gate of its own, approved by its topic.
			gates = append(slices.Clip(gates), ds.Approval{Topic: engine.ActionTopic(ch.Name, inst.ActionSeq), Description: "apply after drift", MinApprovers: 1})
		}
		for _, g := range gates {
			as := apiv1.ApprovalStatus{Topic: g.Topic, Description: g.Description, MinApprovers: g.MinApprovers}
			for _, a := range approvals {
				if a.Topic != g.Topic || a.ReleaseChannel != ch.Name || !g.Shared && a.DesiredStateID != rec.ID {
					continue
				}
				if a.Reject {
					as.RejectedBy = a.User
				} else if !slices.Contains(as.ApprovedBy, a.User) {
					as.ApprovedBy = append(as.ApprovedBy, a.User)
				}
			}
			cs.Approvals = append(cs.Approvals, as)
		}
		if len(ch.Checks) > 0 && (!ok || inst.DesiredStateID == rec.ID) {
			for _, r := range engine.CheckReports(ch, inst, list, approvals, s.now()) {
				cs.Checks = append(cs.Checks, apiv1.CheckStatus{Kind: string(r.Check.Kind), Name: r.Check.Name, Attachment: r.Check.Attachment,
					Phase: r.Check.Lifecycle, State: r.State, Message: r.Message, NextChange: r.NextChange, BypassedBy: r.BypassedBy,
					LastRun: r.LastRun, Runs: r.Runs})
			}
		}
		if ok && detail && inst.DesiredStateID == rec.ID && len(ch.Services) > 0 &&
			(inst.Reason == ds.ReasonServiceDependencyUnmet || inst.Reason == ds.ReasonReleaseChannelDependencyUnmet) {
			if cs.BlockedBy, err = s.blockingChain(ctx, rec.Application, d.Release, ch); err != nil {
				return nil, err
			}
		}
		if ok && detail && inst.Status == ds.StatusWaitingManualApproval && inst.DesiredStateID == rec.ID {
			// What approving it would roll out there.
			if was == nil {
				was = s.paramsOf(ctx)
			}
			p := s.channelPreview(ctx, rec.Application, ch, inst, observed[ch.Name], decodeParams(rec.Params), was)
			cs.Preview = &p
		}
		if o, seen := observed[ch.Name]; seen {
			cs.Info = infoOf(o)
			cs.ObservedAt, cs.ObserveError = o.Since, o.Error
			if ok && detail && o.DesiredStateID == inst.TargetStateID && o.TargetVersion == inst.TargetVersion {
				cs.Objects = objectsOf(o)
			}
		}
		out.ReleaseChannels = append(out.ReleaseChannels, cs)
	}
	out.Status = aggregate(out.ReleaseChannels)
	return out, nil
}

// instancesStatus is a service's status from its instances alone, as they
// are stored, for a desired state that does not decode: the engine shows
// why on each (ENGINE_ERROR), and what it planned last.
func instancesStatus(rec store.DesiredState, list []store.Instance) *apiv1.ServiceStatus {
	out := &apiv1.ServiceStatus{Application: rec.Application, Service: rec.Service, DesiredStateID: rec.ID, DesiredVersion: rec.Version,
		ReleaseChannels: make([]apiv1.ChannelStatus, 0, len(list))}
	for _, inst := range list {
		cs := apiv1.ChannelStatus{Name: inst.ReleaseChannel, Status: string(inst.Status), Reason: string(inst.Reason), Message: inst.Message,
			Version: inst.CurrentVersion, DesiredVersion: inst.DesiredVersion, TargetVersion: inst.TargetVersion, Paused: inst.Paused, UpdatedAt: inst.UpdatedAt}
		if inst.DesiredStateID != rec.ID && inst.Reason != ds.ReasonEngineError {
			cs.Status, cs.Reason, cs.Message = string(ds.StatusPending), "", "new desired state not yet planned"
		}
		out.ReleaseChannels = append(out.ReleaseChannels, cs)
	}
	out.Status = aggregate(out.ReleaseChannels)
	return out
}

// aggregate summarizes channel statuses into the service's status.
func aggregate(chs []apiv1.ChannelStatus) string {
	has := map[ds.Status]bool{}
	for _, c := range chs {
		has[ds.Status(c.Status)] = true
	}
	all := func(set ...ds.Status) bool {
		for _, c := range chs {
			if !slices.Contains(set, ds.Status(c.Status)) {
				return false
			}
		}
		return len(chs) > 0
	}
	switch {
	case has[ds.StatusFailed] || has[ds.StatusFailedRollback]:
		return string(ds.StatusFailed)
	case has[ds.StatusRollingBack]:
		return string(ds.StatusRollingBack)
	case all(ds.StatusConverged):
		return string(ds.StatusConverged)
	case has[ds.StatusRolledBack]:
		// A rolled-back channel stays put until the next push, and the
		// channels after it wait for it: this push is over.
		return string(ds.StatusRolledBack)
	case has[ds.StatusPaused]:
		return string(ds.StatusPaused)
	case has[ds.StatusConverging] || has[ds.StatusPending]:
		return string(ds.StatusConverging)
	case has[ds.StatusWaitingManualApproval]:
		return string(ds.StatusWaitingManualApproval)
	case has[ds.StatusBlocked]:
		// A gate (a deploy window, a protection) holds a channel.
		return string(ds.StatusBlocked)
	case has[ds.StatusWaitingPreconditions]:
		return string(ds.StatusWaitingPreconditions)
	}
	return string(ds.StatusConverging)
}

// listSpan is how many services listServices reads at a time (a test
// makes it smaller).
var listSpan = 256

// listServices passes the status of every service to emit, in the order of
// application and service. It reads them listSpan services at a time (two
// queries for each span, not two per service), so the list of ten thousand
// services is never whole in memory.
func (s *Server) listServices(ctx context.Context, emit func(*apiv1.ServiceStatus) error) error {
	return s.listServicesAs(ctx, false, emit)
}

// listServicesAs is listServices; brief statuses are built from the
// instances' briefs alone (briefStatus), without decoding desired states,
// reading observations or the instances' other columns: what a summary
// needs, at a fraction of the cost.
func (s *Server) listServicesAs(ctx context.Context, brief bool, emit func(*apiv1.ServiceStatus) error) error {
	recs, err := s.store.ListActiveDesiredStates(ctx)
	if err != nil {
		return err
	}
	for len(recs) > 0 {
		part := recs[:min(listSpan, len(recs))]
		recs = recs[len(part):]
		// Instances and observations come ordered by application and
		// service, like recs.
		span := store.ServiceSpan{First: store.ServiceRef{Application: part[0].Application, Service: part[0].Service},
			Last: store.ServiceRef{Application: part[len(part)-1].Application, Service: part[len(part)-1].Service}}
		var (
			insts  []store.Instance
			briefs []store.InstanceBrief
			obs    []store.Observation
		)
		if brief {
			briefs, err = s.store.ListInstanceBriefs(ctx, span)
		} else if insts, err = s.store.ListInstancesIn(ctx, span); err == nil {
			obs, err = s.store.ListObservationsIn(ctx, span)
		}
		if err != nil {
			return err
		}
		for _, rec := range part {
			if !visible(ctx, rec.Application) {
				continue
			}
			var st *apiv1.ServiceStatus
			if brief {
				var mine []store.InstanceBrief
				briefs, mine = takeService(briefs, rec.Application, rec.Service, func(i store.InstanceBrief) (string, string) { return i.Application, i.Service })
				st = s.briefStatus(rec, mine)
			} else {
				var (
					mine []store.Instance
					seen []store.Observation
				)
				insts, mine = takeService(insts, rec.Application, rec.Service, func(i store.Instance) (string, string) { return i.Application, i.Service })
				obs, seen = takeService(obs, rec.Application, rec.Service, func(o store.Observation) (string, string) { return o.Application, o.Service })
				if st, err = s.buildStatus(ctx, rec, mine, seen, false); err != nil {
					return err
				}
			}
			if err := emit(st); err != nil {
				return err
			}
		}
	}
	return nil
}

// briefStatus is a service's status from its instances alone: each
// channel the engine has planned, by its instance (pending while it still
// follows another desired state), and the service's aggregate. Channels
// not planned yet (a push's first moments) are not listed.
func (s *Server) briefStatus(rec store.DesiredState, insts []store.InstanceBrief) *apiv1.ServiceStatus {
	out := &apiv1.ServiceStatus{Application: rec.Application, Service: rec.Service, DesiredStateID: rec.ID, DesiredVersion: rec.Version,
		ReleaseChannels: make([]apiv1.ChannelStatus, 0, len(insts))}
	// Display names come from the active desired state when it is decoded
	// already (the engine keeps active ones at hand); a summary loads none.
	d := s.states.Cached(rec.ID)
	if d != nil {
		out.DisplayName = d.DisplayName
	}
	for _, inst := range insts {
		cs := apiv1.ChannelStatus{Name: inst.ReleaseChannel, Status: string(inst.Status), Version: inst.CurrentVersion}
		if d != nil {
			if ch := channelNamed(d, inst.ReleaseChannel); ch != nil && ch.Version == inst.CurrentVersion {
				cs.DisplayName = ch.DisplayName
			}
		}
		if inst.DesiredStateID != rec.ID {
			cs.Status = string(ds.StatusPending)
		}
		out.ReleaseChannels = append(out.ReleaseChannels, cs)
	}
	out.Status = aggregate(out.ReleaseChannels)
	return out
}

// takeService splits the leading records of list, sorted by application and
// service, that belong to app/svc from the rest; records of services before
// it (without an active desired state) are dropped.
func takeService[T any](list []T, app, svc string, key func(T) (string, string)) (rest, mine []T) {
	for len(list) > 0 {
		a, s := key(list[0])
		if a > app || (a == app && s >= svc) {
			break
		}
		list = list[1:]
	}
	n := 0
	for n < len(list) {
		if a, s := key(list[n]); a != app || s != svc {
			break
		}
		n++
	}
	return list[n:], list[:n]
}

// channelOf returns the active desired state, its decoded form and the channel.
func (s *Server) channelOf(ctx context.Context, app, svc, rc string) (store.DesiredState, *engine.Desired, *engine.Channel, error) {
	rec, err := s.store.ActiveDesiredState(ctx, app, svc)
	if errors.Is(err, store.ErrNotFound) {
		return rec, nil, nil, errorf(apiv1.CodeNotFound, "service %s of %s has no desired state (push it first)", svc, app)
	}
	if err != nil {
		return rec, nil, nil, err
	}
	d, err := s.states.Decode(ctx, rec)
	if err != nil {
		return rec, nil, nil, err
	}
	if rc == "" {
		return rec, d, nil, nil
	}
	for i := range d.Channels {
		if d.Channels[i].Name == rc {
			return rec, d, &d.Channels[i], nil
		}
	}
	var names []string
	for _, c := range d.Channels {
		names = append(names, c.Name)
	}
	return rec, d, nil, errorf(apiv1.CodeNotFound, "service %s has no release channel %q (release channels: %v)", svc, rc, names)
}

// instanceAction applies one of the engine's request rules (pause, resume,
// rollback) to the selected channels, retrying on concurrent engine writes.
func (s *Server) instanceAction(ctx context.Context, app, svc string, req apiv1.ChannelRequest, act func(store.Instance) (store.Instance, store.Event, bool, error)) (*apiv1.ServiceStatus, error) {
	rec, d, ch, err := s.channelOf(ctx, app, svc, req.ReleaseChannel)
	if err != nil {
		return nil, err
	}
	var names []string
	if ch != nil {
		names = []string{ch.Name}
	} else {
		for _, c := range d.Channels {
			names = append(names, c.Name)
		}
	}
	for attempt := 0; ; attempt++ {
		b := &store.Batch{}
		var errs []error
		for _, rc := range names {
			inst, err := s.store.GetInstance(ctx, app, svc, rc)
			if errors.Is(err, store.ErrNotFound) {
				inst = store.Instance{Application: app, Service: svc, ReleaseChannel: rc, DesiredStateID: rec.ID, Status: ds.StatusPending}
			} else if err != nil {
				return nil, err
			}
			next, ev, changed, err := act(inst)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if changed {
				b.Instances = append(b.Instances, next)
				b.Events = append(b.Events, ev)
			}
		}
		if len(b.Instances) == 0 && len(errs) > 0 {
			return nil, statusError(apiv1.CodeFailedPrecondition, errors.Join(errs...))
		}
		err := s.store.Write(ctx, b)
		if errors.Is(err, store.ErrConflict) && attempt < 10 {
			continue
		}
		if err != nil {
			return nil, err
		}
		break
	}
	s.engine.Enqueue(app, svc)
	s.changed.notify()
	return s.statusOf(ctx, rec)
}

func (s *Server) events(ctx context.Context, f store.EventFilter) (*apiv1.EventList, error) {
	evs, err := s.store.ListEvents(ctx, f)
	if err != nil {
		return nil, err
	}
	if len(evs) == 0 {
		// No history: tell an unknown service from one that has none yet.
		if _, err := s.store.GetConfig(ctx, "service", f.Application+"/"+f.Service); errors.Is(err, store.ErrNotFound) {
			return nil, errorf(apiv1.CodeNotFound, "no service %q in application %q", f.Service, f.Application)
		} else if err != nil {
			return nil, err
		}
	}
	out := &apiv1.EventList{Events: make([]apiv1.Event, len(evs))}
	for i, e := range evs {
		out.Events[i] = toAPIEvent(e)
	}
	return out, nil
}

func toAPIEvent(e store.Event) apiv1.Event {
	return apiv1.Event{Seq: e.Seq, Time: e.Time, Application: e.Application, Service: e.Service, ReleaseChannel: e.ReleaseChannel,
		DesiredStateID: e.DesiredStateID, Type: string(e.Type), Actor: e.Actor, Message: e.Message}
}
