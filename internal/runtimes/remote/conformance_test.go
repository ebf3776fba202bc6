package remote_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/agent"
	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/runtimehost"
	"github.com/drover-dev/drover/internal/runtimes"
	"github.com/drover-dev/drover/internal/runtimes/fake"
	"github.com/drover-dev/drover/internal/runtimes/remote"
	"github.com/drover-dev/drover/internal/runtimes/runtimestest"
	"github.com/drover-dev/drover/internal/store"
	"github.com/drover-dev/drover/internal/store/sqlite"
)

// discardRuns drops the runs agents report.
type discardRuns struct{}

func (discardRuns) RecordRun(context.Context, runtimes.Run) error { return nil }

// TestConformanceThroughAgent runs the runtime conformance suite against
// remote.Runtime: every call crosses a real hub, over TLS on loopback, to
// an in-process agent serving fake runtimes (one runtime per case, built
// by the agent from the config the call carries).
func TestConformanceThroughAgent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "drover.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	const token = "drover-agent_CONFORMANCETOKEN"
	if err := st.LinkRuntime(ctx, store.LinkedRuntime{Name: "edge", TokenHash: remote.HashToken(token)}); err != nil {
		t.Fatal(err)
	}
	connected := make(chan string, 16)
	hub := remote.NewHub(remote.HubConfig{Store: st, Runs: discardRuns{}, Replica: "test-server", Heartbeat: 100 * time.Millisecond,
		TakeoverAfter: time.Minute, OnConnect: func(name string) { connected <- name }})
	srv := httptest.NewUnstartedServer(hub)
	srv.StartTLS()
	t.Cleanup(func() { hub.Close(); srv.Close() })
	sum := sha256.Sum256(srv.Certificate().Raw)

	actx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- agent.Run(actx, agent.Config{Server: srv.URL, Token: token, Fingerprint: "sha256:" + hex.EncodeToString(sum[:]),
			Mode: remote.ModeCommands, Registry: runtimehost.Registry{config.KindFake: fake.Factory}, MaxBackoff: 200 * time.Millisecond})
	}()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Logf("agent: %v", err)
		}
	})
	select {
	case <-connected:
	case <-time.After(10 * time.Second):
		t.Fatal("the agent did not connect")
	}

	var n atomic.Int64
	runtimestest.Run(t, runtimestest.Harness{
		New: func(t *testing.T) runtimes.Runtime {
			name := fmt.Sprintf("sim-%d", n.Add(1))
			body, err := json.Marshal(config.File{Runtime: &config.Runtime{Name: name,
				Fake: &config.FakeRuntime{RolloutDuration: config.Duration{Duration: 10 * time.Millisecond}}}})
			if err != nil {
				t.Fatal(err)
			}
			return hub.Runtime("edge", config.KindFake, name, 1, body)
		},
		Target: func(k runtimes.InstanceKey, version string) runtimes.Target {
			name := k.Service + "-" + k.ReleaseChannel
			obj := map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
				"metadata": map[string]any{"name": name, "labels": map[string]any{"drover.dev/version": version}},
				"spec": map[string]any{"replicas": 2, "template": map[string]any{"spec": map[string]any{
					"containers": []any{map[string]any{"name": name, "image": "ghcr.io/acme/" + name + ":" + version}}}}}}
			b, err := json.Marshal(obj)
			if err != nil {
				t.Fatal(err)
			}
			return runtimes.Target{InstanceKey: k, Version: version, DesiredStateID: "ds-" + version, Backend: "kubernetes",
				Objects: []json.RawMessage{b}}
		},
	})
}
