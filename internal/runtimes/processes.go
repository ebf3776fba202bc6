package runtimes

import "context"

// Process is a command a runtime started on this host for an instance.
type Process struct {
	InstanceKey
	Runtime string
	// Kind is fetch, apply, getInfo or plan.
	Kind    string
	Version string
	Command []string
	// Handle finds the process again after a crash (a localexec.Group as
	// JSON for local commands).
	Handle []byte
}

// ProcessRecorder keeps a durable record of the commands running on this
// host, so that a server started after a crash can end what they left
// running before it applies again. The server gives one to runtimes through
// Options.
type ProcessRecorder interface {
	// AddProcess records p and returns a function that deletes the record,
	// to call once the process and its group are gone.
	AddProcess(ctx context.Context, p Process) (remove func(), err error)
}
