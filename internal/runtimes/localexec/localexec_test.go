package localexec

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

var testEnv = []string{"PATH=/usr/bin:/bin", "LANG=C"}

func sh(script string) Cmd {
	return Cmd{Args: []string{"sh", "-c", script}, Env: testEnv}
}

func requireLinux(t *testing.T) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("uses /proc")
	}
}

// procState is the state letter of pid in /proc ("" when there is no such process).
func procState(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	// pid (comm) S ...: comm may contain spaces, so cut at the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return ""
	}
	return s[i+2 : i+3]
}

// waitDead waits until pid is gone or a zombie (an orphan is reaped by
// whatever pid 1 is, which in a container may never do it).
func waitDead(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		st := procState(pid)
		if st == "" || st == "Z" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d still alive (state %s)", pid, st)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// assertReaped checks that Run left no zombie of the command behind.
func assertReaped(t *testing.T, res Result) {
	t.Helper()
	if res.Pid == 0 {
		t.Fatal("no pid")
	}
	if st := procState(res.Pid); st == "Z" {
		t.Errorf("pid %d is a zombie after Run returned", res.Pid)
	}
}

func TestExitCodes(t *testing.T) {
	for _, code := range []int{0, 1, 2, 3, 42, 255} {
		res := Run(t.Context(), sh(fmt.Sprintf("exit %d", code)))
		if res.Err != nil || res.ExitCode != code {
			t.Errorf("exit %d: got code %d, err %v", code, res.ExitCode, res.Err)
		}
		if res.FinishedAt.Before(res.StartedAt) || res.StartedAt.IsZero() {
			t.Errorf("times: %v .. %v", res.StartedAt, res.FinishedAt)
		}
	}
}

func TestSeparateStreams(t *testing.T) {
	res := Run(t.Context(), sh("echo out1; echo err1 >&2; echo out2; echo err2 >&2; exit 1"))
	if res.ExitCode != 1 || res.Err != nil {
		t.Fatalf("got %d %v", res.ExitCode, res.Err)
	}
	if got := string(res.Stdout); got != "out1\nout2\n" {
		t.Errorf("stdout %q", got)
	}
	if got := string(res.Stderr); got != "err1\nerr2\n" {
		t.Errorf("stderr %q", got)
	}
	if res.Truncated {
		t.Error("truncated")
	}
}

func TestTruncationKeepsTail(t *testing.T) {
	c := sh("i=1; while [ $i -le 1000 ]; do echo line$i; i=$((i+1)); done; echo small >&2")
	c.MaxOutput = 100
	res := Run(t.Context(), c)
	if res.ExitCode != 0 {
		t.Fatalf("exit %d: %v", res.ExitCode, res.Err)
	}
	if !res.StdoutTruncated || !res.Truncated || res.StderrTruncated {
		t.Errorf("flags: stdout %v stderr %v any %v", res.StdoutTruncated, res.StderrTruncated, res.Truncated)
	}
	if len(res.Stdout) != 100 || !bytes.HasSuffix(res.Stdout, []byte("line999\nline1000\n")) {
		t.Errorf("stdout (%d bytes): %q", len(res.Stdout), res.Stdout)
	}
	if string(res.Stderr) != "small\n" {
		t.Errorf("stderr %q", res.Stderr)
	}
}

func TestBigOutput(t *testing.T) {
	// 64 MiB on stdout, then a marker: the end is kept, memory stays bounded.
	res := Run(t.Context(), sh("head -c 67108864 /dev/zero; echo END"))
	if res.ExitCode != 0 {
		t.Fatalf("exit %d: %v", res.ExitCode, res.Err)
	}
	if len(res.Stdout) != DefaultMaxOutput || !res.StdoutTruncated {
		t.Errorf("kept %d bytes, truncated %v", len(res.Stdout), res.StdoutTruncated)
	}
	if !bytes.HasSuffix(res.Stdout, []byte("\x00END\n")) {
		t.Errorf("tail %q", res.Stdout[len(res.Stdout)-10:])
	}
}

func TestTimeoutKillsProcessGroup(t *testing.T) {
	requireLinux(t)
	c := sh("sleep 100 & echo $!; sleep 100")
	c.Timeout = 200 * time.Millisecond
	start := time.Now()
	res := Run(t.Context(), c)
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Errorf("Run took %v", elapsed)
	}
	if !res.TimedOut || res.ExitCode != -1 || !errors.Is(res.Err, ErrTimeout) {
		t.Fatalf("got timedOut %v code %d err %v", res.TimedOut, res.ExitCode, res.Err)
	}
	assertReaped(t, res)
	grandchild, err := strconv.Atoi(strings.TrimSpace(string(res.Stdout)))
	if err != nil {
		t.Fatalf("grandchild pid: %q", res.Stdout)
	}
	waitDead(t, grandchild)
}

func TestTermIgnoredGetsKilled(t *testing.T) {
	requireLinux(t)
	c := sh(`trap "" TERM; sleep 100 & echo $!; sleep 100`)
	c.Timeout = 100 * time.Millisecond
	c.KillGrace = 100 * time.Millisecond
	start := time.Now()
	res := Run(t.Context(), c)
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Errorf("Run took %v", elapsed)
	}
	if !res.TimedOut || res.ExitCode != -1 {
		t.Fatalf("got %+v", res)
	}
	assertReaped(t, res)
	grandchild, _ := strconv.Atoi(strings.TrimSpace(string(res.Stdout)))
	waitDead(t, grandchild)
}

func TestCancel(t *testing.T) {
	requireLinux(t)
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(100*time.Millisecond, cancel)
	res := Run(ctx, sh("sleep 100"))
	if !res.Canceled || res.ExitCode != -1 || !errors.Is(res.Err, context.Canceled) {
		t.Fatalf("got canceled %v code %d err %v", res.Canceled, res.ExitCode, res.Err)
	}
	assertReaped(t, res)
}

func TestCanceledBeforeStart(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	res := Run(ctx, sh("exit 0"))
	if res.ExitCode != -1 || !errors.Is(res.Err, ErrNotStarted) || res.Pid != 0 {
		t.Fatalf("got %+v", res)
	}
}

func TestNoZombie(t *testing.T) {
	requireLinux(t)
	for range 20 {
		res := Run(t.Context(), sh("exit 0"))
		assertReaped(t, res)
	}
}

func TestBackgroundChildDoesNotHang(t *testing.T) {
	requireLinux(t)
	start := time.Now()
	res := Run(t.Context(), sh("sleep 100 & echo $!"))
	if elapsed := time.Since(start); elapsed > 2*time.Second {
		t.Errorf("Run took %v: it waited for the background child", elapsed)
	}
	if res.ExitCode != 0 || res.Err != nil {
		t.Fatalf("got %d %v", res.ExitCode, res.Err)
	}
	assertReaped(t, res)
	grandchild, _ := strconv.Atoi(strings.TrimSpace(string(res.Stdout)))
	waitDead(t, grandchild)
}

func TestEscapedChildHoldingPipesDoesNotHang(t *testing.T) {
	requireLinux(t)
	if _, err := os.Stat("/usr/bin/setsid"); err != nil {
		t.Skip("no setsid")
	}
	c := sh("setsid sleep 3 & sleep 0.2; echo started")
	c.WaitDelay = 100 * time.Millisecond
	start := time.Now()
	res := Run(t.Context(), c)
	if elapsed := time.Since(start); elapsed > 2500*time.Millisecond {
		t.Errorf("Run took %v", elapsed)
	}
	if res.ExitCode != 0 || res.Err != nil || string(res.Stdout) != "started\n" {
		t.Fatalf("got %d %v %q", res.ExitCode, res.Err, res.Stdout)
	}
}

func TestEnvironmentIsExactlyEnv(t *testing.T) {
	t.Setenv("LOCALEXEC_LEAK", "leaked")
	res := Run(t.Context(), Cmd{Args: []string{"/usr/bin/env"}})
	if res.ExitCode != 0 || len(bytes.TrimSpace(res.Stdout)) != 0 {
		t.Errorf("nil Env: code %d, env %q", res.ExitCode, res.Stdout)
	}
	res = Run(t.Context(), Cmd{Args: []string{"env"}, Env: []string{"PATH=/usr/bin:/bin", "A=1"}})
	if got := string(res.Stdout); got != "PATH=/usr/bin:/bin\nA=1\n" {
		t.Errorf("env %q (code %d, %v)", got, res.ExitCode, res.Err)
	}
}

func TestNotFound(t *testing.T) {
	for _, c := range []Cmd{
		{Args: []string{"drover-no-such-program"}, Env: testEnv},
		{Args: []string{"sh"}}, // no PATH in its environment
		{Args: []string{"./missing.sh"}, Dir: t.TempDir()},
		{},
	} {
		res := Run(t.Context(), c)
		if res.ExitCode != -1 || !errors.Is(res.Err, ErrNotStarted) {
			t.Errorf("%v: got %d %v", c.Args, res.ExitCode, res.Err)
		}
	}
}

func TestRelativePathAndDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "run.sh"), []byte("#!/bin/sh\npwd\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	res := Run(t.Context(), Cmd{Args: []string{"./run.sh"}, Dir: dir, Env: testEnv})
	if res.ExitCode != 0 {
		t.Fatalf("exit %d: %v %s", res.ExitCode, res.Err, res.Stderr)
	}
	got, _ := filepath.EvalSymlinks(strings.TrimSpace(string(res.Stdout)))
	want, _ := filepath.EvalSymlinks(dir)
	if got != want {
		t.Errorf("pwd %q, want %q", got, want)
	}
}

func TestKilledBySignal(t *testing.T) {
	res := Run(t.Context(), sh("kill -9 $$"))
	if res.ExitCode != -1 || res.Err == nil || !strings.Contains(res.Err.Error(), "signal") {
		t.Fatalf("got %d %v", res.ExitCode, res.Err)
	}
}

func TestTailBuffer(t *testing.T) {
	for _, limit := range []int{1, 3, 7, 16} {
		for _, chunk := range []int{1, 2, 5, 16, 40} {
			b := &tailBuffer{max: limit}
			var all []byte
			for i := range 50 {
				p := bytes.Repeat([]byte{byte('a' + i%26)}, chunk)
				p[0] = byte('A' + i%26)
				all = append(all, p...)
				if _, err := b.Write(p); err != nil {
					t.Fatal(err)
				}
			}
			got, dropped := b.bytes()
			want := all[max(0, len(all)-limit):]
			if !bytes.Equal(got, want) || dropped != (len(all) > limit) {
				t.Errorf("max %d chunk %d: got %q (%v), want %q", limit, chunk, got, dropped, want)
			}
		}
	}
	b := &tailBuffer{max: 4}
	_, _ = b.Write([]byte("é!!!")) // é is 2 bytes: the last 4 are "\xa9!!!"
	got, _ := b.bytes()
	if string(got) != "!!!" {
		t.Errorf("cut rune not dropped: %q", got)
	}
}
