package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	apiv1 "github.com/drover-dev/drover/api/v1"
	"github.com/drover-dev/drover/internal/testing/oidctest"
)

var userCodeRE = regexp.MustCompile(`(?m)^and enter the code\n\s+(\S+)$`)

// TestOIDCSignIn: a server over TLS signs people in through a real OpenID
// provider on 127.0.0.1 (zitadel's example provider). drover login --sso
// runs the device flow: ann, of the group mapped to approver@shop, and
// bob, of the group mapped to deployer@shop, sign in at the provider's
// pages; bob pushes, may not approve; ann approves, may not push; one
// identity's two sessions are one approver. A browser signs carl (no
// mapped group) in with the authorization code flow and PKCE, gets a
// session cookie, and signs out. An admin ends ann's sessions: refused at
// once. The audit log has the sign-ins.
func TestOIDCSignIn(t *testing.T) {
	requireE2E(t)
	dir := quorumTree(t, "shop")
	addr := freeAddr(t)
	op := oidctest.Start(t, []oidctest.Person{
		{Name: "ann", Password: "ann-secret-pw", Email: "ann@example.com", Groups: []string{"release-managers"}},
		{Name: "bob", Password: "bob-secret-pw", Email: "bob@example.com", Groups: []string{"shop-devs", "staff"}},
		{Name: "carl", Password: "carl-secret-pw", Email: "carl@example.com", Groups: []string{"staff"}},
	}, "https://"+addr+"/v1/auth/callback")
	files := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(files, name)
		if err := os.WriteFile(p, []byte(content+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const admin = "drover_e2e-oidc-first-admin-token-0123"
	s := newServerAt(t, addr, "--tls", "--admin-token-file", write("admin", admin),
		"--oidc-issuer", op.Issuer,
		"--oidc-client-id", oidctest.WebClientID, "--oidc-client-secret-file", write("web-secret", oidctest.WebClientSecret),
		"--oidc-device-client-id", oidctest.DeviceClientID, "--oidc-device-client-secret-file", write("cli-secret", oidctest.DeviceClientSecret),
		"--oidc-scopes", "openid,profile,email,groups",
		"--oidc-group", "release-managers=approver@shop", "--oidc-group", "shop-devs=deployer@shop")
	pin := "sha256:" + s.fingerprint()
	mustOK := func(r result) result {
		t.Helper()
		if r.code != 0 {
			t.Fatalf("unexpected failure: %s", r)
		}
		return r
	}
	adminRun := func(args ...string) result {
		t.Helper()
		return runDrover(t, append(args, "--server", s.url, "--token", admin, "--tls-fingerprint", pin)...)
	}
	mustOK(adminRun("apply", dir+"/..."))

	// login signs a person in with the device flow, in a CLI config of
	// their own; as runs the CLI with it.
	login := func(person, password string) string {
		t.Helper()
		config := filepath.Join(t.TempDir(), "config.yaml")
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, droverBin, "login", s.url, "--sso", "--tls-fingerprint", pin)
		cmd.Env = append(cleanEnv(), "DROVER_CONFIG="+config)
		var stdout bytes.Buffer
		cmd.Stdout = &stdout
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var seen strings.Builder
		sc := bufio.NewScanner(stderr)
		code := ""
		for code == "" && sc.Scan() {
			seen.WriteString(sc.Text() + "\n")
			if m := userCodeRE.FindStringSubmatch(seen.String()); m != nil {
				code = m[1]
			}
		}
		if code == "" {
			_ = cmd.Wait()
			t.Fatalf("drover login --sso printed no code:\n%s", seen.String())
		}
		if !strings.Contains(seen.String(), op.URL("/device")) {
			t.Errorf("drover login --sso did not name the provider's device page:\n%s", seen.String())
		}
		if err := op.Approve(ctx, code, person, password); err != nil {
			t.Fatal(err)
		}
		go func() { _, _ = io.Copy(io.Discard, stderr) }()
		if err := cmd.Wait(); err != nil {
			t.Fatalf("drover login --sso as %s: %v\n%s\n%s", person, err, seen.String(), stdout.String())
		}
		if want := "signed in to " + s.url + " as " + person + "@example.com"; !strings.Contains(stdout.String(), want) {
			t.Errorf("login printed %q, want %q", stdout.String(), want)
		}
		return config
	}
	as := func(config string, args ...string) result {
		t.Helper()
		return runDroverEnv(t, []string{"DROVER_CONFIG=" + config}, args...)
	}

	ann := login("ann", "ann-secret-pw")
	bob := login("bob", "bob-secret-pw")
	if r := mustOK(as(ann, "whoami")); !strings.Contains(r.stdout, "ann@example.com (oidc): approver@shop") {
		t.Errorf("whoami as ann: %s", r)
	}
	if r := mustOK(as(bob, "whoami")); !strings.Contains(r.stdout, "bob@example.com (oidc): deployer@shop") {
		t.Errorf("whoami as bob: %s", r)
	}

	if r := as(ann, "push", "web", "--app", "shop", "--param", "image=1.0"); r.code != 1 || !strings.Contains(r.stderr, `ann@example.com lacks permission "push"`) {
		t.Errorf("push as ann (approver): want exit 1 and 403, got %s", r)
	}
	r := mustOK(as(bob, "push", "web", "--app", "shop", "--param", "image=1.0"))
	m := pushedRE.FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("push printed no version: %s", r)
	}
	version := m[1]
	s.waitStatus("shop", "web", 30*time.Second, "prod waiting for approval", prodWaitsForApproval)
	if r := as(bob, "approve", "web", "--app", "shop", "--release-channel", "prod"); r.code != 1 || !strings.Contains(r.stderr, `bob@example.com lacks permission "approve"`) {
		t.Errorf("approve as bob (deployer): want exit 1 and 403, got %s", r)
	}
	if r := mustOK(as(ann, "approve", "web", "--app", "shop", "--release-channel", "prod")); !strings.Contains(r.stdout, "1/2 approvals") {
		t.Errorf("first approval by ann: %s", r)
	}
	// A second session of ann is still ann: her approval does not count twice.
	ann2 := login("ann", "ann-secret-pw")
	if r := as(ann2, "approve", "web", "--app", "shop", "--release-channel", "prod"); r.code != 1 || !strings.Contains(r.stderr, "ann@example.com already approved prod") {
		t.Errorf("ann approving again from another session: want exit 1, got %s", r)
	}
	if prod := channel(t, s.status("shop", "web"), "prod"); prod.Status != "WAITING_MANUAL_APPROVAL" {
		t.Fatalf("one person's two sessions met a quorum of two:\n%s", dump(prod))
	}

	// A browser: carl signs in with the authorization code flow.
	browser := oidctest.Browser(s.httpClient().Transport)
	body, at, err := op.SignIn(t.Context(), browser, s.url+"/v1/auth/login", "carl", "carl-secret-pw")
	if err != nil {
		t.Fatal(err)
	}
	if at.String() != s.url+"/v1/auth/callback" && !strings.HasPrefix(at.String(), s.url+"/v1/auth/callback?") || !strings.Contains(body, "Signed in to drover as carl@example.com") {
		t.Fatalf("the browser sign-in ended at %s with:\n%s", at, body)
	}
	browse := func(method, path string) (int, string) {
		t.Helper()
		var rd io.Reader
		if method == http.MethodPost {
			rd = strings.NewReader("{}")
		}
		req, err := http.NewRequestWithContext(t.Context(), method, s.url+path, rd)
		if err != nil {
			t.Fatal(err)
		}
		if rd != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := browser.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	var id apiv1.Identity
	code, out := browse(http.MethodGet, "/v1/whoami")
	if code != http.StatusOK || json.Unmarshal([]byte(out), &id) != nil || id.Name != "carl@example.com" || id.Kind != "oidc" || len(id.Roles) != 0 {
		t.Errorf("whoami with carl's cookie: %d %s", code, out)
	}
	if code, out := browse(http.MethodGet, "/v1/apps/shop/services/web"); code != http.StatusForbidden {
		t.Errorf("carl (no mapped group) read shop: %d %s", code, out)
	}
	if code, out := browse(http.MethodPost, "/v1/auth/logout"); code != http.StatusOK || !strings.Contains(out, `"signedOut":true`) {
		t.Errorf("sign out: %d %s", code, out)
	}
	if code, out := browse(http.MethodGet, "/v1/whoami"); code != http.StatusUnauthorized {
		t.Errorf("whoami after signing out: %d %s", code, out)
	}

	// An admin ends every session of ann's: refused at once.
	if r := mustOK(adminRun("sessions")); !strings.Contains(r.stdout, "ann@example.com") || !strings.Contains(r.stdout, "carl@example.com") {
		t.Errorf("sessions:\n%s", r)
	}
	if r := mustOK(adminRun("sessions", "revoke", "--identity", "ann@example.com")); !strings.Contains(r.stdout, "2 session(s) of ann@example.com ended") {
		t.Errorf("revoke ann's sessions: %s", r)
	}
	for _, cfg := range []string{ann, ann2} {
		if r := as(cfg, "whoami"); r.code != 1 || !strings.Contains(r.stderr, "was ended by admin") {
			t.Errorf("whoami with a revoked session: want exit 1, got %s", r)
		}
	}
	// bob signs out with the CLI; ann's CLI forgets a session that ended.
	if r := mustOK(as(bob, "logout")); !strings.Contains(r.stdout, "session ended") {
		t.Errorf("logout: %s", r)
	}
	if r := mustOK(as(ann, "logout")); !strings.Contains(r.stderr, "refused the credential") || !strings.Contains(r.stdout, "forgotten") {
		t.Errorf("logout with an ended session: %s", r)
	}

	var log apiv1.AuditList
	if err := json.Unmarshal([]byte(mustOK(adminRun("audit", "-o", "json")).stdout), &log); err != nil {
		t.Fatal(err)
	}
	var signIns []string
	for _, rec := range log.Records {
		if strings.HasPrefix(rec.Action, "sign in") && rec.Outcome == "ok" {
			signIns = append(signIns, rec.Identity+" "+rec.Action)
		}
		if strings.Contains(dump(rec), "drover_session_") {
			t.Errorf("an audit record holds a session: %s", dump(rec))
		}
	}
	want := []string{"ann@example.com sign in (device)", "bob@example.com sign in (device)", "ann@example.com sign in (device)", "carl@example.com sign in (browser)"}
	if !slices.Equal(signIns, want) {
		t.Errorf("sign-ins in the audit log = %v, want %v", signIns, want)
	}
	if st := s.status("shop", "web"); st.DesiredVersion != version {
		t.Errorf("status shows version %s, want bob's push %s", st.DesiredVersion, version)
	}
}
