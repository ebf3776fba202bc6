package localexec

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"
)

// Group identifies the processes of a command that ran. A tracked command
// gets a random mark in its environment (MarkEnv), which every process it
// starts inherits; Mark and the boot it ran in identify them. Records made
// by earlier drover versions name the process group instead: its id (the
// leader's pid) and the leader's start time, which tell the leader from a
// later process that reused its id.
//
// Run reports each tracked command's Group to Cmd.Tracker before the command
// starts, so a record of it outlives drover whenever the command ran. After
// a crash (kill -9, OOM kill, power loss of the process, not of the host)
// Pdeathsig kills only the command itself; what it started (the steps of a
// script) goes on. EndGroup, called by the next drover before it applies
// anything, ends those leftovers.
//
// Limits: a process that starts its children with an emptied environment
// (env -i) hides them from the mark; see EndGroup for the older records.
type Group struct {
	// Mark is the value of MarkEnv in the command's environment ("" in
	// records of earlier versions).
	Mark string `json:"mark,omitempty"`
	// Pgid is the process group id of earlier versions' records (0 with a
	// Mark).
	Pgid int `json:"pgid,omitempty"`
	// StartTicks is the leader's start time in clock ticks since boot
	// (field 22 of /proc/PID/stat); 0 where unknown.
	StartTicks uint64 `json:"startTicks,omitempty"`
	// BootID is /proc/sys/kernel/random/boot_id; "" where unknown.
	BootID string `json:"bootId,omitempty"`
}

// Tracker keeps a durable record of the process groups of running commands.
type Tracker interface {
	// Started records g; Run calls it right before the command starts.
	// When it fails, Run fails with ErrNotStarted and starts nothing: a
	// command that a crash could orphan unnoticed is not let run. done is
	// called once the command's processes have been killed and reaped (or
	// when it could not start).
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

// MarkEnv is the environment variable that carries a tracked command's mark.
const MarkEnv = "DROVER_RUN_MARK"

// EndGroup ends what is left of the command g of an earlier drover: its live
// processes get SIGTERM, then SIGKILL after grace (0 = DefaultEndGrace), and
// EndGroup waits until they are gone or ctx ends. A group from another boot
// is gone. With a Mark, its processes are those whose environment holds the
// mark (it is random: nothing else has it).
//
// A record of an earlier version names a process group: a live leader with
// another start time means the id was reused and nothing is done. When the
// leader is gone (it usually is: Pdeathsig killed it with drover)
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

// newGroup makes the Group of a command about to start: a fresh mark.
func newGroup() (Group, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return Group{}, fmt.Errorf("make a process mark: %w", err)
	}
	return Group{Mark: hex.EncodeToString(b), BootID: bootID()}, nil
}
