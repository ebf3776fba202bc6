package daemon

import (
	"context"
	"encoding/json"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/drover-dev/drover/api/client"
	apiv1 "github.com/drover-dev/drover/api/v1"
	"github.com/drover-dev/drover/examples"
	"github.com/drover-dev/drover/internal/auth"
	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/engine"
	"github.com/drover-dev/drover/internal/runtimehost"
	"github.com/drover-dev/drover/internal/runtimes"
	"github.com/drover-dev/drover/internal/runtimes/fake"
	"github.com/drover-dev/drover/internal/server"
	"github.com/drover-dev/drover/internal/store/postgres"
	"github.com/drover-dev/drover/internal/testing/pgtest"
)

// sharedFakes builds each fake runtime once, in memory, for every node of
// a test: the nodes see one backend, as servers sharing real clusters do.
type sharedFakes struct {
	mu  sync.Mutex
	rts map[string]runtimes.Runtime
}

func (s *sharedFakes) registry() runtimehost.Registry {
	return runtimehost.Registry{"fake": func(cfg *config.Runtime, opts runtimes.Options) (runtimes.Runtime, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if rt, ok := s.rts[cfg.Name]; ok {
			return rt, nil
		}
		opts.DataDir = ""
		rt, err := fake.New(cfg, opts)
		if err != nil {
			return nil, err
		}
		if s.rts == nil {
			s.rts = map[string]runtimes.Runtime{}
		}
		s.rts[cfg.Name] = rt
		return rt, nil
	}}
}

// startReplica runs a node on the PostgreSQL database url and returns a
// client of its API.
func startReplica(t *testing.T, url string, fakes *sharedFakes) *client.Client {
	t.Helper()
	st, err := postgres.Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	settings := engine.DefaultSettings()
	// Polls are slow: what moves fast here, moves because a server heard of it.
	settings.PollInterval, settings.SteadyPollInterval = 5*time.Second, 5*time.Second
	const token = "replica-test-token"
	n := New(Config{Store: st, DataDir: t.TempDir(), Registry: fakes.registry(), Settings: settings, Workers: 4,
		Edge: server.EdgeConfig{Auth: auth.NewTokenAuthenticator(token, auth.LocalIdentity)}, StoreKind: "postgres", Shared: true})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("replica stopped: %v", err)
		}
		_ = st.Close()
	})
	return client.New("http://"+ln.Addr().String(), client.WithToken(token))
}

// TestReplicasHearEachOther: two servers on one PostgreSQL database, polling
// slowly. A push through A shows on B's event stream within a second, and
// an approval through the server whose engine does not plan the service
// moves prod within a second: the servers wake each other through the
// store's change feed.
func TestReplicasHearEachOther(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDatabase(t)
	var fakes sharedFakes
	a, b := startReplica(t, url, &fakes), startReplica(t, url, &fakes)
	ctx := t.Context()

	dir := filepath.Join(t.TempDir(), "quickstart")
	if err := extract(examples.Quickstart, "quickstart", dir); err != nil {
		t.Fatal(err)
	}
	sources, err := config.Load([]string{dir + "/..."})
	if err != nil {
		t.Fatal(err)
	}
	req := apiv1.ApplyConfigsRequest{}
	for _, src := range sources {
		body, err := json.Marshal(src.File)
		if err != nil {
			t.Fatal(err)
		}
		req.Configs = append(req.Configs, apiv1.Config{Source: src.Path, Body: body})
	}
	if _, err := a.ApplyConfigs(ctx, req); err != nil {
		t.Fatal(err)
	}

	var after int64
	if evs, err := b.Events(ctx, "quickstart", "web", 0, 0); err == nil && len(evs.Events) > 0 {
		after = evs.Events[len(evs.Events)-1].Seq
	}
	events := make(chan apiv1.Event, 100)
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go func() {
		_ = b.Watch(wctx, "quickstart", "web", after, func(e apiv1.Event) error { events <- e; return nil })
	}()
	time.Sleep(200 * time.Millisecond) // the stream is open
	pushed := time.Now()
	push, err := a.Push(ctx, "quickstart", "web", apiv1.PushRequest{Params: []apiv1.Param{{Name: "image", Value: "1.27"}}})
	if err != nil {
		t.Fatal(err)
	}
	for heard := false; !heard; {
		select {
		case e := <-events:
			heard = e.DesiredStateID == push.DesiredStateID
		case <-time.After(5 * time.Second):
			t.Fatal("B's event stream never heard of the push through A")
		}
	}
	t.Logf("B's stream had the push through A after %v", time.Since(pushed).Round(time.Millisecond))
	if d := time.Since(pushed); d > time.Second {
		t.Errorf("B's stream heard of the push after %v, want within a second", d)
	}

	channel := func(c *client.Client, rc string) apiv1.ChannelStatus {
		t.Helper()
		st, err := c.Status(ctx, "quickstart", "web")
		if err != nil {
			t.Fatal(err)
		}
		for _, ch := range st.ReleaseChannels {
			if ch.Name == rc {
				return ch
			}
		}
		t.Fatalf("no release channel %s in %+v", rc, st)
		return apiv1.ChannelStatus{}
	}
	deadline := time.Now().Add(30 * time.Second)
	for channel(b, "prod").Status != "WAITING_MANUAL_APPROVAL" {
		if time.Now().After(deadline) {
			t.Fatalf("prod never waited for approval: %+v", channel(b, "prod"))
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Approve through the server whose engine does not plan the service:
	// the one that does must hear of it.
	st, err := postgres.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = st.Close() }()
	leases, err := st.ListLeases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var holder string
	for _, l := range leases {
		if l.Key == "service/quickstart/web" {
			holder = l.Owner
		}
	}
	ha, err := a.Health(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("lease holder %q, A is %q", holder, ha.Replica)
	if holder != ha.Replica { // B holds it: approve through A
		a, b = b, a
	}
	approved := time.Now()
	if _, err := b.Approve(ctx, "quickstart", "web", apiv1.ApproveRequest{ReleaseChannel: "prod", DesiredStateID: push.DesiredStateID}); err != nil {
		t.Fatal(err)
	}
	for channel(a, "prod").Status == "WAITING_MANUAL_APPROVAL" {
		if time.Since(approved) > 5*time.Second {
			t.Fatal("prod still waits for approval 5 s after it was approved through B")
		}
		time.Sleep(10 * time.Millisecond)
	}
	moved := time.Since(approved)
	t.Logf("prod moved %v after the approval through B", moved.Round(time.Millisecond))
	if moved > time.Second {
		t.Errorf("prod moved %v after the approval, want within a second", moved)
	}
}
