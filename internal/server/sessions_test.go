package server

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	apiv1 "github.com/drover-dev/drover/api/v1"
	"github.com/drover-dev/drover/internal/auth"
	"github.com/drover-dev/drover/internal/sso"
	"github.com/drover-dev/drover/internal/store"
)

// TestSessionAuthenticator: a session authenticates by bearer token or by
// cookie, as its person with its roles, until it expires or is revoked
// (refused saying so); other bearer tokens are left to the next
// authenticator; the chain with API tokens keeps the session's reason.
func TestSessionAuthenticator(t *testing.T) {
	s, _ := newPushedServer(t)
	ctx := local(t.Context())
	clock := time.Now().UTC()
	a := NewSessionAuthenticator(s.store, func() time.Time { return clock })
	chain := auth.Chain{a, NewTokenAuthenticator(s.store, func() time.Time { return clock })}
	token := SessionPrefix + "test-secret-0123456789"
	sess, err := s.store.CreateSession(t.Context(), store.Session{Hash: auth.HashToken(token), Identity: "ann@example.com",
		Subject: "https://idp#ann", Roles: []string{"approver@quickstart"}, Groups: []string{"release"}, Via: "device",
		CreatedAt: clock, ExpiresAt: clock.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	bearer := func(tok string) (auth.Identity, error) {
		r := httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/v1/whoami", nil)
		r.Header.Set("Authorization", "Bearer "+tok)
		return chain.Authenticate(r)
	}
	cookie := func(tok string) (auth.Identity, error) {
		// Over TLS (or through a proxy, to a name) the cookie is
		// __Host-drover_session; the same name without the prefix is not
		// taken there, as a sibling site could have set it.
		r := httptest.NewRequestWithContext(t.Context(), http.MethodGet, "https://drover.example.com/v1/whoami", nil)
		r.AddCookie(&http.Cookie{Name: SessionCookie, Value: tok})
		if _, err := chain.Authenticate(r); !errors.Is(err, auth.ErrNoCredential) {
			t.Errorf("a cookie without the __Host- prefix over TLS: %v, want none taken", err)
		}
		r = httptest.NewRequestWithContext(t.Context(), http.MethodGet, "https://drover.example.com/v1/whoami", nil)
		r.AddCookie(&http.Cookie{Name: "__Host-" + SessionCookie, Value: tok})
		return chain.Authenticate(r)
	}
	for name, try := range map[string]func(string) (auth.Identity, error){"bearer": bearer, "cookie": cookie} {
		id, err := try(token)
		if err != nil || id.Name != "ann@example.com" || id.Kind != auth.KindOIDC || id.Session != sess.ID ||
			!id.Can(auth.PermApprove, "quickstart", "prod") || id.Can(auth.PermPush, "quickstart", "") {
			t.Errorf("%s: authenticated as %+v, %v", name, id, err)
		}
	}
	if _, err := a.Authenticate(func() *http.Request {
		r := httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/", nil)
		r.Header.Set("Authorization", "Bearer drover_an-api-token")
		return r
	}()); !errors.Is(err, auth.ErrNoCredential) {
		t.Errorf("an API token offered to the session authenticator: %v, want ErrNoCredential (left to the next)", err)
	}
	if _, err := bearer(SessionPrefix + "unknown"); !errors.Is(err, auth.ErrBadCredential) || !strings.Contains(err.Error(), "sign in again") {
		t.Errorf("unknown session: %v", err)
	}
	got, err := s.store.SessionByHash(t.Context(), sess.Hash)
	if err != nil || got.LastUsedAt.IsZero() {
		t.Errorf("last use not recorded: %+v %v", got, err)
	}

	list, err := s.listSessions(ctx)
	if err != nil || len(list.Sessions) != 1 || list.Sessions[0].State != "active" || list.Sessions[0].Identity != "ann@example.com" {
		t.Fatalf("list: %+v %v", list, err)
	}
	if raw, _ := json.Marshal(list); strings.Contains(string(raw), sess.Hash) {
		t.Errorf("the session list shows its hash")
	}

	clock = clock.Add(2 * time.Hour)
	if _, err := bearer(token); !errors.Is(err, auth.ErrBadCredential) || !strings.Contains(err.Error(), "expired") {
		t.Errorf("expired session: %v", err)
	}
	clock = clock.Add(-2 * time.Hour)
	if _, err := s.revokeSessions(ctx, apiv1.RevokeSessionsRequest{}); err == nil {
		t.Error("revoke with neither id nor identity accepted")
	}
	res, err := s.revokeSessions(ctx, apiv1.RevokeSessionsRequest{Identity: " Ann@Example.com"})
	if err != nil || res.Revoked != 1 {
		t.Fatalf("revoke ann's sessions: %+v %v", res, err)
	}
	if _, err := bearer(token); !errors.Is(err, auth.ErrBadCredential) || !strings.Contains(err.Error(), "ended by "+auth.LocalIdentity.Name) {
		t.Errorf("revoked session: %v", err)
	}
	// A browser with an ended session has no credential: it may still
	// sign in again and sign out.
	if _, err := cookie(token); !errors.Is(err, auth.ErrNoCredential) {
		t.Errorf("revoked session's cookie: %v, want no credential", err)
	}
	if _, err := s.revokeSessions(ctx, apiv1.RevokeSessionsRequest{ID: sess.ID}); err == nil || !strings.Contains(err.Error(), "no session") {
		t.Errorf("revoking an ended session again: %v", err)
	}
}

// TestSignOut ends only the session the request carries.
func TestSignOut(t *testing.T) {
	s, _ := newPushedServer(t)
	clock := time.Now().UTC()
	mk := func(secret string) store.Session {
		sess, err := s.store.CreateSession(t.Context(), store.Session{Hash: auth.HashToken(secret), Identity: "bob", Via: "browser",
			CreatedAt: clock, ExpiresAt: clock.Add(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		return sess
	}
	one, two := mk(SessionPrefix+"one"), mk(SessionPrefix+"two")
	r := httptest.NewRequestWithContext(auth.WithIdentity(t.Context(), auth.Identity{Name: "bob", Kind: auth.KindOIDC, Session: one.ID}),
		http.MethodPost, "/v1/auth/logout", nil)
	w := httptest.NewRecorder()
	res, err := s.signOut(w, r)
	if err != nil || !res.SignedOut {
		t.Fatalf("sign out: %+v %v", res, err)
	}
	if c := w.Result().Cookies(); len(c) != 1 || c[0].Name != "__Host-"+SessionCookie || c[0].MaxAge >= 0 {
		t.Errorf("sign out should clear the cookie: %+v", c)
	}
	for _, tc := range []struct {
		sess    store.Session
		revoked bool
	}{{one, true}, {two, false}} {
		got, err := s.store.SessionByHash(t.Context(), tc.sess.Hash)
		if err != nil || got.RevokedAt.IsZero() != !tc.revoked {
			t.Errorf("session %d revoked=%v, want %v (%v)", tc.sess.ID, !got.RevokedAt.IsZero(), tc.revoked, err)
		}
	}
	// An API token has no session to end.
	r = httptest.NewRequestWithContext(as(t.Context(), "ci"), http.MethodPost, "/v1/auth/logout", nil)
	if res, err := s.signOut(httptest.NewRecorder(), r); err != nil || res.SignedOut {
		t.Errorf("sign out with a token: %+v %v", res, err)
	}
}

// TestSignInWithoutProvider: a server without --oidc-issuer says so.
func TestSignInWithoutProvider(t *testing.T) {
	s, _ := newPushedServer(t)
	if info := s.signInInfo(); info.OIDC != nil {
		t.Errorf("sign-in info without a provider: %+v", info)
	}
	var ae *apiError
	if _, err := s.startDevice(t.Context()); !errors.As(err, &ae) || ae.code != "failed_precondition" || !strings.Contains(err.Error(), "--oidc-issuer") {
		t.Errorf("device sign-in without a provider: %v", err)
	}
	w := httptest.NewRecorder()
	s.browserLogin(w, httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/v1/auth/login", nil))
	if w.Code != http.StatusConflict || !strings.Contains(w.Body.String(), "--oidc-issuer") {
		t.Errorf("browser sign-in without a provider: %d %s", w.Code, w.Body)
	}
}

func TestLocalPathAndSecureCookie(t *testing.T) {
	t.Parallel()
	for p, want := range map[string]bool{"/": true, "/apps/shop?tab=runs": true, "": false, "//evil.example": false, "/\\evil.example": false,
		"https://evil.example/": false, "evil": false, "/a\r\nSet-Cookie: x": false, "/\t/evil.example": false, "/\t\\evil.example": false,
		"/%09/evil.example": true, "/\x7f/x": false, "https:/x": false} {
		got, ok := localPath(p)
		if ok != want || ok && !strings.HasPrefix(got, "/") || ok && strings.HasPrefix(got, "//") {
			t.Errorf("localPath(%q) = %q %v, want %v", p, got, ok, want)
		}
	}
	for host, want := range map[string]bool{"127.0.0.1:7420": false, "localhost:7420": false, "[::1]:7420": false,
		"drover.example.com": true, "10.0.0.5:7420": true} {
		r := httptest.NewRequest(http.MethodGet, "/v1/auth/login", nil)
		r.Host = host
		if got := secureCookie(r); got != want {
			t.Errorf("secureCookie(Host %s, plain HTTP) = %v, want %v", host, got, want)
		}
	}
}

// TestBrowserCallbackRefusals: the provider's refusal, and an answer that
// belongs to no sign-in of this browser (no or another state), are
// refused before any code is traded, and audited.
func TestBrowserCallbackRefusals(t *testing.T) {
	s, _ := newPushedServer(t)
	rp, err := sso.New(sso.Config{Issuer: "http://127.0.0.1:1/", ClientID: "drover"})
	if err != nil {
		t.Fatal(err)
	}
	s.edgeCfg.SSO = &SSOConfig{RP: rp}
	flight := base64.RawURLEncoding.EncodeToString([]byte(`{"s":"the-state","v":"verifier","n":"nonce"}`))
	long := strings.Repeat("x", 5000)
	for _, tc := range []struct {
		query, cookie string
		code          int
		says          string
	}{
		{"state=the-state&error=access_denied&error_description=no+thanks+" + long, flight, http.StatusForbidden, "the provider answered access_denied: no thanks"},
		{"error=access_denied&error_description=forged", "", http.StatusBadRequest, "belongs to no sign-in"},
		{"code=c&state=the-state", "", http.StatusBadRequest, "belongs to no sign-in"},
		{"code=c&state=another", flight, http.StatusBadRequest, "belongs to no sign-in"},
		{"code=c&state=the-state", "%%%", http.StatusBadRequest, "belongs to no sign-in"},
	} {
		r := httptest.NewRequestWithContext(t.Context(), http.MethodGet, "https://drover.example.com/v1/auth/callback?"+tc.query, nil)
		if tc.cookie != "" {
			r.AddCookie(&http.Cookie{Name: "__Host-" + signInCookie, Value: tc.cookie})
		}
		w := httptest.NewRecorder()
		s.browserCallback(w, r)
		if w.Code != tc.code || !strings.Contains(w.Body.String(), tc.says) {
			t.Errorf("callback ?%s: %d %s, want %d saying %q", tc.query, w.Code, w.Body, tc.code, tc.says)
		}
		if strings.Contains(w.Header().Get("Set-Cookie"), SessionCookie+"=") {
			t.Errorf("callback ?%s set a session cookie", tc.query)
		}
		if strings.Contains(w.Body.String(), long) {
			t.Errorf("callback ?%.40s…: the page repeats the provider's text whole", tc.query)
		}
	}
	recs, err := s.store.ListAudit(t.Context(), store.AuditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	// Only the provider's refusal of a sign-in this browser started is
	// recorded; answers of no sign-in are anyone's to send.
	refused := 0
	for _, rec := range recs {
		if rec.Action == "sign in (browser)" && rec.Outcome == "permission_denied" && rec.Identity == "unauthenticated" {
			refused++
			if len(rec.Message) > 2*maxProviderText+100 {
				t.Errorf("the audit record keeps the provider's text whole (%d bytes)", len(rec.Message))
			}
		}
	}
	if refused != 1 {
		t.Errorf("%d refused sign-ins audited, want 1: %+v", refused, recs)
	}
	// A return address elsewhere is refused before the provider is asked.
	w := httptest.NewRecorder()
	s.browserLogin(w, httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/v1/auth/login?return=//evil.example/", nil))
	if w.Code != http.StatusBadRequest {
		t.Errorf("login with a foreign return: %d %s", w.Code, w.Body)
	}
}

// TestTokenSignIn: a browser signs in with an API token and gets a
// session cookie (never the token back) that acts as the token's identity
// and ends when the token is revoked; the local token signs in as local;
// a session's secret or a wrong token signs no one in.
func TestTokenSignIn(t *testing.T) {
	s, _ := newPushedServer(t)
	ctx := local(t.Context())
	const localToken = "drover_local-test-token-0123456789"
	sessions := NewSessionAuthenticator(s.store, nil).WithLocalToken(localToken)
	s.edgeCfg.Auth = auth.Chain{auth.NewTokenAuthenticator(localToken, auth.LocalIdentity), sessions, NewTokenAuthenticator(s.store, nil)}
	created, err := s.createToken(ctx, apiv1.CreateTokenRequest{Name: "vic", Roles: []string{"viewer@quickstart"}, ExpiresAt: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	signIn := func(token string) (*apiv1.SignInResult, *http.Cookie, error) {
		w := httptest.NewRecorder()
		r := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "http://127.0.0.1:7420/v1/auth/token", nil)
		res, err := s.tokenSignIn(w, r, apiv1.TokenSignInRequest{Token: token})
		var c *http.Cookie
		for _, ck := range w.Result().Cookies() {
			if ck.Name == SessionCookie {
				c = ck
			}
		}
		return res, c, err
	}
	withCookie := func(c *http.Cookie) (auth.Identity, error) {
		r := httptest.NewRequestWithContext(t.Context(), http.MethodGet, "http://127.0.0.1:7420/v1/whoami", nil)
		r.AddCookie(c)
		return sessions.Authenticate(r)
	}
	res, c, err := signIn(created.Token)
	if err != nil || c == nil || res.Identity.Name != "vic" || res.Identity.Kind != auth.KindToken || res.Token != "" {
		t.Fatalf("sign in with vic's token: %+v %+v %v", res, c, err)
	}
	if c.Value == created.Token || !strings.HasPrefix(c.Value, SessionPrefix) || !c.HttpOnly {
		t.Errorf("the cookie is not a session of its own: %+v", c)
	}
	if !res.ExpiresAt.After(time.Now().Add(50*time.Minute)) || res.ExpiresAt.After(created.Info.ExpiresAt.Add(time.Second)) {
		t.Errorf("the session ends at %v, want with the token at %v", res.ExpiresAt, created.Info.ExpiresAt)
	}
	id, err := withCookie(c)
	if err != nil || id.Name != "vic" || id.Kind != auth.KindToken || !id.Can(auth.PermRead, "quickstart", "") || id.Can(auth.PermPush, "quickstart", "") {
		t.Fatalf("the cookie acts as %+v, %v", id, err)
	}
	list, err := s.listSessions(ctx)
	if err != nil || len(list.Sessions) != 1 || list.Sessions[0].Subject != "drover-token" || list.Sessions[0].Via != "token" {
		t.Errorf("sessions: %+v %v", list, err)
	}
	if tok, _ := s.store.APITokenByHash(t.Context(), auth.HashToken(created.Token)); tok.LastUsedAt.IsZero() {
		t.Errorf("the token's use through the browser is not recorded")
	}
	if _, err := s.revokeToken(ctx, "vic"); err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequestWithContext(t.Context(), http.MethodGet, "http://127.0.0.1:7420/v1/whoami", nil)
	r.Header.Set("Authorization", "Bearer "+c.Value)
	if _, err := sessions.Authenticate(r); !errors.Is(err, auth.ErrBadCredential) || !strings.Contains(err.Error(), "the token vic was revoked") {
		t.Errorf("the session of a revoked token: %v", err)
	}

	res, c, err = signIn(localToken)
	if err != nil || c == nil || res.Identity.Kind != auth.KindLocal {
		t.Fatalf("sign in with the local token: %+v %v", res, err)
	}
	if id, err := withCookie(c); err != nil || id.Kind != auth.KindLocal || !id.Can(auth.PermTokens, "", "") {
		t.Errorf("the local session acts as %+v, %v", id, err)
	}
	// Another local token (the data directory's was replaced) ends it.
	other := NewSessionAuthenticator(s.store, nil).WithLocalToken("drover_another-local-token")
	r = httptest.NewRequestWithContext(t.Context(), http.MethodGet, "http://127.0.0.1:7420/v1/whoami", nil)
	r.Header.Set("Authorization", "Bearer "+c.Value)
	if _, err := other.Authenticate(r); !errors.Is(err, auth.ErrBadCredential) || !strings.Contains(err.Error(), "no longer has") {
		t.Errorf("a local session after the local token changed: %v", err)
	}
	for _, bad := range []string{"", "drover_wrong", c.Value} {
		if _, c, err := signIn(bad); err == nil || c != nil {
			t.Errorf("sign in with %q: %v (cookie %v)", bad, err, c)
		}
	}
}
