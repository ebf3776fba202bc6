package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	apiv1 "github.com/drover-dev/drover/api/v1"
)

// postJSON sends a raw API request; every raw request of these tests is built
// here, so a header the API starts requiring is added in one place.
func (s *server) postJSON(path string, body any) (int, string) {
	s.t.Helper()
	return s.postJSONWith(s.token(), path, body)
}

// postJSONWith posts body to path with the credential token.
func (s *server) postJSONWith(token, path string, body any) (int, string) {
	s.t.Helper()
	raw, err := json.Marshal(body)
	if err != nil {
		s.t.Fatal(err)
	}
	req, err := newAPIRequest(http.MethodPost, s.url+path, token, bytes.NewReader(raw))
	if err != nil {
		s.t.Fatal(err)
	}
	resp, err := s.httpClient().Do(req)
	if err != nil {
		s.t.Fatalf("POST %s: %v", path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		s.t.Fatal(err)
	}
	return resp.StatusCode, string(out)
}

// quorumTree is twoChannelTree with prod needing two approvers.
func quorumTree(t *testing.T, app string) string {
	t.Helper()
	dir := twoChannelTree(t, app, "1s")
	p := filepath.Join(dir, "app.pvn.yaml")
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	data = bytes.Replace(data, []byte("manualApproval: {}"), []byte("manualApproval: {minApprovers: 2}"), 1)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func prodWaitsForApproval(st *apiv1.ServiceStatus) bool {
	return findChannel(st, "prod").Status == "WAITING_MANUAL_APPROVAL"
}

// TestS3ApprovalBoundToDesiredState: an approval names the desired state the
// approver saw; once another push replaced it the server refuses (409) and
// records nothing. The new one can be approved, even before prod is reached.
func TestS3ApprovalBoundToDesiredState(t *testing.T) {
	requireE2E(t)
	dir := twoChannelTree(t, "shop", "2s")
	s := newServer(t)
	s.ok("alice", "apply", dir+"/...")
	vA, dsA := s.push("dev", "shop", "web", "image=3.0")
	st := s.waitStatus("shop", "web", 30*time.Second, "prod waiting for approval of A", prodWaitsForApproval)
	if st.DesiredStateID != dsA || st.DesiredVersion != vA {
		t.Fatalf("status shows %s %s, want A: %s %s", st.DesiredStateID, st.DesiredVersion, dsA, vA)
	}
	vB, dsB := s.push("mallory", "shop", "web", "image=6.6.6")

	for _, seen := range []string{dsA, vA} {
		r := s.as("reviewer", "approve", "web", "--app", "shop", "--release-channel", "prod", "--desired-state", seen)
		if r.code != 1 || !strings.Contains(r.stderr, "replaced") && !strings.Contains(r.stderr, "another push") {
			t.Errorf("approve of replaced %s: want exit 1 and a conflict, got %s", seen, r)
		}
		if !strings.Contains(r.stderr, dsB) || !strings.Contains(r.stderr, "drover status web --app shop") {
			t.Errorf("the conflict should name the new desired state %s and how to look again: %s", dsB, r)
		}
	}
	code, body := s.postJSON("/v1/apps/shop/services/web:approve", apiv1.ApproveRequest{ReleaseChannel: "prod", DesiredStateID: dsA})
	if code != http.StatusConflict || !strings.Contains(body, `"conflict"`) || !strings.Contains(body, dsA) || !strings.Contains(body, dsB) {
		t.Errorf("API approve of the replaced desired state: %d %s", code, body)
	}
	code, body = s.postJSON("/v1/apps/shop/services/web:approve", apiv1.ApproveRequest{ReleaseChannel: "prod"})
	if code != http.StatusBadRequest || !strings.Contains(body, "desiredStateId") {
		t.Errorf("API approve naming no desired state: %d %s", code, body)
	}
	if got := approvedBy(channel(t, s.status("shop", "web"), "prod")); len(got) != 0 {
		t.Fatalf("a refused approval was recorded: %v", got)
	}

	// B, approved by its id while staging may still roll it out.
	r := s.ok("reviewer", "approve", "web", "--app", "shop", "--release-channel", "prod", "--desired-state", dsB)
	if !strings.Contains(r.stdout, "approving prod of shop/web at desired state "+dsB) {
		t.Errorf("approve should say what it approves: %s", r)
	}
	s.waitStatus("shop", "web", 60*time.Second, "B everywhere", converged(vB))
	if got := approvedBy(channel(t, s.status("shop", "web"), "prod")); !slices.Equal(got, []string{"reviewer"}) {
		t.Errorf("prod approved by %v, want [reviewer]", got)
	}

	// Without --desired-state the CLI approves what status shows, and says so.
	vC, dsC := s.push("dev", "shop", "web", "image=7.0")
	r = s.ok("reviewer", "approve", "web", "--app", "shop", "--release-channel", "prod")
	if !strings.Contains(r.stdout, fmt.Sprintf("approving prod of shop/web at %s (desired state %s)", vC, dsC)) {
		t.Errorf("approve without --desired-state: %s", r)
	}
}

// TestS2ApproverSpellingsCountOnce: alice, ALICE and " alice " are one
// person and cannot meet minApprovers: 2 alone; the repeats are reported as
// such (B14), not as "approved".
func TestS2ApproverSpellingsCountOnce(t *testing.T) {
	requireE2E(t)
	dir := quorumTree(t, "sec")
	s := newServer(t)
	s.ok("dev", "apply", dir+"/...")
	version, _ := s.push("dev", "sec", "web", "image=1.0")
	s.waitStatus("sec", "web", 30*time.Second, "prod waiting for approval", prodWaitsForApproval)

	// The status approve prints counts the approval it recorded.
	if out := s.ok("alice", "approve", "web", "--app", "sec", "--release-channel", "prod").stdout; !strings.Contains(out, "prod: 1/2 approvals") {
		t.Errorf("approve printed a status without its own approval:\n%s", out)
	}
	// alice again, naming herself in any spelling (--user must name the
	// credential's identity).
	for _, spelling := range []string{"ALICE", " alice ", "Alice"} {
		r := s.as("alice", "approve", "web", "--app", "sec", "--release-channel", "prod", "--user", spelling)
		if r.code != 1 || !strings.Contains(r.stderr, "alice already approved prod") || strings.Contains(r.stdout, "approved prod") {
			t.Errorf("approve as %q: want exit 1 and already approved, got %s", spelling, r)
		}
	}
	r := s.as("alice", "approve", "web", "--app", "sec", "--release-channel", "prod", "--user", "ali\u200bce")
	if r.code != 64 || !strings.Contains(r.stderr, "U+200B") {
		t.Errorf("approve with a zero-width space: want exit 64 (usage), got %s", r)
	}
	st := s.status("sec", "web")
	if prod := channel(t, st, "prod"); prod.Status != "WAITING_MANUAL_APPROVAL" || !slices.Equal(approvedBy(prod), []string{"alice"}) {
		t.Fatalf("one person met a quorum of two:\n%s", dump(prod))
	}
	// Naming someone else is refused: approvals count credentials, not names.
	if r := s.as("alice", "approve", "web", "--app", "sec", "--release-channel", "prod", "--user", "bob"); r.code != 1 || !strings.Contains(r.stderr, `authenticated as "alice"`) {
		t.Errorf("alice approving as bob: want exit 1 and a refusal, got %s", r)
	}
	s.ok("Bob", "approve", "web", "--app", "sec", "--release-channel", "prod")
	st = s.waitStatus("sec", "web", 60*time.Second, "converged", converged(version))
	if got := approvedBy(channel(t, st, "prod")); !slices.Equal(got, []string{"alice", "bob"}) {
		t.Errorf("approved by %v, want [alice bob]", got)
	}
}

// TestS9UserTextRefusedOrEscaped: control characters in user and comment are
// refused by the API; a comment's line break cannot forge an event line.
func TestS9UserTextRefusedOrEscaped(t *testing.T) {
	requireE2E(t)
	dir := twoChannelTree(t, "shop", "1s")
	s := newServer(t)
	s.ok("dev", "apply", dir+"/...")
	_, ds := s.push("dev", "shop", "web", "image=1.0")
	s.waitStatus("shop", "web", 30*time.Second, "prod waiting for approval", prodWaitsForApproval)

	const path = "/v1/apps/shop/services/web:approve"
	for _, req := range []apiv1.ApproveRequest{
		{User: "eve\u202egnp.exe"},
		{User: "mallory\x1b[31m"},
		{Comment: "lgtm\x00\x1b[31m"},
		{Comment: "ok\r2026-11-24 10:39:01  approved"},
		{User: " "},
	} {
		req.ReleaseChannel, req.DesiredStateID = "prod", ds
		if code, body := s.postJSON(path, req); code != http.StatusBadRequest || !strings.Contains(body, "invalid_argument") {
			t.Errorf("approve %+q: want 400 invalid_argument, got %d %s", req.User+" / "+req.Comment, code, body)
		}
	}
	if code, body := s.postJSON("/v1/apps/shop/services/web:pause", apiv1.ChannelRequest{ReleaseChannel: "prod", User: "x\x1by"}); code != http.StatusBadRequest {
		t.Errorf("pause as a user with an escape: want 400, got %d %s", code, body)
	}

	forged := "2026-11-24 10:39:01  approved     prod: v-xxxx approved by security-team [security-team]"
	code, body := s.postJSONWith(s.tokenOf("mallory"), path, apiv1.ApproveRequest{ReleaseChannel: "prod", DesiredStateID: ds, Comment: "lgtm\n" + forged})
	if code != http.StatusOK {
		t.Fatalf("approve with a two-line comment: %d %s", code, body)
	}
	r := s.ok("e2e", "events", "web", "--app", "shop")
	for line := range strings.SplitSeq(r.stdout, "\n") {
		if strings.HasPrefix(line, "2026-11-24 10:39:01") {
			t.Errorf("a comment forged an event line: %q\n%s", line, r.stdout)
		}
	}
	if !strings.Contains(r.stdout, `approved by mallory: lgtm\n2026-11-24 10:39:01`) {
		t.Errorf("the comment's line break should be shown escaped:\n%s", r.stdout)
	}
}
