package server

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apiv1 "github.com/drover-dev/drover/api/v1"
	"github.com/drover-dev/drover/internal/auth"
	"github.com/drover-dev/drover/internal/store"
	"github.com/drover-dev/drover/internal/store/sqlite"
)

// request sends one request to the API; every test request goes through it,
// so a header the API starts requiring is added in one place.
func request(t *testing.T, method, url string, body io.Reader) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = resp.Body.Close() })
	return resp
}

func getHealth(t *testing.T, url string) (int, apiv1.Health) {
	t.Helper()
	resp := request(t, http.MethodGet, url+"/v1/health", nil) //nolint:bodyclose // request closes it at cleanup
	var h apiv1.Health
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		t.Fatalf("decode health: %v", err)
	}
	return resp.StatusCode, h
}

func TestB25HealthReportsStore(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.Open(t.Context(), filepath.Join(dir, "drover.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	srv, _ := newTestServer(t, st, dir, EdgeConfig{})
	api := srv.Handler()
	// ts answers as to a caller with the local credential, anon as to a probe without one.
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		api.ServeHTTP(w, r.WithContext(auth.WithIdentity(r.Context(), auth.LocalIdentity)))
	}))
	t.Cleanup(ts.Close)
	anon := httptest.NewServer(api)
	t.Cleanup(anon.Close)

	code, h := getHealth(t, ts.URL)
	if code != http.StatusOK || h.Status != "ok" || h.Store != "ok" {
		t.Fatalf("health of a working store = %d %+v, want 200 ok", code, h)
	}
	// B4: the data directory removed under the running server.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	code, h = getHealth(t, ts.URL)
	if code != http.StatusServiceUnavailable || h.Status != "unhealthy" || h.Store != "error" ||
		!strings.Contains(h.StoreError, "removed or replaced") {
		t.Fatalf("health after the data directory was removed = %d %+v, want 503 with the store's error", code, h)
	}
	// So does the readiness probe, in two words; the process is still live.
	for path, want := range map[string]string{"/readyz": "503 not ok\n", "/livez": "200 ok\n"} {
		resp := request(t, http.MethodGet, anon.URL+path, nil) //nolint:bodyclose // request closes it at cleanup
		raw, _ := io.ReadAll(resp.Body)
		if got := fmt.Sprintf("%d %s", resp.StatusCode, raw); got != want {
			t.Errorf("%s after the data directory was removed = %q, want %q", path, got, want)
		}
	}
	// A probe without a credential learns that the store fails, not its files.
	code, h = getHealth(t, anon.URL)
	if code != http.StatusServiceUnavailable || h.Store != "error" || h.StoreError != "" || h.Version != "" {
		t.Fatalf("anonymous health after the data directory was removed = %d %+v, want 503 without details", code, h)
	}
	// Writes are refused with the same message.
	body := `{"configs": [{"source": "rt.pvn.yaml", "body": {"runtime": {"name": "rt", "fake": {}}}}]}`
	resp := request(t, http.MethodPost, ts.URL+"/v1/configs:apply", strings.NewReader(body)) //nolint:bodyclose // request closes it at cleanup
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusOK || !strings.Contains(string(raw), "removed or replaced") {
		t.Errorf("apply after the data directory was removed = %d %s, want an error naming the cause", resp.StatusCode, raw)
	}
}

func TestB10DecodeCacheKeepsOneVersion(t *testing.T) {
	t.Parallel()
	var c decodeCache
	for v := int64(1); v <= 20; v++ {
		body := fmt.Sprintf(`{"runtime": {"name": "rt", "fake": {}, "labels": [{"label": "v", "value": "%d"}]}}`, v)
		src, err := c.source(store.ConfigObject{Kind: "runtime", Name: "rt", Version: v, Body: []byte(body)})
		if err != nil {
			t.Fatal(err)
		}
		if src == nil {
			t.Fatal("nil source")
		}
	}
	// An older version decoded late does not replace the newest.
	if _, err := c.source(store.ConfigObject{Kind: "runtime", Name: "rt", Version: 3, Body: []byte(`{"runtime": {"name": "rt", "fake": {}}}`)}); err != nil {
		t.Fatal(err)
	}
	if n := c.len(); n != 1 {
		t.Errorf("cache holds %d entries after 20 versions of one config, want 1", n)
	}
	c.mu.Lock()
	v := c.m["runtime\x00rt"].version
	c.mu.Unlock()
	if v != 20 {
		t.Errorf("cached version = %d, want 20", v)
	}
}

// TestDecodeCacheKeepsNoServiceConfig: service configs are decoded each
// time they are asked for (one per service, each needed by its own pushes),
// the others kept.
func TestDecodeCacheKeepsNoServiceConfig(t *testing.T) {
	t.Parallel()
	var c decodeCache
	svc := store.ConfigObject{Kind: "service", Name: "app/svc", Version: 1,
		Body: []byte(`{"service": {"name": "svc", "application": "app"}}`)}
	for range 2 {
		src, err := c.source(svc)
		if err != nil {
			t.Fatal(err)
		}
		if src.Kind() != "service" || src.Name() != "svc" {
			t.Fatalf("decoded %s %s, want service svc", src.Kind(), src.Name())
		}
	}
	if _, err := c.source(store.ConfigObject{Kind: "runtime", Name: "rt", Version: 1, Body: []byte(`{"runtime": {"name": "rt", "fake": {}}}`)}); err != nil {
		t.Fatal(err)
	}
	if n := c.len(); n != 1 {
		t.Errorf("cache holds %d entries, want 1 (the runtime)", n)
	}
}
