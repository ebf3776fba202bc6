package cli

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"
)

// Exit codes of every verb. A script can tell a mistyped command (exitUsage)
// from a rollout that failed (exitFailed), timed out (exitTimeout) or waits
// for someone's approval (exitApproval).
const (
	exitOK      = 0
	exitError   = 1
	exitFailed  = 2
	exitTimeout = 3
	// exitApproval: wait (or push --wait) returned because the rollout
	// can go on only once a person approves a release channel.
	exitApproval = 4
	// exitUsage is sysexits.h's EX_USAGE: a missing or bad flag or argument.
	exitUsage = 64
)

// usageError marks err as a usage error (exit exitUsage).
func usageError(err error) error {
	return &ExitError{Code: exitUsage, Err: err}
}

// usageErrorf is usageError with a formatted message.
func usageErrorf(format string, args ...any) error {
	return usageError(fmt.Errorf(format, args...))
}

// markUsageErrors makes cobra's own errors (bad flags or flag values, wrong
// argument counts) usage errors, for root and every command under it.
func markUsageErrors(root *cobra.Command) {
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError(err) })
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		if args := c.Args; args != nil {
			c.Args = func(cmd *cobra.Command, a []string) error {
				if err := args(cmd, a); err != nil {
					return usageError(err)
				}
				return nil
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// isUsage reports whether err is a usage error.
func isUsage(err error) bool {
	var exit *ExitError
	return errors.As(err, &exit) && exit.Code == exitUsage
}
