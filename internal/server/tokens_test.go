package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	apiv1 "github.com/drover-dev/drover/api/v1"
	"github.com/drover-dev/drover/internal/auth"
	"github.com/drover-dev/drover/internal/store"
	"github.com/drover-dev/drover/internal/store/sqlite"
)

// TestTokensCreateAuthenticateRevoke: a token is shown once and kept
// hashed; it authenticates as its name with its roles until it is revoked
// or expires, refused at once after; its last use is recorded.
func TestTokensCreateAuthenticateRevoke(t *testing.T) {
	s, _ := newPushedServer(t)
	ctx := local(t.Context())
	clock := time.Now()
	a := NewTokenAuthenticator(s.store, func() time.Time { return clock })
	bearer := func(token string) (auth.Identity, error) {
		r := httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/v1/whoami", nil)
		r.Header.Set("Authorization", "Bearer "+token)
		return a.Authenticate(r)
	}
	created, err := s.createToken(ctx, apiv1.CreateTokenRequest{Name: "ci", Roles: []string{"deployer@quickstart", "Viewer"}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(created.Token, "drover_") || created.Info.State != "active" || strings.Join(created.Info.Roles, ",") != "deployer@quickstart,viewer" {
		t.Fatalf("created %+v", created)
	}
	list, err := s.store.ListAPITokens(t.Context())
	if err != nil || len(list) != 1 || list[0].Hash != auth.HashToken(created.Token) || list[0].CreatedBy != auth.LocalIdentity.Name {
		t.Fatalf("stored %+v %v: want the token's hash, created by local", list, err)
	}
	raw, _ := json.Marshal(s.mustList(t))
	if strings.Contains(string(raw), created.Token) || strings.Contains(string(raw), list[0].Hash) {
		t.Errorf("the token list shows the token or its hash: %s", raw)
	}
	id, err := bearer(created.Token)
	if err != nil || id.Name != "ci" || id.Kind != auth.KindToken || !id.Can(auth.PermPush, "quickstart", "") || id.Can(auth.PermPush, "other", "") || id.Can(auth.PermApprove, "quickstart", "prod") {
		t.Fatalf("authenticated as %+v, %v", id, err)
	}
	if _, err := bearer("drover_not-a-token"); !errors.Is(err, auth.ErrBadCredential) {
		t.Errorf("unknown token: %v", err)
	}
	if got, _ := s.store.APITokenByHash(t.Context(), list[0].Hash); !got.LastUsedAt.Equal(clock.UTC().Round(0)) && !got.LastUsedAt.Equal(clock) {
		t.Errorf("last used %v, want %v", got.LastUsedAt, clock)
	}
	if _, err := s.createToken(ctx, apiv1.CreateTokenRequest{Name: "ci", Roles: []string{"viewer"}}); err == nil || !strings.Contains(err.Error(), "revoke it first") {
		t.Errorf("second token named ci: %v", err)
	}
	for _, bad := range []apiv1.CreateTokenRequest{
		{Name: "CI", Roles: []string{"viewer"}},
		{Name: "ci two", Roles: []string{"viewer"}},
		{Name: "x"},
		{Name: "x", Roles: []string{"owner"}},
		{Name: "x", Roles: []string{"viewer@"}},
		{Name: "x", Roles: []string{"viewer"}, ExpiresAt: clock.Add(-time.Hour)},
	} {
		var ae *apiError
		if _, err := s.createToken(ctx, bad); !errors.As(err, &ae) || ae.code != "invalid_argument" {
			t.Errorf("create %+v: %v, want invalid_argument", bad, err)
		}
	}
	revoked, err := s.revokeToken(ctx, "ci")
	if err != nil || revoked.State != "revoked" || revoked.RevokedBy != auth.LocalIdentity.Name {
		t.Fatalf("revoke: %+v %v", revoked, err)
	}
	if _, err := bearer(created.Token); !errors.Is(err, auth.ErrBadCredential) || !strings.Contains(err.Error(), "revoked") {
		t.Errorf("revoked token: %v, want refused as revoked", err)
	}
	short, err := s.createToken(ctx, apiv1.CreateTokenRequest{Name: "ci", Roles: []string{"viewer"}, ExpiresAt: clock.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bearer(short.Token); err != nil {
		t.Fatal(err)
	}
	clock = clock.Add(time.Hour)
	if _, err := bearer(short.Token); !errors.Is(err, auth.ErrBadCredential) || !strings.Contains(err.Error(), "expired") {
		t.Errorf("expired token: %v, want refused as expired", err)
	}
}

func (s *Server) mustList(t *testing.T) *apiv1.TokenList {
	t.Helper()
	out, err := s.listTokens(local(t.Context()))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestBootstrapOnce: the first admin token is made on a store that never
// had a token, and never again.
func TestBootstrapOnce(t *testing.T) {
	s, _ := newPushedServer(t)
	made, err := Bootstrap(t.Context(), s.store, "drover_first")
	if err != nil || !made {
		t.Fatalf("first bootstrap: %v %v", made, err)
	}
	if _, err := s.store.RevokeAPIToken(t.Context(), BootstrapTokenName, "x"); err != nil {
		t.Fatal(err)
	}
	made, err = Bootstrap(t.Context(), s.store, "drover_second")
	if err != nil || made {
		t.Errorf("bootstrap of a store that had tokens: %v %v", made, err)
	}
	got, err := s.store.APITokenByHash(t.Context(), auth.HashToken("drover_first"))
	if err != nil || got.Name != BootstrapTokenName || strings.Join(got.Roles, ",") != "admin" {
		t.Errorf("bootstrap token %+v %v", got, err)
	}
}

// TestAuditRecordsEveryMutation: allowed and refused mutations are in the
// audit log with who, from where, what and how it ended; reads are not.
func TestAuditRecordsEveryMutation(t *testing.T) {
	s, _ := newPushedServer(t)
	before, err := s.store.ListAudit(t.Context(), store.AuditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	viewer := as(t.Context(), "vic", auth.Binding{Role: auth.RoleViewer})
	if code, _ := postAs(viewer, t, s, "/v1/apps/quickstart/services/web:pause", apiv1.ChannelRequest{ReleaseChannel: "prod"}); code != http.StatusForbidden {
		t.Fatalf("pause as a viewer: %d", code)
	}
	if code, body := post(t, s, "/v1/apps/quickstart/services/web:pause", apiv1.ChannelRequest{ReleaseChannel: "prod"}); code != http.StatusOK {
		t.Fatalf("pause: %d %s", code, body)
	}
	req := httptest.NewRequestWithContext(viewer, http.MethodGet, "/v1/apps/quickstart/services/web", nil)
	s.Handler().ServeHTTP(httptest.NewRecorder(), req)
	after, err := s.store.ListAudit(t.Context(), store.AuditFilter{AfterSeq: lastSeq(before)})
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != 2 {
		t.Fatalf("%d audit records, want the refused pause and the pause: %+v", len(after), after)
	}
	refused, ok := after[0], after[1]
	if refused.Identity != "vic" || refused.Status != http.StatusForbidden || refused.Outcome != "permission_denied" ||
		!strings.Contains(refused.Message, `"operate"`) || refused.Action != "POST /v1/apps/{app}/services/{svc}:pause" ||
		refused.Application != "quickstart" || refused.Service != "web" || refused.Source == "" {
		t.Errorf("refused pause recorded as %+v", refused)
	}
	if ok.Identity != auth.LocalIdentity.Name || ok.IdentityKind != auth.KindLocal || ok.Outcome != "ok" || ok.Status != http.StatusOK || ok.ReleaseChannel != "prod" {
		t.Errorf("pause recorded as %+v", ok)
	}
}

func lastSeq(recs []store.AuditRecord) int64 {
	if len(recs) == 0 {
		return 0
	}
	return recs[len(recs)-1].Seq
}

// TestRevokedTokenEndsItsStream: an event stream opened with a token ends
// once the token is revoked, at its next batch or heartbeat.
func TestRevokedTokenEndsItsStream(t *testing.T) {
	s, _ := newPushedServer(t)
	s.edgeCfg.Auth = NewTokenAuthenticator(s.store, nil)
	s.streamRecheck = 0
	created, err := s.createToken(local(t.Context()), apiv1.CreateTokenRequest{Name: "watcher", Roles: []string{"viewer"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(as(t.Context(), "watcher", auth.Binding{Role: auth.RoleViewer}), 10*time.Second)
	defer cancel()
	req := httptest.NewRequestWithContext(ctx, http.MethodGet, "/v1/watch", nil)
	req.Header.Set("Authorization", "Bearer "+created.Token)
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		s.Handler().ServeHTTP(httptest.NewRecorder(), req)
	}()
	time.Sleep(100 * time.Millisecond)
	select {
	case <-ended:
		t.Fatal("the stream ended before the token was revoked")
	default:
	}
	if _, err := s.revokeToken(local(t.Context()), "watcher"); err != nil {
		t.Fatal(err)
	}
	s.Changed() // the next batch
	select {
	case <-ended:
	case <-ctx.Done():
		t.Fatal("the stream of a revoked token went on")
	}
}

// TestForbidSelfApproval: with the setting, the identity that pushed a
// desired state may not approve it (it may still reject it); another may;
// without it, the pusher may.
func TestForbidSelfApproval(t *testing.T) {
	for _, forbid := range []bool{true, false} {
		st, err := sqlite.Open(t.Context(), sqlite.MemoryPath)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		s, _ := newTestServer(t, st, t.TempDir(), EdgeConfig{ForbidSelfApproval: forbid})
		if _, err := s.applyConfigs(local(t.Context()), quickstartConfigs(t)); err != nil {
			t.Fatal(err)
		}
		push, err := s.push(as(t.Context(), "dev"), "quickstart", "web", apiv1.PushRequest{Params: []apiv1.Param{{Name: "image", Value: "1.27"}}})
		if err != nil {
			t.Fatal(err)
		}
		approve := apiv1.ApproveRequest{ReleaseChannel: "prod", DesiredStateID: push.DesiredStateID}
		code, body := postAs(as(t.Context(), "dev"), t, s, approvePath, approve)
		switch {
		case forbid && (code != http.StatusForbidden || !strings.Contains(body, "dev pushed")):
			t.Errorf("the pusher approving with the setting: %d %s, want 403", code, body)
		case !forbid && code != http.StatusOK:
			t.Errorf("the pusher approving without the setting: %d %s, want 200", code, body)
		}
		if forbid {
			if code, body := postAs(as(t.Context(), "rev"), t, s, approvePath, approve); code != http.StatusOK {
				t.Errorf("another identity approving: %d %s", code, body)
			}
		}
	}
}
