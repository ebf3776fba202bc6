package server

import (
	"context"
	"testing"

	"github.com/drover-dev/drover/internal/auth"
	"github.com/drover-dev/drover/internal/engine"
	"github.com/drover-dev/drover/internal/runtimehost"
	"github.com/drover-dev/drover/internal/runtimehost/builtin"
	"github.com/drover-dev/drover/internal/runtimes"
	"github.com/drover-dev/drover/internal/store"
)

// newTestServer wires a server as the composition root (internal/daemon)
// does: a runtime host with the built-in runtimes, started and closed at the
// test's end, and an engine loop that is not running (Run it to converge).
func newTestServer(t testing.TB, st store.Store, dataDir string, edge EdgeConfig) (*Server, *engine.Loop) {
	t.Helper()
	host := runtimehost.New(runtimehost.Config{Store: st, Registry: builtin.Registry(), DataDir: dataDir})
	var s *Server
	loop := engine.NewLoop(engine.Config{Store: st, Runtimes: host, Settings: engine.DefaultSettings(), Workers: 1,
		OnWrite: func() { s.Changed() }})
	s = New(Config{Store: st, Engine: loop, Runtimes: host, Edge: edge})
	if err := host.Start(t.Context(), func(k runtimes.InstanceKey) { loop.Enqueue(k.Application, k.Service) }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(host.Close)
	return s, loop
}

// NewTestServer is newTestServer for the tests of package server_test.
var NewTestServer = newTestServer

// as returns ctx acting as the identity name, holding bindings (admin of
// everything when none are given).
func as(ctx context.Context, name string, bindings ...auth.Binding) context.Context {
	if len(bindings) == 0 {
		bindings = []auth.Binding{{Role: auth.RoleAdmin}}
	}
	return auth.WithIdentity(ctx, auth.Identity{Name: name, Kind: auth.KindToken, Bindings: bindings})
}

// local returns ctx acting as the server's local token (admin).
func local(ctx context.Context) context.Context { return auth.WithIdentity(ctx, auth.LocalIdentity) }
