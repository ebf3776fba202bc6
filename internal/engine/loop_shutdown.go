package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	ds "github.com/drover-dev/drover/internal/desiredstate"
	"github.com/drover-dev/drover/internal/store"
)

// errShutdown is the cause given to applies stopped because the server shut
// down before they finished.
var errShutdown = errors.New("the server shut down before the apply finished")

// recordTimeout bounds the writes that record an apply's outcome.
const recordTimeout = 10 * time.Second

// interruptedByRestart is the message of attempts a crash left open.
const interruptedByRestart = "interrupted by a server restart"

// resetInterrupted is how a process that owns the store alone starts: every
// claim left by a process that died (a crash) ends, and each apply task it
// left running gets an event saying so, before the engine plans anything;
// the runner then claims those tasks again. Engines that share a store
// instead take a dead one's work over as its claims lapse.
func (l *Loop) resetInterrupted(ctx context.Context) error {
	open, err := l.store.ListTasks(ctx, store.TaskFilter{Open: true})
	if err != nil {
		return fmt.Errorf("list interrupted tasks: %w", err)
	}
	var evs []store.Event
	for _, t := range open {
		var a Action
		if t.Status != store.TaskRunning || json.Unmarshal(t.Payload, &a) != nil || a.Kind != ActionApply {
			continue
		}
		app, svc, _ := strings.Cut(t.Key, "/")
		evs = append(evs, store.Event{
			Time: l.now(), Application: app, Service: svc, ReleaseChannel: a.ReleaseChannel,
			DesiredStateID: a.StateID, Type: ds.EventApplyInterrupted, Actor: "engine",
			Message: fmt.Sprintf("%s: apply of %s started %s was %s; it will be applied again",
				a.ReleaseChannel, a.Version, t.ClaimedAt.UTC().Format(time.RFC3339), interruptedByRestart),
		})
		l.log.Warn("apply interrupted by a server restart", "app", app, "service", svc,
			"release_channel", a.ReleaseChannel, "version", a.Version, "task", t.ID)
	}
	if err := l.store.ResetClaims(ctx, evs...); err != nil {
		return err
	}
	if len(evs) > 0 {
		l.written()
	}
	return nil
}

// startApplyContext makes the context applies run under: not canceled when
// Run's context ends, only by the returned function (see drain).
func (l *Loop) startApplyContext(ctx context.Context) context.CancelCauseFunc {
	actx, stop := context.WithCancelCause(context.WithoutCancel(ctx))
	l.mu.Lock()
	l.applyCtx = actx
	l.mu.Unlock()
	return stop
}

// applyContext is the context for an apply started from a pass under ctx.
func (l *Loop) applyContext(ctx context.Context) context.Context {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.applyCtx == nil {
		return ctx // Reconcile called without Run
	}
	return l.applyCtx
}

// drain waits for the applies in flight, up to the shutdown grace, then
// stops those still running (they record themselves as interrupted) and
// waits for them to return.
func (l *Loop) drain(stop context.CancelCauseFunc) {
	done := make(chan struct{})
	go func() {
		l.tasks.Wait()
		close(done)
	}()
	defer stop(nil)
	select {
	case <-done:
		return
	default:
	}
	if l.shutdownGrace > 0 {
		l.log.Info("shutdown waits for applies in flight", "applies", l.applyingCount(), "grace", l.shutdownGrace)
		t := time.NewTimer(l.shutdownGrace)
		defer t.Stop()
		select {
		case <-done:
			return
		case <-t.C:
		}
	}
	l.log.Warn("shutdown stops applies in flight", "applies", l.applyingCount(), "grace", l.shutdownGrace)
	stop(fmt.Errorf("%w (shutdown grace of %v over)", errShutdown, l.shutdownGrace))
	<-done
}

// applyingCount is the number of tasks being carried out.
func (l *Loop) applyingCount() int { return len(l.slots) }

// shutdownCause is the reason ctx was canceled when that is the shutdown,
// else nil.
func shutdownCause(ctx context.Context) error {
	if ctx.Err() == nil {
		return nil
	}
	if c := context.Cause(ctx); errors.Is(c, errShutdown) {
		return c
	}
	return nil
}

// recordContext is a context for recording an outcome: it keeps ctx's values
// but not its cancellation, and is bounded by recordTimeout.
func recordContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
}
