package auth_test

import (
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	apiv1 "github.com/drover-dev/drover/api/v1"
	"github.com/drover-dev/drover/internal/auth"
)

const testToken = "drover_TESTTOKEN0123456789ABCDEF"

func newGuard(t *testing.T, listen string, names ...string) http.Handler {
	t.Helper()
	addr, err := net.ResolveTCPAddr("tcp", listen)
	if err != nil {
		t.Fatal(err)
	}
	hosts, err := auth.NewHosts(addr, names...)
	if err != nil {
		t.Fatal(err)
	}
	g := &auth.Guard{
		Hosts: hosts, Authenticator: auth.NewTokenAuthenticator(testToken, auth.LocalIdentity),
		Open: func(r *http.Request) bool { return r.URL.Path == "/v1/health" },
	}
	return g.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, _ := auth.FromContext(r.Context())
		_, _ = w.Write([]byte("ok " + id.Name))
	}))
}

// request builds every request of these tests: one place to add a header.
func request(method, host, path string, headers map[string]string) *http.Request {
	r := httptest.NewRequest(method, "http://"+host+path, strings.NewReader("{}"))
	r.Host = host
	for k, v := range headers {
		r.Header.Set(k, v)
	}
	return r
}

func TestS1GuardRefusesCrossSiteAndUnauthenticated(t *testing.T) {
	t.Parallel()
	bearer := "Bearer " + testToken
	jsonCT := "application/json"
	cases := []struct {
		name    string
		listen  string
		names   []string
		method  string
		host    string
		path    string
		headers map[string]string
		want    int
		code    apiv1.ErrorCode
	}{
		{"the report's apply: text/plain, foreign origin, rebinding host", "127.0.0.1:7420", nil, "POST", "rebind.evil.example:7420", "/v1/configs:apply",
			map[string]string{"Content-Type": "text/plain;charset=UTF-8", "Origin": "http://evil.example"}, 403, auth.CodePermissionDenied},
		{"the report's push: text/plain, foreign origin", "127.0.0.1:7420", nil, "POST", "127.0.0.1:7420", "/v1/apps/evil/services/s:push",
			map[string]string{"Content-Type": "text/plain", "Origin": "http://evil.example"}, 403, auth.CodePermissionDenied},
		{"rebinding host even with the token", "127.0.0.1:7420", nil, "GET", "rebind.evil.example:7420", "/v1/services",
			map[string]string{"Authorization": bearer}, 403, auth.CodePermissionDenied},
		{"foreign origin even with the token", "127.0.0.1:7420", nil, "GET", "127.0.0.1:7420", "/v1/services",
			map[string]string{"Authorization": bearer, "Origin": "http://evil.example"}, 403, auth.CodePermissionDenied},
		{"origin of another port", "127.0.0.1:7420", nil, "GET", "127.0.0.1:7420", "/v1/services",
			map[string]string{"Authorization": bearer, "Origin": "http://127.0.0.1:8080"}, 403, auth.CodePermissionDenied},
		{"null origin", "127.0.0.1:7420", nil, "GET", "127.0.0.1:7420", "/v1/services",
			map[string]string{"Authorization": bearer, "Origin": "null"}, 403, auth.CodePermissionDenied},
		{"cross-site fetch metadata", "127.0.0.1:7420", nil, "GET", "127.0.0.1:7420", "/v1/services",
			map[string]string{"Authorization": bearer, "Sec-Fetch-Site": "cross-site"}, 403, auth.CodePermissionDenied},
		{"health: host checked too", "127.0.0.1:7420", nil, "GET", "rebind.evil.example:7420", "/v1/health", nil, 403, auth.CodePermissionDenied},
		{"text/plain with the token", "127.0.0.1:7420", nil, "POST", "127.0.0.1:7420", "/v1/configs:apply",
			map[string]string{"Authorization": bearer, "Content-Type": "text/plain"}, 415, auth.CodeUnsupportedMediaType},
		{"form with the token", "127.0.0.1:7420", nil, "POST", "127.0.0.1:7420", "/v1/configs:apply",
			map[string]string{"Authorization": bearer, "Content-Type": "application/x-www-form-urlencoded"}, 415, auth.CodeUnsupportedMediaType},
		{"no content type", "127.0.0.1:7420", nil, "POST", "127.0.0.1:7420", "/v1/configs:apply",
			map[string]string{"Authorization": bearer}, 415, auth.CodeUnsupportedMediaType},
		{"no credential", "127.0.0.1:7420", nil, "POST", "127.0.0.1:7420", "/v1/configs:apply",
			map[string]string{"Content-Type": jsonCT}, 401, auth.CodeUnauthenticated},
		{"wrong token", "127.0.0.1:7420", nil, "GET", "127.0.0.1:7420", "/v1/services",
			map[string]string{"Authorization": "Bearer drover_WRONG"}, 401, auth.CodeUnauthenticated},
		{"basic auth", "127.0.0.1:7420", nil, "GET", "127.0.0.1:7420", "/v1/services",
			map[string]string{"Authorization": "Basic " + testToken}, 401, auth.CodeUnauthenticated},
		{"no host", "127.0.0.1:7420", nil, "GET", "", "/v1/services",
			map[string]string{"Authorization": bearer}, 403, auth.CodePermissionDenied},
		{"public name on another port", "127.0.0.1:7420", []string{"drover.example.com"}, "GET", "drover.example.com:9999", "/v1/services",
			map[string]string{"Authorization": bearer}, 403, auth.CodePermissionDenied},
		{"wildcard listen: a name is not an address", "0.0.0.0:7420", nil, "GET", "rebind.evil.example:7420", "/v1/services",
			map[string]string{"Authorization": bearer}, 403, auth.CodePermissionDenied},
		{"wildcard listen: an address on another port", "0.0.0.0:7420", nil, "GET", "10.1.2.3:80", "/v1/services",
			map[string]string{"Authorization": bearer}, 403, auth.CodePermissionDenied},

		{"cli: json with the token", "127.0.0.1:7420", nil, "POST", "127.0.0.1:7420", "/v1/configs:apply",
			map[string]string{"Authorization": bearer, "Content-Type": "application/json; charset=utf-8"}, 200, ""},
		{"localhost names a loopback server", "127.0.0.1:7420", nil, "GET", "localhost:7420", "/v1/services",
			map[string]string{"Authorization": bearer}, 200, ""},
		{"[::1] names a loopback server", "127.0.0.1:7420", nil, "GET", "[::1]:7420", "/v1/services",
			map[string]string{"Authorization": bearer}, 200, ""},
		{"same origin", "127.0.0.1:7420", nil, "GET", "127.0.0.1:7420", "/v1/services",
			map[string]string{"Authorization": bearer, "Origin": "http://localhost:7420"}, 200, ""},
		{"ipv6 loopback listen", "[::1]:7420", nil, "GET", "[::1]:7420", "/v1/services",
			map[string]string{"Authorization": bearer}, 200, ""},
		{"public name behind a proxy", "127.0.0.1:7420", []string{"drover.example.com"}, "GET", "drover.example.com", "/v1/services",
			map[string]string{"Authorization": bearer, "Origin": "https://drover.example.com"}, 200, ""},
		{"public name with the listen port", "127.0.0.1:7420", []string{"Drover.Example.com"}, "GET", "drover.example.com:7420", "/v1/services",
			map[string]string{"Authorization": bearer}, 200, ""},
		{"wildcard listen: an address with the port", "0.0.0.0:7420", nil, "GET", "10.1.2.3:7420", "/v1/services",
			map[string]string{"Authorization": bearer}, 200, ""},
		{"health without a credential", "127.0.0.1:7420", nil, "GET", "127.0.0.1:7420", "/v1/health", nil, 200, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			w := httptest.NewRecorder()
			newGuard(t, c.listen, c.names...).ServeHTTP(w, request(c.method, c.host, c.path, c.headers))
			if w.Code != c.want {
				t.Fatalf("status %d, want %d: %s", w.Code, c.want, w.Body)
			}
			if c.want == http.StatusOK {
				return
			}
			var er apiv1.ErrorResponse
			if err := json.Unmarshal(w.Body.Bytes(), &er); err != nil || er.Error.Code != c.code || er.Error.Message == "" {
				t.Errorf("error body %q (%v), want code %s", w.Body, err, c.code)
			}
			if c.want == http.StatusUnauthorized && !strings.Contains(er.Error.Message, "DROVER_TOKEN") {
				t.Errorf("a 401 should say how to get the token: %s", er.Error.Message)
			}
		})
	}
}

func TestIdentityOfAnAuthenticatedRequest(t *testing.T) {
	t.Parallel()
	w := httptest.NewRecorder()
	newGuard(t, "127.0.0.1:7420").ServeHTTP(w, request("GET", "127.0.0.1:7420", "/v1/services", map[string]string{"Authorization": "Bearer " + testToken}))
	if got := w.Body.String(); got != "ok local" {
		t.Errorf("handler saw %q, want the local identity", got)
	}
}

func TestPublicNameMustNotBeAURL(t *testing.T) {
	t.Parallel()
	addr := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 7420}
	if _, err := auth.NewHosts(addr, "https://drover.example.com"); err == nil {
		t.Error("a URL was accepted as a public name")
	}
}

func TestChainAcceptsAnyOfItsCredentials(t *testing.T) {
	t.Parallel()
	c := auth.Chain{
		auth.NewTokenAuthenticator(testToken, auth.LocalIdentity),
		auth.NewTokenAuthenticator("drover_PERSONTOKEN0000000000", auth.Identity{Name: "alice"}),
	}
	for header, want := range map[string]string{"Bearer " + testToken: "local", "Bearer drover_PERSONTOKEN0000000000": "alice"} {
		id, err := c.Authenticate(request("GET", "127.0.0.1:7420", "/", map[string]string{"Authorization": header}))
		if err != nil || id.Name != want {
			t.Errorf("%s: %v %v, want %s", header, id, err, want)
		}
	}
	if _, err := c.Authenticate(request("GET", "127.0.0.1:7420", "/", map[string]string{"Authorization": "Bearer nope"})); !errors.Is(err, auth.ErrBadCredential) {
		t.Errorf("wrong token: %v", err)
	}
	if _, err := c.Authenticate(request("GET", "127.0.0.1:7420", "/", nil)); !errors.Is(err, auth.ErrNoCredential) {
		t.Errorf("no token: %v", err)
	}
}
