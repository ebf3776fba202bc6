package server

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sort"
	"strings"
	"time"
	"unicode"

	apiv1 "github.com/drover-dev/drover/api/v1"
	"github.com/drover-dev/drover/internal/auth"
	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/store"
	"github.com/drover-dev/drover/internal/usertext"
	"github.com/drover-dev/drover/internal/version"
)

// Agents is what the server tells of the agent listener, and how it cuts
// an agent off.
type Agents struct {
	// URL is the address agents dial ("" = this server accepts no agents),
	// Fingerprint the SHA-256 of its certificate (hex).
	URL, Fingerprint string
	// Disconnect ends the session of a runtime's agent connected to this
	// server (others notice within a heartbeat).
	Disconnect func(name, reason string)
	// Presence reports what this server holds in memory of a runtime's
	// agent (nil: nothing beyond the store).
	Presence func(name string) AgentPresence
}

// AgentPresence is what a server holds in memory of a linked runtime's
// agent, beyond what the store records.
type AgentPresence struct {
	// RemoteAddr is the address the agent connected from ("" = it is not
	// connected to this server).
	RemoteAddr string
	// Refused is the last attempt of another agent with the runtime's
	// token, refused because this one serves the runtime (nil: none
	// lately).
	Refused *apiv1.AgentAttempt
}

// DefaultAgentImage is the agent's image in the printed manifests.
var DefaultAgentImage = "ghcr.io/drover-dev/drover:" + version.Version

// agentTokenPrefix starts every join token (so that it can be told from the
// API's tokens, and found by secret scanners).
const agentTokenPrefix = "drover-agent_"

func newAgentToken() string { return agentTokenPrefix + rand.Text() }

func (s *Server) linkRuntime(ctx context.Context, req apiv1.LinkRuntimeRequest) (*apiv1.LinkRuntimeResponse, error) {
	if !config.ValidName(req.Name) {
		return nil, errorf(apiv1.CodeInvalidArgument, "runtime name %q is not valid: use lower-case letters, digits and '-', starting with a letter, at most 63 characters", req.Name)
	}
	if err := validLabels(req.Labels); err != nil {
		return nil, err
	}
	if err := validInstall(req); err != nil {
		return nil, err
	}
	obj, err := s.store.GetConfig(ctx, "runtime", req.Name)
	switch {
	case err == nil:
		var f config.File
		if json.Unmarshal(obj.Body, &f) == nil && f.Runtime != nil {
			if kind := f.Runtime.Kind(); kind != "kubernetes" || f.Runtime.Kubernetes != nil {
				what := kind + " runtime"
				if kind == "kubernetes" {
					what = "Kubernetes runtime the server connects to itself (kubernetes:)"
				}
				return nil, errorf(apiv1.CodeFailedPrecondition, "runtime %q is configured as a %s: only a runtime config with no type (a Kubernetes runtime) can be linked; rename one of them", req.Name, what)
			}
		}
	case !errors.Is(err, store.ErrNotFound):
		return nil, err
	}
	token := newAgentToken()
	err = s.store.LinkRuntime(ctx, store.LinkedRuntime{Name: req.Name, Labels: req.Labels, TokenHash: auth.HashToken(token), CreatedAt: s.now()})
	if errors.Is(err, store.ErrConflict) {
		return nil, errorf(apiv1.CodeAlreadyExists, "runtime %q is already linked: drover runtimes rotate-token %s gives it a new token, drover runtimes unlink %s removes it", req.Name, req.Name, req.Name)
	}
	if err != nil {
		return nil, err
	}
	s.runtimes.Invalidate()
	s.log.Info("runtime linked", "runtime", req.Name)
	return s.joinInstructions(req, token), nil
}

func (s *Server) rotateRuntimeToken(ctx context.Context, name string, req apiv1.LinkRuntimeRequest) (*apiv1.LinkRuntimeResponse, error) {
	if err := validInstall(req); err != nil {
		return nil, err
	}
	token := newAgentToken()
	err := s.store.SetLinkToken(ctx, name, auth.HashToken(token))
	if errors.Is(err, store.ErrNotFound) {
		return nil, errorf(apiv1.CodeNotFound, "runtime %q is not linked", name)
	}
	if err != nil {
		return nil, err
	}
	if s.agents.Disconnect != nil {
		s.agents.Disconnect(name, "the runtime's join token was replaced")
	}
	s.log.Info("runtime join token replaced", "runtime", name)
	req.Name = name
	return s.joinInstructions(req, token), nil
}

func (s *Server) unlinkRuntime(ctx context.Context, name string) (any, error) {
	err := s.store.UnlinkRuntime(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		return nil, errorf(apiv1.CodeNotFound, "runtime %q is not linked", name)
	}
	if err != nil {
		return nil, err
	}
	if s.agents.Disconnect != nil {
		s.agents.Disconnect(name, "the runtime was unlinked")
	}
	s.runtimes.Invalidate()
	s.log.Info("runtime unlinked", "runtime", name)
	return struct{}{}, nil
}

func validLabels(labels map[string]string) error {
	for k, v := range labels {
		if k == "" || strings.HasPrefix(k, "@") || strings.ContainsAny(k, "=, \t\n") {
			return errorf(apiv1.CodeInvalidArgument, "label %q is not valid: a label is a name without '=', ',', spaces, or a leading '@'", k)
		}
		if strings.ContainsAny(v, ",\n") {
			return errorf(apiv1.CodeInvalidArgument, "the value of label %q must not contain ',' or a line break", k)
		}
	}
	return nil
}

func validInstall(req apiv1.LinkRuntimeRequest) error {
	if req.Namespace != "" && !config.ValidName(req.Namespace) {
		return errorf(apiv1.CodeInvalidArgument, "namespace %q is not a valid Kubernetes namespace name", req.Namespace)
	}
	if strings.ContainsAny(req.Image, " \t\n\"'") {
		return errorf(apiv1.CodeInvalidArgument, "image %q is not a valid image reference", req.Image)
	}
	if len(req.TokenFile) > 4096 || strings.ContainsFunc(req.TokenFile, unicode.IsControl) {
		return errorf(apiv1.CodeInvalidArgument, "token file %q is not a valid path: give a path of at most 4096 bytes with no control characters", req.TokenFile)
	}
	return nil
}

// joinInstructions says how to start the agent of a linked runtime.
func (s *Server) joinInstructions(req apiv1.LinkRuntimeRequest, token string) *apiv1.LinkRuntimeResponse {
	out := &apiv1.LinkRuntimeResponse{Name: req.Name, Token: token, AgentURL: s.agents.URL, Fingerprint: s.agents.Fingerprint}
	url := s.agents.URL
	if url == "" {
		url = "https://SERVER:PORT"
		out.Warning = "this server accepts no agents: restart it with --agent-listen ADDR (and --agent-url if agents reach it by another name), then rotate the token"
	}
	pin := ""
	if s.agents.Fingerprint != "" {
		pin = " --fingerprint sha256:" + s.agents.Fingerprint
	}
	// The token stays off the command line, where other users see it.
	out.TokenFile = req.TokenFile
	if out.TokenFile == "" {
		out.TokenFile = req.Name + ".token"
	}
	out.Command = fmt.Sprintf("drover agent --server %s%s --token-file %s --kubeconfig ~/.kube/config", url, pin, usertext.ShellQuote(out.TokenFile))
	ns := req.Namespace
	if ns == "" {
		ns = "drover-agent"
	}
	image := req.Image
	if image == "" {
		image = DefaultAgentImage
	}
	out.Manifests = agentManifests(req.Name, ns, image, url, s.agents.Fingerprint, token)
	return out
}

// agentManifests installs an agent in a cluster: its namespace, service
// account, the RBAC drover applies with, the token's Secret and the
// Deployment.
func agentManifests(name, ns, image, url, fingerprint, token string) string {
	args := []string{"agent", "--server", url, "--token-file", "/var/run/drover/token", "--mode", "kubernetes", "--health-listen", ":8080"}
	if fingerprint != "" {
		args = append(args, "--fingerprint", "sha256:"+fingerprint)
	}
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = fmt.Sprintf("%q", a)
	}
	return fmt.Sprintf(`# The drover agent of runtime %[1]s. It dials out to the drover server; the
# server holds no credential of this cluster. drover applies what services
# declare, so the agent may manage every kind of object: narrow the
# ClusterRole to what your services use.
apiVersion: v1
kind: Namespace
metadata:
  name: %[2]s
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: drover-agent
  namespace: %[2]s
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: drover-agent-%[1]s
rules:
- apiGroups: ["*"]
  resources: ["*"]
  verbs: ["*"]
- nonResourceURLs: ["/version", "/api", "/api/*", "/apis", "/apis/*", "/openapi/*"]
  verbs: ["get"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: drover-agent-%[1]s
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: drover-agent-%[1]s
subjects:
- kind: ServiceAccount
  name: drover-agent
  namespace: %[2]s
---
apiVersion: v1
kind: Secret
metadata:
  name: drover-agent-token
  namespace: %[2]s
type: Opaque
stringData:
  token: %[3]q
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: drover-agent
  namespace: %[2]s
  labels:
    app.kubernetes.io/name: drover-agent
spec:
  replicas: 1
  strategy:
    type: Recreate
  selector:
    matchLabels:
      app.kubernetes.io/name: drover-agent
  template:
    metadata:
      labels:
        app.kubernetes.io/name: drover-agent
    spec:
      serviceAccountName: drover-agent
      containers:
      - name: agent
        image: %[4]s
        args: [%[5]s]
        ports:
        - name: health
          containerPort: 8080
        livenessProbe:
          httpGet: {path: /livez, port: health}
        readinessProbe:
          httpGet: {path: /healthz, port: health}
          periodSeconds: 10
        volumeMounts:
        - name: token
          mountPath: /var/run/drover
          readOnly: true
        resources:
          requests: {cpu: 50m, memory: 64Mi}
          limits: {memory: 512Mi}
        securityContext:
          allowPrivilegeEscalation: false
          readOnlyRootFilesystem: true
          runAsNonRoot: true
      volumes:
      - name: token
        secret:
          secretName: drover-agent-token
`, name, ns, token, image, strings.Join(quoted, ", "))
}

// linkedConflicts refuses runtime configs that would change what a linked
// runtime is: a linked runtime's config has no type (its agent serves it).
func (s *Server) linkedConflicts(ctx context.Context, incoming []*config.Source) ([]apiv1.ConfigError, error) {
	var out []apiv1.ConfigError
	for _, src := range incoming {
		rt := src.File.Runtime
		if rt == nil {
			continue
		}
		kind := rt.Kind()
		if kind == "kubernetes" && rt.Kubernetes == nil {
			continue
		}
		_, err := s.store.GetLinkedRuntime(ctx, rt.Name)
		switch {
		case errors.Is(err, store.ErrNotFound):
			continue
		case err != nil:
			return nil, err
		}
		what := kind + " runtime"
		if kind == "kubernetes" {
			what = "Kubernetes runtime the server connects to itself (kubernetes:)"
		}
		out = append(out, apiv1.ConfigError{File: src.Path, Field: "runtime.name", Message: fmt.Sprintf(
			"runtime %q is linked (served by an agent): its config cannot make it a %s; remove the type, or unlink it first (drover runtimes unlink %s)", rt.Name, what, rt.Name)})
	}
	return out, nil
}

// linkedSources adds to the stored runtime configs what linked runtimes
// contribute: a runtime with no config of its name (a Kubernetes runtime),
// and the link's labels on one that has a config (the config's win).
func (s *Server) linkedSources(ctx context.Context, srcs []*config.Source) ([]*config.Source, error) {
	linked, err := s.store.ListLinkedRuntimes(ctx)
	if err != nil || len(linked) == 0 {
		return srcs, err
	}
	byName := make(map[string]int, len(srcs))
	for i, src := range srcs {
		if src.File.Runtime != nil {
			byName[src.File.Runtime.Name] = i
		}
	}
	for _, l := range linked {
		i, ok := byName[l.Name]
		if !ok {
			src, err := linkedSource(l)
			if err != nil {
				return nil, err
			}
			srcs = append(srcs, src)
			continue
		}
		if len(l.Labels) == 0 {
			continue
		}
		// The cached source is shared: change a copy.
		old := srcs[i]
		rt := *old.File.Runtime
		rt.Labels = mergeLabels(l.Labels, rt.Labels)
		f := *old.File
		f.Runtime = &rt
		srcs[i] = &config.Source{Path: old.Path, Decoded: &config.Decoded{File: &f, Pos: old.Pos}}
	}
	return srcs, nil
}

// linkedSource is the runtime config of a linked runtime that has none.
func linkedSource(l store.LinkedRuntime) (*config.Source, error) {
	return config.LinkedRuntimeSource(l.Name, l.Labels)
}

// mergeLabels returns the link's labels, then the config's (which replace
// those of the same name), sorted by name.
func mergeLabels(link map[string]string, cfg []config.Label) []config.Label {
	m := maps.Clone(link)
	if m == nil {
		m = map[string]string{}
	}
	for _, l := range cfg {
		m[l.Label] = l.Value
	}
	out := make([]config.Label, 0, len(m))
	for k, v := range m {
		out = append(out, config.Label{Label: k, Value: v})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Label < out[j].Label })
	return out
}

// agentInfo is the API's view of a linked runtime's agent. A connection
// whose heartbeats stopped being recorded (the server holding it died) is
// shown as disconnected.
func agentInfo(l store.LinkedRuntime, now time.Time) *apiv1.AgentInfo {
	a := l.Agent
	state := "disconnected"
	switch {
	case a.Connected && now.Sub(a.HeartbeatAt) > staleAfter:
		a.Error = fmt.Sprintf("no heartbeat recorded since %s (did server %s stop?)", a.HeartbeatAt.UTC().Format(time.RFC3339), a.Replica)
	case a.Connected:
		state = "connected"
	case a.HeartbeatAt.IsZero() && a.ConnectedAt.IsZero():
		state = "never connected"
	}
	return &apiv1.AgentInfo{State: state, Version: a.Version, Mode: a.Mode, Host: a.Host, Server: a.Replica,
		ConnectedAt: a.ConnectedAt, HeartbeatAt: a.HeartbeatAt, DisconnectedAt: a.DisconnectedAt, Error: a.Error}
}

// describeAgent is agentInfo with what this server holds in memory of the
// agent: where it connected from, and the last attempt of another agent on
// its token that was refused.
func (s *Server) describeAgent(l store.LinkedRuntime, now time.Time) *apiv1.AgentInfo {
	info := agentInfo(l, now)
	if s.agents.Presence == nil {
		return info
	}
	p := s.agents.Presence(l.Name)
	info.RemoteAddr, info.Refused = p.RemoteAddr, p.Refused
	return info
}

// staleAfter is how long a connected agent may go without a recorded
// heartbeat (every 5 s) before it is shown as disconnected (as
// remote.StaleAfter).
const staleAfter = 20 * time.Second
