package localexec

import (
	"context"
	"errors"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// trackerFunc adapts a function to Tracker.
type trackerFunc func(ctx context.Context, g Group) (func(), error)

func (f trackerFunc) Started(ctx context.Context, g Group) (func(), error) { return f(ctx, g) }

// TestB3TrackerSeesGroup: Run records the command's mark before the command
// starts (nothing carries it yet), puts it in the command's environment, and
// says when the command is gone.
func TestB3TrackerSeesGroup(t *testing.T) {
	t.Parallel()
	requireLinux(t)
	var (
		mu      sync.Mutex
		started []Group
		early   []int
		ended   int
	)
	c := sh("echo $" + MarkEnv)
	c.Tracker = trackerFunc(func(_ context.Context, g Group) (func(), error) {
		mu.Lock()
		defer mu.Unlock()
		started = append(started, g)
		pids, err := marked(g.Mark)
		if err != nil {
			t.Error(err)
		}
		early = pids
		return func() {
			mu.Lock()
			ended++
			mu.Unlock()
		}, nil
	})
	res := Run(t.Context(), c)
	if res.Err != nil || res.ExitCode != 0 {
		t.Fatalf("run: %d %v", res.ExitCode, res.Err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(started) != 1 || ended != 1 {
		t.Fatalf("started %v, ended %d times", started, ended)
	}
	g := started[0]
	if len(g.Mark) != 32 || g.Mark != strings.TrimSpace(string(res.Stdout)) || g.BootID == "" || g.Pgid != 0 {
		t.Errorf("group %+v, command saw mark %q", g, res.Stdout)
	}
	if len(early) != 0 {
		t.Errorf("processes %v carried the mark before it was recorded", early)
	}
}

// TestB3EndGroupEndsMarked: every process a crashed command left (a
// background job, one that moved to its own session) is found by its mark
// and ended; a mark of another boot is left alone; one ignoring SIGTERM gets
// SIGKILL.
func TestB3EndGroupEndsMarked(t *testing.T) {
	t.Parallel()
	requireLinux(t)
	mark := func() Group {
		g, err := newGroup()
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	orphans := func(g Group, script string) []int {
		cmd := exec.CommandContext(t.Context(), "sh", "-c", script)
		cmd.Env = []string{"PATH=/usr/bin:/bin", MarkEnv + "=" + g.Mark}
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var pids []int
		buf := make([]byte, 64)
		n, _ := out.Read(buf)
		for f := range strings.FieldsSeq(string(buf[:n])) {
			pid, err := strconv.Atoi(f)
			if err != nil {
				t.Fatalf("pid %q: %v", f, err)
			}
			pids = append(pids, pid)
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Cleanup(func() {
			for _, pid := range pids {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		})
		return pids
	}

	g := mark()
	jobs := orphans(g, `sleep 100 & a=$!; setsid sleep 100 & echo $a $!; wait`)
	if len(jobs) < 2 {
		t.Fatalf("jobs %v", jobs)
	}
	other := g
	other.BootID = "another-boot"
	if res, err := EndGroup(t.Context(), other, time.Second); err != nil || res.Found != 0 {
		t.Errorf("mark of another boot: %+v %v", res, err)
	}
	res, err := EndGroup(t.Context(), g, time.Second)
	if err != nil || res.Found != 2 || res.Killed {
		t.Errorf("EndGroup: %+v %v", res, err)
	}
	for _, pid := range jobs {
		waitDead(t, pid)
	}
	if res, err := EndGroup(t.Context(), g, time.Second); err != nil || res.Found != 0 {
		t.Errorf("EndGroup again: %+v %v", res, err)
	}

	stubborn := mark()
	jobs = orphans(stubborn, `sh -c 'trap "" TERM; echo $$; while :; do sleep 0.05; done' & wait`)
	res, err = EndGroup(t.Context(), stubborn, 200*time.Millisecond)
	if err != nil || res.Found == 0 || !res.Killed {
		t.Errorf("EndGroup of a process ignoring SIGTERM: %+v %v", res, err)
	}
	waitDead(t, jobs[0])

	// A marked process that appears after the first scan (here started by
	// a member's SIGTERM trap) is sent SIGTERM too, not left for SIGKILL.
	// Found counts the shell, the sleep it started, and each short sleep
	// of its loop that a scan saw.
	late := mark()
	jobs = orphans(late, `sh -c 'trap "sleep 30 & exit 0" TERM; echo $$; while :; do sleep 0.05; done' & wait`)
	res, err = EndGroup(t.Context(), late, 5*time.Second)
	if err != nil || res.Found < 2 || res.Killed {
		t.Errorf("EndGroup of a group that grew during the grace: %+v %v", res, err)
	}
	waitDead(t, jobs[0])
	if pids, err := marked(late.Mark); err != nil || len(pids) != 0 {
		t.Errorf("left marked: %v %v", pids, err)
	}
}

// TestB3TrackerFailureStopsCommand: a command whose processes cannot be
// recorded does not start.
func TestB3TrackerFailureStopsCommand(t *testing.T) {
	t.Parallel()
	requireLinux(t)
	c := sh("sleep 100")
	c.Tracker = trackerFunc(func(context.Context, Group) (func(), error) { return nil, errors.New("store down") })
	start := time.Now()
	res := Run(t.Context(), c)
	if time.Since(start) > 5*time.Second {
		t.Errorf("Run took %v", time.Since(start))
	}
	if !errors.Is(res.Err, ErrNotStarted) || !strings.Contains(res.Err.Error(), "store down") || res.ExitCode != -1 || res.Pid != 0 {
		t.Fatalf("got %d %v (pid %d)", res.ExitCode, res.Err, res.Pid)
	}
}

// orphanedGroup starts a script in its own group that starts a background
// job, then kills the script alone (as Pdeathsig does when drover is
// killed): the job is left in the group. It returns the group and the job.
func orphanedGroup(t *testing.T, script string) (Group, int) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	g := groupOf(cmd.Process.Pid)
	buf := make([]byte, 32)
	n, _ := out.Read(buf)
	job, err := strconv.Atoi(strings.TrimSpace(string(buf[:n])))
	if err != nil {
		t.Fatalf("job pid %q: %v", buf[:n], err)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	t.Cleanup(func() { _ = syscall.Kill(-g.Pgid, syscall.SIGKILL) })
	if st := procState(job); st == "" || st == "Z" {
		t.Fatalf("job %d is not running (%q)", job, st)
	}
	return g, job
}

// TestB3EndGroupEndsLeftovers: after its leader died, what is left of a
// recorded group is ended; a group recorded in another boot, or whose id
// now has another leader, is left alone.
func TestB3EndGroupEndsLeftovers(t *testing.T) {
	t.Parallel()
	requireLinux(t)
	g, job := orphanedGroup(t, "sleep 100 & echo $!; wait")

	other := g
	other.BootID = "another-boot"
	if res, err := EndGroup(t.Context(), other, time.Second); err != nil || res.Found != 0 {
		t.Errorf("group of another boot: %+v %v", res, err)
	}
	res, err := EndGroup(t.Context(), g, time.Second)
	if err != nil || res.Found != 1 || res.Killed {
		t.Errorf("EndGroup: %+v %v", res, err)
	}
	waitDead(t, job)
	if res, err := EndGroup(t.Context(), g, time.Second); err != nil || res.Found != 0 {
		t.Errorf("EndGroup again: %+v %v", res, err)
	}
}

// TestB3EndGroupLeavesReusedID: a live leader with another start time is
// another process that got the id: nothing is done to it.
func TestB3EndGroupLeavesReusedID(t *testing.T) {
	t.Parallel()
	requireLinux(t)
	cmd := exec.CommandContext(t.Context(), "sleep", "100")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	g := groupOf(cmd.Process.Pid)
	g.StartTicks++
	if res, err := EndGroup(t.Context(), g, time.Second); err != nil || res.Found != 0 {
		t.Errorf("EndGroup of a reused id: %+v %v", res, err)
	}
	if st := procState(cmd.Process.Pid); st == "" || st == "Z" {
		t.Errorf("the process with the reused id was ended (%q)", st)
	}
}

// TestB3EndGroupKillsAfterGrace: leftovers that ignore SIGTERM get SIGKILL.
func TestB3EndGroupKillsAfterGrace(t *testing.T) {
	t.Parallel()
	requireLinux(t)
	g, job := orphanedGroup(t, `sh -c 'trap "" TERM; echo $$; while :; do sleep 0.05; done' & wait`)
	res, err := EndGroup(t.Context(), g, 200*time.Millisecond)
	if err != nil || res.Found == 0 || !res.Killed {
		t.Errorf("EndGroup: %+v %v", res, err)
	}
	waitDead(t, job)
}

func TestParseStat(t *testing.T) {
	t.Parallel()
	st, ok := parseStat("42 (a) b) (c) S 1 40 40 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 123456 1000 10\n")
	if !ok || st.state != 'S' || st.pgrp != 40 || st.startTicks != 123456 {
		t.Errorf("got %+v %v", st, ok)
	}
	// A full line of Linux 6: flags with PF_KTHREAD clear, and the
	// environment block in fields 50 and 51.
	full := "7941 (sleep) S 1 7938 30021 0 -1 4194304 77 0 0 0 0 0 0 0 20 0 1 0 8672331 2560000 319 " +
		"18446744073709551615 1 2 3 0 0 0 0 6 0 1 0 0 17 0 0 0 0 0 0 4 5 6 7 8 140734337511290 140734337511401 0\n"
	st, ok = parseStat(full)
	if !ok || st.flags&kthread != 0 || st.flags != 4194304 || st.startTicks != 8672331 ||
		st.envStart != 140734337511290 || st.envEnd != 140734337511401 {
		t.Errorf("full line: got %+v %v", st, ok)
	}
	if _, ok := parseStat("42 (x) S 1"); ok {
		t.Error("short line parsed")
	}
}
