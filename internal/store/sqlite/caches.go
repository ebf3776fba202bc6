package sqlite

import (
	"context"
	"fmt"

	"github.com/drover-dev/drover/internal/store"
)

// The caches of this store (instcache.go, configcache.go, leasecache.go,
// opentasks.go) are one role, store.Cache: storetest.RunCache holds them
// to reading the same as the file.

var _ store.Cache = (*Store)(nil)

// DropCaches implements store.Cache. It drops the caches inside a write
// transaction of its own, so that no group commit is between taking its
// rows in and being dropped; the lease tokens belong to the writer and are
// only touched there.
func (s *Store) DropCaches(ctx context.Context) error {
	err := s.writeTxMode(ctx, crashSafe, func(tx *wtx) error {
		clear(tx.leaseCache.tokens)
		s.instances.dropAll()
		s.configs.drop()
		s.openTasks.invalidate()
		return nil
	})
	if err != nil {
		return fmt.Errorf("drop caches: %w", err)
	}
	return nil
}

// dropAll empties the instance cache: every service is read from the file
// again on its next read.
func (c *instanceCache) dropAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.imports.Add(1)
	for _, e := range c.svcs {
		e.gen++
		c.dropLocked(e)
		e.active, e.activeOK = store.DesiredState{}, false
	}
}

// drop empties the config cache; the next read loads it again.
func (c *configCache) drop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	c.byKind, c.ok = nil, false
}
