package cli

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/drover-dev/drover/internal/tlspin"
)

// TestLoginContextsAndPinning: login refuses a self-signed certificate it
// cannot check (naming its fingerprint), signs in with the fingerprint
// pinned, keeps server, token and pin in a 0600 file as the current
// context; later commands go there with that token; --server and --token
// still win; context use and delete switch and forget. (Not parallel: it
// sets XDG_CONFIG_HOME and the DROVER_ variables.)
func TestLoginContextsAndPinning(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("DROVER_CONFIG", "")
	t.Setenv("DROVER_TOKEN", "")
	t.Setenv("DROVER_SERVER", "")
	t.Setenv("DROVER_TLS_FINGERPRINT", "")
	var lastAuth atomic.Value
	lastAuth.Store("")
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lastAuth.Store(r.Header.Get("Authorization"))
		w.Header().Set("Content-Type", "application/json")
		if r.Header.Get("Authorization") != "Bearer good-token" {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":{"code":"unauthenticated","message":"bad token"}}`))
			return
		}
		_, _ = w.Write([]byte(`{"name":"ci","kind":"token","roles":["deployer@shop"]}`))
	}))
	defer srv.Close()
	fp := tlspin.Fingerprint(srv.Certificate().Raw)
	tokenFile := t.TempDir() + "/token"
	if err := os.WriteFile(tokenFile, []byte("good-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	login := func(args ...string) (int, string, string) {
		t.Helper()
		var stdout, stderr bytes.Buffer
		code := Main(append([]string{"login", srv.URL, "--token-file", tokenFile}, args...), &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	if code, _, stderr := login(); code != 1 || !strings.Contains(stderr, "sha256:"+fp) {
		t.Fatalf("login to a self-signed server without a pin: exit %d, %s; want 1 naming its fingerprint", code, stderr)
	}
	code, stdout, stderr := login("--tls-fingerprint", "sha256:"+fp, "--name", "prod")
	if code != 0 || !strings.Contains(stdout, "as ci (deployer@shop); context prod is current") {
		t.Fatalf("login with the pin: exit %d %s %s", code, stdout, stderr)
	}
	path, _ := configPath()
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("config file %s: %v %v, want mode 0600", path, fi, err)
	}
	conf, _, err := loadConfig()
	if err != nil {
		t.Fatal(err)
	}
	cur, ok := conf.current()
	if !ok || cur.Name != "prod" || cur.Server != srv.URL || cur.Token != "good-token" || cur.Fingerprint != fp {
		t.Fatalf("current context %+v", cur)
	}
	// A later command finds server, token and pin in the context.
	var out, errOut bytes.Buffer
	if code := Main([]string{"whoami"}, &out, &errOut); code != 0 || !strings.Contains(out.String(), "ci (token)") {
		t.Fatalf("whoami through the context: exit %d %s %s", code, out.String(), errOut.String())
	}
	if got := lastAuth.Load(); got != "Bearer good-token" {
		t.Errorf("the context's token was not sent: %q", got)
	}
	// --token wins over the context's.
	out.Reset()
	errOut.Reset()
	if code := Main([]string{"whoami", "--token", "other"}, &out, &errOut); code != 1 || lastAuth.Load() != "Bearer other" {
		t.Errorf("whoami --token other: exit %d, sent %q", code, lastAuth.Load())
	}
	// Another context, then switch back, then forget.
	if code, _, stderr := login("--tls-fingerprint", fp, "--name", "staging"); code != 0 {
		t.Fatal(stderr)
	}
	for _, args := range [][]string{{"context", "use", "prod"}, {"context", "delete", "staging"}} {
		out.Reset()
		errOut.Reset()
		if code := Main(args, &out, &errOut); code != 0 {
			t.Fatalf("%v: exit %d %s", args, code, errOut.String())
		}
	}
	out.Reset()
	if code := Main([]string{"context"}, &out, &errOut); code != 0 || !strings.Contains(out.String(), "*        prod") || strings.Contains(out.String(), "staging") {
		t.Errorf("contexts:\n%s", out.String())
	}
	if code := Main([]string{"context", "use", "nosuch"}, &out, &errOut); code != 64 {
		t.Errorf("context use nosuch: exit %d, want 64", code)
	}
}
