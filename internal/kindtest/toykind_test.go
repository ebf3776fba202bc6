// Package kindtest_test proves that a runtime kind and a gate kind land
// without an edit elsewhere: it registers one of each and runs a service on
// them (its own test binary, so the built-in kinds' tests do not see them).
package kindtest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/drover-dev/drover/api/client"
	apiv1 "github.com/drover-dev/drover/api/v1"
	"github.com/drover-dev/drover/internal/auth"
	"github.com/drover-dev/drover/internal/compiler"
	"github.com/drover-dev/drover/internal/config"
	ds "github.com/drover-dev/drover/internal/desiredstate"
	"github.com/drover-dev/drover/internal/engine"
	"github.com/drover-dev/drover/internal/gates"
	"github.com/drover-dev/drover/internal/runtimehost"
	"github.com/drover-dev/drover/internal/runtimehost/builtin"
	"github.com/drover-dev/drover/internal/runtimes"
	"github.com/drover-dev/drover/internal/server"
	"github.com/drover-dev/drover/internal/store/sqlite"
)

// toyKind is a runtime kind that only this test knows: a runtime config
// labelled kind=toy (and of no other type) is one, it runs
// kubernetesConfig services, and its runtimes keep what they applied in
// memory.
const toyKind = "toy"

// toyRuntimes are the toy runtimes the host built, by name.
var toyRuntimes sync.Map

// backendsSeen counts the service backends the toy kind's ValidateBackend saw.
var backendsSeen atomic.Int64

func init() {
	// The facts half: what the compiler, the server and the host read.
	config.RegisterRuntimeKind(config.RuntimeKind{
		Name: toyKind,
		Configured: func(rt *config.Runtime) bool {
			for _, l := range rt.Labels {
				if l.Label == "kind" && l.Value == toyKind {
					return true
				}
			}
			return false
		},
		Backends: []string{config.BackendKubernetesConfig},
		// A kind bringing its own service backend would check and name it
		// here; the toy records that services' backends reach it.
		ValidateBackend: func(b *config.ServiceBackend, path string, _ func(field, msg string)) string {
			if b.KubernetesConfig != nil && path == "service" {
				backendsSeen.Add(1)
			}
			return ""
		},
		Validate: func(rt *config.Runtime, add func(field, msg string)) {
			if len(rt.Applications) == 0 {
				add("runtime.applications", "a toy runtime names the applications it serves")
			}
		},
	})
}

// ticketKind is a gate kind that only this test knows: a release channel
// labelled ticket=T holds deployments until the ticket desk approves T.
// Its config "field" is the label (a real kind adds a field to
// internal/config), its validation is registered with
// config.RegisterChannelGateCheck, its compile hook with
// compiler.RegisterChannelGate, its evaluator in the gates registry the
// engine and the server are given.
const ticketKind = "ticket"

// ticketSpec is the toy gate's spec, as a check carries it.
type ticketSpec struct {
	Ticket string `json:"ticket"`
}

// ticketRE is what a ticket looks like.
var ticketRE = regexp.MustCompile(`^T-[0-9]+$`)

func init() {
	config.RegisterChannelGateCheck(func(rc *config.ReleaseChannel, p string, add func(field, msg string)) {
		for i, l := range rc.Labels {
			if l.Label == ticketKind && !ticketRE.MatchString(l.Value) {
				add(fmt.Sprintf("%s.labels[%d].value", p, i), fmt.Sprintf("%q is not a ticket (T-123)", l.Value))
			}
		}
	})
	compiler.RegisterChannelGate(func(rc *config.ReleaseChannel) (*compiler.CompiledProtection, error) {
		for _, l := range rc.Labels {
			if l.Label == ticketKind {
				g, err := ds.NewGate(ticketKind, ticketSpec{Ticket: l.Value})
				if err != nil {
					return nil, err
				}
				return &compiler.CompiledProtection{Attachment: "ticket-desk", Gate: g}, nil
			}
		}
		return nil, nil
	})
}

// ticketDesk is the toy gate kind's evaluator: it passes the tickets
// approved so far.
type ticketDesk struct {
	mu       sync.Mutex
	approved map[string]bool
}

var _ gates.Evaluator = (*ticketDesk)(nil)

func (d *ticketDesk) approve(ticket string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.approved[ticket] = true
}

func (d *ticketDesk) Evaluate(_ context.Context, _ gates.Target, raw json.RawMessage) (gates.Outcome, error) {
	var spec ticketSpec
	if err := gates.Decode(raw, &spec); err != nil {
		return gates.Outcome{}, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.approved[spec.Ticket] {
		return gates.Outcome{Passed: true, Message: "ticket " + spec.Ticket + " approved"}, nil
	}
	return gates.Outcome{Message: "ticket " + spec.Ticket + " not approved yet"}, nil
}

func (d *ticketDesk) Describe(raw json.RawMessage) string {
	var spec ticketSpec
	if gates.Decode(raw, &spec) != nil {
		return ""
	}
	return "asks the desk about ticket " + spec.Ticket
}

// toyRuntime converges at once to what it was last applied.
type toyRuntime struct {
	mu      sync.Mutex
	applied map[runtimes.InstanceKey]runtimes.Target
}

var _ runtimes.Runtime = (*toyRuntime)(nil)

func (r *toyRuntime) Fetch(_ context.Context, t runtimes.Target) (runtimes.State, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	got, ok := r.applied[t.InstanceKey]
	if !ok {
		return runtimes.State{}, nil
	}
	return runtimes.State{Version: got.Version, Converged: true}, nil
}

func (r *toyRuntime) Apply(_ context.Context, t runtimes.Target) (runtimes.ApplyResult, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.applied[t.InstanceKey] = t
	return runtimes.ApplyResult{Changes: []runtimes.Change{{Object: "toy/" + t.Service, Action: runtimes.ActionConfigured}}}, nil
}

// TestToyKindEndToEnd registers a runtime kind and a gate kind from this
// package, with no edit elsewhere (the runtime's facts with
// config.RegisterRuntimeKind and its factory in a copy of the built-in
// registry; the gate's compile hook with compiler.RegisterChannelGate and
// its evaluator in a gates registry), and runs a service on them through
// the real server and engine: apply, compile, push, held by the gate,
// converged once the gate passes.
func TestToyKindEndToEnd(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	st, err := sqlite.Open(t.Context(), filepath.Join(dir, "drover.db"))
	if err != nil {
		t.Fatal(err)
	}
	reg := builtin.Registry()
	reg[toyKind] = func(cfg *config.Runtime, _ runtimes.Options) (runtimes.Runtime, error) {
		r := &toyRuntime{applied: map[runtimes.InstanceKey]runtimes.Target{}}
		toyRuntimes.Store(cfg.Name, r)
		return r, nil
	}
	host := runtimehost.New(runtimehost.Config{Store: st, Registry: reg, DataDir: dir})
	desk := &ticketDesk{approved: map[string]bool{}}
	gateKinds := &gates.Registry{}
	if err := gateKinds.Register(ticketKind, desk); err != nil {
		t.Fatal(err)
	}
	settings := engine.DefaultSettings()
	settings.PollInterval, settings.SteadyPollInterval, settings.ApplyBackoff = 20*time.Millisecond, 200*time.Millisecond, 20*time.Millisecond
	settings.CheckInterval = 50 * time.Millisecond
	var srv *server.Server
	loop := engine.NewLoop(engine.Config{Store: st, Runtimes: host, Settings: settings, Gates: gateKinds, Workers: 1, OnWrite: func() { srv.Changed() }})
	const token = "drover_TOYKINDTESTTOKEN0123456789"
	srv = server.New(server.Config{Store: st, Engine: loop, Runtimes: host, Gates: gateKinds,
		Edge: server.EdgeConfig{Auth: auth.NewTokenAuthenticator(token, auth.LocalIdentity)}})
	if err := host.Start(t.Context(), func(k runtimes.InstanceKey) { loop.Enqueue(k.Application, k.Service) }); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 2)
	go func() { done <- srv.Run(ctx, ln) }()
	go func() { done <- loop.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		for range 2 {
			if err := <-done; err != nil {
				t.Errorf("server: %v", err)
			}
		}
		host.Close()
		_ = st.Close()
	})
	c := client.New("http://"+ln.Addr().String(), client.WithToken(token))

	files := map[string]string{
		"toybox.pvn.yaml": "runtime:\n  name: toybox\n  labels:\n    - label: kind\n      value: toy\n",
		"play.pvn.yaml":   "application:\n  name: play\n  releaseChannels:\n    - name: only\n      labels:\n        - label: ticket\n          value: T-1\n      runtimes:\n        - runtime: toybox\n",
		"blocks.pvn.yaml": "service:\n  name: blocks\n  application: play\n  parameters:\n    - name: color\n      string: {}\n  kubernetesConfig:\n    type: KUBERNETES\n    inlined: |\n      apiVersion: v1\n      kind: ConfigMap\n      metadata:\n        name: blocks\n      data:\n        color: \"{{.Params.color}}\"\n",
	}
	apply := func() (*apiv1.ApplyConfigsResponse, error) {
		req := loadConfigs(t, files)
		return c.ApplyConfigs(t.Context(), req)
	}
	// The kind's validation hook runs at apply.
	_, err = apply()
	var ce *client.Error
	if !errors.As(err, &ce) || len(ce.Details) != 1 || ce.Details[0].Field != "runtime.applications" ||
		!strings.Contains(ce.Details[0].Message, "a toy runtime names the applications it serves") {
		t.Fatalf("apply without applications: %v %+v, want the toy kind's validation error", err, ce)
	}
	files["toybox.pvn.yaml"] += "  applications: [play]\n"
	// The gate kind's validation runs at apply too, and names the field.
	good := files["play.pvn.yaml"]
	files["play.pvn.yaml"] = strings.Replace(good, "T-1", "someday", 1)
	_, err = apply()
	if !errors.As(err, &ce) || len(ce.Details) != 1 || ce.Details[0].Field != "application.releaseChannels[0].labels[0].value" ||
		!strings.Contains(ce.Details[0].Message, `"someday" is not a ticket`) {
		t.Fatalf("apply with a bad ticket: %v %+v, want the ticket kind's validation error at its field", err, ce)
	}
	files["play.pvn.yaml"] = good
	if _, err := apply(); err != nil {
		t.Fatal(err)
	}
	if backendsSeen.Load() == 0 {
		t.Error("the toy kind's ValidateBackend never saw the service's backend")
	}
	push, err := c.Push(t.Context(), "play", "blocks", apiv1.PushRequest{Params: []apiv1.Param{{Name: "color", Value: "red"}}})
	if err != nil {
		t.Fatal(err)
	}
	// The toy gate holds the channel, saying why, and nothing is applied.
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := c.Status(t.Context(), "play", "blocks")
		if err != nil {
			t.Fatal(err)
		}
		if len(st.ReleaseChannels) == 1 && strings.Contains(st.ReleaseChannels[0].Message, "ticket T-1 not approved yet") {
			if st.ReleaseChannels[0].Status == "CONVERGED" {
				t.Fatalf("converged while its gate said no: %+v", st.ReleaseChannels[0])
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the ticket gate never held the channel: %+v", st.ReleaseChannels)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if v, ok := toyRuntimes.Load("toybox"); ok {
		rt := v.(*toyRuntime)
		rt.mu.Lock()
		n := len(rt.applied)
		rt.mu.Unlock()
		if n != 0 {
			t.Fatalf("the toy runtime was applied %d times while the gate held the channel", n)
		}
	}
	desk.approve("T-1")
	deadline = time.Now().Add(30 * time.Second)
	for {
		st, err := c.Status(t.Context(), "play", "blocks")
		if err != nil {
			t.Fatal(err)
		}
		if len(st.ReleaseChannels) == 1 && st.ReleaseChannels[0].Status == "CONVERGED" && st.ReleaseChannels[0].Version == push.BundleVersion {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("never converged: %+v", st.ReleaseChannels)
		}
		time.Sleep(20 * time.Millisecond)
	}
	v, ok := toyRuntimes.Load("toybox")
	if !ok {
		t.Fatal("the host built no toy runtime")
	}
	rt := v.(*toyRuntime)
	rt.mu.Lock()
	got := rt.applied[runtimes.InstanceKey{Application: "play", Service: "blocks", ReleaseChannel: "only"}]
	rt.mu.Unlock()
	if len(got.Objects) != 1 {
		t.Fatalf("toy runtime applied %d objects, want the ConfigMap", len(got.Objects))
	}
	var cm struct {
		Kind string            `json:"kind"`
		Data map[string]string `json:"data"`
	}
	if err := json.Unmarshal(got.Objects[0], &cm); err != nil || cm.Kind != "ConfigMap" || cm.Data["color"] != "red" {
		t.Fatalf("applied %s (%v), want the rendered ConfigMap", got.Objects[0], err)
	}
	compiled, err := c.Compiled(t.Context(), "play", "blocks", push.DesiredStateID, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(compiled.ReleaseChannels) != 1 || compiled.ReleaseChannels[0].RuntimeKind != toyKind {
		t.Errorf("compiled channels %+v, want one of runtime kind %q", compiled.ReleaseChannels, toyKind)
	}
}

// loadConfigs writes files to a directory and loads them as drover apply
// does.
func loadConfigs(t *testing.T, files map[string]string) apiv1.ApplyConfigsRequest {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	sources, err := config.Load([]string{dir + "/..."})
	if err != nil {
		t.Fatal(err)
	}
	var req apiv1.ApplyConfigsRequest
	for _, src := range sources {
		body, err := json.Marshal(src.File)
		if err != nil {
			t.Fatal(err)
		}
		req.Configs = append(req.Configs, apiv1.Config{Source: src.Path, Body: body})
	}
	return req
}
