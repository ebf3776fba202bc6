package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/drover-dev/drover/internal/datadir"
	"github.com/drover-dev/drover/internal/store/sqlite"
)

// openDataDir prepares the data directory (mode 0700), takes its lock (one
// server per directory) and opens the store in it. The lock is held until
// Release, after the store is closed.
func openDataDir(ctx context.Context, dir string, log *slog.Logger, opts ...sqlite.Option) (*datadir.Lock, *sqlite.Store, error) {
	lock, err := lockDataDir(dir, log)
	if err != nil {
		return nil, nil, err
	}
	st, err := sqlite.Open(ctx, filepath.Join(dir, "drover.db"), opts...)
	if err != nil {
		_ = lock.Release()
		return nil, nil, err
	}
	return lock, st, nil
}

// lockDataDir prepares the data directory (mode 0700) and takes its lock:
// one server per directory, whether its store is in it or not.
func lockDataDir(dir string, log *slog.Logger) (*datadir.Lock, error) {
	warn, err := datadir.Prepare(dir)
	if err != nil {
		return nil, err
	}
	if warn != nil {
		log.Warn("data directory not private", "error", warn)
	}
	lock, err := datadir.Acquire(dir)
	if err != nil {
		if errors.Is(err, datadir.ErrInUse) {
			return nil, err
		}
		return nil, fmt.Errorf("lock data directory %s: %w", dir, err)
	}
	return lock, nil
}
