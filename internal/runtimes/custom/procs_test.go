package custom

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/runtimes"
	"github.com/drover-dev/drover/internal/runtimes/localexec"
)

// procRecorder keeps the process records a runtime makes.
type procRecorder struct {
	mu      sync.Mutex
	live    map[int]runtimes.Process
	added   []runtimes.Process
	next    int
	failing bool
}

func (p *procRecorder) AddProcess(_ context.Context, proc runtimes.Process) (func(), error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.failing {
		return nil, errors.New("store unavailable")
	}
	if p.live == nil {
		p.live = map[int]runtimes.Process{}
	}
	p.next++
	id := p.next
	p.live[id] = proc
	p.added = append(p.added, proc)
	return func() {
		p.mu.Lock()
		delete(p.live, id)
		p.mu.Unlock()
	}, nil
}

// TestB3ApplyRecordsItsProcessGroup: an apply's processes are recorded while
// it runs (by the mark in its environment, secrets redacted from the
// command) and the record is removed once it ended.
func TestB3ApplyRecordsItsProcessGroup(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	out := filepath.Join(dir, "pid")
	apply := script(t, dir, "apply.sh", `echo "$DROVER_RUN_MARK" > "$OUT"`)
	cr := &config.CustomRuntime{Apply: &config.ApplyCommand{
		TaskConfig: &config.TaskConfig{Program: &config.Program{Cmd: []string{apply, "s3cr3t-token"}}},
		Env:        map[string]config.EnvValue{"OUT": {Value: out}, "TOKEN": {RawSecret: "s3cr3t-token"}},
	}}
	rec := &procRecorder{}
	r := newRuntime(t, runtimes.Options{DataDir: t.TempDir(), Processes: rec})
	k := key("web", "prod")
	mustApply(t, r, target(k, "v1", cr))

	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.added) != 1 || len(rec.live) != 0 {
		t.Fatalf("added %d, still recorded %d", len(rec.added), len(rec.live))
	}
	p := rec.added[0]
	if p.InstanceKey != k || p.Kind != kindApply || p.Version != "v1" || p.Runtime != testRuntime {
		t.Errorf("process %+v", p)
	}
	if strings.Contains(strings.Join(p.Command, " "), "s3cr3t") {
		t.Errorf("secret in the recorded command %q", p.Command)
	}
	var g localexec.Group
	if err := json.Unmarshal(p.Handle, &g); err != nil {
		t.Fatalf("handle %s: %v", p.Handle, err)
	}
	if g.Mark == "" || g.Mark != strings.TrimSpace(readFile(t, out)) {
		t.Errorf("group %+v, the command's mark %s", g, readFile(t, out))
	}
}

// TestB3UnrecordedApplyDoesNotRun: when its process group cannot be
// recorded, the apply fails instead of running unprotected.
func TestB3UnrecordedApplyDoesNotRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	apply := script(t, dir, "apply.sh", `sleep 100`)
	cr := &config.CustomRuntime{Apply: &config.ApplyCommand{TaskConfig: task(apply)}}
	r := newRuntime(t, runtimes.Options{DataDir: t.TempDir(), Processes: &procRecorder{failing: true}})
	_, err := r.Apply(t.Context(), target(key("web", "prod"), "v1", cr))
	if err == nil || !strings.Contains(err.Error(), "store unavailable") {
		t.Fatalf("Apply: %v", err)
	}
}
