package auth_test

import (
	"bytes"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/drover-dev/drover/internal/auth"
)

// TestRefusalWithoutCredentialLogsAtDebug: the web UI's page, before its
// user signs in, sends requests without a credential, one per API call: a
// refusal of those is debug, not a warning per call; a wrong token still
// warns.
func TestRefusalWithoutCredentialLogsAtDebug(t *testing.T) {
	t.Parallel()
	addr, err := net.ResolveTCPAddr("tcp", "127.0.0.1:7420")
	if err != nil {
		t.Fatal(err)
	}
	hosts, err := auth.NewHosts(addr)
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	g := &auth.Guard{Hosts: hosts, Authenticator: auth.NewTokenAuthenticator(testToken, auth.LocalIdentity),
		Log: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	h := g.Wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	for _, bearer := range []string{"", "Bearer drover_WRONGTOKEN0123456789ABCDEF"} {
		headers := map[string]string{}
		if bearer != "" {
			headers["Authorization"] = bearer
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, request(http.MethodGet, "127.0.0.1:7420", "/v1/services", headers))
		if rec.Code != http.StatusUnauthorized {
			t.Fatalf("%q: %d, want 401", bearer, rec.Code)
		}
	}
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "level=DEBUG") || !strings.Contains(lines[0], "reason=no_credential") ||
		!strings.Contains(lines[1], "level=WARN") || !strings.Contains(lines[1], "reason=bad_credential") {
		t.Errorf("refusal logs:\n%s", logs.String())
	}
}
