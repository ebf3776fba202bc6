package e2e

import (
	"encoding/json"
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

// TestAccessOverTLS: a team's server over TLS (a self-signed certificate,
// pinned by its fingerprint), with API tokens: a deployer pushes but cannot
// approve; one identity's two approvals do not meet minApprovers: 2, nor
// does naming someone else; a revoked token is refused at once; a second
// approver's approval rolls prod out; the audit log has the refusals.
func TestAccessOverTLS(t *testing.T) {
	requireE2E(t)
	dir := quorumTree(t, "shop")
	adminFile := filepath.Join(t.TempDir(), "admin-token")
	const admin = "drover_e2e-first-admin-token-0123456789"
	if err := os.WriteFile(adminFile, []byte(admin+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := newServer(t, "--tls", "--admin-token-file", adminFile)
	if !strings.HasPrefix(s.url, "https://") {
		t.Fatalf("server URL %s, want https", s.url)
	}
	pin := "sha256:" + s.fingerprint()
	with := func(token string, args ...string) result {
		t.Helper()
		return runDrover(t, append(args, "--server", s.url, "--token", token, "--tls-fingerprint", pin)...)
	}
	mustOK := func(r result) result {
		t.Helper()
		if r.code != 0 {
			t.Fatalf("unexpected failure: %s", r)
		}
		return r
	}
	if r := mustOK(with(admin, "whoami")); !strings.Contains(r.stdout, "admin (token): admin") {
		t.Errorf("whoami as the first admin: %s", r)
	}
	wrong := "sha256:" + strings.Repeat("ab", 32)
	if r := runDrover(t, "whoami", "--server", s.url, "--token", admin, "--tls-fingerprint", wrong); r.code != 1 || !strings.Contains(r.stderr, "not the pinned one") {
		t.Errorf("whoami pinning another certificate: want exit 1 and a refusal, got %s", r)
	}

	token := func(name string, roles ...string) string {
		t.Helper()
		args := []string{"tokens", "create", name, "-o", "json"}
		for _, r := range roles {
			args = append(args, "--role", r)
		}
		var resp apiv1.CreateTokenResponse
		if err := json.Unmarshal([]byte(mustOK(with(admin, args...)).stdout), &resp); err != nil || resp.Token == "" {
			t.Fatalf("create token %s: %v", name, err)
		}
		return resp.Token
	}
	ci := token("ci", "deployer@shop")
	ann := token("ann", "approver@shop")
	ben := token("ben", "approver@shop/prod")
	viewer := token("vic", "viewer")

	mustOK(with(admin, "apply", dir+"/..."))
	if r := with(viewer, "push", "web", "--app", "shop", "--param", "image=1.0"); r.code != 1 || !strings.Contains(r.stderr, `vic lacks permission "push" on application shop`) {
		t.Errorf("push as a viewer: want exit 1 and 403, got %s", r)
	}
	r := mustOK(with(ci, "push", "web", "--app", "shop", "--param", "image=1.0"))
	m := pushedRE.FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("push printed no version: %s", r)
	}
	version := m[1]
	s.waitStatus("shop", "web", 30*time.Second, "prod waiting for approval", prodWaitsForApproval)

	if r := with(ci, "approve", "web", "--app", "shop", "--release-channel", "prod"); r.code != 1 || !strings.Contains(r.stderr, `ci lacks permission "approve"`) {
		t.Errorf("approve as a deployer: want exit 1 and 403, got %s", r)
	}
	if r := mustOK(with(ann, "approve", "web", "--app", "shop", "--release-channel", "prod")); !strings.Contains(r.stdout, "approved prod of shop/web as ann") || !strings.Contains(r.stdout, "1/2 approvals") {
		t.Errorf("first approval by ann: %s", r)
	}
	if r := with(ann, "approve", "web", "--app", "shop", "--release-channel", "prod"); r.code != 1 || !strings.Contains(r.stderr, "ann already approved prod") {
		t.Errorf("second approval by ann: want exit 1, got %s", r)
	}
	if r := with(ann, "approve", "web", "--app", "shop", "--release-channel", "prod", "--user", "ben"); r.code != 1 || !strings.Contains(r.stderr, `authenticated as "ann"`) {
		t.Errorf("ann approving as ben: want exit 1, got %s", r)
	}
	st := s.status("shop", "web")
	if prod := channel(t, st, "prod"); prod.Status != "WAITING_MANUAL_APPROVAL" || !slices.Equal(approvedBy(prod), []string{"ann"}) {
		t.Fatalf("one identity met a quorum of two:\n%s", dump(prod))
	}

	mustOK(with(admin, "tokens", "revoke", "ben"))
	if r := with(ben, "approve", "web", "--app", "shop", "--release-channel", "prod"); r.code != 1 || !strings.Contains(r.stderr, "the token ben was revoked by admin") {
		t.Errorf("approve with a revoked token: want exit 1 and refused as revoked, got %s", r)
	}
	if code, body := s.postJSONWith(ben, "/v1/apps/shop/services/web:approve", apiv1.ApproveRequest{ReleaseChannel: "prod", Version: version}); code != http.StatusUnauthorized {
		t.Errorf("API approve with a revoked token: %d %s", code, body)
	}
	cat := token("cat", "approver@shop/prod")
	mustOK(with(cat, "approve", "web", "--app", "shop", "--release-channel", "prod"))
	st = s.waitStatus("shop", "web", 60*time.Second, "converged", converged(version))
	if got := approvedBy(channel(t, st, "prod")); !slices.Equal(got, []string{"ann", "cat"}) {
		t.Errorf("approved by %v, want [ann cat]", got)
	}

	if r := with(ci, "audit"); r.code != 1 || !strings.Contains(r.stderr, `lacks permission "audit"`) {
		t.Errorf("audit as a deployer: want exit 1 and 403, got %s", r)
	}
	var log apiv1.AuditList
	if err := json.Unmarshal([]byte(mustOK(with(admin, "audit", "--app", "shop", "-o", "json")).stdout), &log); err != nil {
		t.Fatal(err)
	}
	var all apiv1.AuditList
	if err := json.Unmarshal([]byte(mustOK(with(admin, "audit", "-o", "json")).stdout), &all); err != nil {
		t.Fatal(err)
	}
	revokedRefusal := false
	for _, rec := range all.Records {
		if rec.Identity == "unauthenticated" && rec.Status == 401 && strings.Contains(rec.Message, "the token ben was revoked") && strings.HasSuffix(rec.Action, "web:approve") {
			revokedRefusal = true
		}
		if strings.Contains(dump(rec), ben) {
			t.Errorf("an audit record holds a token: %s", dump(rec))
		}
	}
	if !revokedRefusal {
		t.Errorf("the approve with a revoked token is not in the audit log:\n%s", dump(all))
	}
	var refusedApprove, pushByCI, approveByCat bool
	for _, rec := range log.Records {
		switch {
		case rec.Identity == "ci" && strings.HasSuffix(rec.Action, ":approve") && rec.Outcome == "permission_denied" && rec.Status == 403 && strings.HasPrefix(rec.Source, "127.0.0.1:"):
			refusedApprove = true
		case rec.Identity == "ci" && strings.HasSuffix(rec.Action, ":push") && rec.Outcome == "ok":
			pushByCI = true
		case rec.Identity == "cat" && strings.HasSuffix(rec.Action, ":approve") && rec.Outcome == "ok" && rec.ReleaseChannel == "prod":
			approveByCat = true
		}
	}
	if !refusedApprove || !pushByCI || !approveByCat {
		t.Errorf("audit log (refused approve %v, push %v, approve %v):\n%s", refusedApprove, pushByCI, approveByCat, dump(log))
	}
	// Metrics: a viewer of one application may not scrape; an admin may.
	scrape := func(token string) (int, string) {
		t.Helper()
		req, err := newAPIRequest(http.MethodGet, s.url+"/metrics", token, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := s.httpClient().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, _ := scrape(ci); code != http.StatusForbidden {
		t.Errorf("scrape as a deployer of shop: %d, want 403", code)
	}
	code, body := scrape(admin)
	if code != http.StatusOK {
		t.Fatalf("scrape as admin: %d %s", code, body)
	}
	for _, want := range []string{
		`drover_tasks_total{kind="apply",outcome="succeeded"}`,
		`drover_instances{application="shop",reason="",status="CONVERGED"} 2`,
		`drover_api_requests_total{code="403",route="POST /v1/apps/{app}/services/{svc}:approve"} 2`,
		`drover_runtime_call_duration_seconds_count{op="apply",result="ok",runtime="prod"}`,
		`drover_reconcile_duration_seconds_count{result="requeue_after"}`,
		`drover_engine_queue_depth`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the scrape lacks %s", want)
		}
	}
	tokens := mustOK(with(admin, "tokens")).stdout
	for _, want := range []string{"ben", "revoked by admin", "deployer@shop", "approver@shop/prod"} {
		if !strings.Contains(tokens, want) {
			t.Errorf("tokens list lacks %q:\n%s", want, tokens)
		}
	}
}
