package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	apiv1 "github.com/drover-dev/drover/api/v1"
	"github.com/drover-dev/drover/internal/auth"
	ds "github.com/drover-dev/drover/internal/desiredstate"
	"github.com/drover-dev/drover/internal/engine/requests"
	"github.com/drover-dev/drover/internal/store"
	"github.com/drover-dev/drover/internal/usertext"
)

// requestUser is who a request acts as: its authenticated identity. A
// request may still name a user (the CLI's --user, older clients); it must
// then be that identity, as approvals count the people who send them, not
// names typed.
func requestUser(ctx context.Context, raw string) (string, error) {
	id, ok := auth.FromContext(ctx)
	if !ok {
		return "", errorf(apiv1.CodeUnauthenticated, "this request carries no credential")
	}
	name, err := usertext.User(id.Name)
	if err != nil {
		return "", fmt.Errorf("identity %q: %w", id.Name, err)
	}
	if raw == "" {
		return name, nil
	}
	u, err := usertext.User(raw)
	if err != nil {
		return "", statusError(apiv1.CodeInvalidArgument, err)
	}
	if u != name {
		return "", errorf(apiv1.CodePermissionDenied, "the request names user %q, but it is authenticated as %q: "+
			"drover records what a request does under the identity that sends it; drop --user, or send it with %s's own credential", u, name, u)
	}
	return name, nil
}

// approve records an approval or rejection of a channel's pending approval of
// the desired state the request names, which must be the active one. An
// approval may come before the rollout reaches the channel: it is bound to
// that desired state, so it cannot count for another push.
func (s *Server) approve(ctx context.Context, app, svc string, req apiv1.ApproveRequest) (*apiv1.ServiceStatus, error) {
	if req.ReleaseChannel == "" {
		return nil, errorf(apiv1.CodeInvalidArgument, "releaseChannel is required")
	}
	user, comment, err := userAndComment(ctx, req.User, req.Comment)
	if err != nil {
		return nil, err
	}
	if req.DesiredStateID == "" && req.Version == "" {
		return nil, errorf(apiv1.CodeInvalidArgument, "desiredStateId or version is required: the desired state being approved, as drover status %s --app %s shows it", svc, app)
	}
	rec, d, ch, err := s.channelOf(ctx, app, svc, req.ReleaseChannel)
	if err != nil {
		return nil, err
	}
	if err := s.sameDesiredState(ctx, rec, req); err != nil {
		return nil, err
	}
	if s.edgeCfg.ForbidSelfApproval && !req.Reject && rec.CreatedBy != "" && rec.CreatedBy == user {
		return nil, errorf(apiv1.CodePermissionDenied, "%s pushed %s and may not approve it: this server requires someone else's approval of a push (--forbid-self-approval)", user, rec.Version)
	}
	inst, err := s.store.GetInstance(ctx, app, svc, ch.Name)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	before := inst.Revision
	if inst.DesiredStateID != "" && inst.DesiredStateID != rec.ID {
		inst = store.Instance{Status: ds.StatusPending} // not yet planned for this push
	}
	typ := ds.EventApproved
	if req.Reject {
		typ = ds.EventRejected
	}
	now := s.now()
	var answeredGate ds.Approval
	// The decision and the write are one store transaction: concurrent
	// approvals cannot overshoot a gate, count a person twice, or land on a
	// desired state a push replaced meanwhile.
	_, err = s.store.AddApproval(ctx, rec.ID, func(cur store.DesiredState, recorded []store.Approval) (store.Approval, []store.Event, error) {
		if cur.ReplacedBy != "" {
			return store.Approval{}, nil, replacedError(app, svc, rec, cur.ReplacedBy)
		}
		gate, err := requests.PendingApproval(requests.Channel{Channel: &ch.Channel, Version: ch.Version, StateID: ch.StateID}, inst, recorded, req.Topic, user)
		switch {
		case errors.Is(err, requests.ErrAlreadyAnswered):
			return store.Approval{}, nil, statusError(apiv1.CodeAlreadyExists, err)
		case err != nil:
			return store.Approval{}, nil, statusError(apiv1.CodeFailedPrecondition, err)
		}
		answeredGate = gate
		msg := fmt.Sprintf("%s: %s %s by %s", ch.Name, ds.VersionLabel(ch.Version, ch.DisplayName), typ, user)
		if comment != "" {
			msg += ": " + comment
		}
		a := store.Approval{DesiredStateID: rec.ID, Application: app, Service: svc, ReleaseChannel: ch.Name, Topic: gate.Topic,
			User: user, Reject: req.Reject, Comment: comment, CreatedAt: now}
		ev := store.Event{Time: now, Application: app, Service: svc, ReleaseChannel: ch.Name, DesiredStateID: rec.ID, Type: typ, Actor: user, Message: msg}
		return a, []store.Event{ev}, nil
	})
	var ae *apiError
	switch {
	case errors.As(err, &ae):
		return nil, ae
	case errors.Is(err, store.ErrDuplicate):
		return nil, errorf(apiv1.CodeAlreadyExists, "%s already answered the approval of %s; each person counts once", user, ch.Name)
	case err != nil:
		return nil, err
	}
	if rel := releaseOf(d); answeredGate.Shared && rel != nil {
		// The other services of the release share the answer.
		for _, m := range rel.Services {
			if m.Service != svc {
				s.engine.Enqueue(app, m.Service)
			}
		}
	}
	return s.answered(ctx, rec, ch.Name, before)
}

// answered has the engine plan the service of a recorded answer (an
// approval, a bypass) and returns its status once the plan counts it (or
// planWait passed): before is the instance's revision before the answer.
func (s *Server) answered(ctx context.Context, rec store.DesiredState, rc string, before int64) (*apiv1.ServiceStatus, error) {
	s.engine.Enqueue(rec.Application, rec.Service)
	s.changed.notify()
	s.awaitPlan(ctx, rec.Application, rec.Service, rc, before)
	return s.statusOf(ctx, rec)
}

// userAndComment is who answers (requestUser) and their note, refusing
// what usertext refuses.
func userAndComment(ctx context.Context, user, comment string) (string, string, error) {
	u, err := requestUser(ctx, user)
	if err != nil {
		return "", "", err
	}
	c, err := usertext.Comment(comment)
	if err != nil {
		return "", "", statusError(apiv1.CodeInvalidArgument, err)
	}
	return u, c, nil
}

// planWait bounds how long an approval's answer waits for the engine to
// plan the service again, so the status it returns counts the approval.
const planWait = 2 * time.Second

// awaitPlan waits until the engine has written the instance of channel rc
// again (its revision differs from before), at most planWait. On time out
// the answer shows the status as it is; the approval is recorded either way.
func (s *Server) awaitPlan(ctx context.Context, app, svc, rc string, before int64) {
	timer := time.NewTimer(planWait)
	defer timer.Stop()
	for {
		wake := s.changed.wait()
		inst, err := s.store.GetInstance(ctx, app, svc, rc)
		if err == nil && inst.Revision != before {
			return
		}
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return
		}
		select {
		case <-wake:
		case <-timer.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// sameDesiredState checks that the desired state (or version) an approval
// names is the active one, rec.
func (s *Server) sameDesiredState(ctx context.Context, rec store.DesiredState, req apiv1.ApproveRequest) error {
	if req.DesiredStateID != "" && req.DesiredStateID != rec.ID {
		named, err := s.store.GetDesiredState(ctx, req.DesiredStateID)
		switch {
		case errors.Is(err, store.ErrNotFound), err == nil && (named.Application != rec.Application || named.Service != rec.Service):
			return errorf(apiv1.CodeNotFound, "service %s of %s has no desired state %q; its desired state is %s (%s): drover status %s --app %s",
				rec.Service, rec.Application, req.DesiredStateID, rec.ID, rec.Version, rec.Service, rec.Application)
		case err != nil:
			return err
		}
		return replacedError(rec.Application, rec.Service, named, rec.ID)
	}
	if req.Version != "" && req.Version != rec.Version {
		return errorf(apiv1.CodeConflict, "version %s is not the desired version of %s/%s: another push made it %s (desired state %s); look again with drover status %s --app %s",
			req.Version, rec.Application, rec.Service, rec.Version, rec.ID, rec.Service, rec.Application)
	}
	return nil
}

// replacedError says that desired state old, which an approval names, was
// replaced by a newer push.
func replacedError(app, svc string, old store.DesiredState, by string) error {
	return errorf(apiv1.CodeConflict, "desired state %s (%s) of %s/%s was replaced by %s (another push); nothing was recorded: look again with drover status %s --app %s and approve what it shows",
		old.ID, old.Version, app, svc, by, svc, app)
}
