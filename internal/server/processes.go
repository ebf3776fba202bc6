package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/drover-dev/drover/internal/runtimes"
	"github.com/drover-dev/drover/internal/runtimes/localexec"
	"github.com/drover-dev/drover/internal/store"
)

// processWriteTimeout bounds the writes of process records: they are made
// whatever the caller's context says, as a command starts and once it ended.
const processWriteTimeout = 10 * time.Second

// processRecorder keeps the store's record of the commands running on this
// host (runtimes.ProcessRecorder).
type processRecorder struct {
	store store.Store
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

// endLeftovers ends the process groups that commands of an earlier server
// left running (it was killed, or lost power to its process, mid-command),
// so no leftover step of an interrupted apply overlaps the apply the engine
// starts again. It runs before the engine starts. Each group ended is
// logged and recorded as an event of its instance; a group that cannot be
// ended keeps its record (and is tried again at the next start).
func (s *Server) endLeftovers(ctx context.Context, grace time.Duration) error {
	procs, err := s.store.ListProcesses(ctx)
	if err != nil {
		return fmt.Errorf("list the processes of the previous run: %w", err)
	}
	var errs []error
	for _, p := range procs {
		log := s.log.With("app", p.Application, "service", p.Service, "release_channel", p.ReleaseChannel,
			"runtime", p.Runtime, "kind", p.Kind, "version", p.Version)
		var g localexec.Group
		if err := json.Unmarshal(p.Handle, &g); err != nil {
			log.Error("unreadable process record dropped", "process_id", p.ID, "error", err)
		} else {
			res, err := localexec.EndGroup(ctx, g, grace)
			if err != nil {
				log.Error("ending a leftover process group failed", "pgid", g.Pgid, "error", err)
				errs = append(errs, fmt.Errorf("process group %d (%s of %s/%s/%s): %w", g.Pgid, p.Kind, p.Application, p.Service, p.ReleaseChannel, err))
				continue
			}
			if res.Found > 0 {
				log.Warn("ended a leftover process group", "pgid", g.Pgid, "processes", res.Found, "killed", res.Killed, "started_at", p.StartedAt)
				ev := store.Event{
					Application: p.Application, Service: p.Service, ReleaseChannel: p.ReleaseChannel,
					Type: "leftover-ended", Actor: "server",
					Message: fmt.Sprintf("%s: ended %d leftover process(es) of the %s command started %s for %s (the server stopped while it ran)",
						p.ReleaseChannel, res.Found, p.Kind, p.StartedAt.UTC().Format(time.RFC3339), p.Version),
				}
				if err := s.store.AppendEvents(ctx, ev); err != nil {
					return fmt.Errorf("record the leftover process group %d: %w", g.Pgid, err)
				}
			}
		}
		if err := s.store.RemoveProcess(ctx, p.ID); err != nil && !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("remove process record %d: %w", p.ID, err)
		}
	}
	if len(errs) > 0 {
		s.log.Error("some leftover processes of the previous run could not be ended; applies may overlap them", "error", errors.Join(errs...))
	}
	return nil
}
