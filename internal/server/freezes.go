package server

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	apiv1 "github.com/drover-dev/drover/api/v1"
	"github.com/drover-dev/drover/internal/auth"
	ds "github.com/drover-dev/drover/internal/desiredstate"
	"github.com/drover-dev/drover/internal/store"
)

// Freezes (drover freeze, drover's own) are kept as versioned objects of
// kind freeze in the config store, named by their id: a freeze's first
// version says who made it and why, a lift is its next version. Making or
// lifting one is recorded in the event history (frozen, unfrozen) and
// tells the engine (through the store's feed, every engine sharing it).

func (s *Server) freeze(ctx context.Context, req apiv1.FreezeRequest) (*apiv1.Freeze, error) {
	user, reason, err := userAndComment(ctx, req.User, req.Reason)
	if err != nil {
		return nil, err
	}
	noteAudit(ctx, "freeze of "+freezeScope(ds.Freeze{Application: req.Application, ReleaseChannel: req.ReleaseChannel}))
	if err := allow(ctx, auth.PermFreeze, req.Application, ""); err != nil {
		return nil, err
	}
	switch {
	case reason == "":
		return nil, errorf(apiv1.CodeInvalidArgument, "reason is required: it is shown on every release channel the freeze holds")
	case req.Application != "" && !appName.MatchString(req.Application):
		return nil, errorf(apiv1.CodeInvalidArgument, "application %q is not an application name (lower-case letters, digits and dashes)", req.Application)
	case !req.Until.IsZero() && !req.Until.After(s.now()):
		return nil, errorf(apiv1.CodeInvalidArgument, "until %s is not in the future", req.Until.UTC().Format("2006-01-02T15:04:05Z"))
	}
	if err := ds.ParseChannelScope(req.ReleaseChannel); err != nil {
		return nil, statusError(apiv1.CodeInvalidArgument, err)
	}
	id, err := freezeID()
	if err != nil {
		return nil, err
	}
	f := ds.Freeze{ID: id, Application: req.Application, ReleaseChannel: req.ReleaseChannel, Reason: reason, NoHeal: req.NoHeal,
		CreatedBy: user, CreatedAt: s.now(), Until: req.Until.UTC()}
	if err := s.putFreeze(ctx, f); err != nil {
		return nil, err
	}
	msg := fmt.Sprintf("%s froze %s: %s", user, freezeScope(f), reason)
	if f.NoHeal {
		msg += " (drift healing held too)"
	}
	if !f.Until.IsZero() {
		msg += " until " + f.Until.Format("2006-01-02T15:04:05Z")
	}
	s.freezeEvent(ctx, f, ds.EventFrozen, user, msg)
	out := freezeOut(f, s)
	return &out, nil
}

func (s *Server) unfreeze(ctx context.Context, req apiv1.UnfreezeRequest) (*apiv1.FreezeList, error) {
	user, comment, err := userAndComment(ctx, req.User, req.Comment)
	if err != nil {
		return nil, err
	}
	if req.ID == "" {
		if err := allow(ctx, auth.PermFreeze, req.Application, ""); err != nil {
			return nil, err
		}
	}
	all, err := s.loadFreezes(ctx)
	if err != nil {
		return nil, err
	}
	var lift []ds.Freeze
	var active []string
	for _, f := range all {
		if !f.Active(s.now()) || !visible(ctx, f.Application) {
			continue
		}
		active = append(active, fmt.Sprintf("%s (%s)", f.ID, freezeScope(f)))
		if req.ID != "" && f.ID == req.ID || req.ID == "" && f.Application == req.Application && f.ReleaseChannel == req.ReleaseChannel {
			lift = append(lift, f)
		}
	}
	if len(lift) == 0 {
		what := "no freeze in force with id " + req.ID
		if req.ID == "" {
			what = "no freeze in force of " + freezeScope(ds.Freeze{Application: req.Application, ReleaseChannel: req.ReleaseChannel})
		}
		if len(active) == 0 {
			return nil, errorf(apiv1.CodeNotFound, "%s: nothing is frozen", what)
		}
		return nil, errorf(apiv1.CodeNotFound, "%s; in force: %s", what, strings.Join(active, ", "))
	}
	for _, f := range lift {
		if err := allow(ctx, auth.PermFreeze, f.Application, ""); err != nil {
			return nil, err
		}
	}
	out := &apiv1.FreezeList{Freezes: []apiv1.Freeze{}}
	for _, f := range lift {
		f.LiftedBy, f.LiftedAt, f.Comment = user, s.now(), comment
		if err := s.putFreeze(ctx, f); err != nil {
			return nil, err
		}
		msg := fmt.Sprintf("%s lifted the freeze of %s (%s, by %s: %s)", user, freezeScope(f), f.ID, f.CreatedBy, f.Reason)
		if comment != "" {
			msg += ": " + comment
		}
		s.freezeEvent(ctx, f, ds.EventUnfrozen, user, msg)
		out.Freezes = append(out.Freezes, freezeOut(f, s))
	}
	return out, nil
}

func (s *Server) listFreezes(ctx context.Context, withEnded bool) (*apiv1.FreezeList, error) {
	all, err := s.loadFreezes(ctx)
	if err != nil {
		return nil, err
	}
	out := &apiv1.FreezeList{Freezes: []apiv1.Freeze{}}
	for _, f := range all {
		if (withEnded || f.Active(s.now())) && visible(ctx, f.Application) {
			out.Freezes = append(out.Freezes, freezeOut(f, s))
		}
	}
	return out, nil
}

// loadFreezes returns every freeze (the latest version of each), newest first.
func (s *Server) loadFreezes(ctx context.Context) ([]ds.Freeze, error) {
	objs, err := s.store.ListConfigs(ctx, ds.FreezeKind)
	if err != nil {
		return nil, err
	}
	out := make([]ds.Freeze, 0, len(objs))
	for _, o := range objs {
		var f ds.Freeze
		if err := json.Unmarshal(o.Body, &f); err != nil {
			return nil, fmt.Errorf("freeze %s: %w", o.Name, err)
		}
		out = append(out, f)
	}
	slices.SortFunc(out, func(a, b ds.Freeze) int { return b.CreatedAt.Compare(a.CreatedAt) })
	return out, nil
}

func (s *Server) putFreeze(ctx context.Context, f ds.Freeze) error {
	body, err := json.Marshal(f)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(body)
	if _, _, err := s.store.PutConfig(ctx, store.ConfigObject{Kind: ds.FreezeKind, Name: f.ID, Body: body, Hash: hex.EncodeToString(sum[:])}); err != nil {
		return fmt.Errorf("record freeze %s: %w", f.ID, err)
	}
	s.engine.FreezesChanged()
	return nil
}

// freezeEvent records a freeze's making or lifting in the history: one
// application-wide event, and one in the history of every service in its
// scope that has a desired state (drover events shows it there). The
// freeze itself is recorded already, so a failure here is only logged.
func (s *Server) freezeEvent(ctx context.Context, f ds.Freeze, typ ds.EventType, user, msg string) {
	now := s.now()
	evs := []store.Event{{Time: now, Application: f.Application, Type: typ, Actor: user, Message: msg}}
	active, err := s.store.ListActiveDesiredStates(ctx)
	if err != nil {
		s.log.Error("record freeze event: list services", "freeze", f.ID, "error", err)
	}
	for _, d := range active {
		if f.Application == "" || f.Application == d.Application {
			evs = append(evs, store.Event{Time: now, Application: d.Application, Service: d.Service, Type: typ, Actor: user, Message: msg})
		}
	}
	if err := s.store.AppendEvents(ctx, evs...); err != nil {
		s.log.Error("record freeze event", "freeze", f.ID, "error", err)
	}
	s.changed.notify()
}

// freezeScope says what a freeze holds, for people.
func freezeScope(f ds.Freeze) string {
	switch {
	case f.Application == "" && f.ReleaseChannel == "":
		return "every application"
	case f.ReleaseChannel == "":
		return "application " + f.Application
	case f.Application == "":
		return "release channels " + f.ReleaseChannel + " of every application"
	}
	return "release channels " + f.ReleaseChannel + " of application " + f.Application
}

func freezeOut(f ds.Freeze, s *Server) apiv1.Freeze {
	return apiv1.Freeze{ID: f.ID, Application: f.Application, ReleaseChannel: f.ReleaseChannel, Reason: f.Reason, NoHeal: f.NoHeal,
		CreatedBy: f.CreatedBy, CreatedAt: f.CreatedAt, Until: f.Until, LiftedBy: f.LiftedBy, LiftedAt: f.LiftedAt, Comment: f.Comment,
		Active: f.Active(s.now())}
}

// appName is what an application name may be.
var appName = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?$`)

// freezeID is a new freeze's id: "frz-" and 12 random hex digits.
func freezeID() (string, error) {
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return "frz-" + hex.EncodeToString(b), nil
}
