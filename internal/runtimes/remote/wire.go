// Package remote reaches runtimes that agents serve. An agent (drover agent)
// runs inside the user's network and dials out to the server over TLS; the
// connection is upgraded to a multiplexed session (yamux) on which the
// server opens a stream per call (HTTP/1.1 requests: fetch, apply, info,
// discover, watch) and the agent opens streams to hand back what its
// runtimes recorded (command runs). Nothing the agent can reach is reachable
// from the server except through those calls: the server sends a runtime's
// config and a target, the agent does the work with its own credentials.
//
// Hub is the server's side: it authenticates agents by their join token,
// holds their sessions, records their connection state in the store and
// builds the runtimes (Runtime) that forward to them. Serve is the agent's
// side of one session.
package remote

import (
	"encoding/json"
	"time"

	"github.com/drover-dev/drover/internal/runtimes"
)

// Protocol is the value of the Upgrade header an agent connects with.
const Protocol = "drover-agent/1"

// ConnectPath is the path agents connect to on the agent listener.
const ConnectPath = "/v1/agent/connect"

// InstanceHeader carries, on an agent's connect request, the id its process
// chose at start (random): the server tells a connection of the agent
// serving a runtime (which replaces its older one) from another agent on
// the same token (refused while the first one answers).
const InstanceHeader = "Drover-Agent-Instance"

// Paths of the calls the server makes on a session (served by the agent),
// and of those the agent makes (served by the server).
const (
	pathHello    = "/hello"
	pathFetch    = "/fetch"
	pathApply    = "/apply"
	pathCheck    = "/check"
	pathInfo     = "/info"
	pathDiscover = "/discover"
	pathWatch    = "/watch"
	pathRuns     = "/runs"
	pathPeers    = "/peers"
)

// Modes an agent serves in.
const (
	// ModeKubernetes serves Kubernetes runtimes with the agent's cluster
	// credentials (in-cluster service account or a kubeconfig).
	ModeKubernetes = "kubernetes"
	// ModeCommands runs custom runtime and Terraform commands on the
	// agent's host.
	ModeCommands = "commands"
)

// Hello is what an agent says of itself when a session opens.
type Hello struct {
	Version string `json:"version"`
	Mode    string `json:"mode"`
	Host    string `json:"host"`
}

// Peer is a server that accepts agents at URL (https://HOST:PORT) directly.
type Peer struct {
	Name string `json:"name"`
	URL  string `json:"url"`
}

// Peers is what a server tells its agents of the servers sharing its store:
// itself (URL "" when it does not announce one) and the others, which each
// agent connects to as well, so that every server reaches every agent.
type Peers struct {
	Self   Peer   `json:"self"`
	Others []Peer `json:"others,omitempty"`
}

// RuntimeRef names the runtime a call is for and carries its config (a
// config.File as JSON, as stored): the agent builds the runtime from it
// and keeps it while Version stays the same.
type RuntimeRef struct {
	Name    string          `json:"name"`
	Version int64           `json:"version"`
	Config  json.RawMessage `json:"config"`
}

// Target is runtimes.Target with the fields that never leave a process
// otherwise (environment and secret values): the agent needs them to run
// commands. They travel only inside the agent's TLS session.
type Target struct {
	runtimes.Target
	Env     map[string]string `json:"env,omitempty"`
	Secrets []string          `json:"secrets,omitempty"`
}

func wireTarget(t runtimes.Target) Target {
	return Target{Target: t, Env: t.Env, Secrets: t.Secrets}
}

func (t Target) runtimeTarget() runtimes.Target {
	out := t.Target
	out.Env, out.Secrets = t.Env, t.Secrets
	return out
}

// call is the body of every call the server makes.
type call struct {
	Runtime RuntimeRef            `json:"runtime"`
	Target  *Target               `json:"target,omitempty"`
	Key     *runtimes.InstanceKey `json:"key,omitempty"`
	// Check is the protection command of a check call.
	Check *checkCall `json:"check,omitempty"`
}

// checkCall is a protection command to run (runtimes.CheckCommand).
type checkCall struct {
	Name string          `json:"name"`
	Spec json.RawMessage `json:"spec"`
}

// checkOutcome is a check call's answer (runtimes.CheckOutcome).
type checkOutcome struct {
	Passed  bool   `json:"passed,omitempty"`
	Message string `json:"message,omitempty"`
}

// callError is the body of a failed call.
type callError struct {
	Error     string `json:"error"`
	Permanent bool   `json:"permanent,omitempty"`
}

// facts is runtimes.Facts on the wire.
type facts struct {
	KubeVersion string   `json:"kubeVersion,omitempty"`
	APIVersions []string `json:"apiVersions,omitempty"`
}

// Timing of a session.
const (
	// HeartbeatEvery is how often the server pings each agent and checks
	// that its runtime is still linked with the same token.
	HeartbeatEvery = 5 * time.Second
	// StaleAfter is how long a connection recorded as open may go without
	// a recorded heartbeat before it counts as lost (the server holding
	// it died).
	StaleAfter = 4 * HeartbeatEvery
	// keepAlive is the session's own keep-alive (both ends): a peer that
	// stops answering ends the session within about twice this.
	keepAlive = 5 * time.Second
	// writeTimeout bounds one write on the session.
	writeTimeout = 10 * time.Second
)
