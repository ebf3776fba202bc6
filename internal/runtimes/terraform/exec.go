package terraform

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/drover-dev/drover/internal/runtimes"
)

// outputLimit is how much of each of a command's stdout and stderr is kept
// (the end).
const outputLimit = 64 << 10

// tailBuffer is an io.Writer keeping the last limit bytes written.
type tailBuffer struct {
	mu        sync.Mutex
	limit     int
	buf       []byte
	truncated bool
}

func newTailBuffer(limit int) *tailBuffer { return &tailBuffer{limit: limit} }

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(p)
	if len(p) > b.limit {
		p = p[len(p)-b.limit:]
		b.truncated = true
	}
	b.buf = append(b.buf, p...)
	if len(b.buf) > 2*b.limit {
		b.buf = append(b.buf[:0], b.buf[len(b.buf)-b.limit:]...)
		b.truncated = true
	}
	return n, nil
}

// String returns the kept bytes, starting at a character boundary.
func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.buf
	if len(s) > b.limit {
		s = s[len(s)-b.limit:]
		b.truncated = true
	}
	for n := 0; n < utf8.UTFMax && len(s) > 0 && !utf8.RuneStart(s[0]); n++ {
		s = s[1:]
	}
	return string(s)
}

// Truncated reports whether bytes were dropped.
func (b *tailBuffer) Truncated() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.truncated || len(b.buf) > b.limit
}

// outcome is what one command did.
type outcome struct {
	stdout, stderr string
	truncated      bool
	exitCode       int
	err            error
}

// exitCode is the process exit code in err: 0 without error, -1 when the
// process did not start or was stopped (by ctx).
func exitCode(ctx context.Context, err error) int {
	if err == nil {
		return 0
	}
	if ctx.Err() != nil {
		return -1
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return -1
}

// runError is the Error of a Run: why a command did not exit by itself, or
// its exit status.
func runError(ctx context.Context, err error) string {
	if err == nil {
		return ""
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		if errors.Is(ctxErr, context.DeadlineExceeded) {
			return "timed out"
		}
		return "canceled"
	}
	first, _, _ := strings.Cut(err.Error(), "\n")
	return first
}

// record reports one command to opts.Runs.
func (r *Runtime) record(ctx context.Context, key runtimes.InstanceKey, kind, version string, cmd []string, started time.Time, o outcome) {
	if r.runs == nil {
		return
	}
	run := runtimes.Run{
		InstanceKey: key,
		Runtime:     r.name,
		Kind:        kind,
		Version:     version,
		Command:     cmd,
		ExitCode:    o.exitCode,
		StartedAt:   started,
		FinishedAt:  r.now(),
		Stdout:      o.stdout,
		Stderr:      o.stderr,
		Truncated:   o.truncated,
	}
	// A plan that found changes exits 2 with no error.
	if o.exitCode != 0 && (kind != kindPlan || o.exitCode != 2) {
		run.Error = runError(ctx, o.err)
	}
	// Record even when ctx ended: the run happened.
	if rerr := r.runs.RecordRun(context.WithoutCancel(ctx), run); rerr != nil {
		r.log.Warn("terraform runtime: cannot record run", "runtime", r.name, "instance", key.String(), "kind", kind, "error", rerr)
	}
}

// errorExcerpt is the part of a command's stderr worth putting in an error
// message: from terraform's first "Error:" on, or else the end, at most
// about 1 KiB, on one line per paragraph.
func errorExcerpt(stderr string) string {
	const limit = 1024
	s := stderr
	if i := strings.Index(s, "Error: "); i >= 0 {
		s = s[i:]
	} else if len(s) > limit {
		s = s[len(s)-limit:]
	}
	var lines []string
	for line := range strings.SplitSeq(s, "\n") {
		line = strings.TrimSpace(strings.Trim(line, "│╷╵"))
		if line != "" {
			lines = append(lines, line)
		}
	}
	s = strings.Join(lines, " ")
	if len(s) > limit {
		s = s[:limit]
		for len(s) > 0 && !utf8.ValidString(s) {
			s = s[:len(s)-1]
		}
		s += "…"
	}
	return s
}

// fileExists reports whether path names an existing file.
func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
