package server

import (
	"context"
	"errors"
	"strings"

	apiv1 "github.com/drover-dev/drover/api/v1"
	"github.com/drover-dev/drover/internal/store"
)

func toAPIRun(r store.TaskRun, withOutput bool) apiv1.Run {
	out := apiv1.Run{
		ID: r.ID, Application: r.Application, Service: r.Service, ReleaseChannel: r.ReleaseChannel,
		Runtime: r.Runtime, Kind: r.Kind, Version: r.Version, Command: r.Command, ExitCode: r.ExitCode,
		Error: r.Error, StartedAt: r.StartedAt, FinishedAt: r.FinishedAt, Truncated: r.Truncated,
	}
	if withOutput {
		out.Stdout, out.Stderr = r.Stdout, r.Stderr
	}
	return out
}

func (s *Server) runs(ctx context.Context, f store.RunFilter) (*apiv1.RunList, error) {
	runs, err := s.store.ListRuns(ctx, f)
	if err != nil {
		return nil, err
	}
	out := &apiv1.RunList{Runs: make([]apiv1.Run, len(runs))}
	for i, r := range runs {
		out.Runs[i] = toAPIRun(r, false)
	}
	return out, nil
}

func (s *Server) run(ctx context.Context, id int64) (*apiv1.Run, error) {
	r, err := s.store.GetRun(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, errorf(apiv1.CodeNotFound, "no run %d", id)
	}
	if err != nil {
		return nil, err
	}
	if !visible(ctx, r.Application) {
		// As an unknown id: an id must not tell another application's name.
		return nil, errorf(apiv1.CodeNotFound, "no run %d", id)
	}
	out := toAPIRun(r, true)
	return &out, nil
}

// objectsOf is what status shows of an observation's objects.
func objectsOf(o store.Observation) []apiv1.ObjectStatus {
	out := make([]apiv1.ObjectStatus, 0, len(o.Objects))
	for _, obj := range o.Objects {
		out = append(out, apiv1.ObjectStatus{ObjectType: obj.ObjectType, Namespace: obj.Namespace, Name: obj.Name, Version: obj.Version,
			Replicas: obj.Replicas, AvailableReplicas: obj.AvailableReplicas, TargetReplicas: obj.TargetReplicas, Status: obj.Status, Message: obj.Message})
	}
	return out
}

// infoOf is what status shows of an observation's getInfo outputs.
func infoOf(o store.Observation) []apiv1.InfoOutput {
	if len(o.Info) == 0 {
		return nil
	}
	out := make([]apiv1.InfoOutput, 0, len(o.Info))
	for _, i := range o.Info {
		out = append(out, apiv1.InfoOutput{Name: i.Name, Text: strings.TrimSpace(i.Text)})
	}
	return out
}
