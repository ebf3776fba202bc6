package runtimehost

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	ds "github.com/drover-dev/drover/internal/desiredstate"
	"github.com/drover-dev/drover/internal/runtimes/localexec"
	"github.com/drover-dev/drover/internal/store"
)

// endLeftovers ends the process groups that commands of an earlier process
// left running (it was killed, or lost power, mid-command), so no leftover
// step of an interrupted apply overlaps the apply the engine starts again.
// Start runs it before anything applies. Each group ended is logged and
// recorded as an event of its instance; a group that cannot be ended keeps
// its record (and is tried again at the next start).
func (h *Host) endLeftovers(ctx context.Context, grace time.Duration) error {
	procs, err := h.store.ListProcesses(ctx)
	if err != nil {
		return fmt.Errorf("list the processes of the previous run: %w", err)
	}
	var errs []error
	for _, p := range procs {
		log := h.log.With("app", p.Application, "service", p.Service, "release_channel", p.ReleaseChannel,
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
					Type: ds.EventLeftoverEnded, Actor: "server",
					Message: fmt.Sprintf("%s: ended %d leftover process(es) of the %s command started %s for %s (the server stopped while it ran)",
						p.ReleaseChannel, res.Found, p.Kind, p.StartedAt.UTC().Format(time.RFC3339), p.Version),
				}
				if err := h.store.AppendEvents(ctx, ev); err != nil {
					return fmt.Errorf("record the leftover process group %d: %w", g.Pgid, err)
				}
			}
		}
		if err := h.store.RemoveProcess(ctx, p.ID); err != nil && !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("remove process record %d: %w", p.ID, err)
		}
	}
	if len(errs) > 0 {
		h.log.Error("some leftover processes of the previous run could not be ended; applies may overlap them", "error", errors.Join(errs...))
	}
	return nil
}
