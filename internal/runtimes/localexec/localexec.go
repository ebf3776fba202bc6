// Package localexec runs one command on this host, the way drover's local
// runners need it: without a shell, with exactly the environment given, with
// stdout and stderr captured separately and size-limited, and with the whole
// process tree cleaned up whatever happens.
//
// # Process lifetime
//
// The command runs in its own process group (Setpgid). On Linux it also gets
// Pdeathsig SIGKILL, so it dies with drover if drover is killed (only the
// direct child: grandchildren in its group are orphaned then, as after any
// crash of a parent; with Cmd.Tracker set, the next drover ends them, see
// Group and EndGroup; such a command also has MarkEnv in its environment).
// Pdeathsig fires when the OS thread that started the
// child exits; Go only ends threads locked with runtime.LockOSThread, so Run
// must not be called from such a goroutine that then exits.
//
// When the timeout elapses or ctx ends, the whole process group gets SIGTERM,
// then SIGKILL after Cmd.KillGrace. When the command exits by itself, what it
// left running in its process group (background jobs such as `sleep 100 &`)
// is killed too, as when a Kubernetes Job's pod ends: a run-to-completion
// command leaves nothing behind. A process that moved to another session or
// group (setsid, nohup with setsid) escapes this; if it keeps the output
// pipes open, Run stops reading them Cmd.WaitDelay after the command exited.
//
// The command is always waited for: Run never leaves a zombie.
//
// On Linux the group is killed before the leader is reaped (waitid with
// WNOWAIT), so the group id cannot have been reused by another process. On
// other Unix systems the leftovers are killed right after the leader is
// reaped.
package localexec

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"
)

// Defaults for the zero values of Cmd.
const (
	DefaultMaxOutput = 1 << 20
	DefaultKillGrace = 2 * time.Second
	DefaultWaitDelay = 2 * time.Second
)

// Errors set in Result.Err.
var (
	// ErrTimeout is wrapped by Result.Err when Cmd.Timeout elapsed.
	ErrTimeout = errors.New("timed out")
	// ErrNotStarted is wrapped by Result.Err when the command could not start.
	ErrNotStarted = errors.New("did not start")
)

// Cmd is a command to run.
type Cmd struct {
	// Args is the argv; Args[0] is the program. Without a path separator it
	// is looked up in the PATH of Env (not drover's own PATH); a relative
	// path with a separator is relative to Dir.
	Args []string
	// Path, if set, is the executable to run instead of resolving Args[0].
	Path string
	// Env is the complete environment of the command, KEY=VALUE. Nothing is
	// inherited from drover: nil means an empty environment. With a
	// Tracker, MarkEnv is added.
	Env []string
	// Dir is the working directory ("" = drover's).
	Dir string
	// Timeout bounds the run (0 = only ctx bounds it).
	Timeout time.Duration
	// MaxOutput is how many bytes of each of stdout and stderr are kept (the
	// end is kept). 0 means DefaultMaxOutput.
	MaxOutput int
	// KillGrace is the time between SIGTERM and SIGKILL when the command is
	// stopped (0 = DefaultKillGrace).
	KillGrace time.Duration
	// WaitDelay bounds how long output pipes still held open by escaped
	// descendants are read after the command exited (0 = DefaultWaitDelay).
	WaitDelay time.Duration
	// Tracker, if set, records the command's processes while it runs,
	// so that a drover started after a crash can end what it left (see
	// Group and EndGroup).
	Tracker Tracker
}

// Result is the outcome of a run.
type Result struct {
	// ExitCode is the command's exit code, or -1 when it did not start, was
	// stopped (timeout, cancel) or was killed by a signal; Err says which.
	ExitCode int
	// Err is nil when the command ran and exited by itself with ExitCode.
	Err error
	// TimedOut and Canceled say why the command was stopped.
	TimedOut, Canceled bool
	// Stdout and Stderr are the ends of the command's output.
	Stdout, Stderr []byte
	// StdoutTruncated and StderrTruncated say the beginning was dropped;
	// Truncated is either.
	StdoutTruncated, StderrTruncated, Truncated bool
	// Pid is the process id of the command (0 if it did not start).
	Pid        int
	StartedAt  time.Time
	FinishedAt time.Time
}

// Run runs c until it exits, its timeout elapses or ctx ends, and returns
// its outcome. It never returns before the process is reaped.
func Run(ctx context.Context, c Cmd) Result {
	res := Result{ExitCode: -1, StartedAt: time.Now()}
	defer func() {
		if res.FinishedAt.IsZero() {
			res.FinishedAt = time.Now()
		}
	}()
	if len(c.Args) == 0 && c.Path == "" {
		res.Err = fmt.Errorf("%w: no command", ErrNotStarted)
		return res
	}
	args := c.Args
	if len(args) == 0 {
		args = []string{c.Path}
	}
	path := c.Path
	if path == "" {
		p, err := lookPath(args[0], c.Env, c.Dir)
		if err != nil {
			res.Err = fmt.Errorf("%w: %w", ErrNotStarted, err)
			return res
		}
		path = p
	}
	maxOut := c.MaxOutput
	if maxOut <= 0 {
		maxOut = DefaultMaxOutput
	}
	grace := c.KillGrace
	if grace <= 0 {
		grace = DefaultKillGrace
	}
	waitDelay := c.WaitDelay
	if waitDelay <= 0 {
		waitDelay = DefaultWaitDelay
	}
	env := c.Env
	if env == nil {
		env = []string{} // nil would make os/exec inherit drover's environment
	}
	stdout, stderr := &tailBuffer{max: maxOut}, &tailBuffer{max: maxOut}
	cmd := &exec.Cmd{
		Path:        path,
		Args:        args,
		Env:         env,
		Dir:         c.Dir,
		Stdout:      stdout,
		Stderr:      stderr,
		SysProcAttr: sysProcAttr(),
		WaitDelay:   waitDelay,
	}
	if err := ctx.Err(); err != nil {
		res.Canceled = true
		res.Err = fmt.Errorf("%w: %w", ErrNotStarted, err)
		return res
	}
	if c.Tracker != nil {
		// The record is durable before the command starts: a crash at
		// any moment after finds every process the command started.
		g, err := newGroup()
		if err != nil {
			res.Err = fmt.Errorf("%w: %w", ErrNotStarted, err)
			return res
		}
		cmd.Env = append(append([]string(nil), env...), MarkEnv+"="+g.Mark)
		done, err := c.Tracker.Started(ctx, g)
		if err != nil {
			res.Err = fmt.Errorf("%w: record its processes: %w", ErrNotStarted, err)
			return res
		}
		if done != nil {
			// Every return below comes after the command's processes
			// were killed and the leader reaped.
			defer done()
		}
	}
	res.StartedAt = time.Now()
	if err := cmd.Start(); err != nil {
		res.Err = fmt.Errorf("%w: %w", ErrNotStarted, err)
		return res
	}
	pid := cmd.Process.Pid
	res.Pid = pid

	var timeout <-chan time.Time
	if c.Timeout > 0 {
		t := time.NewTimer(c.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	exited := make(chan struct{})
	var waitErr error
	go func() {
		if waitNoReap {
			waitExited(pid)
		} else {
			waitErr = cmd.Wait()
		}
		close(exited)
	}()
	stopped := false
	select {
	case <-exited:
	case <-timeout:
		res.TimedOut, stopped = true, true
	case <-ctx.Done():
		res.Canceled, stopped = true, true
	}
	if stopped {
		killGroup(pid, syscall.SIGTERM)
		t := time.NewTimer(grace)
		select {
		case <-exited:
		case <-t.C:
			killGroup(pid, syscall.SIGKILL)
			<-exited
		}
		t.Stop()
	}
	// Kill what the command left running in its group. With waitNoReap the
	// leader is still a zombie holding the group id, so nothing else can
	// have taken it and this reaches only the command's leftovers.
	killGroup(pid, syscall.SIGKILL)
	if waitNoReap {
		waitErr = cmd.Wait()
	}
	res.FinishedAt = time.Now()
	res.Stdout, res.StdoutTruncated = stdout.bytes()
	res.Stderr, res.StderrTruncated = stderr.bytes()
	res.Truncated = res.StdoutTruncated || res.StderrTruncated
	switch {
	case res.TimedOut:
		res.Err = fmt.Errorf("%w after %v", ErrTimeout, c.Timeout)
		return res
	case res.Canceled:
		res.Err = fmt.Errorf("stopped: %w", context.Cause(ctx))
		return res
	}
	st := cmd.ProcessState
	if st == nil {
		res.Err = waitErr
		return res
	}
	res.ExitCode = st.ExitCode()
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		res.ExitCode = -1
		res.Err = fmt.Errorf("killed by signal %v", ws.Signal())
	}
	return res
}

// lookPath resolves name like a shell with environment env would: a name
// with a slash is a path (relative to dir), anything else is searched in
// env's PATH.
func lookPath(name string, env []string, dir string) (string, error) {
	if name == "" {
		return "", errors.New("empty program name")
	}
	if strings.Contains(name, "/") {
		p := name
		if !filepath.IsAbs(p) && dir != "" {
			p = filepath.Join(dir, p)
		}
		if err := checkExecutable(p); err != nil {
			return "", fmt.Errorf("%s: %w", name, err)
		}
		return name, nil // os/exec resolves it relative to Dir itself
	}
	pathEnv := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			pathEnv = v
		}
	}
	for _, d := range filepath.SplitList(pathEnv) {
		if d == "" || !filepath.IsAbs(d) {
			continue // never resolve against the current directory implicitly
		}
		p := filepath.Join(d, name)
		if checkExecutable(p) == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: executable file not found in PATH (%s)", name, pathEnv)
}

func checkExecutable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if fi.IsDir() {
		return errors.New("is a directory")
	}
	if fi.Mode().Perm()&0o111 == 0 {
		return errors.New("permission denied (not executable)")
	}
	return nil
}

// tailBuffer keeps the last max bytes written to it. It grows up to max,
// then wraps around as a ring.
type tailBuffer struct {
	max     int
	buf     []byte
	pos     int // next write position once the ring is full
	dropped bool
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	n := len(p)
	if len(p) >= b.max {
		b.dropped = b.dropped || len(b.buf) > 0 || len(p) > b.max
		b.buf = append(b.buf[:0], p[len(p)-b.max:]...)
		b.pos = 0
		return n, nil
	}
	if room := b.max - len(b.buf); room > 0 {
		k := min(room, len(p))
		b.buf = append(b.buf, p[:k]...)
		p = p[k:]
	}
	for len(p) > 0 {
		b.dropped = true
		k := copy(b.buf[b.pos:], p)
		p = p[k:]
		b.pos = (b.pos + k) % b.max
	}
	return n, nil
}

// bytes returns what is kept, oldest first, and whether anything was
// dropped. A multi-byte character cut at the start is dropped.
func (b *tailBuffer) bytes() ([]byte, bool) {
	out := make([]byte, 0, len(b.buf))
	out = append(out, b.buf[b.pos:]...)
	out = append(out, b.buf[:b.pos]...)
	if b.dropped {
		for i := 0; i < utf8.UTFMax-1 && len(out) > 0 && !utf8.RuneStart(out[0]); i++ {
			out = out[1:]
		}
	}
	return out, b.dropped
}
