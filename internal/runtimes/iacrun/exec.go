package iacrun

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/drover-dev/drover/internal/runtimes/redact"
)

// OutputLimit is how much of each of a command's stdout and stderr is kept
// (the end).
const OutputLimit = 64 << 10

// TailBuffer is an io.Writer keeping the last limit bytes written.
type TailBuffer struct {
	mu        sync.Mutex
	limit     int
	buf       []byte
	truncated bool
}

// NewTailBuffer returns a TailBuffer keeping the last limit bytes.
func NewTailBuffer(limit int) *TailBuffer { return &TailBuffer{limit: limit} }

func (b *TailBuffer) Write(p []byte) (int, error) {
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
func (b *TailBuffer) String() string {
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
func (b *TailBuffer) Truncated() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.truncated || len(b.buf) > b.limit
}

// Outcome is what one command did.
type Outcome struct {
	Stdout, Stderr string
	Truncated      bool
	ExitCode       int
	Err            error
	// Result says a non-zero exit code is a result, not a failure (a plan
	// that found changes): the recorded run then has no error.
	Result bool
}

// Redact replaces raw secrets in what a command printed and in its error,
// before the outcome is recorded or quoted in an error: as they are and in
// the escaped forms HCL and JSON print them. Secrets shorter than
// redact.MinTextLen are left in text (see package redact).
func (o Outcome) Redact(rd *redact.Redactor) Outcome {
	o.Stdout, o.Stderr = rd.Text(o.Stdout), rd.Text(o.Stderr)
	if o.Err != nil {
		if msg := rd.Text(o.Err.Error()); msg != o.Err.Error() {
			o.Err = errors.New(msg)
		}
	}
	return o
}

// ExitCode is the process exit code in err: 0 without error, -1 when the
// process did not start or was stopped (by ctx).
func ExitCode(ctx context.Context, err error) int {
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

// FileExists reports whether path names an existing file.
func FileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// ShellQuote quotes s as one word for sh.
func ShellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
