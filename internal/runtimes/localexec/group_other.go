//go:build !linux

package localexec

import (
	"context"
	"time"
)

func bootID() string { return "" }

// endGroup does nothing: without /proc neither a mark nor a group can be
// told from a stranger's processes, and killing those is worse than leaving
// leftovers.
func endGroup(context.Context, Group, time.Duration) (EndResult, error) { return EndResult{}, nil }
