package server

import (
	"context"
	"errors"
	"fmt"

	apiv1 "github.com/drover-dev/drover/api/v1"
	ds "github.com/drover-dev/drover/internal/desiredstate"
	"github.com/drover-dev/drover/internal/engine/requests"
	"github.com/drover-dev/drover/internal/store"
)

// bypass records that a person let one protection (or extension) of a
// release channel pass for a desired state (MANUALLY_BYPASSED): an approval
// with the attachment's bypass topic, and an event saying who, what and
// why, in one store transaction.
func (s *Server) bypass(ctx context.Context, app, svc string, req apiv1.BypassRequest) (*apiv1.ServiceStatus, error) {
	switch {
	case req.ReleaseChannel == "":
		return nil, errorf(apiv1.CodeInvalidArgument, "releaseChannel is required")
	case req.Protection == "":
		return nil, errorf(apiv1.CodeInvalidArgument, "protection is required: the attachment (or protection, or extension) to bypass")
	case req.DesiredStateID == "" && req.Version == "":
		return nil, errorf(apiv1.CodeInvalidArgument, "desiredStateId or version is required: the desired state the bypass is for, as drover status %s --app %s shows it", svc, app)
	}
	user, comment, err := userAndComment(ctx, req.User, req.Comment)
	if err != nil {
		return nil, err
	}
	rec, _, ch, err := s.channelOf(ctx, app, svc, req.ReleaseChannel)
	if err != nil {
		return nil, err
	}
	if err := s.sameDesiredState(ctx, rec, apiv1.ApproveRequest{DesiredStateID: req.DesiredStateID, Version: req.Version}); err != nil {
		return nil, err
	}
	attachment, checks, err := requests.BypassableChecks(&ch.Channel, req.Protection)
	if err != nil {
		return nil, statusError(apiv1.CodeNotFound, err)
	}
	inst, err := s.store.GetInstance(ctx, app, svc, ch.Name)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	before := inst.Revision
	topic := requests.BypassTopic(attachment)
	now := s.now()
	_, err = s.store.AddApproval(ctx, rec.ID, func(cur store.DesiredState, recorded []store.Approval) (store.Approval, []store.Event, error) {
		if cur.ReplacedBy != "" {
			return store.Approval{}, nil, replacedError(app, svc, rec, cur.ReplacedBy)
		}
		for _, a := range recorded {
			if a.ReleaseChannel == ch.Name && a.Topic == topic {
				return store.Approval{}, nil, errorf(apiv1.CodeAlreadyExists, "%s of %s was already bypassed for %s by %s", attachment, ch.Name, rec.Version, a.User)
			}
		}
		phases := ""
		for i, c := range checks {
			if i > 0 {
				phases += ", "
			}
			phases += c.Lifecycle
		}
		msg := fmt.Sprintf("%s: %s (%s) bypassed for %s by %s", ch.Name, attachment, phases, rec.Version, user)
		if comment != "" {
			msg += ": " + comment
		}
		a := store.Approval{DesiredStateID: rec.ID, Application: app, Service: svc, ReleaseChannel: ch.Name, Topic: topic,
			User: user, Comment: comment, CreatedAt: now}
		ev := store.Event{Time: now, Application: app, Service: svc, ReleaseChannel: ch.Name, DesiredStateID: rec.ID, Type: ds.EventBypassed, Actor: user, Message: msg}
		return a, []store.Event{ev}, nil
	})
	var ae *apiError
	switch {
	case errors.As(err, &ae):
		return nil, ae
	case errors.Is(err, store.ErrDuplicate):
		return nil, errorf(apiv1.CodeAlreadyExists, "%s of %s was already bypassed for %s", attachment, ch.Name, rec.Version)
	case err != nil:
		return nil, err
	}
	return s.answered(ctx, rec, ch.Name, before)
}
