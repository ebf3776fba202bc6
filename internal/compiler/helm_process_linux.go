package compiler

import (
	"bufio"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// limitRenderer limits a chart renderer (helm_process.go): its data (heap,
// stacks, every private writable mapping) to what it uses now plus
// maxMemory, so that an allocation past it fails and the Go runtime ends
// the process; its CPU time to more than maxTime on every CPU, in case its
// parent is gone and cannot kill it; and it offers itself first to the
// kernel's out-of-memory killer.
func limitRenderer(maxMemory int, maxTime time.Duration) error {
	setSoftMemoryLimit(maxMemory)
	used, err := dataSize()
	if err != nil {
		return err
	}
	hard := uint64(used) + uint64(maxMemory) //nolint:gosec // G115: both are sizes, positive
	if err := syscall.Setrlimit(syscall.RLIMIT_DATA, &syscall.Rlimit{Cur: hard, Max: hard}); err != nil {
		return fmt.Errorf("limit its memory: %w", err)
	}
	// Every thread counts (the garbage collector runs on all CPUs).
	cpu := uint64(math.Ceil(maxTime.Seconds()))*uint64(2*max(runtime.NumCPU(), 1)) + 5
	if err := syscall.Setrlimit(syscall.RLIMIT_CPU, &syscall.Rlimit{Cur: cpu, Max: cpu + 5}); err != nil {
		return fmt.Errorf("limit its CPU time: %w", err)
	}
	// Best effort: some sandboxes do not let a process raise its score.
	_ = os.WriteFile("/proc/self/oom_score_adj", []byte("1000"), 0)
	return nil
}

// dataSize is the process's VmData, in bytes: what RLIMIT_DATA counts.
func dataSize() (int, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmData:"); ok {
			kb, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			if err != nil {
				return 0, fmt.Errorf("/proc/self/status: VmData %q: %w", v, err)
			}
			return kb << 10, nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, errors.New("/proc/self/status has no VmData")
}

// rendererProcAttr kills a chart renderer when the thread that started it
// ends, with its process (runRenderer keeps that thread until the child
// ends).
func rendererProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// killedBy says why a renderer was killed by a signal its parent did not
// send: SIGKILL from the kernel's out-of-memory killer, SIGXCPU for its
// CPU time.
func killedBy(err error) rendererFailure {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return failedNot
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	switch {
	case !ok || !ws.Signaled():
		return failedNot
	case ws.Signal() == syscall.SIGKILL:
		return failedMemory
	case ws.Signal() == syscall.SIGXCPU:
		return failedTime
	}
	return failedNot
}
