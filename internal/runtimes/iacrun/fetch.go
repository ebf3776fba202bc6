package iacrun

import (
	"context"
	"fmt"

	"github.com/drover-dev/drover/internal/runtimes"
)

// Fetch plans t's instance with Refresh: the first Fetch of a target
// synchronously; later ones return the cached result of the last plan,
// which background polls refresh. While an apply runs and nothing is
// cached, the state says so rather than waiting.
func (b *Base[X, S]) Fetch(ctx context.Context, t runtimes.Target) (runtimes.State, error) {
	if err := ctx.Err(); err != nil {
		return runtimes.State{}, err
	}
	sp, err := b.Parse(t)
	if err != nil {
		return runtimes.State{}, b.wrap(t, err)
	}
	in, err := b.Use(t.InstanceKey)
	if err != nil {
		return runtimes.State{}, err
	}
	if st, ok := b.Cached(in, t); ok {
		return st, nil
	}
	in.Cmd.Lock()
	defer in.Cmd.Unlock()
	if st, ok := b.Cached(in, t); ok {
		return st, nil
	}
	st, _, err := b.Refresh(ctx, in, t, sp)
	if err != nil {
		return runtimes.State{}, b.wrap(t, err)
	}
	return st, nil
}

// Apply applies t with Update, one command of an instance at a time.
// Errors are retryable, except a target that cannot work (no version, an
// object Parse refuses).
func (b *Base[X, S]) Apply(ctx context.Context, t runtimes.Target) (runtimes.ApplyResult, error) {
	if err := ctx.Err(); err != nil {
		return runtimes.ApplyResult{}, err
	}
	if t.Version == "" {
		return runtimes.ApplyResult{}, runtimes.Permanent(fmt.Errorf("%s runtime %s: %s: target has no version", b.Tool, b.Name, t.InstanceKey))
	}
	sp, err := b.Parse(t)
	if err != nil {
		return runtimes.ApplyResult{}, runtimes.Permanent(b.wrap(t, err))
	}
	in, err := b.Use(t.InstanceKey)
	if err != nil {
		return runtimes.ApplyResult{}, err
	}
	defer b.Applying(in)()
	in.Cmd.Lock()
	defer in.Cmd.Unlock()
	res, err := b.Update(ctx, in, t, sp)
	if err != nil {
		return res, b.wrap(t, err)
	}
	return res, nil
}

// wrap names the runtime and the instance in err.
func (b *Base[X, S]) wrap(t runtimes.Target, err error) error {
	return fmt.Errorf("%s runtime %s: %s: %w", b.Tool, b.Name, t.InstanceKey, err)
}

// StateOf is the state a plan of t for in shows, obj describing the
// whole (its Version, Status and Message are set here). No change: t's
// version runs, converged (and is recorded as applied). Changes: the
// version of the last successful apply runs ("" if none), drifted when
// that is t's version, with the plan's summary as the message.
func (b *Base[X, S]) StateOf(in *Instance[X, S], t runtimes.Target, obj runtimes.Object, changed bool, summary string) runtimes.State {
	if !changed {
		// Nothing to change: t's version is what runs.
		b.WriteApplied(in, t.Version)
		obj.Version, obj.Status = t.Version, runtimes.ObjectSucceeded
		return runtimes.State{Version: t.Version, Converged: true, Objects: []runtimes.Object{obj}}
	}
	applied := ReadApplied(in.Dir)
	obj.Version, obj.Status, obj.Message = applied, runtimes.ObjectPending, summary
	return runtimes.State{
		Version: applied,
		// What drover applied for this version changed (or its inputs did).
		Drifted: applied == t.Version,
		Message: summary,
		Objects: []runtimes.Object{obj},
	}
}
