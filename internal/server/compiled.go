package server

import (
	"context"
	"errors"

	apiv1 "github.com/drover-dev/drover/api/v1"
	ds "github.com/drover-dev/drover/internal/desiredstate"
	"github.com/drover-dev/drover/internal/store"
)

// compiled answers the compiled config of a service's desired state (id,
// or the active one when id is ""), for every release channel or only rc.
// Secret values (raw secret env, a Secret's data, a runtime's secrets)
// are redacted wherever they appear.
func (s *Server) compiled(ctx context.Context, app, svc, id, rc string) (*apiv1.CompiledService, error) {
	active, err := s.store.ActiveDesiredState(ctx, app, svc)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	if id == "" {
		if err != nil {
			return nil, errorf(apiv1.CodeNotFound, "service %s/%s has no desired state (push it first)", app, svc)
		}
		id = active.ID
	}
	rec, err := s.store.GetDesiredState(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound), err == nil && (rec.Application != app || rec.Service != svc):
		return nil, errorf(apiv1.CodeNotFound, "no desired state %q of service %s/%s", id, app, svc)
	case err != nil:
		return nil, err
	case !rec.PrunedAt.IsZero():
		return nil, errorf(apiv1.CodeNotFound, "desired state %s of %s/%s was pruned at %s: only recent ones keep their compiled config",
			id, app, svc, rec.PrunedAt.UTC().Format("2006-01-02 15:04:05Z"))
	}
	d, err := s.states.Decode(ctx, rec)
	if err != nil {
		return nil, err
	}
	out := &apiv1.CompiledService{Application: app, Service: svc, DesiredStateID: rec.ID, Version: rec.Version,
		Active: rec.ID == active.ID, ReleaseChannels: []apiv1.CompiledChannel{}}
	for i := range d.Channels {
		ch := &d.Channels[i].Channel
		if rc != "" && ch.Name != rc {
			continue
		}
		out.ReleaseChannels = append(out.ReleaseChannels, compiledChannel(ch))
	}
	if rc != "" && len(out.ReleaseChannels) == 0 {
		return nil, errorf(apiv1.CodeNotFound, "desired state %s of %s/%s has no release channel %q", rec.ID, app, svc, rc)
	}
	return out, nil
}

// compiledChannel is the API's view of one compiled channel, secrets
// redacted.
func compiledChannel(ch *ds.Channel) apiv1.CompiledChannel {
	secrets := ch.Secrets()
	objs := renderObjectList(ch.Backend, ch.Objects, &secrets)
	out := apiv1.CompiledChannel{Name: ch.Name, Runtime: ch.Runtime, RuntimeKind: ch.RuntimeKind, Namespace: ch.Namespace,
		Backend: ch.Backend, Group: ch.Group, Labels: ch.Labels, DependsOn: ch.DependsOn, EveryAction: ch.EveryAction,
		AutoRollback: ch.AutoRollback, Objects: make([]apiv1.CompiledObject, len(objs))}
	if !ch.ProgressDeadline.IsZero() {
		out.ProgressDeadline = ch.ProgressDeadline.String()
	}
	if !ch.ConvergenceGrace.IsZero() {
		out.ConvergenceGrace = ch.ConvergenceGrace.String()
	}
	for _, a := range ch.Approvals {
		out.Approvals = append(out.Approvals, apiv1.CompiledApproval{Topic: a.Topic, Description: a.Description, MinApprovers: a.MinApprovers})
	}
	for _, c := range ch.Checks {
		out.Checks = append(out.Checks, apiv1.CompiledCheck{Kind: string(c.Kind), Name: c.Name, Attachment: c.Attachment, Phase: c.Lifecycle})
	}
	if len(ch.Env) > 0 {
		out.Env = make(map[string]string, len(ch.Env))
		for k, v := range ch.Env {
			out.Env[k] = redact(v, secrets)
		}
		for _, k := range ch.SecretEnv {
			if _, ok := out.Env[k]; ok {
				out.Env[k] = "(redacted)"
			}
		}
	}
	for i, o := range objs {
		// Secrets found in a later object are redacted in earlier ones too.
		out.Objects[i] = apiv1.CompiledObject{Object: o.name, YAML: redact(o.yaml, secrets)}
	}
	return out
}
