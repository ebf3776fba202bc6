package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	ds "github.com/drover-dev/drover/internal/desiredstate"
)

// freezeTTL is how long the engine trusts the freezes it read: a freeze
// made through another server whose notice was lost holds within it.
const freezeTTL = 2 * time.Second

// freezes keeps the freezes not lifted, read from the store at most once
// per freezeTTL, and at once after FreezesChanged.
type freezes struct {
	mu   sync.Mutex
	list []ds.Freeze
	read time.Time
}

// current returns the freezes not lifted (their end is the planner's to
// judge), reading them again when stale.
func (l *Loop) currentFreezes(ctx context.Context) ([]ds.Freeze, error) {
	f := &l.freezes
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.read.IsZero() && time.Since(f.read) < freezeTTL {
		return f.list, nil
	}
	objs, err := l.store.ListConfigs(ctx, ds.FreezeKind)
	if err != nil {
		return nil, fmt.Errorf("list freezes: %w", err)
	}
	list := make([]ds.Freeze, 0, len(objs))
	for _, o := range objs {
		var fr ds.Freeze
		if err := json.Unmarshal(o.Body, &fr); err != nil {
			// Only drover writes freezes; one it cannot read holds
			// nothing rather than stopping every pass.
			l.log.Error("undecodable freeze ignored", "freeze", o.Name, "error", err)
			continue
		}
		if fr.LiftedAt.IsZero() {
			list = append(list, fr)
		}
	}
	f.list, f.read = list, time.Now()
	return list, nil
}

// FreezesChanged tells the engine that a freeze was made or lifted (here,
// or through another server sharing the store): it reads them again and
// looks at every service.
func (l *Loop) FreezesChanged() {
	l.freezes.mu.Lock()
	l.freezes.read = time.Time{}
	l.freezes.mu.Unlock()
	go func() {
		if err := l.EnqueueAll(context.Background()); err != nil {
			l.log.Warn("freezes changed: list services", "error", err)
		}
	}()
}
