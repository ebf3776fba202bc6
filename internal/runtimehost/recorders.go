package runtimehost

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/drover-dev/drover/internal/runtimes"
	"github.com/drover-dev/drover/internal/store"
)

// runRecorder stores the commands runtimes run (runtimes.RunRecorder); a
// run the store does not take is kept in the spool (when there is one) and
// recorded once the store answers again.
type runRecorder struct {
	store Store
	spool *runSpool
	log   *slog.Logger
}

func (r runRecorder) RecordRun(ctx context.Context, run runtimes.Run) error {
	tr := store.TaskRun{
		Application: run.Application, Service: run.Service, ReleaseChannel: run.ReleaseChannel,
		Runtime: run.Runtime, Kind: run.Kind, Version: run.Version, Command: run.Command,
		ExitCode: run.ExitCode, Error: run.Error, StartedAt: run.StartedAt, FinishedAt: run.FinishedAt,
		Stdout: run.Stdout, Stderr: run.Stderr, Truncated: run.Truncated,
	}
	_, err := r.store.RecordRun(ctx, tr)
	if err == nil || r.spool == nil {
		return err
	}
	if serr := r.spool.add(tr); serr != nil {
		return fmt.Errorf("%w; keeping it to record later failed too: %w", err, serr)
	}
	r.log.Warn("run kept to be recorded once the store answers", "app", run.Application, "service", run.Service,
		"release_channel", run.ReleaseChannel, "kind", run.Kind, "error", err)
	return nil
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
