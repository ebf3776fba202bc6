// Package oidctest runs a real OpenID provider on 127.0.0.1 for tests: the
// example provider of github.com/zitadel/oidc/v3 (its login pages, device
// pages and in-memory storage), with the people a test names and a groups
// claim. It answers the authorization code flow with PKCE and the device
// flow as any provider does; Approve and SignIn play the person at the
// provider's pages, as a browser would.
package oidctest

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zitadel/oidc/v3/example/server/exampleop"
	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
	"golang.org/x/text/language"
)

// The clients the provider knows: a web client (authorization code, with
// PKCE as drover sends it, and a secret) and a device client. Their
// secrets are a test provider's, on 127.0.0.1.
//
//nolint:gosec // G101: test credentials of a provider that lives as long as a test.
const (
	WebClientID        = "drover"
	WebClientSecret    = "drover-web-secret"
	DeviceClientID     = "drover-cli"
	DeviceClientSecret = "drover-cli-secret"
	// GroupsScope asks for the groups claim.
	GroupsScope = "groups"
)

// Person is someone who can sign in at the provider: Name is both their
// id (the subject) and their user name.
type Person struct {
	Name, Password, Email string
	Groups                []string
}

// Provider is a running OpenID provider.
type Provider struct {
	// Issuer is its issuer URL: http://127.0.0.1:PORT/.
	Issuer string
	store  *groupStorage
}

// Start runs a provider on 127.0.0.1 until the test ends; redirectURIs are
// where its web client may send people back to (drover's callback).
func Start(t testing.TB, people []Person, redirectURIs ...string) *Provider {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("oidctest: listen: %v", err)
	}
	issuer := "http://" + ln.Addr().String() + "/"
	users := userStore{}
	groups := map[string][]string{}
	for _, p := range people {
		users[p.Name] = &storage.User{ID: p.Name, Username: p.Name, Password: p.Password, FirstName: p.Name,
			Email: p.Email, EmailVerified: p.Email != "", PreferredLanguage: language.English}
		groups[p.Name] = p.Groups
	}
	clients := map[string]*storage.Client{
		WebClientID:    storage.WebClient(WebClientID, WebClientSecret, redirectURIs...),
		DeviceClientID: storage.DeviceClient(DeviceClientID, DeviceClientSecret),
	}
	st := &groupStorage{Storage: storage.NewStorageWithClients(users, clients), groups: groups}
	router := exampleop.SetupServer(issuer, st, nil, false)
	srv := &http.Server{Handler: router, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return &Provider{Issuer: issuer, store: st}
}

// URL is the provider's address joined with path.
func (p *Provider) URL(path string) string { return strings.TrimSuffix(p.Issuer, "/") + path }

// Approve signs in as name at the provider's device page and allows the
// device whose user code is userCode, as the person would in a browser.
func (p *Provider) Approve(ctx context.Context, userCode, name, password string) error {
	c := browser()
	form := url.Values{"user_code": {userCode}, "username": {name}, "password": {password}}
	body, err := post(ctx, c, p.URL("/device/login"), form)
	if err != nil {
		return err
	}
	if !strings.Contains(body, "allowed") {
		return fmt.Errorf("oidctest: the device login page did not ask to confirm: %s", body)
	}
	body, err = post(ctx, c, p.URL("/device/confirm"), url.Values{"action": {"allowed"}})
	if err != nil {
		return err
	}
	if !strings.Contains(body, "Device authorization allowed") {
		return fmt.Errorf("oidctest: device not allowed: %s", body)
	}
	return nil
}

// SignIn follows start (drover's sign-in address) with client to the
// provider's login page, signs in there as name, and follows the
// redirects back; it returns the last answer's body and address. client
// needs a cookie jar (Browser gives one).
func (p *Provider) SignIn(ctx context.Context, client *http.Client, start, name, password string) (string, *url.URL, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, start, nil)
	if err != nil {
		return "", nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", nil, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	login := resp.Request.URL
	id := login.Query().Get("authRequestID")
	if !strings.HasPrefix(login.String(), p.Issuer) || id == "" {
		return "", nil, fmt.Errorf("oidctest: %s led to %s (%s), not to the provider's login page", start, login, resp.Status)
	}
	form := url.Values{"id": {id}, "username": {name}, "password": {password}}
	req, err = http.NewRequestWithContext(ctx, http.MethodPost, p.URL("/login/username"), strings.NewReader(form.Encode()))
	if err != nil {
		return "", nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err = client.Do(req)
	if err != nil {
		return "", nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	return string(b), resp.Request.URL, err
}

// Browser is an HTTP client with a cookie jar that follows redirects, as a
// browser does; base is its transport (nil: the default).
func Browser(base http.RoundTripper) *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, Transport: base, Timeout: 30 * time.Second}
}

func browser() *http.Client { return Browser(nil) }

func post(ctx context.Context, c *http.Client, u string, form url.Values) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(form.Encode()))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("oidctest: POST %s: %s: %s", u, resp.Status, b)
	}
	return string(b), err
}

// groupStorage is the example's storage with a groups claim, in the ID
// token and at the userinfo endpoint, when the groups scope is asked.
type groupStorage struct {
	*storage.Storage
	groups map[string][]string
}

// SetUserinfoFromRequest adds the groups to the ID token's claims.
func (s *groupStorage) SetUserinfoFromRequest(ctx context.Context, info *oidc.UserInfo, req op.IDTokenRequest, scopes []string) error {
	if err := s.Storage.SetUserinfoFromRequest(ctx, info, req, scopes); err != nil {
		return err
	}
	s.addGroups(info, req.GetSubject(), scopes)
	return nil
}

// SetUserinfoFromScopes adds the groups where the ID token asks the
// scopes' claims.
func (s *groupStorage) SetUserinfoFromScopes(ctx context.Context, info *oidc.UserInfo, userID, clientID string, scopes []string) error {
	if err := s.Storage.SetUserinfoFromScopes(ctx, info, userID, clientID, scopes); err != nil {
		return err
	}
	s.addGroups(info, userID, scopes)
	return nil
}

// SetUserinfoFromToken adds the groups to the userinfo endpoint's answer.
func (s *groupStorage) SetUserinfoFromToken(ctx context.Context, info *oidc.UserInfo, tokenID, subject, origin string) error {
	if err := s.Storage.SetUserinfoFromToken(ctx, info, tokenID, subject, origin); err != nil {
		return err
	}
	s.addGroups(info, info.Subject, []string{GroupsScope})
	return nil
}

func (s *groupStorage) addGroups(info *oidc.UserInfo, subject string, scopes []string) {
	if g, ok := s.groups[subject]; ok && slices.Contains(scopes, GroupsScope) {
		info.AppendClaims("groups", g)
	}
}

// userStore holds the test's people.
type userStore map[string]*storage.User

func (u userStore) GetUserByID(id string) *storage.User { return u[id] }

func (u userStore) GetUserByUsername(name string) *storage.User { return u[name] }

func (u userStore) ExampleClientID() string { return storage.ServiceUserID }
