// Package sso signs people in through an OpenID provider: the
// authorization code flow with PKCE for a browser, and the device flow for
// the CLI (RFC 8628), both run by the server as the provider's client. It
// checks the provider's ID token (github.com/coreos/go-oidc), names the
// person from a claim, and maps their groups to drover's role bindings.
// What the server makes of a signed-in person (a session) is the server's.
package sso

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/drover-dev/drover/internal/auth"
	"github.com/drover-dev/drover/internal/usertext"
)

// Defaults of Config.
const (
	DefaultNameClaim   = "email"
	DefaultGroupsClaim = "groups"
)

// DefaultScopes are asked when Config.Scopes is empty.
var DefaultScopes = []string{oidc.ScopeOpenID, "profile", "email"}

// Config is how drover uses a provider.
type Config struct {
	// Issuer is the provider's issuer URL (its discovery document is at
	// ISSUER/.well-known/openid-configuration).
	Issuer string
	// ClientID and ClientSecret are drover's client at the provider: the
	// browser sign-in's (authorization code with PKCE), and the device
	// flow's unless DeviceClientID is set. The secret may be empty for a
	// public client.
	ClientID, ClientSecret string
	// DeviceClientID and DeviceClientSecret are the device flow's client,
	// for providers that register it apart ("" = ClientID's).
	DeviceClientID, DeviceClientSecret string
	// Scopes are asked of the provider ("openid" is added when missing;
	// none = DefaultScopes).
	Scopes []string
	// NameClaim names the person (default "email", which counts only
	// with email_verified true). A sign-in whose tokens lack it fails:
	// names decide who approved, so no other claim stands in for it.
	NameClaim string
	// GroupsClaim holds the person's groups (default "groups"): a list of
	// strings, or one string.
	GroupsClaim string
	// Groups maps a group to the role bindings its members hold.
	Groups map[string][]auth.Binding
	// Everyone are the bindings of every person the provider signs in
	// (none by default: a person without a mapped group holds no role).
	Everyone []auth.Binding
	// HTTPClient talks to the provider (nil: http.DefaultClient).
	HTTPClient *http.Client
}

// Person is someone the provider signed in.
type Person struct {
	// Name is how drover records them (the name claim, normalized as
	// user names are).
	Name string
	// Subject is ISSUER#SUB: who they are at the provider.
	Subject string
	// Groups are their groups as the provider named them.
	Groups []string
	// Bindings are the roles their groups (and Everyone) map to.
	Bindings []auth.Binding
}

// The outcomes of a device sign-in that has no person yet.
var (
	// ErrPending: the person has not answered yet; ask again.
	ErrPending = errors.New("the sign-in is not finished yet")
	// ErrDenied: the person refused the device at the provider.
	ErrDenied = errors.New("the sign-in was refused at the provider")
	// ErrExpired: the device code expired; start again.
	ErrExpired = errors.New("the sign-in code expired: start again")
)

// RP is drover as a relying party of one provider. Its discovery runs at
// first use and is kept once it succeeded, so a server starts while its
// provider is away.
type RP struct {
	cfg Config

	mu       sync.Mutex
	provider *oidc.Provider
}

// New checks cfg and returns its relying party.
func New(cfg Config) (*RP, error) {
	u, err := url.Parse(cfg.Issuer)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("oidc issuer %q: want an http(s) URL", cfg.Issuer)
	}
	if cfg.ClientID == "" {
		return nil, errors.New("oidc: a client id is required (--oidc-client-id)")
	}
	if cfg.DeviceClientID == "" {
		cfg.DeviceClientID, cfg.DeviceClientSecret = cfg.ClientID, cfg.ClientSecret
	}
	if len(cfg.Scopes) == 0 {
		cfg.Scopes = DefaultScopes
	}
	if !slices.Contains(cfg.Scopes, oidc.ScopeOpenID) {
		cfg.Scopes = append([]string{oidc.ScopeOpenID}, cfg.Scopes...)
	}
	if cfg.NameClaim == "" {
		cfg.NameClaim = DefaultNameClaim
	}
	if cfg.GroupsClaim == "" {
		cfg.GroupsClaim = DefaultGroupsClaim
	}
	return &RP{cfg: cfg}, nil
}

// Issuer is the provider's issuer URL.
func (r *RP) Issuer() string { return r.cfg.Issuer }

func (r *RP) ctx(ctx context.Context) context.Context {
	if r.cfg.HTTPClient != nil {
		return oidc.ClientContext(ctx, r.cfg.HTTPClient)
	}
	return ctx
}

// discover returns the provider, reading its discovery document once.
func (r *RP) discover(ctx context.Context) (*oidc.Provider, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.provider != nil {
		return r.provider, nil
	}
	p, err := oidc.NewProvider(r.ctx(ctx), r.cfg.Issuer)
	if err != nil {
		return nil, fmt.Errorf("reach the OpenID provider %s: %w", r.cfg.Issuer, err)
	}
	r.provider = p
	return p, nil
}

func (r *RP) oauth(p *oidc.Provider, redirect string) *oauth2.Config {
	return &oauth2.Config{ClientID: r.cfg.ClientID, ClientSecret: r.cfg.ClientSecret, Endpoint: p.Endpoint(),
		RedirectURL: redirect, Scopes: r.cfg.Scopes}
}

func (r *RP) deviceOAuth(p *oidc.Provider) *oauth2.Config {
	return &oauth2.Config{ClientID: r.cfg.DeviceClientID, ClientSecret: r.cfg.DeviceClientSecret, Endpoint: p.Endpoint(),
		Scopes: r.cfg.Scopes}
}

// Browser is one browser sign-in in flight: what the callback must be
// given back to finish it (kept by the browser, in a cookie).
type Browser struct {
	State, Verifier, Nonce string
}

// NewBrowser returns fresh random values for a browser sign-in.
func NewBrowser() Browser {
	return Browser{State: oauth2.GenerateVerifier(), Verifier: oauth2.GenerateVerifier(), Nonce: oauth2.GenerateVerifier()}
}

// AuthCodeURL is where a browser goes to sign in at the provider; it comes
// back to redirect with a code (PKCE with S256, state and nonce from b).
func (r *RP) AuthCodeURL(ctx context.Context, redirect string, b Browser) (string, error) {
	p, err := r.discover(ctx)
	if err != nil {
		return "", err
	}
	return r.oauth(p, redirect).AuthCodeURL(b.State, oauth2.S256ChallengeOption(b.Verifier), oidc.Nonce(b.Nonce)), nil
}

// Exchange finishes a browser sign-in: it trades code for the provider's
// tokens (with b's PKCE verifier) and checks the ID token and its nonce.
func (r *RP) Exchange(ctx context.Context, redirect, code string, b Browser) (Person, error) {
	if b.Verifier == "" || b.Nonce == "" {
		return Person{}, errors.New("the sign-in has no PKCE verifier or nonce")
	}
	p, err := r.discover(ctx)
	if err != nil {
		return Person{}, err
	}
	cfg := r.oauth(p, redirect)
	tok, err := cfg.Exchange(r.ctx(ctx), code, oauth2.VerifierOption(b.Verifier))
	if err != nil {
		return Person{}, fmt.Errorf("trade the provider's code for tokens: %w", err)
	}
	return r.person(ctx, p, r.cfg.ClientID, tok, b.Nonce)
}

// Device is a device sign-in started at the provider.
type Device struct {
	// DeviceCode is what the poll gives back; UserCode what the person
	// types at VerificationURI (VerificationURIComplete has it already).
	DeviceCode, UserCode, VerificationURI, VerificationURIComplete string
	// Expiry ends the sign-in; Interval is how often to ask, in seconds.
	Expiry   time.Time
	Interval int64
}

// DeviceStart starts a device sign-in at the provider.
func (r *RP) DeviceStart(ctx context.Context) (Device, error) {
	p, err := r.discover(ctx)
	if err != nil {
		return Device{}, err
	}
	if p.Endpoint().DeviceAuthURL == "" {
		return Device{}, fmt.Errorf("the OpenID provider %s offers no device sign-in (no device_authorization_endpoint): sign in with a browser, or use an API token", r.cfg.Issuer)
	}
	da, err := r.deviceOAuth(p).DeviceAuth(r.ctx(ctx))
	if err != nil {
		return Device{}, fmt.Errorf("start a device sign-in at the provider: %w", err)
	}
	interval := da.Interval
	if interval <= 0 {
		interval = 5
	}
	return Device{DeviceCode: da.DeviceCode, UserCode: da.UserCode, VerificationURI: da.VerificationURI,
		VerificationURIComplete: da.VerificationURIComplete, Expiry: da.Expiry, Interval: interval}, nil
}

// DevicePoll asks the provider, every interval seconds until ctx ends,
// whether the person allowed the device: the person, or ErrPending when
// ctx ended first, ErrDenied, ErrExpired, or the provider's error.
func (r *RP) DevicePoll(ctx context.Context, deviceCode string, interval int64) (Person, error) {
	p, err := r.discover(ctx)
	if err != nil {
		return Person{}, err
	}
	tok, err := r.deviceOAuth(p).DeviceAccessToken(r.ctx(ctx), &oauth2.DeviceAuthResponse{DeviceCode: deviceCode, Interval: interval})
	var re *oauth2.RetrieveError
	switch {
	case err == nil:
		// The provider spent the device code: finish even if the poll's
		// time is up.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		return r.person(ctx, p, r.cfg.DeviceClientID, tok, "")
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
		return Person{}, ErrPending
	case errors.As(err, &re) && re.ErrorCode == "access_denied":
		return Person{}, ErrDenied
	case errors.As(err, &re) && re.ErrorCode == "expired_token":
		return Person{}, ErrExpired
	}
	return Person{}, fmt.Errorf("ask the provider for the sign-in's tokens: %w", err)
}

// person checks tok's ID token (signature, issuer, audience clientID,
// expiry, and nonce when one was sent) and reads who it names. Claims the
// ID token lacks (many providers put the e-mail and groups only at the
// userinfo endpoint) are read from there.
func (r *RP) person(ctx context.Context, p *oidc.Provider, clientID string, tok *oauth2.Token, nonce string) (Person, error) {
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return Person{}, errors.New("the provider sent no ID token (is the openid scope allowed for drover's client?)")
	}
	idt, err := p.Verifier(&oidc.Config{ClientID: clientID}).Verify(r.ctx(ctx), raw)
	if err != nil {
		return Person{}, fmt.Errorf("the provider's ID token is not valid: %w", err)
	}
	if nonce != "" && idt.Nonce != nonce {
		return Person{}, errors.New("the provider's ID token answers another sign-in (nonce mismatch)")
	}
	claims := map[string]any{}
	if err := idt.Claims(&claims); err != nil {
		return Person{}, fmt.Errorf("read the ID token's claims: %w", err)
	}
	_, hasName := claims[r.cfg.NameClaim]
	_, hasGroups := claims[r.cfg.GroupsClaim]
	if (!hasName || !hasGroups) && p.UserInfoEndpoint() != "" {
		// Many providers put the e-mail and groups only at the userinfo
		// endpoint: a sign-in that cannot read it fails rather than go on
		// with another name or fewer groups.
		info, err := p.UserInfo(r.ctx(ctx), oauth2.StaticTokenSource(tok))
		if err != nil {
			return Person{}, fmt.Errorf("read the person's claims at the provider's userinfo endpoint: %w", err)
		}
		if info.Subject != idt.Subject {
			return Person{}, errors.New("the provider's userinfo answers for another subject than its ID token")
		}
		more := map[string]any{}
		if err := info.Claims(&more); err != nil {
			return Person{}, fmt.Errorf("read the userinfo claims: %w", err)
		}
		for k, v := range more {
			if _, ok := claims[k]; !ok {
				claims[k] = v
			}
		}
	}
	return r.personFrom(idt.Issuer, idt.Subject, claims)
}

// personFrom names the person of claims and maps their groups.
func (r *RP) personFrom(issuer, subject string, claims map[string]any) (Person, error) {
	var name string
	if r.cfg.NameClaim == "sub" {
		name = subject
	} else if s, ok := claims[r.cfg.NameClaim].(string); ok {
		name = s
	}
	if strings.TrimSpace(name) == "" {
		return Person{}, fmt.Errorf("the provider's tokens carry no %s claim to name the person by (ask for its scope with --oidc-scopes, or name people by another claim with --oidc-name-claim)", r.cfg.NameClaim)
	}
	if r.cfg.NameClaim == "email" && !verified(claims["email_verified"]) {
		return Person{}, errors.New("the provider does not vouch for the person's e-mail address (email_verified is not true): drover names people by a verified address; name them by another claim with --oidc-name-claim")
	}
	norm, err := usertext.User(name)
	if err != nil {
		return Person{}, fmt.Errorf("the provider's claim %s cannot name a person: %w", r.cfg.NameClaim, err)
	}
	per := Person{Name: norm, Subject: issuer + "#" + subject}
	switch g := claims[r.cfg.GroupsClaim].(type) {
	case string:
		per.Groups = []string{g}
	case []any:
		for _, v := range g {
			if s, ok := v.(string); ok {
				per.Groups = append(per.Groups, s)
			}
		}
	}
	sort.Strings(per.Groups)
	per.Bindings = r.Bindings(per.Groups)
	return per, nil
}

// verified reads an email_verified claim: true, or "true" as some
// providers send it.
func verified(v any) bool {
	switch b := v.(type) {
	case bool:
		return b
	case string:
		return b == "true"
	}
	return false
}

// Bindings are the role bindings of a member of groups: Everyone's and
// each mapped group's, each once.
func (r *RP) Bindings(groups []string) []auth.Binding {
	var out []auth.Binding
	seen := map[string]bool{}
	add := func(bs []auth.Binding) {
		for _, b := range bs {
			if k := b.String(); !seen[k] {
				seen[k] = true
				out = append(out, b)
			}
		}
	}
	add(r.cfg.Everyone)
	for _, g := range groups {
		add(r.cfg.Groups[g])
	}
	return out
}

// ParseGroup reads one mapping of a group to roles, as --oidc-group takes
// it: GROUP=BINDING[,BINDING...], a binding being ROLE, ROLE@APP or
// ROLE@APP/CHANNEL. The first "=" splits, so a group name may not hold one.
func ParseGroup(s string) (string, []auth.Binding, error) {
	group, list, ok := strings.Cut(s, "=")
	group = strings.TrimSpace(group)
	if !ok || group == "" || strings.TrimSpace(list) == "" {
		return "", nil, fmt.Errorf("group mapping %q: want GROUP=ROLE[@APP[/CHANNEL]][,...], e.g. release-managers=approver@shop", s)
	}
	bs, err := ParseBindings(list)
	if err != nil {
		return "", nil, fmt.Errorf("group mapping %q: %w", s, err)
	}
	return group, bs, nil
}

// ParseBindings reads a comma-separated list of role bindings.
func ParseBindings(list string) ([]auth.Binding, error) {
	var out []auth.Binding
	for _, part := range strings.Split(list, ",") {
		b, err := auth.ParseBinding(strings.TrimSpace(part))
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}
