package server

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	apiv1 "github.com/drover-dev/drover/api/v1"
	"github.com/drover-dev/drover/internal/engine"
	"github.com/drover-dev/drover/internal/runtimes"
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
		return nil, errorf("not_found", "no run %d", id)
	}
	if err != nil {
		return nil, err
	}
	out := toAPIRun(r, true)
	return &out, nil
}

// objects asks the channel's runtime what runs for the instance's target.
// Runtimes answer from what they already observed (watch caches, the last
// fetch), so this is cheap; a slow answer is left out rather than waited for.
func (s *Server) objects(ctx context.Context, runtime string, inst store.Instance) []apiv1.ObjectStatus {
	if inst.TargetStateID == "" {
		return nil
	}
	rec, err := s.store.GetDesiredState(ctx, inst.TargetStateID)
	if err != nil {
		return nil
	}
	target, err := engine.TargetOf(rec, inst.ReleaseChannel)
	if err != nil {
		return nil
	}
	rt, err := s.runtimes.Runtime(ctx, runtime)
	if err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	st, err := rt.Fetch(ctx, target)
	if err != nil {
		return nil
	}
	out := make([]apiv1.ObjectStatus, 0, len(st.Objects))
	for _, o := range st.Objects {
		out = append(out, apiv1.ObjectStatus{ObjectType: o.ObjectType, Namespace: o.Namespace, Name: o.Name, Version: o.Version,
			Replicas: o.Replicas, AvailableReplicas: o.AvailableReplicas, TargetReplicas: o.TargetReplicas, Status: string(o.Status), Message: o.Message})
	}
	return out
}

// info asks the channel's runtime for display-only information.
func (s *Server) info(ctx context.Context, runtime string, key runtimes.InstanceKey) []apiv1.InfoOutput {
	rt, err := s.runtimes.Runtime(ctx, runtime)
	if err != nil {
		return nil
	}
	ig, ok := rt.(runtimes.InfoGetter)
	if !ok {
		return nil
	}
	outs, err := ig.Info(ctx, key)
	if err != nil {
		return []apiv1.InfoOutput{{Name: "error", Text: fmt.Sprintf("getInfo failed: %v", err)}}
	}
	res := make([]apiv1.InfoOutput, 0, len(outs))
	for _, o := range outs {
		res = append(res, apiv1.InfoOutput{Name: o.Name, Text: strings.TrimSpace(o.Text)})
	}
	return res
}
