package custom

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/drover-dev/drover/internal/config"
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

// executor runs the commands of a runtime: as processes on this host
// (localExecutor) or as Kubernetes Jobs (jobExecutor).
type executor interface {
	// build prepares the kind command of a target from its config.
	build(kind string, t *runtimes.Target, tc *config.TaskConfig, kc *config.KubernetesConfig, cmdEnv map[string]config.EnvValue, timeout time.Duration) (*command, error)
	// run runs c and returns its outcome; the output is not redacted yet.
	run(ctx context.Context, key runtimes.InstanceKey, version string, c *command) outcome
}

// outcome is what an executor reports of a command it ran.
type outcome struct {
	// exitCode is the command's exit code, or -1 when it did not exit by
	// itself; err says why.
	exitCode int
	err      error
	// notStarted, timedOut and canceled qualify err.
	notStarted, timedOut, canceled bool
	stdout, stderr                 string
	// stdoutTruncated says the beginning of stdout was dropped; truncated
	// that something was.
	stdoutTruncated, truncated bool
	// reason says why a Job failed, for people ("" for processes).
	reason string
	// command is what ran, as recorded: the argv, or the image and argv.
	command []string
	// job names the Job that ran ("" for processes).
	job      string
	duration time.Duration
}

// result is a finished command, its output redacted.
type result struct {
	// ExitCode is the command's exit code, or -1 when it did not exit by
	// itself (Err says why).
	ExitCode int
	Err      error
	// NotStarted, TimedOut and Canceled say why the command did not exit
	// by itself.
	NotStarted, TimedOut, Canceled bool
	StdoutTruncated                bool
	stdout, stderr                 string
	// reason says why a Job failed ("" for processes).
	reason string
}

// run runs c for the instance and records it.
func (r *Runtime) run(ctx context.Context, key runtimes.InstanceKey, version string, c *command) result {
	started := r.now()
	o := r.exec.run(ctx, key, version, c)
	finished := r.now()
	res := result{
		ExitCode: o.exitCode, Err: o.err,
		NotStarted: o.notStarted, TimedOut: o.timedOut, Canceled: o.canceled,
		StdoutTruncated: o.stdoutTruncated,
		stdout:          c.rd.Text(o.stdout), stderr: c.rd.Text(o.stderr), reason: c.rd.Text(o.reason),
	}
	argv := c.rd.All(o.command)
	errText := ""
	if o.err != nil {
		errText = c.rd.Text(o.err.Error())
	}
	level := slog.LevelDebug
	if c.kind == kindApply {
		level = slog.LevelInfo
	}
	attrs := []any{
		"runtime", r.name, "instance", key.String(), "kind", c.kind, "version", version,
		"command", argv, "exit_code", o.exitCode, "error", errText,
		"duration", o.duration.Round(time.Millisecond),
	}
	if o.job != "" {
		attrs = append(attrs, "job", o.job, "reason", res.reason)
	}
	r.log.Log(context.Background(), level, "custom runtime command finished", attrs...)
	if r.runs == nil {
		return res
	}
	errOut := res.stderr
	if errOut == "" {
		errOut = res.reason // a Job's output is one stream: stdout
	}
	out, outCut := tail(res.stdout, maxRecorded)
	errOut, errCut := tail(errOut, maxRecorded)
	run := runtimes.Run{
		InstanceKey: key,
		Runtime:     r.name,
		Kind:        c.kind,
		Version:     version,
		Command:     argv,
		ExitCode:    o.exitCode,
		Error:       errText,
		StartedAt:   started,
		FinishedAt:  finished,
		Stdout:      out,
		Stderr:      errOut,
		Truncated:   o.truncated || outCut || errCut,
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := r.runs.RecordRun(rctx, run); err != nil {
		r.log.Warn("custom runtime: recording a command run failed", "runtime", r.name, "instance", key.String(), "kind", c.kind, "error", err)
	}
	return res
}

// localExecutor runs commands as processes on this host.
type localExecutor struct{ r *Runtime }

func (e localExecutor) build(kind string, t *runtimes.Target, tc *config.TaskConfig, kc *config.KubernetesConfig, cmdEnv map[string]config.EnvValue, timeout time.Duration) (*command, error) {
	return e.r.buildLocal(kind, t, tc, kc, cmdEnv, timeout)
}

func (e localExecutor) run(ctx context.Context, key runtimes.InstanceKey, version string, c *command) outcome {
	lr := localexec.Run(ctx, localexec.Cmd{
		Args:      c.argv,
		Env:       c.env,
		Dir:       c.dir,
		Timeout:   c.timeout,
		MaxOutput: maxOutput,
		Tracker:   e.r.tracker(key, version, c),
	})
	return outcome{
		exitCode:        lr.ExitCode,
		err:             lr.Err,
		notStarted:      errors.Is(lr.Err, localexec.ErrNotStarted),
		timedOut:        lr.TimedOut,
		canceled:        lr.Canceled,
		stdout:          string(lr.Stdout),
		stderr:          string(lr.Stderr),
		stdoutTruncated: lr.StdoutTruncated,
		truncated:       lr.Truncated,
		command:         c.argv,
		duration:        lr.FinishedAt.Sub(lr.StartedAt),
	}
}

// describeFailure says why a command that did not exit by itself stopped.
func (r *Runtime) describeFailure(c *command, res result) string {
	switch {
	case res.TimedOut:
		return fmt.Sprintf("%s timed out after %v", c.kind, c.timeout)
	case res.NotStarted:
		return fmt.Sprintf("%s could not start: %s", c.kind, c.rd.Text(strings.TrimPrefix(res.Err.Error(), localexec.ErrNotStarted.Error()+": ")))
	case res.Err != nil:
		return fmt.Sprintf("%s %s", c.kind, c.rd.Text(res.Err.Error()))
	}
	return fmt.Sprintf("%s exited with code %d", c.kind, res.ExitCode)
}

// excerpt is the end of a command's output for an error message: stderr,
// or stdout when stderr is empty; at most excerptLines lines and
// excerptBytes bytes. It starts with ": " when not empty. A Job's failure
// reason, when the error does not say it already (it exited, or timed
// out), comes first, in parentheses.
func excerpt(res result) string {
	why := ""
	if res.reason != "" && (res.Err == nil || res.TimedOut) {
		why = " (" + res.reason + ")"
	}
	s := strings.TrimSpace(res.stderr)
	if s == "" {
		s = strings.TrimSpace(res.stdout)
	}
	if s == "" {
		return why
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
	return why + ": " + s
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
