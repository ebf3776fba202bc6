package fake

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/runtimes"
	"github.com/drover-dev/drover/internal/runtimes/runtimestest"
)

func TestPersistenceRoundTrip(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	clock := runtimestest.NewClock(time.Time{})
	opts := runtimes.Options{Now: clock.Now, DataDir: dir}
	s := Settings{RolloutDuration: 3 * time.Second}
	r1 := NewWithSettings("sim", s, opts)
	done, rolling, drifted := target(t, key("a", "prod"), "v1"), target(t, key("b", "prod"), "v2"), target(t, key("c", "prod"), "v3")
	mustApply(t, r1, done)
	mustApply(t, r1, drifted)
	clock.Advance(3 * time.Second)
	r1.Tick()
	mustApply(t, r1, rolling)
	if err := r1.SetDrift(drifted.InstanceKey); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Second)
	want := map[runtimes.InstanceKey]runtimes.State{}
	for _, tg := range []runtimes.Target{done, rolling, drifted} {
		want[tg.InstanceKey] = mustFetch(t, r1, tg)
	}
	if err := r1.Close(); err != nil {
		t.Fatal(err)
	}

	r2, err := Open("sim", s, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	for _, tg := range []runtimes.Target{done, rolling, drifted} {
		got := mustFetch(t, r2, tg)
		gj, _ := json.Marshal(got)
		wj, _ := json.Marshal(want[tg.InstanceKey])
		if string(gj) != string(wj) {
			t.Errorf("%s after reload:\n got %s\nwant %s", tg.InstanceKey, gj, wj)
		}
	}
	if st := want[rolling.InstanceKey]; st.Message != "rolling out v2: 1/3 replicas available" {
		t.Errorf("rolling: %+v", st)
	}
	// The content hashes survived: re-applying is a no-op.
	if got := changeList(mustApply(t, r2, done)); got != "Deployment.apps/a-prod=unchanged ConfigMap/a-prod-config=unchanged" {
		t.Errorf("re-apply after reload: %s", got)
	}
	// The rollout in progress goes on from its recorded start, timer re-armed.
	notes := watch(t, r2)
	clock.Advance(2 * time.Second)
	if n := r2.Tick(); n != 1 {
		t.Errorf("Tick at the end of the reloaded rollout fired %d, want 1", n)
	}
	expectNote(t, notes, rolling.InstanceKey)
	if st := mustFetch(t, r2, rolling); !runtimestest.Converged(st, "v2") {
		t.Errorf("reloaded rollout: %+v", st)
	}
}

func TestPersistenceRealTimerRearmed(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := Settings{RolloutDuration: 200 * time.Millisecond}
	r1 := NewWithSettings("sim", s, runtimes.Options{DataDir: dir})
	k := key("a", "prod")
	mustApply(t, r1, target(t, k, "v1"))
	if err := r1.Close(); err != nil {
		t.Fatal(err)
	}
	r2 := NewWithSettings("sim", s, runtimes.Options{DataDir: dir})
	defer r2.Close()
	notes := watch(t, r2)
	if st := mustFetch(t, r2, target(t, k, "v1")); st.Converged {
		t.Skip("the machine was too slow: the rollout ended before the reload")
	}
	expectNote(t, notes, k)
}

func TestCorruptStateFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := NewWithSettings("sim", Settings{}, runtimes.Options{DataDir: dir})
	mustApply(t, r, target(t, key("a", "prod"), "v1"))
	mustApply(t, r, target(t, key("b", "prod"), "v1"))
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "fake-sim.json")
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{
		"truncated":     string(good[:len(good)/2]),
		"empty":         "",
		"garbage":       "\x00\x00\x00",
		"other format":  `{"format":"something/v9","runtime":"sim","instances":[]}`,
		"other runtime": strings.Replace(string(good), `"runtime":"sim"`, `"runtime":"other"`, 1),
		"bad hash":      strings.Replace(string(good), `"hash":"`, `"hash":"zz`, 1),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			p := filepath.Join(dir, "fake-sim.json")
			if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := Open("sim", Settings{}, runtimes.Options{DataDir: dir})
			if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "corrupt") {
				t.Errorf("Open: err = %v, want a corrupt state file error naming %s", err, p)
			}
			if b, _ := os.ReadFile(p); string(b) != content {
				t.Errorf("the corrupt file was modified")
			}
		})
	}
}

func TestStaleTempFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := NewWithSettings("sim", Settings{}, runtimes.Options{DataDir: dir})
	mustApply(t, r, target(t, key("a", "prod"), "v1"))
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	// A write cut short before its rename.
	stale := filepath.Join(dir, ".fake-sim.json.tmp-12345")
	if err := os.WriteFile(stale, []byte(`{"form`), 0o644); err != nil {
		t.Fatal(err)
	}
	r2, err := Open("sim", Settings{}, runtimes.Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	if st := mustFetch(t, r2, target(t, key("a", "prod"), "v1")); !runtimestest.Converged(st, "v1") {
		t.Errorf("state: %+v", st)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("stale temporary file not removed: %v", err)
	}
}

func TestCoalescedSaving(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const interval = 50 * time.Millisecond
	r := NewWithSettings("sim", Settings{SaveInterval: interval}, runtimes.Options{DataDir: dir})
	const n = 500
	start := time.Now()
	for i := range n {
		mustApply(t, r, target(t, key(fmt.Sprintf("svc-%d", i), "prod"), "v1"))
	}
	elapsed := time.Since(start)
	if err := r.Flush(); err != nil {
		t.Fatal(err)
	}
	saves := r.saves.Load()
	if limit := 2 + int64(elapsed/interval); saves > limit {
		t.Errorf("%d applies in %v wrote the state %d times, want at most %d", n, elapsed, saves, limit)
	}
	// The saver writes by itself, without Flush or Close.
	mustApply(t, r, target(t, key("late", "prod"), "v1"))
	path := filepath.Join(dir, "fake-sim.json")
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), `"service":"late"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the saver did not write the last apply")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	var fst fileState
	b, _ := os.ReadFile(path)
	if err := json.Unmarshal(b, &fst); err != nil || len(fst.Instances) != n+1 {
		t.Errorf("state file: %d instances, err %v", len(fst.Instances), err)
	}
}

func TestSaveErrorReported(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	r := NewWithSettings("sim", Settings{}, runtimes.Options{DataDir: dir})
	// The data directory becomes a file: no write can succeed, even as root.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	mustApply(t, r, target(t, key("a", "prod"), "v1"))
	if err := r.Close(); err == nil || !strings.Contains(err.Error(), "saving state") {
		t.Errorf("Close: err = %v, want the save error", err)
	}
}

// TestKilledWhileSaving kills a process that applies and saves continuously
// with SIGKILL, several times: the state file must always load.
func TestKilledWhileSaving(t *testing.T) {
	t.Parallel()
	if runtime.GOOS == "windows" {
		t.Skip("needs SIGKILL")
	}
	if testing.Short() {
		t.Skip("spawns processes")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "fake-sim.json")
	for round := range 3 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperSaveForever$")
		cmd.Env = append(os.Environ(), "DROVER_FAKE_SAVE_DIR="+dir, fmt.Sprintf("DROVER_FAKE_ROUND=%d", round))
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Wait until the child has written this round's state a few times.
		deadline := time.Now().Add(30 * time.Second)
		for {
			b, _ := os.ReadFile(path)
			if strings.Contains(string(b), fmt.Sprintf(`"service":"r%d-s20"`, round)) {
				break
			}
			if time.Now().After(deadline) {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
				t.Fatalf("round %d: the child did not save", round)
			}
			time.Sleep(5 * time.Millisecond)
		}
		time.Sleep(time.Duration(round) * 7 * time.Millisecond) // vary where the kill lands
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
		r, err := Open("sim", Settings{}, runtimes.Options{DataDir: dir})
		if err != nil {
			t.Fatalf("round %d: after SIGKILL: %v", round, err)
		}
		st := mustFetch(t, r, target(t, key(fmt.Sprintf("r%d-s0", round), "prod"), "v1"))
		if st.Version == "" {
			t.Errorf("round %d: a save that completed before the kill was lost: %+v", round, st)
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestHelperSaveForever is the child of TestKilledWhileSaving.
func TestHelperSaveForever(t *testing.T) {
	dir := os.Getenv("DROVER_FAKE_SAVE_DIR")
	if dir == "" {
		t.Skip("helper process")
	}
	round := os.Getenv("DROVER_FAKE_ROUND")
	r := NewWithSettings("sim", Settings{SaveInterval: time.Millisecond}, runtimes.Options{DataDir: dir})
	for i := 0; ; i++ {
		mustApply(t, r, target(t, key(fmt.Sprintf("r%s-s%d", round, i), "prod"), "v1"))
		if i%10 == 0 {
			if err := r.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
}
