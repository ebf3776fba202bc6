package runtimehost

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/runtimes"
	"github.com/drover-dev/drover/internal/store"
	"github.com/drover-dev/drover/internal/store/sqlite"
)

// downStore is a store whose runs fail while down is set (a PostgreSQL
// database stopped).
type downStore struct {
	*sqlite.Store
	mu   sync.Mutex
	down bool
}

func (s *downStore) RecordRun(ctx context.Context, r store.TaskRun) (int64, error) {
	s.mu.Lock()
	down := s.down
	s.mu.Unlock()
	if down {
		return 0, errors.New("failed to connect to the database: connection refused")
	}
	return s.Store.RecordRun(ctx, r)
}

func (s *downStore) set(down bool) {
	s.mu.Lock()
	s.down = down
	s.mu.Unlock()
}

// TestRunEndedWhileTheStoreWasDown: a command that ends while the store
// cannot take its record is kept in the data directory and recorded once
// the store answers, byte for byte, once, also by a host started anew on
// the directory (tour 3's B32: such a run was never recorded).
func TestRunEndedWhileTheStoreWasDown(t *testing.T) {
	t.Parallel()
	sq, err := sqlite.Open(t.Context(), sqlite.MemoryPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sq.Close() })
	st := &downStore{Store: sq}
	data := t.TempDir()
	h := New(Config{Store: st, Registry: Registry{}, DataDir: data})
	runs := h.opts.Runs
	at := time.Date(2026, 12, 1, 18, 49, 52, 0, time.UTC)
	run := func(out string) runtimes.Run {
		return runtimes.Run{InstanceKey: runtimes.InstanceKey{Application: "slowapp", Service: "job", ReleaseChannel: "stg"}, Runtime: "slow", Kind: "apply",
			Version: "v-07ac", Command: []string{"sh", "-c", "x"}, StartedAt: at, FinishedAt: at.Add(8 * time.Second), Stdout: out, Stderr: "e"}
	}
	st.set(true)
	for _, out := range []string{"first\xff\x00", "second"} {
		if err := runs.RecordRun(t.Context(), run(out)); err != nil {
			t.Fatalf("RecordRun with the store down: %v", err)
		}
	}
	if got, _ := sq.ListRuns(t.Context(), store.RunFilter{}); len(got) != 0 {
		t.Fatalf("runs recorded while the store was down: %d", len(got))
	}
	if n, err := h.spool.flush(t.Context()); n != 0 || err == nil {
		t.Errorf("flush with the store down: %d, %v", n, err)
	}
	// The store is back; a new host on the directory (the server was
	// restarted meanwhile) records the runs at its start.
	st.set(false)
	h2 := New(Config{Store: st, Registry: Registry{}, DataDir: data})
	ctx, cancel := context.WithCancel(t.Context())
	if err := h2.Start(ctx, nil); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	var got []store.TaskRun
	for time.Now().Before(deadline) {
		if got, err = sq.ListRuns(t.Context(), store.RunFilter{}); err != nil {
			t.Fatal(err)
		}
		if len(got) == 2 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	h2.Close()
	if len(got) != 2 {
		t.Fatalf("runs recorded once the store was back: %d, want 2", len(got))
	}
	outs := map[string]bool{}
	for _, r := range got {
		outs[r.Stdout] = true
		if !r.FinishedAt.Equal(at.Add(8*time.Second)) || r.Version != "v-07ac" || r.Stderr != "e" {
			t.Errorf("recorded run %+v", r)
		}
	}
	if !outs["first\xff\x00"] || !outs["second"] {
		t.Errorf("outputs %v", outs)
	}
	if left, _ := os.ReadDir(filepath.Join(data, spoolDir)); len(left) != 0 {
		t.Errorf("%d files left in the spool", len(left))
	}
	// Nothing is recorded twice.
	if n, err := h2.spool.flush(t.Context()); n != 0 || err != nil {
		t.Errorf("second flush: %d, %v", n, err)
	}
}
