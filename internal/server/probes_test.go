package server_test

import (
	"io"
	"net/http"
	"testing"

	"github.com/drover-dev/drover/internal/server"
)

// TestProbesNeedNoCredential: /livez and /readyz answer a caller without a
// credential with 200 and "ok" and nothing more, through the whole edge
// (Host check, guard); other paths the API does not know still answer 401.
func TestProbesNeedNoCredential(t *testing.T) {
	t.Parallel()
	addr := startServer(t, server.EdgeConfig{})
	for _, tc := range []struct {
		method, path string
		code         int
		body         string
	}{
		{"GET", "/livez", http.StatusOK, "ok\n"},
		{"GET", "/readyz", http.StatusOK, "ok\n"},
		{"GET", "/healthz", http.StatusUnauthorized, ""},
		{"GET", "/livez/x", http.StatusUnauthorized, ""},
	} {
		req := newRequest(t, tc.method, "http://"+addr+tc.path, "")
		req.Header.Del("Authorization")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != tc.code || (tc.body != "" && string(raw) != tc.body) {
			t.Errorf("%s %s without a credential: %d %q, want %d %q", tc.method, tc.path, resp.StatusCode, raw, tc.code, tc.body)
		}
		if tc.code == http.StatusOK && resp.Header.Get("Content-Type") != "text/plain; charset=utf-8" {
			t.Errorf("%s %s: content type %q, want text/plain", tc.method, tc.path, resp.Header.Get("Content-Type"))
		}
	}
	// The Host check holds for probes too: they answer for this server only.
	req := newRequest(t, "GET", "http://"+addr+"/readyz", "")
	req.Header.Del("Authorization")
	req.Host = "evil.example"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("/readyz for another host: %d, want 403", resp.StatusCode)
	}
}
