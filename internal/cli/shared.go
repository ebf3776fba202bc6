package cli

import (
	"context"
	"io"
)

// What the server verbs of internal/daemon share with these, so that every
// verb reports errors, escapes text and prints JSON the same way.

// UsageErrorf is a usage error (exit 64) with a formatted message.
func UsageErrorf(format string, args ...any) error { return usageErrorf(format, args...) }

// APIError turns an error of the API client into the CLI error with the
// right exit code and message.
func APIError(err error) error { return apiErr(err) }

// Clean makes text from other people safe to print on one terminal line.
func Clean(s string) string { return clean(s) }

// OutputFormat refuses an -o value other than allowed (a usage error).
func OutputFormat(value string, allowed ...string) error { return outputFormat(value, allowed...) }

// WriteJSON prints v as indented JSON.
func WriteJSON(w io.Writer, v any) error { return writeJSON(w, v) }

// SignalContext is cancelled on SIGINT or SIGTERM.
func SignalContext(parent context.Context) (context.Context, context.CancelFunc) {
	return signalContext(parent)
}
