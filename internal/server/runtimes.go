package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/drover-dev/drover/internal/compiler"
	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/runtimes"
	"github.com/drover-dev/drover/internal/store"
)

// runtimeSet builds runtimes from their stored configs on first use, rebuilds
// one when its config version changes, and starts a watch on those that push
// changes, so the engine hears about them without polling.
type runtimeSet struct {
	store    store.Store
	registry runtimes.Registry
	opts     runtimes.Options
	notify   func(runtimes.InstanceKey)
	log      *slog.Logger
	ctx      context.Context

	mu      sync.Mutex
	entries map[string]*runtimeEntry
	// checked marks runtimes whose config was read since the last apply of
	// configs, so the hot path does not query the store every time.
	checked map[string]bool
}

type runtimeEntry struct {
	version int64
	rt      runtimes.Runtime
	cancel  context.CancelFunc
}

// invalidate makes the next lookups re-read runtime configs (after an apply).
func (s *runtimeSet) invalidate() {
	s.mu.Lock()
	s.checked = nil
	s.mu.Unlock()
}

func (s *runtimeSet) Runtime(ctx context.Context, name string) (runtimes.Runtime, error) {
	s.mu.Lock()
	if e, ok := s.entries[name]; ok && s.checked[name] {
		s.mu.Unlock()
		return e.rt, nil
	}
	s.mu.Unlock()
	obj, err := s.store.GetConfig(ctx, "runtime", name)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("runtime %q is not configured (drover apply its config)", name)
	}
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.checked == nil {
		s.checked = map[string]bool{}
	}
	if e, ok := s.entries[name]; ok && e.version == obj.Version {
		s.checked[name] = true
		return e.rt, nil
	}
	var f config.File
	if err := json.Unmarshal(obj.Body, &f); err != nil || f.Runtime == nil {
		return nil, fmt.Errorf("runtime %q: stored config is not a runtime", name)
	}
	rt, err := s.registry.New(compiler.RuntimeKind(f.Runtime), f.Runtime, s.opts)
	if err != nil {
		return nil, err
	}
	if old, ok := s.entries[name]; ok {
		old.close()
	}
	e := &runtimeEntry{version: obj.Version, rt: rt}
	if w, ok := rt.(runtimes.Watcher); ok {
		wctx, cancel := context.WithCancel(s.ctx)
		e.cancel = cancel
		go func() {
			if err := w.Watch(wctx, s.notify); err != nil && wctx.Err() == nil {
				s.log.Error("runtime watch stopped", "runtime", name, "error", err)
			}
		}()
	}
	if s.entries == nil {
		s.entries = map[string]*runtimeEntry{}
	}
	s.entries[name] = e
	s.checked[name] = true
	return rt, nil
}

func (e *runtimeEntry) close() {
	if e.cancel != nil {
		e.cancel()
	}
	if c, ok := e.rt.(runtimes.Closer); ok {
		_ = c.Close()
	}
}

// Close stops every watch and closes every runtime.
func (s *runtimeSet) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range s.entries {
		e.close()
	}
	s.entries = nil
}
