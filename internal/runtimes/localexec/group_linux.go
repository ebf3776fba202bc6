package localexec

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// procStat is what drover reads of /proc/PID/stat.
type procStat struct {
	state      byte
	pgrp       int
	startTicks uint64
}

// readStat reads /proc/PID/stat; ok is false when there is no such process.
func readStat(pid int) (procStat, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, false
	}
	return parseStat(string(b))
}

// parseStat parses "pid (comm) S ppid pgrp ... starttime ...". comm may hold
// spaces and parentheses, so fields are counted from the last ')'.
func parseStat(s string) (procStat, bool) {
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return procStat{}, false
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state), so field N is f[N-3].
	if len(f) < 20 || len(f[0]) != 1 {
		return procStat{}, false
	}
	pgrp, err1 := strconv.Atoi(f[2])
	start, err2 := strconv.ParseUint(f[19], 10, 64)
	if err1 != nil || err2 != nil {
		return procStat{}, false
	}
	return procStat{state: f[0][0], pgrp: pgrp, startTicks: start}, true
}

func bootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// groupOf identifies the group led by pid, a child not yet reaped (the form
// of records of earlier versions).
func groupOf(pid int) Group {
	g := Group{Pgid: pid, BootID: bootID()}
	if st, ok := readStat(pid); ok {
		g.StartTicks = st.startTicks
	}
	return g
}

// liveMembers counts the processes of group pgid that are not zombies
// (a zombie is dead already and waits only for its parent).
func liveMembers(pgid int) (int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, fmt.Errorf("list processes: %w", err)
	}
	n := 0
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, ok := readStat(pid); ok && st.pgrp == pgid && st.state != 'Z' && st.state != 'X' {
			n++
		}
	}
	return n, nil
}

// marked lists the live processes whose environment holds the mark
// (MarkEnv=mark). A process whose environment cannot be read (another
// user's, or one that made itself undumpable) is not listed.
func marked(mark string) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	want := []byte(MarkEnv + "=" + mark)
	self := os.Getpid()
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil || !hasEntry(env, want) {
			continue
		}
		if st, ok := readStat(pid); ok && st.state != 'Z' && st.state != 'X' {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// hasEntry says whether the NUL-separated environment block env holds the
// entry want.
func hasEntry(env, want []byte) bool {
	for len(env) > 0 {
		entry, rest, _ := bytes.Cut(env, []byte{0})
		if bytes.Equal(entry, want) {
			return true
		}
		env = rest
	}
	return false
}

func endGroup(ctx context.Context, g Group, grace time.Duration) (EndResult, error) {
	if g.BootID == "" || g.BootID != bootID() {
		return EndResult{}, nil // another boot: everything it ran is gone
	}
	if g.Mark != "" {
		return endMarked(ctx, g.Mark, grace)
	}
	return endPgid(ctx, g, grace)
}

// endMarked ends the processes carrying mark: SIGTERM, SIGKILL after grace
// to those left (and to any they started meanwhile).
func endMarked(ctx context.Context, mark string, grace time.Duration) (EndResult, error) {
	var res EndResult
	pids, err := marked(mark)
	if err != nil || len(pids) == 0 {
		return res, err
	}
	res.Found = len(pids)
	signal := func(pids []int, sig syscall.Signal) {
		for _, pid := range pids {
			_ = syscall.Kill(pid, sig) // ESRCH: it ended meanwhile
		}
	}
	signal(pids, syscall.SIGTERM)
	gone := func(d time.Duration, sig syscall.Signal) (bool, error) {
		deadline := time.Now().Add(d)
		for {
			pids, err := marked(mark)
			if err != nil || len(pids) == 0 {
				return len(pids) == 0, err
			}
			if time.Now().After(deadline) {
				return false, nil
			}
			if sig != 0 {
				signal(pids, sig)
			}
			select {
			case <-ctx.Done():
				return false, context.Cause(ctx)
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	if ok, err := gone(grace, 0); ok || err != nil {
		return res, err
	}
	res.Killed = true
	ok, err := gone(killWait, syscall.SIGKILL)
	if err == nil && !ok {
		err = fmt.Errorf("processes marked %s remain %v after SIGKILL", mark, killWait)
	}
	return res, err
}

// endPgid ends what is left of a process group recorded by an earlier
// version.
func endPgid(ctx context.Context, g Group, grace time.Duration) (EndResult, error) {
	var res EndResult
	if g.Pgid <= 1 {
		return res, nil
	}
	if g.Pgid == syscall.Getpgrp() {
		return res, nil // never our own group
	}
	if st, ok := readStat(g.Pgid); ok && st.startTicks != g.StartTicks {
		return res, nil // the id now belongs to another process
	}
	n, err := liveMembers(g.Pgid)
	if err != nil || n == 0 {
		return res, err
	}
	res.Found = n
	signal := func(sig syscall.Signal) error {
		if err := syscall.Kill(-g.Pgid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("signal process group %d: %w", g.Pgid, err)
		}
		return nil
	}
	gone := func(d time.Duration) (bool, error) {
		deadline := time.Now().Add(d)
		for {
			n, err := liveMembers(g.Pgid)
			if err != nil || n == 0 {
				return n == 0, err
			}
			if time.Now().After(deadline) {
				return false, nil
			}
			select {
			case <-ctx.Done():
				return false, context.Cause(ctx)
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	if err := signal(syscall.SIGTERM); err != nil {
		return res, err
	}
	if ok, err := gone(grace); ok || err != nil {
		return res, err
	}
	res.Killed = true
	if err := signal(syscall.SIGKILL); err != nil {
		return res, err
	}
	ok, err := gone(killWait)
	if err == nil && !ok {
		err = fmt.Errorf("process group %d still has processes %v after SIGKILL", g.Pgid, killWait)
	}
	return res, err
}

// killWait bounds the wait for a group to be gone after SIGKILL (a process
// in uninterruptible sleep dies only when its I/O returns).
const killWait = 10 * time.Second
