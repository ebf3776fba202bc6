package localexec

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Group identifies the process group of a command that ran: its id (the
// leader's pid) and, on Linux, the leader's start time and the boot it
// started in, which tell the leader from a later process that reused its id.
//
// Run reports each command's Group to Cmd.Tracker as soon as the command
// started, so that a record of it can outlive drover. After a crash (kill -9,
// OOM kill, power loss of the process, not of the host) Pdeathsig kills only
// the command itself; what it started (the steps of a script) goes on in the
// group. EndGroup, called by the next drover before it applies anything, ends
// those leftovers.
//
// Limits: a process that left the group (setsid, setpgid) is not found; the
// group is recorded a moment after the command started, so a crash in that
// moment (before the record is durable) can leave an unrecorded group, though
// Pdeathsig still kills its leader; and see EndGroup for reused ids.
type Group struct {
	Pgid int `json:"pgid"`
	// StartTicks is the leader's start time in clock ticks since boot
	// (field 22 of /proc/PID/stat); 0 where unknown.
	StartTicks uint64 `json:"startTicks,omitempty"`
	// BootID is /proc/sys/kernel/random/boot_id; "" where unknown.
	BootID string `json:"bootId,omitempty"`
}

// Tracker keeps a durable record of the process groups of running commands.
type Tracker interface {
	// Started records g; Run calls it right after the command started.
	// When it fails, Run kills the command and fails with ErrNotStarted:
	// a command that a crash could orphan unnoticed is not let run. done is
	// called once the group has been killed and the command reaped.
	Started(ctx context.Context, g Group) (done func(), err error)
}

// RecordFunc is a Tracker from a function that durably records a started
// group, given as its JSON encoding (what EndGroup's caller decodes after a
// crash), and returns the function that deletes the record.
type RecordFunc func(ctx context.Context, handle []byte) (done func(), err error)

// Started implements Tracker.
func (f RecordFunc) Started(ctx context.Context, g Group) (func(), error) {
	h, err := json.Marshal(g)
	if err != nil {
		return nil, fmt.Errorf("encode process group: %w", err)
	}
	return f(ctx, h)
}

// DefaultEndGrace is the time EndGroup leaves between SIGTERM and SIGKILL.
const DefaultEndGrace = 5 * time.Second

// EndResult is what EndGroup found and did.
type EndResult struct {
	// Found is how many live processes the group had (0: nothing to end).
	Found int
	// Killed says SIGKILL was needed (SIGTERM did not end them within grace).
	Killed bool
}

// EndGroup ends what is left of the process group g of an earlier drover:
// if the group still has live processes and is the one recorded, they get
// SIGTERM, then SIGKILL after grace (0 = DefaultEndGrace), and EndGroup waits
// until they are gone or ctx ends. A group from another boot is gone; a live
// leader with another start time means the id was reused: nothing is done.
//
// When the leader is gone (it usually is: Pdeathsig killed it with drover)
// but members remain, they are ours: Linux does not hand out a pid that is
// still some group's id. The one case this cannot tell apart is a group that
// ended entirely, then a new process that got the same pid, made it its own
// group's id, and exited before its children (it needs the pid counter to
// come round exactly to the same number in between); those children would
// be ended too.
//
// It is implemented on Linux only (it reads /proc); elsewhere it does nothing.
func EndGroup(ctx context.Context, g Group, grace time.Duration) (EndResult, error) {
	if grace <= 0 {
		grace = DefaultEndGrace
	}
	return endGroup(ctx, g, grace)
}
