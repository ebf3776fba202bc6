package runtimehost

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/drover-dev/drover/internal/atomicfile"
	"github.com/drover-dev/drover/internal/store"
)

// The run spool keeps the records of commands that ended while the store
// could not take them (its database was down: tour 3's B32), one file per
// run under <DataDir>/pending-runs, and records them once the store answers
// again: at the host's start, every spoolRetry, and after each run recorded
// directly. A file is removed once its run is stored, so a server killed
// meanwhile records the rest at its next start. A run whose write failed
// after the database committed it is recorded twice (at least once, never
// lost).

const (
	// spoolDir is the spool's directory under the data directory.
	spoolDir = "pending-runs"
	// spoolRetry is how often the spool tries the store again.
	spoolRetry = 5 * time.Second
	// spoolMax bounds the runs kept: each is at most a run's output
	// (capped by the runtimes), so the spool stays within a few hundred
	// MiB however long the store is away. A run beyond it is not kept.
	spoolMax = 2000
)

// spooledRun is a store.TaskRun as a spool file holds it: output as bytes,
// which need not be text.
type spooledRun struct {
	store.TaskRun
	StdoutBytes []byte `json:"stdoutBytes,omitempty"`
	StderrBytes []byte `json:"stderrBytes,omitempty"`
}

// runSpool is the spool of one host.
type runSpool struct {
	dir   string
	store Store
	log   *slog.Logger
	// mu serializes flushes (a file is recorded once per flush) and adds.
	mu sync.Mutex
}

func newRunSpool(dataDir string, st Store, log *slog.Logger) *runSpool {
	if dataDir == "" {
		return nil
	}
	return &runSpool{dir: filepath.Join(dataDir, spoolDir), store: st, log: log}
}

// add keeps run to be recorded later.
func (s *runSpool) add(run store.TaskRun) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	names, err := s.names()
	if err != nil {
		return err
	}
	if len(names) >= spoolMax {
		return fmt.Errorf("%d runs wait in %s already for the store to answer; this one is not kept", len(names), s.dir)
	}
	rec := spooledRun{TaskRun: run, StdoutBytes: []byte(run.Stdout), StderrBytes: []byte(run.Stderr)}
	rec.Stdout, rec.Stderr, rec.ID = "", "", 0
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	var suffix [6]byte
	if _, err := rand.Read(suffix[:]); err != nil {
		return err
	}
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return err
	}
	// Named by time, so that runs are recorded in the order they ended.
	name := fmt.Sprintf("%020d-%s.json", time.Now().UnixNano(), hex.EncodeToString(suffix[:]))
	return atomicfile.Write(filepath.Join(s.dir, name), b, 0o600)
}

// names lists the spooled runs, oldest first.
func (s *runSpool) names() ([]string, error) {
	entries, err := os.ReadDir(s.dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if e.Type().IsRegular() && strings.HasSuffix(e.Name(), ".json") {
			out = append(out, e.Name())
		}
	}
	slices.Sort(out)
	return out, nil
}

// flush records the spooled runs in order until the store fails; it
// returns how many it recorded.
func (s *runSpool) flush(ctx context.Context) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	names, err := s.names()
	if err != nil {
		return 0, err
	}
	n := 0
	for _, name := range names {
		path := filepath.Join(s.dir, name)
		b, err := os.ReadFile(path)
		if err != nil {
			return n, err
		}
		var rec spooledRun
		if err := json.Unmarshal(b, &rec); err != nil {
			// Not one of ours (or cut short by a crash before the
			// rename, which atomicfile rules out): keep it aside.
			s.log.Warn("run spool: unreadable file set aside", "path", path, "error", err)
			if err := os.Rename(path, path+".bad"); err != nil {
				return n, err
			}
			continue
		}
		run := rec.TaskRun
		run.ID, run.Stdout, run.Stderr = 0, string(rec.StdoutBytes), string(rec.StderrBytes)
		if _, err := s.store.RecordRun(ctx, run); err != nil {
			return n, err
		}
		if err := os.Remove(path); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// loop flushes the spool at start and every spoolRetry until ctx ends.
func (s *runSpool) loop(ctx context.Context) {
	t := time.NewTicker(spoolRetry)
	defer t.Stop()
	for {
		s.flushLogged(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (s *runSpool) flushLogged(ctx context.Context) {
	n, err := s.flush(ctx)
	if n > 0 {
		s.log.Info("run spool: runs recorded once the store answered", "runs", n)
	}
	if err != nil && ctx.Err() == nil {
		s.log.Debug("run spool: the store does not take runs yet", "error", err)
	}
}
