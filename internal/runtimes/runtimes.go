// Package runtimes defines the interface between the convergence engine and
// the backends services run on. A Runtime is two calls: Fetch (what runs now)
// and Apply (drive it to a target). Optional abilities are one-method
// interfaces found by type assertion (Watcher, InfoGetter, Deleter). The
// engine imports this package, never an implementation.
package runtimes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// InstanceKey names a service in a release channel.
type InstanceKey struct {
	Application    string `json:"application"`
	Service        string `json:"service"`
	ReleaseChannel string `json:"releaseChannel"`
}

func (k InstanceKey) String() string {
	return k.Application + "/" + k.Service + "/" + k.ReleaseChannel
}

// Target is what one service instance must converge to.
type Target struct {
	InstanceKey
	// Version is the service (bundle) version.
	Version string `json:"version"`
	// DesiredStateID is the desired state the version comes from.
	DesiredStateID string `json:"desiredStateId"`
	// Namespace is the Kubernetes namespace chosen by the release channel, if any.
	Namespace string `json:"namespace,omitempty"`
	// Objects are the compiled objects: Kubernetes manifests
	// (map[string]any) or one custom runtime object, as JSON.
	Objects []json.RawMessage `json:"objects"`
	// Backend is "kubernetes" or "customRuntime".
	Backend string `json:"backend"`
	// Env is the service's environment in this channel (release channel
	// defaults, then service env), secrets resolved. Custom runtime commands
	// receive it; it never appears in logs or API responses.
	Env map[string]string `json:"-"`
	// Secrets are the values of Env that came from raw secrets: runtimes
	// redact them from everything they record (output, errors, getInfo).
	Secrets []string `json:"-"`
	// Memo is what the runtime returned as ApplyResult.Memo from its last
	// successful apply of this instance (of any version), as the store
	// keeps it with the instance; empty when none is recorded. A runtime
	// that must remember something across applies (an apply-only custom
	// runtime: what it applied last) keeps it here rather than on the disk
	// of the process that applied, so that every server sharing the store,
	// and every agent serving the runtime, sees the same.
	Memo json.RawMessage `json:"memo,omitempty"`
}

// MaxMemo is the largest ApplyResult.Memo the engine keeps: a memo is a
// small record, stored with the instance and sent with every target.
const MaxMemo = 16 << 10

// ObjectStatus is the health of one runtime object.
type ObjectStatus string

// Object statuses.
const (
	ObjectPending   ObjectStatus = "PENDING"
	ObjectSucceeded ObjectStatus = "SUCCEEDED"
	ObjectFailed    ObjectStatus = "FAILED"
)

// Object is one object as the runtime sees it.
type Object struct {
	ObjectType string `json:"objectType"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
	// Version is the service version the object runs ("" = unknown owner).
	Version           string       `json:"version,omitempty"`
	Replicas          int32        `json:"replicas"`
	AvailableReplicas int32        `json:"availableReplicas"`
	TargetReplicas    int32        `json:"targetReplicas"`
	Status            ObjectStatus `json:"status"`
	Message           string       `json:"message,omitempty"`
}

// State is what runs for one instance, as fetched.
type State struct {
	// Version is the version running now ("" when nothing runs).
	Version string `json:"version,omitempty"`
	// Converged is true when Version runs healthy everywhere.
	Converged bool `json:"converged"`
	// Failed is true when the rollout of Version failed and will not recover by itself.
	Failed bool `json:"failed,omitempty"`
	// Drifted is true when the live objects differ from what was applied.
	Drifted bool     `json:"drifted,omitempty"`
	Message string   `json:"message,omitempty"`
	Objects []Object `json:"objects,omitempty"`
}

// Action is the outcome of applying one object (Flux's ChangeSet vocabulary).
type Action string

// Apply actions.
const (
	ActionCreated    Action = "created"
	ActionConfigured Action = "configured"
	ActionUnchanged  Action = "unchanged"
	ActionDeleted    Action = "deleted"
	ActionSkipped    Action = "skipped"
)

// Change is one object's apply outcome.
type Change struct {
	Object string `json:"object"`
	Action Action `json:"action"`
}

// ApplyResult is what an apply changed.
type ApplyResult struct {
	Changes []Change `json:"changes,omitempty"`
	// Memo, when set, replaces what the store remembers for the runtime
	// of this instance (Target.Memo of the next targets): a JSON value of
	// at most MaxMemo bytes. Empty keeps the one recorded.
	Memo json.RawMessage `json:"memo,omitempty"`
}

// Runtime fetches and applies service instances on one backend.
//
// Both calls must be idempotent and safe to retry: the engine may repeat an
// apply after a crash. An error from Apply means the apply did not complete;
// the engine retries with backoff and fails the instance after its attempts
// are exhausted. Use Permanent to mark an error that retrying cannot fix.
type Runtime interface {
	// Fetch returns the current state of the instance that target describes.
	Fetch(ctx context.Context, target Target) (State, error)
	// Apply drives the instance toward target and returns what changed.
	Apply(ctx context.Context, target Target) (ApplyResult, error)
}

// Watcher is implemented by runtimes that report changes themselves, so the
// engine need not wait for its next poll: notify is called with the key of an
// instance whose state may have changed. Watch blocks until ctx ends.
type Watcher interface {
	Watch(ctx context.Context, notify func(InstanceKey)) error
}

// InfoOutput is one piece of display-only information about an instance
// (a custom runtime's getInfo output).
type InfoOutput struct {
	Name string `json:"name"`
	Text string `json:"text"`
}

// InfoGetter is implemented by runtimes that can describe an instance for
// people (shown by drover status); it never affects convergence.
type InfoGetter interface {
	Info(ctx context.Context, key InstanceKey) ([]InfoOutput, error)
}

// Run is one command a runtime ran for an instance (fetch, apply, getInfo,
// plan), kept so people can read its output.
type Run struct {
	InstanceKey
	Runtime string `json:"runtime"`
	// Kind is fetch, apply, getInfo or plan.
	Kind    string   `json:"kind"`
	Version string   `json:"version,omitempty"`
	Command []string `json:"command,omitempty"`
	// ExitCode is the process exit code, or -1 when it did not start, was
	// killed or timed out (Error says which).
	ExitCode   int       `json:"exitCode"`
	Error      string    `json:"error,omitempty"`
	StartedAt  time.Time `json:"startedAt"`
	FinishedAt time.Time `json:"finishedAt"`
	// Stdout and Stderr are kept separately, each limited in size (the
	// end is kept; Truncated says something was dropped).
	Stdout    string `json:"stdout,omitempty"`
	Stderr    string `json:"stderr,omitempty"`
	Truncated bool   `json:"truncated,omitempty"`
}

// RunRecorder stores runs; the server gives one to runtimes through Options.
type RunRecorder interface {
	RecordRun(ctx context.Context, r Run) error
}

// GraceReporter is implemented by runtimes that know how soon after an
// apply Fetch shows the applied version; the engine applies again when that
// time has passed without it (default: Settings.ConvergenceGrace, 10m).
type GraceReporter interface {
	ConvergenceGrace() time.Duration
}

// CheckRunner is implemented by runtimes that run protection commands (a
// protection's taskConfig or kubernetesConfig) for an instance. RunCheck
// runs the check once for target's instance and version; an error means it
// could not run (and says nothing about the check), a run that ran and
// exited is an outcome.
type CheckRunner interface {
	RunCheck(ctx context.Context, target Target, check CheckCommand) (CheckOutcome, error)
}

// CheckCommand is a check to run: its name for people and its spec as the
// compiler wrote it (the protection's rendered taskConfig or
// kubernetesConfig, env and timeout).
type CheckCommand struct {
	Name string
	Spec json.RawMessage
}

// CheckOutcome is what one run of a check came to: passed (exit code 0) or
// not, and a line for people (the last line of its output, or why it failed).
type CheckOutcome struct {
	Passed  bool
	Message string
}

// Facts is what a runtime can tell about its backend.
type Facts struct {
	// KubeVersion is a Kubernetes cluster's version ("v1.34.1").
	KubeVersion string
	// APIVersions lists the cluster's "group/version" and
	// "group/version/Kind" entries (Helm's .Capabilities.APIVersions),
	// sorted.
	APIVersions []string
}

// Discoverer is implemented by runtimes that can describe their backend;
// the host asks now and then and stores the answer, which pushes read.
type Discoverer interface {
	Discover(ctx context.Context) (Facts, error)
}

// Closer is implemented by runtimes holding resources.
type Closer interface {
	Close() error
}

// ErrUnavailable is wrapped by the errors of a runtime that cannot be
// reached now but may be later (an agent that is not connected).
var ErrUnavailable = errors.New("runtime unavailable")

// ErrElsewhere is wrapped by the errors of a runtime that another server
// sharing the store can reach and this one cannot (an agent connected to
// it); it is an ErrUnavailable.
var ErrElsewhere = fmt.Errorf("%w through this server", ErrUnavailable)

// PermanentError marks an apply error that retrying will not fix.
type PermanentError struct{ Err error }

func (e *PermanentError) Error() string { return e.Err.Error() }
func (e *PermanentError) Unwrap() error { return e.Err }

// Permanent wraps err as a PermanentError.
func Permanent(err error) error { return &PermanentError{Err: err} }

// IsPermanent reports whether err is permanent.
func IsPermanent(err error) bool {
	var p *PermanentError
	return errors.As(err, &p)
}

// Options are what every runtime constructor receives.
type Options struct {
	// DataDir is a directory the runtime may keep state in ("" = keep none).
	DataDir string
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Runs records the commands a runtime runs (nil = keep none).
	Runs RunRecorder
	// Processes records the commands running on this host (nil = keep
	// none), so a restart after a crash ends what they left.
	Processes ProcessRecorder
	// Log is the runtime's logger (nil = discard).
	Log *slog.Logger
	// Secret returns the value of version version (KEY-N) of the stored
	// secret key (drover secrets), for a runtime config that references
	// one; nil where no secret store is reachable (an agent's host).
	Secret func(ctx context.Context, key, version string) (string, error)
}
