package server

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	apiv1 "github.com/drover-dev/drover/api/v1"
	"github.com/drover-dev/drover/internal/engine"
	"github.com/drover-dev/drover/internal/runtimehost"
	"github.com/drover-dev/drover/internal/runtimehost/builtin"
	"github.com/drover-dev/drover/internal/runtimes"
	"github.com/drover-dev/drover/internal/store/sqlite"
)

// newRunningServer is a server with the quickstart applied and its engine
// running with short intervals, so fake rollouts converge in moments.
func newRunningServer(t *testing.T) *Server {
	t.Helper()
	st, err := sqlite.Open(t.Context(), sqlite.MemoryPath)
	if err != nil {
		t.Fatal(err)
	}
	host := runtimehost.New(runtimehost.Config{Store: st, Registry: builtin.Registry(), DataDir: t.TempDir()})
	settings := engine.DefaultSettings()
	settings.PollInterval, settings.SteadyPollInterval, settings.ApplyBackoff = 20*time.Millisecond, 200*time.Millisecond, 20*time.Millisecond
	var s *Server
	loop := engine.NewLoop(engine.Config{Store: st, Runtimes: host, Settings: settings, Workers: 1, OnWrite: func() { s.Changed() }})
	s = New(Config{Store: st, Engine: loop, Runtimes: host})
	if err := host.Start(t.Context(), func(k runtimes.InstanceKey) { loop.Enqueue(k.Application, k.Service) }); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- loop.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("engine: %v", err)
		}
		host.Close()
		_ = st.Close()
	})
	if _, err := s.applyConfigs(local(t.Context()), quickstartConfigs(t)); err != nil {
		t.Fatal(err)
	}
	return s
}

// waitChannel polls the service's status until rc satisfies ok.
func waitChannel(t *testing.T, s *Server, rc, what string, ok func(apiv1.ChannelStatus) bool) apiv1.ChannelStatus {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var last apiv1.ChannelStatus
	for time.Now().Before(deadline) {
		st, err := s.status(t.Context(), "quickstart", "web")
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range st.ReleaseChannels {
			if c.Name == rc {
				last = c
				if ok(c) {
					return c
				}
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s never %s: %+v", rc, what, last)
	return last
}

func converged(version string) func(apiv1.ChannelStatus) bool {
	return func(c apiv1.ChannelStatus) bool { return c.Status == "CONVERGED" && c.Version == version }
}

// pushAndRoll pushes image tag and rolls it out to staging and prod
// (approving prod), returning the version.
func pushAndRoll(t *testing.T, s *Server, tag string) string {
	t.Helper()
	ctx := as(t.Context(), "dev")
	push, err := s.push(ctx, "quickstart", "web", apiv1.PushRequest{Params: []apiv1.Param{{Name: "image", Value: tag}}})
	if err != nil {
		t.Fatal(err)
	}
	waitChannel(t, s, "staging", "converged "+tag, converged(push.BundleVersion))
	waitChannel(t, s, "prod", "waiting for approval of "+tag, func(c apiv1.ChannelStatus) bool { return c.Status == "WAITING_MANUAL_APPROVAL" })
	if _, err := s.approve(as(t.Context(), "boss"), "quickstart", "web", apiv1.ApproveRequest{ReleaseChannel: "prod", DesiredStateID: push.DesiredStateID, User: "boss"}); err != nil {
		t.Fatal(err)
	}
	waitChannel(t, s, "prod", "converged "+tag, converged(push.BundleVersion))
	return push.BundleVersion
}

// TestRollbackToChosenVersion: prod rolls back from 1.29 to 1.27 by its
// display name, through prod's manual approval like any rollout, while
// staging stays on 1.29; refusals name the problem; versions lists the
// choices with their display names and where they ran.
func TestRollbackToChosenVersion(t *testing.T) {
	t.Parallel()
	s := newRunningServer(t)
	v27 := pushAndRoll(t, s, "1.27")
	v28 := pushAndRoll(t, s, "1.28")
	v29 := pushAndRoll(t, s, "1.29")
	ctx := as(t.Context(), "dev")

	refused := func(req apiv1.RollbackRequest, code apiv1.ErrorCode, says ...string) {
		t.Helper()
		_, err := s.rollback(ctx, "quickstart", "web", "dev", req)
		var ae *apiError
		if !errors.As(err, &ae) || ae.code != code {
			t.Fatalf("rollback %+v: %v, want %s", req, err, code)
		}
		for _, want := range says {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("rollback %+v: %q does not say %q", req, err, want)
			}
		}
	}
	refused(apiv1.RollbackRequest{ReleaseChannel: "prod", To: "9.99"}, "not_found", `no version "9.99"`, "(1.28)", "(1.27)", "drover versions web")
	refused(apiv1.RollbackRequest{ReleaseChannel: "prod", To: "1.29"}, "failed_precondition", "runs "+v29+" (1.29) already")
	refused(apiv1.RollbackRequest{ReleaseChannel: "prod", To: v29}, "failed_precondition", "already")
	refused(apiv1.RollbackRequest{To: "1.27"}, "invalid_argument", "--release-channel")

	res, err := s.rollback(ctx, "quickstart", "web", "dev", apiv1.RollbackRequest{ReleaseChannel: "prod", To: "1.27"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rollbacks) != 1 || res.Rollbacks[0].Version != v27 || res.Rollbacks[0].DisplayName != "1.27" || res.Rollbacks[0].ReleaseChannel != "prod" {
		t.Fatalf("rollbacks %+v, want prod to %s (1.27)", res.Rollbacks, v27)
	}
	// The same gate as a push: prod waits for its approval, still on 1.29.
	waiting := waitChannel(t, s, "prod", "waiting for approval of the rollback", func(c apiv1.ChannelStatus) bool { return c.Status == "WAITING_MANUAL_APPROVAL" })
	if waiting.Version != v29 || waiting.DisplayName != "1.29" || waiting.DesiredVersion != v27 || waiting.DesiredDisplayName != "1.27" {
		t.Errorf("prod while waiting: %+v", waiting)
	}
	refused(apiv1.RollbackRequest{ReleaseChannel: "prod", To: "1.27"}, "failed_precondition", "is the version release channel prod is to run already")
	if _, err := s.approve(as(t.Context(), "boss"), "quickstart", "web", apiv1.ApproveRequest{ReleaseChannel: "prod", DesiredStateID: res.DesiredStateID, User: "boss"}); err != nil {
		t.Fatal(err)
	}
	done := waitChannel(t, s, "prod", "converged 1.27", converged(v27))
	if done.DisplayName != "1.27" {
		t.Errorf("prod after the rollback: display name %q, want 1.27", done.DisplayName)
	}
	staging := waitChannel(t, s, "staging", "on 1.29", converged(v29))
	if staging.DisplayName != "1.29" || staging.TargetVersion != v29 {
		t.Errorf("staging moved: %+v", staging)
	}

	list, err := s.versions(t.Context(), "quickstart", "web", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Versions) != 4 || !list.Versions[0].Rollback || !list.Versions[0].Active {
		t.Fatalf("versions: %+v", list.Versions)
	}
	want := map[string]string{v27: "1.27", v28: "1.28", v29: "1.29"}
	for _, v := range list.Versions[1:] {
		if want[v.Version] != v.DisplayName || v.CreatedBy != "dev" {
			t.Errorf("version %s: display name %q by %q", v.Version, v.DisplayName, v.CreatedBy)
		}
		for _, c := range v.ReleaseChannels {
			if !c.Ran {
				t.Errorf("%s of %s: not seen converged", c.Name, v.DisplayName)
			}
			if running := v.Version == v29 && c.Name == "staging" || v.Version == v27 && c.Name == "prod"; c.Running != running {
				t.Errorf("%s of %s: running %v, want %v", c.Name, v.DisplayName, c.Running, running)
			}
		}
	}
	// A desired state id names a version too; a freeze holds the rollback
	// of staging (no manual approval there) until it is lifted.
	var id28 string
	for _, v := range list.Versions {
		if v.Version == v28 {
			id28 = v.DesiredStateID
		}
	}
	if _, err := s.freeze(ctx, apiv1.FreezeRequest{Application: "quickstart", ReleaseChannel: "staging", Reason: "hold it", User: "dev"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.rollback(ctx, "quickstart", "web", "dev", apiv1.RollbackRequest{ReleaseChannel: "staging", To: id28}); err != nil {
		t.Fatal(err)
	}
	held := waitChannel(t, s, "staging", "held by the freeze", func(c apiv1.ChannelStatus) bool { return c.Reason == "FROZEN" })
	if held.Version != v29 || held.Status != "BLOCKED" {
		t.Errorf("staging under the freeze: %+v", held)
	}
	if _, err := s.unfreeze(ctx, apiv1.UnfreezeRequest{Application: "quickstart", ReleaseChannel: "staging", User: "dev"}); err != nil {
		t.Fatal(err)
	}
	waitChannel(t, s, "staging", "converged 1.28", converged(v28))
	waitChannel(t, s, "prod", "still on 1.27", converged(v27))
}
