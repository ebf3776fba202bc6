package runtimehost

import (
	"context"
	"log/slog"
	"time"

	"github.com/drover-dev/drover/internal/runtimes"
	"github.com/drover-dev/drover/internal/store"
)

// runRecorder stores the commands runtimes run (runtimes.RunRecorder).
type runRecorder struct {
	store Store
}

func (r runRecorder) RecordRun(ctx context.Context, run runtimes.Run) error {
	_, err := r.store.RecordRun(ctx, store.TaskRun{
		Application: run.Application, Service: run.Service, ReleaseChannel: run.ReleaseChannel,
		Runtime: run.Runtime, Kind: run.Kind, Version: run.Version, Command: run.Command,
		ExitCode: run.ExitCode, Error: run.Error, StartedAt: run.StartedAt, FinishedAt: run.FinishedAt,
		Stdout: run.Stdout, Stderr: run.Stderr, Truncated: run.Truncated,
	})
	return err
}

// processWriteTimeout bounds the writes of process records: they are made
// whatever the caller's context says, as a command starts and once it ended.
const processWriteTimeout = 10 * time.Second

// processRecorder keeps the store's record of the commands running on this
// host (runtimes.ProcessRecorder).
type processRecorder struct {
	store Store
	log   *slog.Logger
}

func (r processRecorder) AddProcess(ctx context.Context, p runtimes.Process) (func(), error) {
	base := context.WithoutCancel(ctx)
	ctx, cancel := context.WithTimeout(base, processWriteTimeout)
	defer cancel()
	id, err := r.store.AddProcess(ctx, store.Process{
		Application: p.Application, Service: p.Service, ReleaseChannel: p.ReleaseChannel,
		Runtime: p.Runtime, Kind: p.Kind, Version: p.Version, Command: p.Command, Handle: p.Handle,
	})
	if err != nil {
		return nil, err
	}
	return func() {
		ctx, cancel := context.WithTimeout(base, processWriteTimeout)
		defer cancel()
		if err := r.store.RemoveProcess(ctx, id); err != nil {
			// The next start finds the group gone and removes the record.
			r.log.Warn("remove process record failed", "process_id", id, "error", err)
		}
	}, nil
}
