package terraform

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

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

func newTrackedRuntime(t *testing.T, runner *config.TerraformRunner, procs runtimes.ProcessRecorder) *Runtime {
	t.Helper()
	r, err := NewWith(&config.Runtime{Name: "tf", TerraformRunner: runner}, runtimes.Options{DataDir: t.TempDir(), Processes: procs}, testSettings(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// TestB3PreRunRecordsItsProcessGroup: a preRun command's process group is
// recorded while it runs (secrets redacted from the command), so a server
// restarted after a crash ends what it left, and the record is removed once
// it ended.
func TestB3PreRunRecordsItsProcessGroup(t *testing.T) {
	requireBinary(t)
	t.Parallel()
	const secret = "PRERUNSECRET-0b3a"
	module := writeModule(t, map[string]string{"main.tf": versionModule})
	pidFile := filepath.Join(t.TempDir(), "pid")
	runner := runnerConfig(t, time.Minute, time.Minute)
	runner.Env["PID_FILE"] = config.EnvValue{Value: pidFile}
	runner.PreRun = []config.RunnerCommand{{Cmd: `echo "$DROVER_RUN_MARK" > "$PID_FILE"; echo ` + secret + ` >/dev/null`}}
	rec := &procRecorder{}
	rt := newTrackedRuntime(t, runner, rec)
	k := key("web", "staging")
	tg := target(t, k, "v1", module, runner, nil)
	tg.Env = map[string]string{"S": secret}
	tg.Secrets = []string{secret}
	mustFetch(t, rt, tg)

	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.added) != 1 || len(rec.live) != 0 {
		t.Fatalf("added %d, still recorded %d", len(rec.added), len(rec.live))
	}
	p := rec.added[0]
	if p.InstanceKey != k || p.Kind != kindPreRun || p.Version != "v1" || p.Runtime != "tf" {
		t.Errorf("process %+v", p)
	}
	if cmd := strings.Join(p.Command, " "); strings.Contains(cmd, secret) || !strings.HasPrefix(cmd, "sh -c ") {
		t.Errorf("recorded command %q", p.Command)
	}
	var g localexec.Group
	if err := json.Unmarshal(p.Handle, &g); err != nil {
		t.Fatalf("handle %s: %v", p.Handle, err)
	}
	pid, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	if g.Mark == "" || g.Mark != strings.TrimSpace(string(pid)) {
		t.Errorf("group %+v, the preRun's mark %s", g, pid)
	}
}

// TestB3UnrecordedPreRunDoesNotRun: when its process group cannot be
// recorded, the preRun (and so the plan) fails instead of running
// unprotected.
func TestB3UnrecordedPreRunDoesNotRun(t *testing.T) {
	requireBinary(t)
	t.Parallel()
	module := writeModule(t, map[string]string{"main.tf": versionModule})
	runner := runnerConfig(t, time.Minute, time.Minute)
	runner.PreRun = []config.RunnerCommand{{Cmd: "true"}}
	rt := newTrackedRuntime(t, runner, &procRecorder{failing: true})
	_, err := rt.Fetch(t.Context(), target(t, key("web", "staging"), "v1", module, runner, nil))
	if err == nil || !strings.Contains(err.Error(), "store unavailable") {
		t.Fatalf("Fetch: %v", err)
	}
}
