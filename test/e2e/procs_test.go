package e2e

// End-to-end tests of the processes the server starts: what a crash leaves
// (B3, B12) and what a graceful stop does to an apply in flight (B11).

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	apiv1 "github.com/drover-dev/drover/api/v1"
	"github.com/drover-dev/drover/internal/store"
	"github.com/drover-dev/drover/internal/store/sqlite"
)

// terminate stops the server with SIGTERM (the Ctrl-C path) and waits for it
// to exit, at most within.
func (s *server) terminate(within time.Duration) {
	s.t.Helper()
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.mu.Unlock()
	if cmd == nil {
		s.t.Fatal("terminate: server not running")
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		s.t.Fatalf("SIGTERM server: %v", err)
	}
	select {
	case <-exited:
	case <-time.After(within):
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-exited
		s.t.Fatalf("server did not stop within %s of SIGTERM", within)
	}
	s.mu.Lock()
	s.cmd = nil
	s.mu.Unlock()
}

// applyTasks reads the apply tasks of a service and the process records
// from the database of a stopped server.
func (s *server) applyTasks(app, svc string) ([]store.Task, []store.Process) {
	s.t.Helper()
	st, err := sqlite.Open(s.t.Context(), filepath.Join(s.data, "drover.db"))
	if err != nil {
		s.t.Fatal(err)
	}
	defer func() { _ = st.Close() }()
	as, err := st.ListTasks(s.t.Context(), store.TaskFilter{Key: app + "/" + svc})
	if err != nil {
		s.t.Fatal(err)
	}
	ps, err := st.ListProcesses(s.t.Context())
	if err != nil {
		s.t.Fatal(err)
	}
	return as, ps
}

// logLines reads a file of "WORD PID ..." lines written by apply scripts.
func logLines(t *testing.T, path string) [][]string {
	t.Helper()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	var out [][]string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		out = append(out, strings.Fields(sc.Text()))
	}
	return out
}

// waitLogLine waits until a line of path starts with word and returns it.
func waitLogLine(t *testing.T, path, word string, timeout time.Duration) []string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		for _, l := range logLines(t, path) {
			if len(l) > 0 && l[0] == word {
				return l
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %q line in %s within %s:\n%s", word, path, timeout, crReadFile(t, path))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// procsConfigs writes an apply-only custom runtime running script (with LOG
// and DIR in its environment) and an application with one channel.
func procsConfigs(t *testing.T, tmp, app, svc, rc, script string) string {
	t.Helper()
	return crWriteConfigs(t, filepath.Join(tmp, "config"), map[string]crObj{
		"runtime": crRuntime("steps", nil, crObj{
			"apply": crProgram(script, map[string]string{"LOG": tmp + "/log", "DIR": tmp}),
		}),
		"app":     crApp(app, crChannel(rc, "steps")),
		"service": crService(app, svc),
	})
}

// TestB3NoOverlapAfterCrash: the server is killed (-9) while an apply's
// multi-step script runs a step; the restarted server ends that leftover
// step before it applies again, so no step of the interrupted attempt runs
// beside or after the new one (B3). The interrupted attempt gets an outcome
// and an event before the new apply (B12).
func TestB3NoOverlapAfterCrash(t *testing.T) {
	requireE2E(t)
	tmp := t.TempDir()
	const app, svc, rc = "slowapp", "job", "stg"
	// Each line: WORD PID-of-the-attempt. The inner sh is the step that
	// Pdeathsig does not reach; $PPID there is the outer script's pid.
	script := `echo "start $$" >> "$LOG"
sh -c 'echo "step1 $PPID" >> "$LOG"; sleep 4; echo "step2 $PPID" >> "$LOG"'
echo "done $$" >> "$LOG"`
	dir := procsConfigs(t, tmp, app, svc, rc, script)
	s := newServer(t)
	s.ok("alice", "apply", dir+"/...")
	version, _ := s.push("alice", app, svc)

	first := waitLogLine(t, tmp+"/log", "step1", 30*time.Second)[1]
	s.kill()
	s.start()
	s.waitStatus(app, svc, 60*time.Second, "converged after the restart", converged(version))

	// The new attempt took more than the 4s the orphaned step had left:
	// had it survived, its step2 would be in the log by now.
	var second string
	for _, l := range logLines(t, tmp+"/log") {
		switch {
		case len(l) != 2:
			t.Errorf("log line %q", l)
		case l[1] == first && l[0] != "start" && l[0] != "step1":
			t.Errorf("the interrupted attempt (pid %s) went on after the crash: %q\n%s", first, l, crReadFile(t, tmp+"/log"))
		case l[1] != first && l[0] == "start":
			second = l[1]
		}
	}
	want := []string{"start " + first, "step1 " + first, "start " + second, "step1 " + second, "step2 " + second, "done " + second}
	if got := strings.Split(strings.TrimSpace(crReadFile(t, tmp+"/log")), "\n"); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("log:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	evs := s.events(app, svc)
	ended := crEvent(evs, 0, "leftover-ended", rc)
	interrupted := crEvent(evs, 0, "apply-interrupted", rc)
	var applying []apiv1.Event
	for _, e := range evs {
		if e.Type == "applying" {
			applying = append(applying, e)
		}
	}
	if ended == nil || interrupted == nil || len(applying) != 2 {
		t.Fatalf("events:\n%s", strings.Join(crEventLines(evs), "\n"))
	}
	if !strings.Contains(interrupted.Message, "interrupted by a server restart") ||
		interrupted.Seq < applying[0].Seq || interrupted.Seq > applying[1].Seq || ended.Seq > applying[1].Seq {
		t.Errorf("the interrupted attempt is not closed between the two applies:\n%s", strings.Join(crEventLines(evs), "\n"))
	}

	s.terminate(30 * time.Second)
	// One task, claimed twice: the crash interrupted the first claim.
	tasks, procs := s.applyTasks(app, svc)
	if len(tasks) != 1 || tasks[0].Status != store.TaskSucceeded || tasks[0].Attempts != 2 || tasks[0].FinishedAt.IsZero() {
		t.Errorf("apply tasks: %s", dump(tasks))
	}
	if len(procs) != 0 {
		t.Errorf("process records left: %s", dump(procs))
	}
}

// TestB11SIGTERMLetsApplyFinish: SIGTERM during an apply lets it finish
// (within --shutdown-grace) and records its outcome; nothing is recorded
// with a canceled context, and the restarted server does not apply again.
func TestB11SIGTERMLetsApplyFinish(t *testing.T) {
	requireE2E(t)
	tmp := t.TempDir()
	const app, svc, rc = "drain", "job", "live"
	script := `echo "start $$" >> "$LOG"; sleep 2; echo "done $$" >> "$LOG"`
	dir := procsConfigs(t, tmp, app, svc, rc, script)
	s := newServer(t, "--shutdown-grace", "30s")
	s.ok("alice", "apply", dir+"/...")
	version, _ := s.push("alice", app, svc)
	waitLogLine(t, tmp+"/log", "start", 30*time.Second)
	s.terminate(20 * time.Second)
	waitLogLine(t, tmp+"/log", "done", time.Second)

	logText := crReadFile(t, s.logPath)
	if strings.Contains(logText, "context canceled") || !strings.Contains(logText, "shutdown waits for applies in flight") {
		t.Errorf("server log:\n%s", s.logTail(40))
	}
	tasks, procs := s.applyTasks(app, svc)
	if len(tasks) != 1 || tasks[0].Status != store.TaskSucceeded || tasks[0].Attempts != 1 || tasks[0].FinishedAt.IsZero() || len(procs) != 0 {
		t.Fatalf("tasks %s, processes %s", dump(tasks), dump(procs))
	}

	s.start()
	s.waitStatus(app, svc, 30*time.Second, "converged after the restart", converged(version))
	if n := len(logLines(t, tmp+"/log")); n != 2 {
		t.Errorf("applied again after a graceful stop:\n%s", crReadFile(t, tmp+"/log"))
	}
	if evs := s.events(app, svc); crEvent(evs, 0, "apply-interrupted", "") != nil || crEvent(evs, 0, "applied", rc) == nil {
		t.Errorf("events:\n%s", strings.Join(crEventLines(evs), "\n"))
	}
}

// TestB11SIGTERMPastGraceRecordsInterrupted: an apply still running when
// --shutdown-grace is over is stopped, recorded as interrupted (not left
// open, not failed), and applied again after the restart.
func TestB11SIGTERMPastGraceRecordsInterrupted(t *testing.T) {
	requireE2E(t)
	tmp := t.TempDir()
	const app, svc, rc = "cut", "job", "live"
	// The first attempt hangs; later ones finish at once.
	script := `echo "start $$" >> "$LOG"
if [ ! -e "$DIR/hung" ]; then : > "$DIR/hung"; sleep 60; fi
echo "done $$" >> "$LOG"`
	dir := procsConfigs(t, tmp, app, svc, rc, script)
	s := newServer(t, "--shutdown-grace", "500ms")
	s.ok("alice", "apply", dir+"/...")
	version, _ := s.push("alice", app, svc)
	waitLogLine(t, tmp+"/log", "start", 30*time.Second)
	s.terminate(20 * time.Second)

	if logText := crReadFile(t, s.logPath); strings.Contains(logText, "context canceled") || !strings.Contains(logText, "shutdown stops applies in flight") {
		t.Errorf("server log:\n%s", s.logTail(40))
	}
	// The interrupted task was handed back, pending, with why.
	tasks, procs := s.applyTasks(app, svc)
	if len(tasks) != 1 || tasks[0].Status != store.TaskPending || tasks[0].Owner != "" ||
		!strings.Contains(tasks[0].Message, "shut down") || len(procs) != 0 {
		t.Fatalf("tasks %s, processes %s", dump(tasks), dump(procs))
	}

	s.start()
	s.waitStatus(app, svc, 30*time.Second, "converged after the restart", converged(version))
	evs := s.events(app, svc)
	var interrupted []apiv1.Event
	for _, e := range evs {
		if e.Type == "apply-interrupted" {
			interrupted = append(interrupted, e)
		}
	}
	if len(interrupted) != 1 || !strings.Contains(interrupted[0].Message, "shut down") || crEvent(evs, 0, "apply-failed", "") != nil {
		t.Errorf("events:\n%s", strings.Join(crEventLines(evs), "\n"))
	}
}
