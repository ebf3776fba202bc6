package desiredstate

import (
	"encoding/json"
	"fmt"
	"time"
)

// Format is the version of the stored form written by Encode. Decode also
// reads what drover stored before there was one (the compiler's result).
const Format = 2

// Compiled is the engine-facing form of one push: for each release channel,
// what must run there and under which conditions. The compiler builds it;
// the store keeps it as JSON (Encode); the engine reads nothing else (Decode).
type Compiled struct {
	Format      int    `json:"format"`
	Application string `json:"application"`
	Service     string `json:"service"`
	// Version is the bundle version every channel converges to.
	Version string `json:"version"`
	// BundleName is the service's bundleName, rendered ("" when unset).
	BundleName string `json:"bundleName,omitempty"`
	// DisplayName names the version for people beside its id: the
	// bundleName, else the dockerImage parameters' tags ("" when neither,
	// and in what drover stored before there were display names).
	DisplayName string `json:"displayName,omitempty"`
	// Channels are the release channels in declaration order.
	Channels []Channel `json:"channels"`
	// Graph is the entity graph, for people and tools that show it.
	Graph *DesiredState `json:"graph,omitempty"`
	// Release is set on a desired state pushed as one of a release's
	// (drover release create): the release and every service of it.
	Release *Release `json:"release,omitempty"`
}

// ReleaseKind is the config store kind releases are kept under, by id.
const ReleaseKind = "release"

// Release is one push of several services of an application: what each
// of them was pushed as. It is stored as a record of its own
// (ReleaseKind) and in each of its desired states, so the engine knows,
// for a service a channel waits for, the version of the same release.
type Release struct {
	ID          string `json:"id"`
	Application string `json:"application"`
	// Services are the release's services, by name.
	Services  []ReleaseService `json:"services"`
	CreatedBy string           `json:"createdBy,omitempty"`
	CreatedAt time.Time        `json:"createdAt,omitzero"`
}

// ReleaseService is one service of a release.
type ReleaseService struct {
	Service        string `json:"service"`
	DesiredStateID string `json:"desiredStateId"`
	Version        string `json:"version"`
	DisplayName    string `json:"displayName,omitempty"`
}

// Member returns the release's entry for svc, if it has one.
func (r *Release) Member(svc string) (ReleaseService, bool) {
	if r == nil {
		return ReleaseService{}, false
	}
	for _, m := range r.Services {
		if m.Service == svc {
			return m, true
		}
	}
	return ReleaseService{}, false
}

// Channel is what one release channel must converge to, and under which
// conditions.
type Channel struct {
	Name string `json:"name"`
	// Runtime is the runtime (connection) the service uses in this channel,
	// RuntimeKind its kind (fake, kubernetes, custom, terraformRunner).
	Runtime     string `json:"runtime"`
	RuntimeKind string `json:"runtimeKind,omitempty"`
	// Namespace is the Kubernetes namespace the channel chose, if any.
	Namespace string `json:"namespace,omitempty"`
	// Backend is "kubernetes" or "customRuntime".
	Backend string `json:"backend"`
	// Group and Labels are the release channel's group and own labels,
	// which label queries (a freeze's scope) match.
	Group  string            `json:"group,omitempty"`
	Labels map[string]string `json:"labels,omitempty"`
	// DependsOn are channels that must run the same version converged first.
	DependsOn []string `json:"dependsOn,omitempty"`
	// Services are the other services of the application that must run
	// converged first (service.dependsOn), each in its release channel.
	Services []ServiceDependency `json:"services,omitempty"`
	// Approvals must each have MinApprovers distinct approvers.
	Approvals []Approval `json:"approvals,omitempty"`
	// EveryAction requires a fresh approval before each apply that heals
	// drift (manualApproval.everyAction, requireApprovalBeforeApply).
	EveryAction bool `json:"everyAction,omitempty"`
	// Checks are the protections and convergence extensions that gate the
	// channel, one per lifecycle phase.
	Checks []Check `json:"checks,omitempty"`
	// AutoRollback rolls back to the last converged version on failure.
	AutoRollback bool `json:"autoRollback,omitempty"`
	// ProgressDeadline fails a rollout that has not converged in time (0 =
	// the engine's default).
	ProgressDeadline Duration `json:"progressDeadline,omitzero"`
	// ConvergenceGrace is how long after an apply the runtime may still not
	// show the version before it is applied again (0 = the runtime's or the
	// engine's default): a custom runtime's convergenceGracePeriod.
	ConvergenceGrace Duration `json:"convergenceGrace,omitzero"`
	// Objects are the compiled objects the runtime applies: Kubernetes
	// manifests, or one custom runtime object.
	Objects []json.RawMessage `json:"objects"`
	// Env is the service's environment in this channel (release channel
	// defaults, then service env): plain values and raw secrets. References
	// to stored or Kubernetes secrets are resolved by the runtimes that
	// support them and are not listed here.
	Env map[string]string `json:"env,omitempty"`
	// SecretEnv names the keys of Env whose values are raw secrets.
	SecretEnv []string `json:"secretEnv,omitempty"`
	// Held is set on a channel that does not converge to this desired
	// state's version: a rollback of one release channel keeps every other
	// one where it was and points the rolled-back one at an earlier
	// version (nil: the channel runs this desired state's version).
	Held *Held `json:"held,omitempty"`
}

// ServiceDependency is a service a channel waits for, and the release
// channel it must run converged in.
type ServiceDependency struct {
	Service        string `json:"service"`
	ReleaseChannel string `json:"releaseChannel"`
}

// Held says which version a channel of a desired state created by a
// rollback converges to, and which desired state holds its objects.
type Held struct {
	// StateID is the desired state whose copy of the channel is applied.
	StateID string `json:"stateId"`
	// Version and DisplayName are that copy's version and display name.
	Version     string `json:"version"`
	DisplayName string `json:"displayName,omitempty"`
	// Rollback marks the channel a person rolled back: it does not wait for
	// the channels it depends on to run the version (Prodvana's rollbacks
	// skip release channel ordering); approvals, protections and freezes
	// still gate it.
	Rollback bool `json:"rollback,omitempty"`
}

// Secrets returns the raw secret values of the channel's environment, for
// runtimes to redact.
func (c *Channel) Secrets() []string {
	var out []string
	for _, k := range c.SecretEnv {
		if v := c.Env[k]; v != "" {
			out = append(out, v)
		}
	}
	return out
}

// Approval is a manual approval precondition.
type Approval struct {
	Topic        string `json:"topic"`
	Description  string `json:"description,omitempty"`
	MinApprovers int    `json:"minApprovers"`
	// Shared marks a sharedManualApproval: approvals of its topic on any
	// service of the desired state's release count (SharedTopic).
	Shared bool `json:"shared,omitempty"`
}

// CheckKind says what runs a check.
type CheckKind string

// Check kinds.
const (
	CheckProtection           CheckKind = "protection"
	CheckConvergenceExtension CheckKind = "convergenceExtension"
)

// Check is a protection or convergence extension that runs in one lifecycle
// phase of a channel (preApproval, postApproval, deployment, postDeployment;
// approval and deployment for extensions).
type Check struct {
	Kind CheckKind `json:"kind"`
	// Name is the protection or extension name.
	Name      string `json:"name"`
	Lifecycle string `json:"lifecycle"`
	// Entity is the check's entity in the graph.
	Entity ID `json:"entity"`
	// Source and Attachment name a protection's attachment
	// (releaseChannel, serviceInstance or convergence; its name).
	Source     string `json:"source,omitempty"`
	Attachment string `json:"attachment,omitempty"`
	// FailureBehavior of a deployment check: FailureBlock (default) or
	// FailureFail.
	FailureBehavior string `json:"failureBehavior,omitempty"`
	// DelayCheck and CheckFor time a postDeployment check.
	DelayCheck Duration `json:"delayCheck,omitzero"`
	CheckFor   Duration `json:"checkFor,omitzero"`
	// Builtin is a protection drover evaluates itself; nil for a command
	// (taskConfig, kubernetesConfig) or a builtin it cannot evaluate.
	Builtin *Builtin `json:"builtin,omitempty"`
	// Command is a protection's command (opaque here: the channel's
	// runtime reads it), run again every PollInterval (0: the engine's
	// default); exit code 0 passes.
	Command      json.RawMessage `json:"command,omitempty"`
	PollInterval Duration        `json:"pollInterval,omitzero"`
	// Gate is a check of a kind an evaluator registered with the engine
	// decides (an alert gate, commitDenylist ranges: see gate.go), asked
	// every PollInterval like a command. It is stored as a member of its
	// own, named by its kind.
	Gate *Gate `json:"-"`
	// Shared is the key of the run a convergence extension shares with
	// every channel whose extension has it ("" = its channel's own run).
	Shared string `json:"shared,omitempty"`
	// Retry times the runs of a failing convergence extension: from Base,
	// doubling up to Max.
	Retry *Retry `json:"retry,omitempty"`
	// DependsOn names the extensions that must succeed first.
	DependsOn []string `json:"dependsOn,omitempty"`
}

// Retry is a convergence extension's retry policy.
type Retry struct {
	Base Duration `json:"base,omitzero"`
	Max  Duration `json:"max,omitzero"`
}

// checkFields are a Check's fields, encoded as encoding/json does.
type checkFields Check

// MarshalJSON writes the check's fields and, last, its gate as a member
// named by its kind.
func (c Check) MarshalJSON() ([]byte, error) {
	return MarshalGated(checkFields(c), c.Gate)
}

// UnmarshalJSON reads what MarshalJSON writes.
func (c *Check) UnmarshalJSON(b []byte) error {
	var f checkFields
	g, err := UnmarshalGated(b, &f)
	if err != nil {
		return fmt.Errorf("check: %w", err)
	}
	*c = Check(f)
	c.Gate = g
	return nil
}

// RunKey names the runs of a command check: one run serves every phase of
// a protection's attachment ("<source>/<attachment>"); an extension's runs
// are its own ("extension/<name>"), or shared by every extension with its
// key ("extension@<key>").
func (c Check) RunKey() string {
	switch {
	case c.Kind == CheckConvergenceExtension && c.Shared != "":
		return "extension@" + c.Shared // every extension with the key
	case c.Kind == CheckConvergenceExtension:
		return "extension/" + c.Name
	}
	return c.Source + "/" + c.Attachment
}

// SourceDrover is the Source of checks drover adds itself (a release
// channel's deployWindows).
const SourceDrover = "drover"

// Key identifies the check among a channel's, for the conditions an
// instance records as met: "check:<entity name>".
func (c Check) Key() string { return "check:" + c.Entity.Name }

// String describes the check for people: "protection p (deployment)".
func (c Check) String() string {
	kind := string(c.Kind)
	switch {
	case c.Kind == CheckConvergenceExtension:
		kind = "convergence extension"
	case c.Source == SourceDrover:
		return fmt.Sprintf("%s (%s)", c.Name, c.Lifecycle) // deployWindows (deployment)
	}
	return fmt.Sprintf("%s %s (%s)", kind, c.Name, c.Lifecycle)
}

// Duration is a time.Duration stored as Go duration text ("10m0s").
type Duration struct{ time.Duration }

// IsZero reports whether the duration is unset.
func (d Duration) IsZero() bool { return d.Duration == 0 }

// MarshalJSON writes Go duration text.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// UnmarshalJSON reads Go duration text, which includes Prodvana's seconds
// form ("30s", "1.5s").
func (d *Duration) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string: %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	d.Duration = v
	return nil
}

// Encode returns the stored form of c (JSON, with Format set).
func Encode(c *Compiled) ([]byte, error) {
	cp := *c
	cp.Format = Format
	return json.Marshal(&cp)
}

// Decode reads a stored desired state: the form Encode writes, or the
// compiler result drover stored before (see legacy.go).
func Decode(raw []byte) (*Compiled, error) {
	// The current form is read in one pass; only another (older, newer, or
	// undecodable) looks at the format first.
	var c Compiled
	if err := json.Unmarshal(raw, &c); err == nil && c.Format > 0 && c.Format <= Format {
		return &c, nil
	}
	var head struct {
		Format int `json:"format"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		return nil, fmt.Errorf("decode desired state: %w", err)
	}
	switch {
	case head.Format == 0:
		return decodeLegacy(raw)
	case head.Format > Format:
		return nil, fmt.Errorf("decode desired state: format %d is newer than this drover reads (%d); upgrade drover", head.Format, Format)
	}
	c = Compiled{}
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, fmt.Errorf("decode desired state: %w", err)
	}
	return &c, nil
}

// DecodeWithoutGraph is Decode leaving the entity graph out (Graph is
// nil): the engine has no use for it, and it is most of the stored form
// and of the work of decoding it. The decoder only scans past it.
func DecodeWithoutGraph(raw []byte) (*Compiled, error) {
	var c struct {
		Compiled
		// The outer field takes the key from the embedded one.
		Graph skipped `json:"graph"`
	}
	if err := json.Unmarshal(raw, &c); err == nil && c.Format > 0 && c.Format <= Format {
		return &c.Compiled, nil
	}
	full, err := Decode(raw)
	if err != nil {
		return nil, err
	}
	full.Graph = nil
	return full, nil
}

// skipped is a JSON value that decodes to nothing.
type skipped struct{}

func (*skipped) UnmarshalJSON([]byte) error { return nil }
