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

	apiv1 "github.com/drover-dev/drover/api/v1"
	ds "github.com/drover-dev/drover/internal/desiredstate"
	"github.com/drover-dev/drover/internal/engine"
	"github.com/drover-dev/drover/internal/store"
)

// Releases (drover release create): one push of several services of an
// application. Each service gets a desired state of its own, as a push
// would, that names the release and every service of it (ds.Release), so
// the engine holds a service waiting for another of the release until that
// one runs the release's version, and counts a sharedManualApproval given
// on any of them for all. The release itself is a record in the config
// store (kind release, named APP/ID), as freezes are; its status is read
// off its desired states and their instances, never stored twice.

// Release statuses (reference.md §4.9).
const (
	releasePending    = "PENDING"
	releaseInProgress = "IN_PROGRESS"
	releaseSucceeded  = "SUCCEEDED"
	releaseFailed     = "FAILED"
	releaseSkipped    = "SKIPPED"
)

// releaseMax bounds the services of one release.
const releaseMax = 500

// createRelease compiles every service of the request and, unless it is a
// dry run, stores the release and pushes each service. Nothing is pushed
// when one of them does not compile.
func (s *Server) createRelease(ctx context.Context, app string, req apiv1.ReleaseRequest) (*apiv1.Release, error) {
	user, err := requestUser(ctx, req.User)
	if err != nil {
		return nil, err
	}
	switch {
	case len(req.Services) == 0:
		return nil, errorf(apiv1.CodeInvalidArgument, "a release needs at least one service")
	case len(req.Services) > releaseMax:
		return nil, errorf(apiv1.CodeInvalidArgument, "a release may hold at most %d services, not %d", releaseMax, len(req.Services))
	}
	now := s.now()
	rel := &ds.Release{ID: newID("rel", now), Application: app, CreatedBy: user, CreatedAt: now}
	pushes := make([]compiledPush, 0, len(req.Services))
	seen := map[string]bool{}
	for i, rs := range req.Services {
		switch {
		case rs.Service == "":
			return nil, errorf(apiv1.CodeInvalidArgument, "services[%d]: service is required", i)
		case seen[rs.Service]:
			return nil, errorf(apiv1.CodeInvalidArgument, "services[%d]: service %s is listed twice", i, rs.Service)
		}
		seen[rs.Service] = true
		preq := apiv1.PushRequest{Params: rs.Params, User: user, Immediate: req.Immediate}
		in, configVersion, res, form, err := s.compilePush(ctx, app, rs.Service, preq)
		if err != nil {
			return nil, fmt.Errorf("service %s: %w", rs.Service, err)
		}
		cp := compiledPush{app: app, svc: rs.Service, req: preq, in: in, configVersion: configVersion, res: res, form: form,
			id: newID("ds", now), release: rel.ID}
		pushes = append(pushes, cp)
		rel.Services = append(rel.Services, ds.ReleaseService{Service: rs.Service, DesiredStateID: cp.id, Version: res.BundleVersion, DisplayName: res.DisplayName})
	}
	for i := range pushes {
		pushes[i].form.Release = rel
	}
	channels := map[string][]ds.Channel{}
	for _, cp := range pushes {
		channels[cp.svc] = cp.form.Channels
	}
	order := releaseOrder(rel, channels)
	if req.DryRun {
		out := apiv1.Release{Application: app, Status: releasePending, CreatedBy: user, ReleaseChannels: []apiv1.ReleaseChannelState{}, Order: order}
		for _, m := range rel.Services {
			out.Services = append(out.Services, apiv1.ReleaseService{Service: m.Service, Version: m.Version, DisplayName: m.DisplayName, Status: releasePending})
		}
		return &out, nil
	}
	body, err := json.Marshal(rel)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(body)
	if _, err := s.store.PutConfigs(ctx, []store.ConfigObject{{Kind: ds.ReleaseKind, Name: app + "/" + rel.ID, Body: body, Hash: hex.EncodeToString(sum[:])}},
		func(store.ConfigObject) store.Event {
			return store.Event{Time: now, Application: app, Type: ds.EventPushed, Actor: user,
				Message: fmt.Sprintf("release %s created: %s", rel.ID, releaseSummary(rel))}
		}); err != nil {
		return nil, err
	}
	for _, cp := range pushes {
		if _, err := s.storePush(ctx, cp); err != nil {
			return nil, fmt.Errorf("release %s: push %s: %w (the services before it are pushed; drover release get %s --app %s shows where it stands)", rel.ID, cp.svc, err, rel.ID, app)
		}
	}
	out := s.releaseStatus(ctx, rel, false)
	if out.Err != nil {
		return nil, out.Err
	}
	out.Order = order
	return &out.Release, nil
}

// releaseSummary lists a release's services and versions for its event.
func releaseSummary(rel *ds.Release) string {
	parts := make([]string, len(rel.Services))
	for i, m := range rel.Services {
		parts[i] = m.Service + " " + ds.VersionLabel(m.Version, m.DisplayName)
	}
	return strings.Join(parts, ", ")
}

// releaseOrder is the order a release takes: each (service, channel) after
// the channels it waits for (releaseChannelStable) and the services of the
// release it waits for (service.dependsOn), in steps of those that may
// start together.
func releaseOrder(rel *ds.Release, bySvc map[string][]ds.Channel) []apiv1.ReleaseStep {
	type node struct{ svc, rc string }
	in := map[string]bool{}
	for _, m := range rel.Services {
		in[m.Service] = true
	}
	deps := map[node][]node{}
	var nodes []node
	var channels []string
	for _, m := range rel.Services {
		for _, ch := range bySvc[m.Service] {
			n := node{m.Service, ch.Name}
			nodes = append(nodes, n)
			if !slices.Contains(channels, ch.Name) {
				channels = append(channels, ch.Name)
			}
			for _, d := range ch.DependsOn {
				deps[n] = append(deps[n], node{m.Service, d})
			}
			for _, d := range ch.Services {
				if in[d.Service] {
					deps[n] = append(deps[n], node{d.Service, d.ReleaseChannel})
				}
			}
		}
	}
	level := map[node]int{}
	var depth func(n node, seen int) int
	depth = func(n node, seen int) int {
		if l, ok := level[n]; ok {
			return l
		}
		l := 0
		if seen < len(nodes) { // validate refuses cycles; a bound all the same
			for _, d := range deps[n] {
				l = max(l, depth(d, seen+1)+1)
			}
		}
		level[n] = l
		return l
	}
	for _, n := range nodes {
		depth(n, 0)
	}
	slices.SortStableFunc(nodes, func(a, b node) int {
		return cmp.Or(cmp.Compare(level[a], level[b]), cmp.Compare(slices.Index(channels, a.rc), slices.Index(channels, b.rc)), cmp.Compare(a.svc, b.svc))
	})
	var out []apiv1.ReleaseStep
	for i, n := range nodes {
		if i > 0 && level[nodes[i-1]] == level[n] && nodes[i-1].rc == n.rc {
			out[len(out)-1].Services = append(out[len(out)-1].Services, n.svc)
			continue
		}
		out = append(out, apiv1.ReleaseStep{ReleaseChannel: n.rc, Services: []string{n.svc}})
	}
	return out
}

// readRelease reads release id of app, or answers not found.
func (s *Server) readRelease(ctx context.Context, app, id string) (*ds.Release, error) {
	obj, err := s.store.GetConfig(ctx, ds.ReleaseKind, app+"/"+id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, errorf(apiv1.CodeNotFound, "application %s has no release %q: drover release list --app %s lists them", app, id, app)
	}
	if err != nil {
		return nil, err
	}
	var rel ds.Release
	if err := json.Unmarshal(obj.Body, &rel); err != nil {
		return nil, fmt.Errorf("release %s: %w", id, err)
	}
	return &rel, nil
}

// getRelease answers a release with each service's channels and the
// release's events.
func (s *Server) getRelease(ctx context.Context, app, id string) (*apiv1.Release, error) {
	rel, err := s.readRelease(ctx, app, id)
	if err != nil {
		return nil, err
	}
	out := s.releaseStatus(ctx, rel, true)
	if out.Err != nil {
		return nil, out.Err
	}
	channels := map[string][]ds.Channel{}
	for _, m := range rel.Services {
		rec, err := s.store.GetDesiredState(ctx, m.DesiredStateID)
		if err != nil {
			continue // pruned or gone: the order leaves the service out
		}
		if d, err := s.states.Decode(ctx, rec); err == nil {
			for _, ch := range d.Channels {
				channels[m.Service] = append(channels[m.Service], ch.Channel)
			}
		}
	}
	out.Order = releaseOrder(rel, channels)
	members := map[string]bool{}
	for _, m := range rel.Services {
		members[m.DesiredStateID] = true
		evs, err := s.store.ListEvents(ctx, store.EventFilter{Application: app, Service: m.Service})
		if err != nil {
			return nil, err
		}
		for _, e := range evs {
			if members[e.DesiredStateID] {
				out.Events = append(out.Events, toAPIEvent(e))
			}
		}
	}
	slices.SortStableFunc(out.Events, func(a, b apiv1.Event) int { return cmp.Compare(a.Seq, b.Seq) })
	return &out.Release, nil
}

// listReleases answers an application's releases, newest first.
func (s *Server) listReleases(ctx context.Context, app string) (*apiv1.ReleaseList, error) {
	objs, err := s.store.ListConfigs(ctx, ds.ReleaseKind)
	if err != nil {
		return nil, err
	}
	out := &apiv1.ReleaseList{Releases: []apiv1.Release{}}
	for _, obj := range objs {
		if !strings.HasPrefix(obj.Name, app+"/") {
			continue
		}
		var rel ds.Release
		if err := json.Unmarshal(obj.Body, &rel); err != nil {
			return nil, fmt.Errorf("release %s: %w", obj.Name, err)
		}
		st := s.releaseStatus(ctx, &rel, false)
		if st.Err != nil {
			return nil, st.Err
		}
		out.Releases = append(out.Releases, st.Release)
	}
	slices.SortStableFunc(out.Releases, func(a, b apiv1.Release) int { return b.CreatedAt.Compare(a.CreatedAt) })
	return out, nil
}

// releaseState is a release's status, or why it could not be read.
type releaseState struct {
	apiv1.Release
	Err error `json:"-"`
}

// releaseStatus reads where a release stands from its desired states and
// their instances; detail adds each service's channels.
func (s *Server) releaseStatus(ctx context.Context, rel *ds.Release, detail bool) releaseState {
	out := releaseState{Release: apiv1.Release{ID: rel.ID, Application: rel.Application, CreatedBy: rel.CreatedBy, CreatedAt: rel.CreatedAt,
		ReleaseChannels: []apiv1.ReleaseChannelState{}, Services: make([]apiv1.ReleaseService, 0, len(rel.Services))}}
	byChannel := map[string][]string{}
	var channels []string
	for _, m := range rel.Services {
		rs := apiv1.ReleaseService{Service: m.Service, DesiredStateID: m.DesiredStateID, Version: m.Version, DisplayName: m.DisplayName}
		active, err := s.store.ActiveDesiredState(ctx, rel.Application, m.Service)
		switch {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			out.Err = err
			return out
		}
		list, err := s.store.ListInstances(ctx, rel.Application, m.Service)
		if err != nil {
			out.Err = err
			return out
		}
		// A member still queued in its service's release train has no
		// desired state yet: it is pending everywhere.
		_, err = s.store.GetDesiredState(ctx, m.DesiredStateID)
		queued := errors.Is(err, store.ErrNotFound)
		if err != nil && !queued {
			out.Err = err
			return out
		}
		if queued && s.supersededInTrain(ctx, rel.Application, m) {
			rs.Status = releaseSkipped
			out.Services = append(out.Services, rs)
			continue
		}
		var mine []string
		for _, inst := range list {
			st := memberChannelStatus(m, active.ID == m.DesiredStateID, inst)
			if queued {
				st = releasePending
			}
			if !slices.Contains(channels, inst.ReleaseChannel) {
				channels = append(channels, inst.ReleaseChannel)
			}
			byChannel[inst.ReleaseChannel] = append(byChannel[inst.ReleaseChannel], st)
			mine = append(mine, st)
		}
		if len(mine) == 0 {
			mine = []string{releasePending}
			if active.ID != "" && active.ID != m.DesiredStateID && !queued {
				mine = []string{releaseSkipped}
			}
		}
		rs.Status = combineRelease(mine)
		if detail && active.ID == m.DesiredStateID {
			st, err := s.statusOf(ctx, active)
			if err != nil {
				out.Err = err
				return out
			}
			rs.ReleaseChannels = st.ReleaseChannels
		}
		out.Services = append(out.Services, rs)
	}
	// The application's order of channels: the first member's desired
	// state's, else the order the instances came in.
	if len(rel.Services) > 0 {
		if rec, err := s.store.GetDesiredState(ctx, rel.Services[0].DesiredStateID); err == nil {
			if d, err := s.states.Decode(ctx, rec); err == nil {
				order := make([]string, 0, len(d.Channels))
				for _, ch := range d.Channels {
					order = append(order, ch.Name)
				}
				slices.SortStableFunc(channels, func(a, b string) int { return cmp.Compare(indexOr(order, a), indexOr(order, b)) })
			}
		}
	}
	var all []string
	for _, rc := range channels {
		st := combineRelease(byChannel[rc])
		out.ReleaseChannels = append(out.ReleaseChannels, apiv1.ReleaseChannelState{Name: rc, Status: st})
		all = append(all, st)
	}
	if len(all) == 0 {
		all = []string{releasePending}
	}
	svcs := make([]string, len(out.Services))
	for i, rs := range out.Services {
		svcs[i] = rs.Status
	}
	if !slices.ContainsFunc(svcs, func(st string) bool { return st != releaseSkipped }) {
		out.Status = releaseSkipped
	} else {
		out.Status = combineRelease(all)
	}
	return out
}

// indexOr is the index of s in list, or len(list) when it is not there.
func indexOr(list []string, s string) int {
	if i := slices.Index(list, s); i >= 0 {
		return i
	}
	return len(list)
}

// memberChannelStatus is where one service of a release stands in one
// release channel.
func memberChannelStatus(m ds.ReleaseService, active bool, inst store.Instance) string {
	switch {
	case inst.CurrentVersion == m.Version && inst.Status == ds.StatusConverged:
		return releaseSucceeded
	case !active:
		// A later push of the service replaced the release's.
		return releaseSkipped
	case inst.DesiredStateID != m.DesiredStateID:
		return releasePending
	}
	switch inst.Status {
	case ds.StatusFailed, ds.StatusRollingBack, ds.StatusRolledBack, ds.StatusFailedRollback:
		return releaseFailed
	default:
		// On its way, or waiting: the target says whether it started.
	}
	if inst.TargetVersion == m.Version {
		return releaseInProgress
	}
	return releasePending
}

// combineRelease is the status of a set of statuses: FAILED if one
// failed; SUCCEEDED once each succeeded or was skipped; SKIPPED if all were
// skipped; IN_PROGRESS once one started; else PENDING.
func combineRelease(sts []string) string {
	has := map[string]int{}
	for _, st := range sts {
		has[st]++
	}
	switch {
	case has[releaseFailed] > 0:
		return releaseFailed
	case has[releaseSkipped] == len(sts):
		return releaseSkipped
	case has[releaseSucceeded]+has[releaseSkipped] == len(sts):
		return releaseSucceeded
	case has[releaseInProgress] > 0 || has[releaseSucceeded] > 0:
		return releaseInProgress
	}
	return releasePending
}

// approveRelease answers, for every service of the release whose channel
// waits for approvals, each of its approval gates: one answer per service,
// recorded on the service's desired state; a shared approval is answered
// once (it serves the others).
func (s *Server) approveRelease(ctx context.Context, app, id string, req apiv1.ReleaseApproveRequest) (*apiv1.ReleaseApproveResponse, error) {
	if req.ReleaseChannel == "" {
		return nil, errorf(apiv1.CodeInvalidArgument, "releaseChannel is required")
	}
	rel, err := s.readRelease(ctx, app, id)
	if err != nil {
		return nil, err
	}
	out := &apiv1.ReleaseApproveResponse{Results: []apiv1.ReleaseApproveResult{}}
	shared := map[string]bool{}
	answered := 0
	for _, m := range rel.Services {
		res := apiv1.ReleaseApproveResult{Service: m.Service}
		gates, err := s.releaseGates(ctx, app, m, req.ReleaseChannel)
		if err != nil {
			res.Error = err.Error()
			out.Results = append(out.Results, res)
			continue
		}
		for _, g := range gates {
			if g.Shared && shared[g.Topic] {
				res.Topics = append(res.Topics, g.Topic+" (shared, answered above)")
				continue
			}
			_, err := s.approve(ctx, app, m.Service, apiv1.ApproveRequest{ReleaseChannel: req.ReleaseChannel, DesiredStateID: m.DesiredStateID,
				Topic: g.Topic, Reject: req.Reject, User: req.User, Comment: req.Comment})
			if err != nil {
				res.Error = strings.TrimSpace(res.Error + " " + err.Error())
				continue
			}
			answered++
			shared[g.Topic] = g.Shared
			res.Topics = append(res.Topics, g.Topic)
		}
		if len(gates) == 0 {
			res.Error = "waits for no approval in " + req.ReleaseChannel
		}
		out.Results = append(out.Results, res)
	}
	if answered == 0 {
		var why []string
		for _, r := range out.Results {
			why = append(why, r.Service+": "+r.Error)
		}
		return nil, errorf(apiv1.CodeFailedPrecondition, "no service of release %s could be answered in %s: %s", id, req.ReleaseChannel, strings.Join(why, "; "))
	}
	return out, nil
}

// releaseGates are the approval gates of release member m in channel rc
// not answered yet, or why there are none to answer.
func (s *Server) releaseGates(ctx context.Context, app string, m ds.ReleaseService, rc string) ([]ds.Approval, error) {
	rec, _, ch, err := s.channelOf(ctx, app, m.Service, rc)
	if err != nil {
		return nil, err
	}
	if rec.ID != m.DesiredStateID {
		if _, err := s.store.GetDesiredState(ctx, m.DesiredStateID); errors.Is(err, store.ErrNotFound) {
			return nil, fmt.Errorf("queued in its release train behind desired state %s: answer once it is active", rec.ID)
		}
		return nil, fmt.Errorf("a later push (desired state %s) replaced the release's", rec.ID)
	}
	inst, err := s.store.GetInstance(ctx, app, m.Service, rc)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	if inst.TargetStateID == ch.StateID && inst.TargetVersion == ch.Version {
		return nil, fmt.Errorf("%s already received %s", rc, ch.Version)
	}
	return ch.Approvals, nil
}

// releaseOf returns the release d was pushed in, if any, for the callers
// that enqueue its other services (a shared approval answered).
func releaseOf(d *engine.Desired) *ds.Release {
	if d == nil {
		return nil
	}
	return d.Release
}
