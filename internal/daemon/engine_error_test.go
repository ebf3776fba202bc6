package daemon

import (
	"context"
	"encoding/json"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/api/client"
	apiv1 "github.com/drover-dev/drover/api/v1"
	"github.com/drover-dev/drover/examples"
	"github.com/drover-dev/drover/internal/auth"
	"github.com/drover-dev/drover/internal/config"
	ds "github.com/drover-dev/drover/internal/desiredstate"
	"github.com/drover-dev/drover/internal/engine"
	"github.com/drover-dev/drover/internal/server"
	"github.com/drover-dev/drover/internal/store"
	"github.com/drover-dev/drover/internal/store/sqlite"
)

// TestUndecodableDesiredStateShowsInStatus: a node whose store holds an
// active desired state that this drover cannot decode (a newer one wrote
// it) answers the service's status, through the API, with ENGINE_ERROR and
// the decoder's message on each channel, instead of the last status
// planned (or an error).
func TestUndecodableDesiredStateShowsInStatus(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "drover.db"))
	if err != nil {
		t.Fatal(err)
	}
	settings := engine.DefaultSettings()
	settings.RetryBackoff, settings.MaxBackoff = 10*time.Millisecond, 50*time.Millisecond
	const token = "engine-error-test-token"
	n := New(Config{Store: st, DataDir: t.TempDir(), Settings: settings, Workers: 2,
		Edge: server.EdgeConfig{Auth: auth.NewTokenAuthenticator(token, auth.LocalIdentity)}})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Run(runCtx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("node stopped: %v", err)
		}
		_ = st.Close()
	})
	c := client.New("http://"+ln.Addr().String(), client.WithToken(token))

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
	if _, err := c.ApplyConfigs(ctx, req); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Push(ctx, "quickstart", "web", apiv1.PushRequest{Params: []apiv1.Param{{Name: "image", Value: "1.27"}}}); err != nil {
		t.Fatal(err)
	}
	waitStatus := func(what string, ok func(apiv1.ChannelStatus) bool) *apiv1.ServiceStatus {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			got, err := c.Status(ctx, "quickstart", "web")
			if err == nil && len(got.ReleaseChannels) == 2 && ok(got.ReleaseChannels[0]) && ok(got.ReleaseChannels[1]) {
				return got
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %+v, %v", what, got, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	// staging converges; prod waits for its approval.
	waitStatus("planned", func(ch apiv1.ChannelStatus) bool {
		return ch.Status == string(ds.StatusConverged) || ch.Status == string(ds.StatusWaitingManualApproval)
	})

	if err := st.CreateDesiredState(ctx, store.DesiredState{ID: "ds-from-a-newer-drover", Application: "quickstart", Service: "web", Version: "v9",
		Compiled: []byte(`{"format": 99, "application": "quickstart", "service": "web", "version": "v9"}`)}); err != nil {
		t.Fatal(err)
	}
	n.loop.Enqueue("quickstart", "web")
	got := waitStatus("ENGINE_ERROR shown", func(ch apiv1.ChannelStatus) bool { return ch.Reason == string(ds.ReasonEngineError) })
	if got.DesiredStateID != "ds-from-a-newer-drover" {
		t.Errorf("status of desired state %s", got.DesiredStateID)
	}
	for _, ch := range got.ReleaseChannels {
		if !strings.Contains(ch.Message, "format 99 is newer than this drover reads") {
			t.Errorf("%s: message %q, want the decoder's", ch.Name, ch.Message)
		}
	}
}
