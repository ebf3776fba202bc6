package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	apiv1 "github.com/drover-dev/drover/api/v1"
	"github.com/drover-dev/drover/examples"
	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/store/sqlite"
)

// newPushedServer is a server (engine not running) with the quickstart
// applied and pushed once; it returns the desired state id.
func newPushedServer(t testing.TB) (*Server, string) {
	t.Helper()
	st, err := sqlite.Open(t.Context(), sqlite.MemoryPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	s, _ := newTestServer(t, st, t.TempDir(), EdgeConfig{}) // the engine is not run
	req := quickstartConfigs(t)
	if _, err := s.applyConfigs(local(t.Context()), req); err != nil {
		t.Fatal(err)
	}
	push, err := s.push(as(t.Context(), "dev"), "quickstart", "web", apiv1.PushRequest{Params: []apiv1.Param{{Name: "image", Value: "1.27"}}})
	if err != nil {
		t.Fatal(err)
	}
	return s, push.DesiredStateID
}

// quickstartConfigs is the request applying the quickstart example.
func quickstartConfigs(t testing.TB) apiv1.ApplyConfigsRequest {
	t.Helper()
	dir := t.TempDir()
	sub, err := fs.Sub(examples.Quickstart, "quickstart")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(dir, sub); err != nil {
		t.Fatal(err)
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

// post sends one API request to the handler as the local identity.
func post(t *testing.T, s *Server, path string, body any) (int, string) {
	t.Helper()
	return postAs(local(t.Context()), t, s, path, body)
}

// postAs sends one API request to the handler under ctx's identity; every
// request of these tests is built here.
func postAs(ctx context.Context, t *testing.T, s *Server, path string, body any) (int, string) {
	t.Helper()
	raw, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequestWithContext(ctx, http.MethodPost, path, bytes.NewReader(raw))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, req)
	return rec.Code, rec.Body.String()
}

const approvePath = "/v1/apps/quickstart/services/web:approve"

// TestB26ConcurrentApprovalsDoNotOvershoot: people approving a gate for one
// at the same moment: one is recorded, the others are told it is met.
func TestB26ConcurrentApprovalsDoNotOvershoot(t *testing.T) {
	t.Parallel()
	s, ds := newPushedServer(t)
	const n = 8
	codes := make([]int, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			codes[i], _ = postAs(as(t.Context(), fmt.Sprint("user", i)), t, s, approvePath, apiv1.ApproveRequest{ReleaseChannel: "prod", DesiredStateID: ds})
		})
	}
	close(start)
	wg.Wait()
	ok := 0
	for i, c := range codes {
		switch c {
		case http.StatusOK:
			ok++
		case http.StatusConflict:
		default:
			t.Errorf("approval %d: status %d", i, c)
		}
	}
	got, err := s.store.ListApprovals(t.Context(), ds)
	if err != nil {
		t.Fatal(err)
	}
	if ok != 1 || len(got) != 1 {
		t.Errorf("%d concurrent approvals of a gate for one: %d answered 200, %d recorded; want 1 and 1", n, ok, len(got))
	}
}

// TestB14DuplicateApprovalIsConflict: the same person again (any spelling)
// is 409 already_exists, not a second "approved".
func TestB14DuplicateApprovalIsConflict(t *testing.T) {
	t.Parallel()
	s, ds := newPushedServer(t)
	alice := as(t.Context(), "alice")
	if code, body := postAs(alice, t, s, approvePath, apiv1.ApproveRequest{ReleaseChannel: "prod", DesiredStateID: ds}); code != http.StatusOK {
		t.Fatalf("first approval: %d %s", code, body)
	}
	code, body := postAs(alice, t, s, approvePath, apiv1.ApproveRequest{ReleaseChannel: "prod", DesiredStateID: ds, User: " ALICE", Reject: true})
	if code != http.StatusConflict || !strings.Contains(body, `"already_exists"`) || !strings.Contains(body, "alice already approved prod") {
		t.Errorf("second answer by alice: %d %s", code, body)
	}
}

// TestS9ControlCharactersRefusedAtAPI: user and comment with control or
// format characters are 400 for every verb that records a user.
func TestS9ControlCharactersRefusedAtAPI(t *testing.T) {
	t.Parallel()
	s, ds := newPushedServer(t)
	for _, tc := range []struct {
		path string
		body any
	}{
		{approvePath, apiv1.ApproveRequest{ReleaseChannel: "prod", DesiredStateID: ds, User: "eve\u202egnp.exe"}},
		{approvePath, apiv1.ApproveRequest{ReleaseChannel: "prod", DesiredStateID: ds, User: "mallory", Comment: "lgtm\x1b[31m"}},
		{approvePath, apiv1.ApproveRequest{ReleaseChannel: "prod", DesiredStateID: ds, User: "mallory", Comment: "a\x00"}},
		{"/v1/apps/quickstart/services/web:pause", apiv1.ChannelRequest{ReleaseChannel: "prod", User: "bob\n"}},
		{"/v1/apps/quickstart/services/web:push", apiv1.PushRequest{User: "bob\u200b", Params: []apiv1.Param{{Name: "image", Value: "1.28"}}}},
		{"/v1/configs:apply", apiv1.ApplyConfigsRequest{User: "\x07", Configs: []apiv1.Config{{Source: "x", Body: json.RawMessage(`{}`)}}}},
	} {
		if code, body := postAs(as(t.Context(), "mallory"), t, s, tc.path, tc.body); code != http.StatusBadRequest || !strings.Contains(body, "invalid_argument") {
			t.Errorf("POST %s %+v: want 400, got %d %s", tc.path, tc.body, code, body)
		}
	}
	got, err := s.store.ListApprovals(t.Context(), ds)
	if err != nil || len(got) != 0 {
		t.Errorf("refused approvals were recorded: %v %v", got, err)
	}
}
