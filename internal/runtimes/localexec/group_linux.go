package localexec

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// procStat is what drover reads of /proc/PID/stat.
type procStat struct {
	state      byte
	pgrp       int
	flags      uint64
	startTicks uint64
	// envStart and envEnd bound the environment block in the process's
	// memory; both 0 while an exec has not set it up yet (or when the
	// kernel does not show them).
	envStart, envEnd uint64
}

// kthread is PF_KTHREAD in the flags of /proc/PID/stat.
const kthread = 0x00200000

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
	flags, err2 := strconv.ParseUint(f[6], 10, 64)
	start, err3 := strconv.ParseUint(f[19], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return procStat{}, false
	}
	st := procStat{state: f[0][0], pgrp: pgrp, flags: flags, startTicks: start}
	if len(f) >= 49 { // fields 50 and 51, since Linux 3.5
		st.envStart, _ = strconv.ParseUint(f[47], 10, 64)
		st.envEnd, _ = strconv.ParseUint(f[48], 10, 64)
	}
	return st, true
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
//
// A process in the middle of exec reads as an empty environment for a
// moment: the kernel has switched it to its new memory and not yet copied
// the environment in. An empty read is believed at once only when the
// process's stat shows a set, empty environment block (started with an
// empty environment); other empty reads are tried again for up to
// execSettle, so a member caught exec-ing is not missed. A process still
// empty after that (one whose kernel never set an environment, like some
// containers' init) is remembered and not waited for again.
func marked(mark string) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	want := []byte(MarkEnv + "=" + mark)
	self := os.Getpid()
	emptyEnv.Lock()
	defer emptyEnv.Unlock()
	seen := map[procID]bool{}
	// check says whether pid is marked, or unsure (read empty, maybe
	// mid-exec).
	check := func(pid int) (marked, unsure bool, id procID) {
		env, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
		st, ok := readStat(pid)
		if err != nil || !ok || st.state == 'Z' || st.state == 'X' || st.flags&kthread != 0 {
			return false, false, id
		}
		id = procID{pid, st.startTicks}
		seen[id] = true
		if len(env) > 0 {
			return hasEntry(env, want), false, id
		}
		settled := st.envEnd != 0 && st.envStart == st.envEnd
		return false, !settled && !emptyEnv.ids[id], id
	}
	var pids []int
	var unsure []procID
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		switch ok, empty, id := check(pid); {
		case ok:
			pids = append(pids, pid)
		case empty:
			unsure = append(unsure, id)
		}
	}
	for deadline := time.Now().Add(execSettle); len(unsure) > 0 && time.Now().Before(deadline); {
		time.Sleep(2 * time.Millisecond)
		still := unsure[:0]
		for _, u := range unsure {
			switch ok, empty, id := check(u.pid); {
			case ok:
				pids = append(pids, u.pid)
			case empty && id == u:
				still = append(still, u)
			}
		}
		unsure = still
	}
	for _, u := range unsure {
		emptyEnv.ids[u] = true
	}
	for id := range emptyEnv.ids {
		if !seen[id] {
			delete(emptyEnv.ids, id) // ended
		}
	}
	return pids, nil
}

// procID names one process over the life of the boot.
type procID struct {
	pid        int
	startTicks uint64
}

// emptyEnv remembers the processes whose environment stayed empty through
// a whole execSettle: they are not waited for again. The lock also keeps
// scans one at a time.
var emptyEnv = struct {
	sync.Mutex
	ids map[procID]bool
}{ids: map[procID]bool{}}

// execSettle is how long marked reads an empty environment again: far
// longer than an exec takes to copy the environment, even on a busy
// machine.
const execSettle = 50 * time.Millisecond

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
// to those left (and to any they started meanwhile). Every scan during the
// grace sends SIGTERM to marked processes not signalled yet: one that was
// in the middle of exec at the first scan (its environment reads empty for
// that moment) or that a member started since.
func endMarked(ctx context.Context, mark string, grace time.Duration) (EndResult, error) {
	var res EndResult
	seen := map[int]bool{}
	// scan lists the marked processes and sends sig to those not seen
	// before (term) or to all of them (kill).
	scan := func(sig syscall.Signal, all bool) ([]int, error) {
		pids, err := marked(mark)
		if err != nil {
			return nil, err
		}
		for _, pid := range pids {
			if all || !seen[pid] {
				_ = syscall.Kill(pid, sig) // ESRCH: it ended meanwhile
			}
			seen[pid] = true
		}
		res.Found = len(seen)
		return pids, nil
	}
	pids, err := scan(syscall.SIGTERM, false)
	if err != nil || len(pids) == 0 {
		return res, err
	}
	// gone scans until no marked process is left, twice in a row: a child
	// forked after one scan listed /proc, by a member that then exited, is
	// seen only by the next.
	gone := func(d time.Duration, sig syscall.Signal, all bool) (bool, error) {
		deadline := time.Now().Add(d)
		empty := 0
		for {
			pids, err := scan(sig, all)
			if err != nil {
				return false, err
			}
			if len(pids) > 0 {
				empty = 0
			} else if empty++; empty == 2 {
				return true, nil
			}
			if time.Now().After(deadline) {
				return empty > 0, nil
			}
			select {
			case <-ctx.Done():
				return false, context.Cause(ctx)
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	if ok, err := gone(grace, syscall.SIGTERM, false); ok || err != nil {
		return res, err
	}
	res.Killed = true
	ok, err := gone(killWait, syscall.SIGKILL, true)
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
