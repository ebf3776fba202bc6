package sso_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/auth"
	"github.com/drover-dev/drover/internal/sso"
	"github.com/drover-dev/drover/internal/testing/oidctest"
)

var people = []oidctest.Person{
	{Name: "ann", Password: "ann-pw", Email: "Ann@Example.com", Groups: []string{"release-managers", "staff"}},
	{Name: "bob", Password: "bob-pw", Email: "bob@example.com", Groups: []string{"staff"}},
}

func newRP(t *testing.T, issuer string, device bool) *sso.RP {
	t.Helper()
	_, approver, err := sso.ParseGroup("release-managers=approver@shop,viewer")
	if err != nil {
		t.Fatal(err)
	}
	cfg := sso.Config{Issuer: issuer, ClientID: oidctest.WebClientID, ClientSecret: oidctest.WebClientSecret,
		Scopes:   []string{"openid", "profile", "email", oidctest.GroupsScope},
		Groups:   map[string][]auth.Binding{"release-managers": approver},
		Everyone: []auth.Binding{{Role: auth.RoleViewer, Application: "docs"}}}
	if device {
		cfg.DeviceClientID, cfg.DeviceClientSecret = oidctest.DeviceClientID, oidctest.DeviceClientSecret
	}
	rp, err := sso.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return rp
}

func bindings(p sso.Person) []string {
	var out []string
	for _, b := range p.Bindings {
		out = append(out, b.String())
	}
	return out
}

// TestDeviceSignIn runs the device flow against a real provider: pending
// until the person allows the device, then the person with their groups'
// roles.
func TestDeviceSignIn(t *testing.T) {
	t.Parallel()
	op := oidctest.Start(t, people)
	rp := newRP(t, op.Issuer, true)
	ctx := t.Context()
	d, err := rp.DeviceStart(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d.UserCode == "" || d.DeviceCode == "" || !strings.HasPrefix(d.VerificationURI, op.Issuer) {
		t.Fatalf("device start = %+v", d)
	}
	short, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	defer cancel()
	if _, err := rp.DevicePoll(short, d.DeviceCode, 1); !errors.Is(err, sso.ErrPending) {
		t.Fatalf("poll before the person answered = %v, want ErrPending", err)
	}
	if err := op.Approve(ctx, d.UserCode, "ann", "ann-pw"); err != nil {
		t.Fatal(err)
	}
	p, err := rp.DevicePoll(ctx, d.DeviceCode, 1)
	if err != nil {
		t.Fatal(err)
	}
	if p.Name != "ann@example.com" || p.Subject != op.Issuer+"#ann" {
		t.Errorf("person = %+v, want ann@example.com (the e-mail claim, folded)", p)
	}
	if !slices.Equal(p.Groups, []string{"release-managers", "staff"}) {
		t.Errorf("groups = %v", p.Groups)
	}
	if got := bindings(p); !slices.Equal(got, []string{"viewer@docs", "approver@shop", "viewer"}) {
		t.Errorf("bindings = %v", got)
	}
}

// TestBrowserSignIn runs the authorization code flow with PKCE: the
// provider sends the browser back with a code that only the verifier
// trades; a wrong verifier or nonce is refused.
func TestBrowserSignIn(t *testing.T) {
	t.Parallel()
	var redirect string
	type result struct {
		p   sso.Person
		err error
	}
	results := make(chan result, 4)
	var rp *sso.RP
	var flight sso.Browser
	cb := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("state") != flight.State {
			results <- result{err: errors.New("state mismatch")}
			return
		}
		p, err := rp.Exchange(r.Context(), redirect, r.URL.Query().Get("code"), flight)
		results <- result{p, err}
		_, _ = w.Write([]byte("done"))
	}))
	t.Cleanup(cb.Close)
	redirect = cb.URL + "/callback"
	op := oidctest.Start(t, people, redirect)
	rp = newRP(t, op.Issuer, false)
	ctx := t.Context()

	flight = sso.NewBrowser()
	start, err := rp.AuthCodeURL(ctx, redirect, flight)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(start, "code_challenge_method=S256") {
		t.Errorf("authorization URL without PKCE: %s", start)
	}
	if _, _, err := op.SignIn(ctx, oidctest.Browser(nil), start, "bob", "bob-pw"); err != nil {
		t.Fatal(err)
	}
	r := <-results
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.p.Name != "bob@example.com" || len(r.p.Bindings) != 1 || r.p.Bindings[0].String() != "viewer@docs" {
		t.Errorf("bob = %+v, want bob@example.com holding viewer@docs only", r.p)
	}

	// The code trades only with its own verifier.
	good := sso.NewBrowser()
	flight = good
	start, err = rp.AuthCodeURL(ctx, redirect, flight)
	if err != nil {
		t.Fatal(err)
	}
	flight.Verifier = sso.NewBrowser().Verifier
	if _, _, err := op.SignIn(ctx, oidctest.Browser(nil), start, "ann", "ann-pw"); err != nil {
		t.Fatal(err)
	}
	if r := <-results; r.err == nil {
		t.Errorf("a code traded with another verifier signed %s in", r.p.Name)
	}
}

func TestParseGroup(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"", "ops", "=admin", "ops=", "ops=boss", "ops=admin@"} {
		if _, _, err := sso.ParseGroup(bad); err == nil {
			t.Errorf("ParseGroup(%q) accepted", bad)
		}
	}
	g, bs, err := sso.ParseGroup(" ops = deployer@shop/prod, viewer")
	if err != nil || g != "ops" || len(bs) != 2 || bs[0].String() != "deployer@shop/prod" {
		t.Errorf("ParseGroup = %q %v %v", g, bs, err)
	}
}
