//go:build !linux

package localexec

import (
	"context"
	"time"
)

// groupOf: without /proc the leader's start time is unknown.
func groupOf(pid int) Group { return Group{Pgid: pid} }

// endGroup does nothing: without /proc a group cannot be told from a later
// one that reused its id, and killing a stranger's processes is worse than
// leaving leftovers.
func endGroup(context.Context, Group, time.Duration) (EndResult, error) { return EndResult{}, nil }
