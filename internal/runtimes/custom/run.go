package custom

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/drover-dev/drover/internal/runtimes"
	"github.com/drover-dev/drover/internal/runtimes/localexec"
	"github.com/drover-dev/drover/internal/runtimes/redact"
)

// Output limits.
const (
	// maxOutput is how much of each stream a command may print and still be
	// read in full (a structured fetch's JSON, getInfo's outputs).
	maxOutput = 1 << 20
	// maxRecorded is how much of each stream a recorded run keeps (the end):
	// enough for any log worth reading, small enough that the 200 runs kept
	// per instance and kind stay cheap in the store.
	maxRecorded = 64 << 10
	// excerptLines and excerptBytes bound the output quoted in errors.
	excerptLines = 10
	excerptBytes = 1024
	redacted     = redact.Marker
)

// result is a finished command, its output redacted.
type result struct {
	localexec.Result
	stdout, stderr string
}

// run runs c for the instance and records it.
func (r *Runtime) run(ctx context.Context, key runtimes.InstanceKey, version string, c *command) result {
	started := r.now()
	lr := localexec.Run(ctx, localexec.Cmd{
		Args:      c.argv,
		Env:       c.env,
		Dir:       c.dir,
		Timeout:   c.timeout,
		MaxOutput: maxOutput,
		Tracker:   r.tracker(key, version, c),
	})
	finished := r.now()
	res := result{Result: lr, stdout: c.rd.Text(string(lr.Stdout)), stderr: c.rd.Text(string(lr.Stderr))}
	argv := c.rd.All(c.argv)
	errText := ""
	if lr.Err != nil {
		errText = c.rd.Text(lr.Err.Error())
	}
	level := slog.LevelDebug
	if c.kind == kindApply {
		level = slog.LevelInfo
	}
	r.log.Log(context.Background(), level, "custom runtime command finished",
		"runtime", r.name, "instance", key.String(), "kind", c.kind, "version", version,
		"command", argv, "exit_code", lr.ExitCode, "error", errText,
		"duration", lr.FinishedAt.Sub(lr.StartedAt).Round(time.Millisecond))
	if r.runs == nil {
		return res
	}
	out, outCut := tail(res.stdout, maxRecorded)
	errOut, errCut := tail(res.stderr, maxRecorded)
	run := runtimes.Run{
		InstanceKey: key,
		Runtime:     r.name,
		Kind:        c.kind,
		Version:     version,
		Command:     argv,
		ExitCode:    lr.ExitCode,
		Error:       errText,
		StartedAt:   started,
		FinishedAt:  finished,
		Stdout:      out,
		Stderr:      errOut,
		Truncated:   lr.Truncated || outCut || errCut,
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := r.runs.RecordRun(rctx, run); err != nil {
		r.log.Warn("custom runtime: recording a command run failed", "runtime", r.name, "instance", key.String(), "kind", c.kind, "error", err)
	}
	return res
}

// describeFailure says why a command that did not exit by itself stopped.
func (r *Runtime) describeFailure(c *command, res result) string {
	switch {
	case res.TimedOut:
		return fmt.Sprintf("%s timed out after %v", c.kind, c.timeout)
	case errors.Is(res.Err, localexec.ErrNotStarted):
		return fmt.Sprintf("%s could not start: %s", c.kind, c.rd.Text(strings.TrimPrefix(res.Err.Error(), localexec.ErrNotStarted.Error()+": ")))
	case res.Err != nil:
		return fmt.Sprintf("%s %s", c.kind, c.rd.Text(res.Err.Error()))
	}
	return fmt.Sprintf("%s exited with code %d", c.kind, res.ExitCode)
}

// excerpt is the end of a command's output for an error message: stderr,
// or stdout when stderr is empty; at most excerptLines lines and
// excerptBytes bytes. It starts with ": " when not empty.
func excerpt(res result) string {
	s := strings.TrimSpace(res.stderr)
	if s == "" {
		s = strings.TrimSpace(res.stdout)
	}
	if s == "" {
		return ""
	}
	lines := strings.Split(s, "\n")
	cut := false
	if len(lines) > excerptLines {
		lines, cut = lines[len(lines)-excerptLines:], true
	}
	s = strings.Join(lines, "\n")
	if len(s) > excerptBytes {
		s, _ = tail(s, excerptBytes)
		cut = true
	}
	if cut {
		s = "…" + s
	}
	return ": " + s
}

// tail keeps the last n bytes of s, starting at a character boundary.
func tail(s string, n int) (string, bool) {
	if len(s) <= n {
		return s, false
	}
	s = s[len(s)-n:]
	for i := 0; i < 3 && len(s) > 0 && s[0]&0xC0 == 0x80; i++ {
		s = s[1:]
	}
	return s, true
}
