package server

import (
	"context"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	apiv1 "github.com/drover-dev/drover/api/v1"
	"github.com/drover-dev/drover/internal/auth"
	"github.com/drover-dev/drover/internal/sso"
	"github.com/drover-dev/drover/internal/store"
	"github.com/drover-dev/drover/internal/usertext"
)

// Sessions: people signed in through the server's OpenID provider. The
// server is the provider's client for both ways in: a browser (the
// authorization code flow with PKCE, GET /v1/auth/login and
// /v1/auth/callback) and the CLI (the device flow, POST /v1/auth/device
// and /v1/auth/device/token, which the server polls for it). Once the
// provider vouched for a person, the server issues its own credential, a
// session: a bearer token for the CLI, an HttpOnly cookie for a browser,
// kept hashed in the store like an API token, with the roles the person's
// groups map to. Sessions end at their expiry, at sign-out, or when an
// admin revokes them, at once on every server sharing the store.

const (
	// SessionPrefix starts every session's secret.
	SessionPrefix = "drover_session_"
	// SessionCookie is the browser's session cookie; over TLS it is named
	// with the __Host- prefix (hostCookie), which browsers take only from
	// this host, over TLS, for the whole site.
	SessionCookie = "drover_session"
	// signInCookie carries a browser sign-in in flight (state, PKCE
	// verifier, nonce, where to go back) to the callback.
	signInCookie = "drover_signin"
	// maxPollsPerSource bounds the device polls one address holds open.
	maxPollsPerSource = 4
	// maxProviderText bounds what a provider's error text adds to the
	// audit log and pages.
	maxProviderText = 200
	// signInTTL bounds a browser sign-in in flight.
	signInTTL = 10 * time.Minute
	// DefaultSessionTTL is how long a session lasts.
	DefaultSessionTTL = 12 * time.Hour
	// devicePollWait is how long one device poll asks the provider.
	devicePollWait = 20 * time.Second
	// keepEndedSessions is how long ended sessions stay listed.
	keepEndedSessions = 24 * time.Hour
	// sessionSweep is how often ended sessions are removed.
	sessionSweep = time.Hour
)

// SSOConfig is the server's OpenID provider and its sessions.
type SSOConfig struct {
	RP *sso.RP
	// SessionTTL is how long a session lasts (0 = DefaultSessionTTL).
	SessionTTL time.Duration
	// RedirectURL is the callback the provider sends browsers back to
	// ("" = this server's address as the browser used it, with
	// /v1/auth/callback); it must be registered at the provider.
	RedirectURL string
}

func (s *Server) sso() (*sso.RP, error) {
	if s.edgeCfg.SSO == nil || s.edgeCfg.SSO.RP == nil {
		return nil, errorf(apiv1.CodeFailedPrecondition, "this server signs no one in through an OpenID provider (start it with --oidc-issuer): use an API token (drover login SERVER --token-file FILE)")
	}
	return s.edgeCfg.SSO.RP, nil
}

func (s *Server) sessionTTL() time.Duration {
	if s.edgeCfg.SSO != nil && s.edgeCfg.SSO.SessionTTL > 0 {
		return s.edgeCfg.SSO.SessionTTL
	}
	return DefaultSessionTTL
}

// signInInfo answers GET /v1/auth/info.
func (s *Server) signInInfo() *apiv1.SignInInfo {
	out := &apiv1.SignInInfo{}
	if rp, err := s.sso(); err == nil {
		out.OIDC = &apiv1.OIDCInfo{Issuer: rp.Issuer(), LoginPath: "/v1/auth/login", DevicePath: "/v1/auth/device"}
	}
	return out
}

// startDevice answers POST /v1/auth/device.
func (s *Server) startDevice(ctx context.Context) (*apiv1.DeviceSignIn, error) {
	rp, err := s.sso()
	if err != nil {
		return nil, err
	}
	d, err := rp.DeviceStart(ctx)
	if err != nil {
		return nil, statusError(apiv1.CodeUnavailable, err)
	}
	return &apiv1.DeviceSignIn{DeviceCode: d.DeviceCode, UserCode: d.UserCode, VerificationURI: d.VerificationURI,
		VerificationURIComplete: d.VerificationURIComplete, ExpiresAt: d.Expiry.UTC(), Interval: d.Interval}, nil
}

// pollDevice answers POST /v1/auth/device/token: it asks the provider for
// up to devicePollWait, then answers pending or the new session.
func (s *Server) pollDevice(r *http.Request, req apiv1.DeviceTokenRequest) (*apiv1.SignInResult, error) {
	rp, err := s.sso()
	if err != nil {
		return nil, err
	}
	if req.DeviceCode == "" {
		return nil, errorf(apiv1.CodeInvalidArgument, "deviceCode is required (from POST /v1/auth/device)")
	}
	done, err := s.polls.enter(sourceHost(r))
	if err != nil {
		return nil, err
	}
	defer done()
	// The provider's interval is at least 5 s (RFC 8628); one poll asks
	// at least once before it answers pending.
	interval := min(max(req.Interval, 5), 15)
	ctx, cancel := context.WithTimeout(r.Context(), devicePollWait)
	defer cancel()
	p, err := rp.DevicePoll(ctx, req.DeviceCode, interval)
	switch {
	case errors.Is(err, sso.ErrPending):
		if r.Context().Err() != nil {
			return nil, r.Context().Err()
		}
		return &apiv1.SignInResult{Status: "pending"}, nil
	case errors.Is(err, sso.ErrDenied):
		// Only the person at the provider's page refuses a real code:
		// that is worth a record; an unknown code is not.
		s.auditSignIn(r, "device", sso.Person{}, 0, apiv1.CodePermissionDenied, err.Error())
		return nil, statusError(apiv1.CodePermissionDenied, err)
	case errors.Is(err, sso.ErrExpired):
		return nil, statusError(apiv1.CodeExpired, err)
	case err != nil:
		return nil, statusError(apiv1.CodeUnavailable, err)
	}
	token, sess, err := s.newSession(r, p, "device")
	if err != nil {
		return nil, err
	}
	return &apiv1.SignInResult{Status: "signed_in", Token: token, Identity: identityOf(sess), Groups: sess.Groups,
		ExpiresAt: sess.ExpiresAt}, nil
}

// newSession records a session for p, lasting the session TTL, and
// returns its secret.
func (s *Server) newSession(r *http.Request, p sso.Person, via string) (string, store.Session, error) {
	return s.newSessionUntil(r, p, via, s.now().Add(s.sessionTTL()))
}

// newSessionUntil records a session for p that ends at expires.
func (s *Server) newSessionUntil(r *http.Request, p sso.Person, via string, expires time.Time) (string, store.Session, error) {
	token := SessionPrefix + strings.TrimPrefix(auth.NewToken(), "drover_")
	roles := make([]string, 0, len(p.Bindings))
	for _, b := range p.Bindings {
		roles = append(roles, b.String())
	}
	now := s.now().UTC()
	// The provider spent its code: the session is made even if the client
	// left meanwhile.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 30*time.Second)
	defer cancel()
	sess, err := s.store.CreateSession(ctx, store.Session{Hash: auth.HashToken(token), Identity: p.Name, Subject: p.Subject,
		Roles: roles, Groups: p.Groups, Via: via, Source: r.RemoteAddr, CreatedAt: now, ExpiresAt: expires.UTC()})
	if err != nil {
		s.auditSignIn(r, via, p, 0, apiv1.CodeInternal, err.Error())
		return "", store.Session{}, err
	}
	s.auditSignIn(r, via, p, sess.ID, "", "")
	return token, sess, nil
}

// Subjects of the sessions a browser signs in to with a token: an API
// token's (tokenSubject and the token's hash: the session ends with the
// token), or the server's local token.
const (
	tokenSubject = "drover-token#"
	localSubject = "drover-local"
)

// tokenSignIn answers POST /v1/auth/token: a browser signs in with an API
// token or the local token, checked as a request carrying it would be,
// and gets a session cookie (never the token back). The session lasts
// while the token does: revoking or expiring the token ends it.
func (s *Server) tokenSignIn(w http.ResponseWriter, r *http.Request, req apiv1.TokenSignInRequest) (*apiv1.SignInResult, error) {
	token := strings.TrimSpace(req.Token)
	if token == "" || strings.HasPrefix(token, SessionPrefix) {
		return nil, errorf(apiv1.CodeInvalidArgument, "token: give an API token (drover tokens create) or the server's local token")
	}
	if s.edgeCfg.Auth == nil {
		return nil, errorf(apiv1.CodeFailedPrecondition, "this server authenticates no one")
	}
	probe := r.Clone(r.Context())
	probe.Header = http.Header{"Authorization": {"Bearer " + token}}
	id, err := s.edgeCfg.Auth.Authenticate(probe)
	switch {
	case err == nil && (id.Kind == auth.KindToken || id.Kind == auth.KindLocal):
	case err == nil, errors.Is(err, auth.ErrBadCredential), errors.Is(err, auth.ErrNoCredential):
		s.auditSignIn(r, "token", sso.Person{}, 0, apiv1.CodeUnauthenticated, "a token this server does not take")
		msg := "the token is not valid for this server"
		if err != nil && errors.Unwrap(err) != nil {
			msg = err.Error()
		}
		return nil, errorf(apiv1.CodeUnauthenticated, "%s", msg)
	default:
		return nil, statusError(apiv1.CodeUnavailable, err)
	}
	// A local-token session names the token by its hash: it ends when the
	// server's local token changes.
	p := sso.Person{Name: id.Name, Bindings: id.Bindings, Subject: localSubject + "#" + auth.HashToken(token)}
	expires := s.now().Add(s.sessionTTL())
	if id.Kind == auth.KindToken {
		p.Subject = tokenSubject + auth.HashToken(token)
		if t, err := s.store.APITokenByHash(r.Context(), auth.HashToken(token)); err == nil && !t.ExpiresAt.IsZero() && t.ExpiresAt.Before(expires) {
			expires = t.ExpiresAt
		}
	}
	via := "token"
	if id.Kind == auth.KindLocal {
		via = "local"
	}
	secret, sess, err := s.newSessionUntil(r, p, via, expires)
	if err != nil {
		return nil, err
	}
	setCookie(w, r, SessionCookie, secret, sess.ExpiresAt)
	out := identityOf(sess)
	out.Kind = id.Kind
	return &apiv1.SignInResult{Status: "signed_in", Identity: out, ExpiresAt: sess.ExpiresAt}, nil
}

// auditSignIn records a sign-in, or a refused one (refused is its error
// code; "" for a sign-in made).
func (s *Server) auditSignIn(r *http.Request, via string, p sso.Person, id int64, refused apiv1.ErrorCode, msg string) {
	kind := auth.KindOIDC
	switch via {
	case "token":
		kind = auth.KindToken
	case "local":
		kind = auth.KindLocal
	}
	rec := store.AuditRecord{Time: s.now(), Identity: p.Name, IdentityKind: kind, Source: r.RemoteAddr,
		Action: "sign in (" + via + ")", Outcome: "ok", Message: msg, Status: http.StatusOK}
	if id != 0 {
		rec.Target = fmt.Sprintf("session %d", id)
	}
	if rec.Identity == "" {
		rec.Identity, rec.IdentityKind = "unauthenticated", ""
	}
	if refused != "" {
		rec.Outcome, rec.Status = string(refused), refused.HTTPStatus()
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 30*time.Second)
	defer cancel()
	if _, err := s.store.AppendAudit(ctx, rec); err != nil {
		s.auditFailed(err, rec)
	}
}

// identityOf is the API's view of a session's identity.
func identityOf(sess store.Session) *apiv1.Identity {
	roles := sess.Roles
	if roles == nil {
		roles = []string{}
	}
	return &apiv1.Identity{Name: sess.Identity, Kind: auth.KindOIDC, Roles: roles}
}

// signInFlight is the browser sign-in the signInCookie carries.
type signInFlight struct {
	State    string `json:"s"`
	Verifier string `json:"v"`
	Nonce    string `json:"n"`
	Return   string `json:"r,omitempty"`
}

// redirectURL is where the provider sends r's browser back to.
func (s *Server) redirectURL(r *http.Request) string {
	if s.edgeCfg.SSO != nil && s.edgeCfg.SSO.RedirectURL != "" {
		return s.edgeCfg.SSO.RedirectURL
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	// The edge let only this server's own names through as Host.
	return scheme + "://" + r.Host + "/v1/auth/callback"
}

// localPath returns p as a path on this server to send a browser to, and
// whether it is one: a single leading slash, no scheme or host, and none
// of the bytes browsers drop or turn into slashes (controls, backslash),
// which could make "/\t/evil.example" a scheme-relative //evil.example.
func localPath(p string) (string, bool) {
	for i := 0; i < len(p); i++ {
		if c := p[i]; c < 0x20 || c == 0x7f || c == '\\' {
			return "", false
		}
	}
	if !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//") {
		return "", false
	}
	u, err := url.Parse(p)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || !strings.HasPrefix(u.Path, "/") || strings.HasPrefix(u.Path, "//") {
		return "", false
	}
	return u.String(), true
}

// browserLogin answers GET /v1/auth/login: it sends the browser to the
// provider, with the sign-in in flight in a short-lived cookie.
func (s *Server) browserLogin(w http.ResponseWriter, r *http.Request) {
	rp, err := s.sso()
	if err != nil {
		signInPage(w, http.StatusConflict, "Sign-in is not set up", err.Error())
		return
	}
	ret := r.URL.Query().Get("return")
	if ret != "" {
		var ok bool
		if ret, ok = localPath(ret); !ok {
			signInPage(w, http.StatusBadRequest, "Sign-in refused", "return must be a path on this server, such as /")
			return
		}
	}
	b := sso.NewBrowser()
	to, err := rp.AuthCodeURL(r.Context(), s.redirectURL(r), b)
	if err != nil {
		s.log.Warn("browser sign-in could not start", "error", err)
		signInPage(w, http.StatusServiceUnavailable, "The OpenID provider cannot be reached", err.Error())
		return
	}
	raw, _ := json.Marshal(signInFlight{State: b.State, Verifier: b.Verifier, Nonce: b.Nonce, Return: ret})
	setCookie(w, r, signInCookie, base64.RawURLEncoding.EncodeToString(raw), time.Now().Add(signInTTL))
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, to, http.StatusFound)
}

// browserCallback answers GET /v1/auth/callback: the provider sent the
// browser back with a code, traded here (with the flight's PKCE
// verifier) for the person, who gets a session cookie.
func (s *Server) browserCallback(w http.ResponseWriter, r *http.Request) {
	rp, err := s.sso()
	if err != nil {
		signInPage(w, http.StatusConflict, "Sign-in is not set up", err.Error())
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	clearCookie(w, r, signInCookie)
	q := r.URL.Query()
	var flight signInFlight
	c, err := r.Cookie(cookieName(r, signInCookie))
	if err == nil {
		var raw []byte
		raw, err = base64.RawURLEncoding.DecodeString(c.Value)
		if err == nil {
			err = json.Unmarshal(raw, &flight)
		}
	}
	// An answer that belongs to no sign-in of this browser is refused
	// before anything else, unrecorded: anyone may send one.
	if err != nil || flight.State == "" || subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(flight.State)) != 1 {
		signInPage(w, http.StatusBadRequest, "Sign-in refused",
			"this answer of the provider belongs to no sign-in started in this browser (or it took longer than 10 minutes): start again at /v1/auth/login")
		return
	}
	if e := q.Get("error"); e != "" {
		msg := "the provider answered " + clip(e)
		if d := q.Get("error_description"); d != "" {
			msg += ": " + clip(d)
		}
		s.auditSignIn(r, "browser", sso.Person{}, 0, apiv1.CodePermissionDenied, msg)
		signInPage(w, http.StatusForbidden, "Sign-in refused", msg)
		return
	}
	p, err := rp.Exchange(r.Context(), s.redirectURL(r), q.Get("code"), sso.Browser{State: flight.State, Verifier: flight.Verifier, Nonce: flight.Nonce})
	if err != nil {
		s.auditSignIn(r, "browser", sso.Person{}, 0, apiv1.CodePermissionDenied, err.Error())
		signInPage(w, http.StatusForbidden, "Sign-in refused", err.Error())
		return
	}
	token, sess, err := s.newSession(r, p, "browser")
	if err != nil {
		signInPage(w, http.StatusInternalServerError, "Sign-in failed", err.Error())
		return
	}
	setCookie(w, r, SessionCookie, token, sess.ExpiresAt)
	if ret, ok := localPath(flight.Return); ok {
		http.Redirect(w, r, ret, http.StatusFound)
		return
	}
	roles := "no role yet: ask an admin to map one of your groups"
	if len(sess.Roles) > 0 {
		roles = "roles " + strings.Join(sess.Roles, ", ")
	}
	signInPage(w, http.StatusOK, "Signed in", fmt.Sprintf("Signed in to drover as %s (%s) until %s.", sess.Identity, roles,
		sess.ExpiresAt.Format(time.RFC1123)))
}

// clip shortens text a provider (or whoever sent the browser) wrote.
func clip(s string) string {
	if len(s) <= maxProviderText {
		return s
	}
	cut := maxProviderText
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// cookieName is name as r's cookies carry it: with the __Host- prefix
// when they are Secure.
func cookieName(r *http.Request, name string) string {
	if secureCookie(r) {
		return "__Host-" + name
	}
	return name
}

// setCookie sets cookie name for the whole site until expires: HttpOnly,
// SameSite=Lax, Secure (and __Host-) as secureCookie says.
func setCookie(w http.ResponseWriter, r *http.Request, name, value string, expires time.Time) {
	http.SetCookie(w, &http.Cookie{Name: cookieName(r, name), Value: value, Path: "/", Expires: expires, //nolint:gosec // G124: Secure as secureCookie says
		HttpOnly: true, Secure: secureCookie(r), SameSite: http.SameSiteLaxMode})
}

// clearCookie removes cookie name.
func clearCookie(w http.ResponseWriter, r *http.Request, name string) {
	http.SetCookie(w, &http.Cookie{Name: cookieName(r, name), Path: "/", MaxAge: -1, HttpOnly: true, //nolint:gosec // G124: see secureCookie
		Secure: secureCookie(r), SameSite: http.SameSiteLaxMode})
}

// secureCookie is whether r's cookies are marked Secure: always but over
// plain HTTP to a loopback address (drover dev, where browsers and other
// clients must still send them back). Plain HTTP to another name is taken
// for a proxy that ends TLS in front of the server; a server serving plain
// HTTP to the network (--insecure) cannot keep browser sessions.
func secureCookie(r *http.Request) bool {
	if r.TLS != nil {
		return true
	}
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if host == "localhost" {
		return false
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip == nil || !ip.IsLoopback()
}

// signInPage answers a browser with a small page.
func signInPage(w http.ResponseWriter, code int, title, msg string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'none'")
	w.WriteHeader(code)
	_, _ = fmt.Fprintf(w, "<!doctype html><meta charset=utf-8><title>drover: %s</title><h1>%s</h1><p>%s</p>\n",
		html.EscapeString(title), html.EscapeString(title), html.EscapeString(msg))
}

// signOut answers POST /v1/auth/logout: it ends the session the request
// carries and clears a browser's cookie.
// It needs no credential, so that a browser whose session ended can still
// drop its cookie; ending a session is audited.
func (s *Server) signOut(w http.ResponseWriter, r *http.Request) (*apiv1.SignOutResult, error) {
	clearCookie(w, r, SessionCookie)
	id, ok := sessionOf(r.Context())
	if !ok {
		return &apiv1.SignOutResult{}, nil
	}
	sess, err := s.store.RevokeSession(r.Context(), id, actor(r.Context()))
	if errors.Is(err, store.ErrNotFound) {
		return &apiv1.SignOutResult{}, nil
	}
	if err != nil {
		return nil, err
	}
	rec := store.AuditRecord{Time: s.now(), Identity: sess.Identity, IdentityKind: auth.KindOIDC, Source: r.RemoteAddr,
		Action: "POST /v1/auth/logout", Target: fmt.Sprintf("session %d", id), Status: http.StatusOK, Outcome: "ok"}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 30*time.Second)
	defer cancel()
	if _, err := s.store.AppendAudit(ctx, rec); err != nil {
		s.auditFailed(err, rec)
	}
	return &apiv1.SignOutResult{SignedOut: true}, nil
}

func (s *Server) listSessions(ctx context.Context) (*apiv1.SessionList, error) {
	list, err := s.store.ListSessions(ctx)
	if err != nil {
		return nil, err
	}
	out := &apiv1.SessionList{Sessions: make([]apiv1.SessionInfo, 0, len(list))}
	for _, sess := range list {
		out.Sessions = append(out.Sessions, s.sessionInfo(sess))
	}
	return out, nil
}

func (s *Server) sessionInfo(sess store.Session) apiv1.SessionInfo {
	state := "active"
	switch {
	case !sess.RevokedAt.IsZero():
		state = "revoked"
	case !s.now().Before(sess.ExpiresAt):
		state = "expired"
	}
	roles := sess.Roles
	if roles == nil {
		roles = []string{}
	}
	subject := sess.Subject
	switch {
	case strings.HasPrefix(subject, tokenSubject):
		subject = "drover-token" // the hash stays in the store
	case strings.HasPrefix(subject, localSubject):
		subject = localSubject
	}
	return apiv1.SessionInfo{ID: sess.ID, Identity: sess.Identity, Subject: subject, Roles: roles, Groups: sess.Groups, Via: sess.Via,
		Source: sess.Source, CreatedAt: sess.CreatedAt, ExpiresAt: sess.ExpiresAt, RevokedAt: sess.RevokedAt, RevokedBy: sess.RevokedBy,
		LastUsedAt: sess.LastUsedAt, State: state}
}

func (s *Server) revokeSessions(ctx context.Context, req apiv1.RevokeSessionsRequest) (*apiv1.RevokeSessionsResult, error) {
	switch {
	case (req.ID == 0) == (req.Identity == ""):
		return nil, errorf(apiv1.CodeInvalidArgument, "name one session (id) or one person (identity)")
	case req.ID != 0:
		noteAudit(ctx, fmt.Sprintf("session %d", req.ID))
		_, err := s.store.RevokeSession(ctx, req.ID, actor(ctx))
		if errors.Is(err, store.ErrNotFound) {
			return nil, errorf(apiv1.CodeNotFound, "no session %d is in force (drover sessions list shows them)", req.ID)
		}
		if err != nil {
			return nil, err
		}
		return &apiv1.RevokeSessionsResult{Revoked: 1}, nil
	}
	who, err := usertext.User(req.Identity)
	if err != nil {
		return nil, statusError(apiv1.CodeInvalidArgument, err)
	}
	noteAudit(ctx, "sessions of "+who)
	n, err := s.store.RevokeSessionsOf(ctx, who, actor(ctx))
	if err != nil {
		return nil, err
	}
	return &apiv1.RevokeSessionsResult{Revoked: n}, nil
}

// sweepSessions removes sessions ended more than keepEndedSessions ago,
// every sessionSweep until ctx ends.
func (s *Server) sweepSessions(ctx context.Context) {
	t := time.NewTicker(sessionSweep)
	defer t.Stop()
	for {
		if n, err := s.store.DeleteEndedSessions(ctx, s.now().Add(-keepEndedSessions)); err != nil && ctx.Err() == nil {
			s.log.Warn("ended sessions not removed", "error", err)
		} else if n > 0 {
			s.log.Info("ended sessions removed", "count", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sessionOf is the session a request authenticated with.
func sessionOf(ctx context.Context) (int64, bool) {
	id, _ := auth.FromContext(ctx)
	return id.Session, id.Session != 0
}

// SessionAuthenticator accepts the sessions kept in a store: a bearer
// token starting with SessionPrefix, or a browser's session cookie.
type SessionAuthenticator struct {
	store Identities
	now   func() time.Time
	// localHash is the hash of the server's local token: the sessions
	// made from it are valid while it is ("": none are).
	localHash string
	// last writes each session's (and token's) last use, once a minute
	// at most.
	last lastUse
}

var _ auth.Authenticator = (*SessionAuthenticator)(nil)

// NewSessionAuthenticator accepts the sessions of st (now nil = time.Now).
func NewSessionAuthenticator(st Identities, now func() time.Time) *SessionAuthenticator {
	if now == nil {
		now = time.Now
	}
	return &SessionAuthenticator{store: st, now: now}
}

// WithLocalToken makes the sessions a browser signed in to with token
// (the server's local token) valid, as long as it is the server's.
func (a *SessionAuthenticator) WithLocalToken(token string) *SessionAuthenticator {
	a.localHash = auth.HashToken(token)
	return a
}

// Authenticate looks the session up: an ended one is refused, saying so
// (an ended cookie counts as no credential). A request with a credential
// other than a session's is left to the other authenticators.
func (a *SessionAuthenticator) Authenticate(r *http.Request) (auth.Identity, error) {
	var (
		token  string
		cookie bool
	)
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, t, ok := strings.Cut(h, " ")
		t = strings.TrimSpace(t)
		if !ok || !strings.EqualFold(scheme, "Bearer") || !strings.HasPrefix(t, SessionPrefix) {
			return auth.Identity{}, auth.ErrNoCredential
		}
		token = t
	} else if c, err := r.Cookie(cookieName(r, SessionCookie)); err == nil && c.Value != "" {
		token, cookie = c.Value, true
	} else {
		return auth.Identity{}, auth.ErrNoCredential
	}
	id, err := a.session(r, token)
	if cookie && errors.Is(err, auth.ErrBadCredential) {
		// A browser holding an ended session must still reach the
		// sign-in and sign-out routes; elsewhere it has no credential.
		return auth.Identity{}, auth.ErrNoCredential
	}
	return id, err
}

func (a *SessionAuthenticator) session(r *http.Request, token string) (auth.Identity, error) {
	sess, err := a.store.SessionByHash(r.Context(), auth.HashToken(token))
	switch {
	case errors.Is(err, store.ErrNotFound):
		return auth.Identity{}, fmt.Errorf("%w: the session is unknown (ended a day ago or more, or signed in to another server): sign in again", auth.ErrBadCredential)
	case err != nil:
		return auth.Identity{}, fmt.Errorf("look the session up: %w", err)
	}
	now := a.now()
	switch {
	case !sess.RevokedAt.IsZero():
		return auth.Identity{}, fmt.Errorf("%w: the session of %s was ended by %s at %s: sign in again", auth.ErrBadCredential, sess.Identity, sess.RevokedBy, sess.RevokedAt.Format(time.RFC3339))
	case !now.Before(sess.ExpiresAt):
		return auth.Identity{}, fmt.Errorf("%w: the session of %s expired at %s: sign in again", auth.ErrBadCredential, sess.Identity, sess.ExpiresAt.Format(time.RFC3339))
	}
	id := auth.Identity{Name: sess.Identity, Kind: auth.KindOIDC, Session: sess.ID}
	switch {
	case strings.HasPrefix(sess.Subject, localSubject):
		// Made from the local token: valid while that token is the
		// server's.
		want := localSubject + "#" + a.localHash
		if a.localHash == "" || subtle.ConstantTimeCompare([]byte(sess.Subject), []byte(want)) != 1 {
			return auth.Identity{}, fmt.Errorf("%w: the session was made from a local token this server no longer has: sign in again", auth.ErrBadCredential)
		}
		id.Kind = auth.KindLocal
	case strings.HasPrefix(sess.Subject, tokenSubject):
		// Signed in with an API token: it ends with the token.
		t, err := a.store.APITokenByHash(r.Context(), strings.TrimPrefix(sess.Subject, tokenSubject))
		switch {
		case errors.Is(err, store.ErrNotFound):
			return auth.Identity{}, fmt.Errorf("%w: the API token %s signed in with is gone: sign in again", auth.ErrBadCredential, sess.Identity)
		case err != nil:
			return auth.Identity{}, fmt.Errorf("look the session's token up: %w", err)
		case !t.RevokedAt.IsZero():
			return auth.Identity{}, fmt.Errorf("%w: the token %s was revoked by %s at %s", auth.ErrBadCredential, t.Name, t.RevokedBy, t.RevokedAt.Format(time.RFC3339))
		case !t.ExpiresAt.IsZero() && !now.Before(t.ExpiresAt):
			return auth.Identity{}, fmt.Errorf("%w: the token %s expired at %s", auth.ErrBadCredential, t.Name, t.ExpiresAt.Format(time.RFC3339))
		}
		id.Kind = auth.KindToken
		// The token is in use, through the browser.
		a.last.touch(r.Context(), fmt.Sprintf("token %d", t.ID), now, func(ctx context.Context) error { return a.store.TouchAPIToken(ctx, t.ID, now) })
	}
	for _, s := range sess.Roles {
		if b, err := auth.ParseBinding(s); err == nil {
			id.Bindings = append(id.Bindings, b)
		}
	}
	a.touch(r.Context(), sess.ID, now)
	return id, nil
}

func (a *SessionAuthenticator) touch(ctx context.Context, id int64, now time.Time) {
	a.last.touch(ctx, fmt.Sprintf("session %d", id), now, func(ctx context.Context) error { return a.store.TouchSession(ctx, id, now) })
}

// pollGate bounds the device polls each source address holds open (each
// holds a request and asks the provider for up to devicePollWait).
type pollGate struct {
	mu   sync.Mutex
	open map[string]int
}

func (g *pollGate) enter(source string) (func(), error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.open[source] >= maxPollsPerSource {
		return nil, errorf(apiv1.CodeResourceExhausted, "%s polls %d device sign-ins at once, as many as one address may", source, maxPollsPerSource)
	}
	if g.open == nil {
		g.open = map[string]int{}
	}
	g.open[source]++
	return func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.open[source]--; g.open[source] <= 0 {
			delete(g.open, source)
		}
	}, nil
}
