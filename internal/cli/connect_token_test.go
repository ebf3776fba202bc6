package cli

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/drover-dev/drover/internal/auth"
)

// TestS1SquattedPortTokenNotSent: a token the CLI found by itself (the
// record of a server of this OS user) is not sent when another user's
// process listens on the address; a token given explicitly is. (Not
// parallel: it sets XDG_CONFIG_HOME and DROVER_TOKEN.)
func TestS1SquattedPortTokenNotSent(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("DROVER_TOKEN", "")
	var sent atomic.Value
	sent.Store("")
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		sent.Store(r.Header.Get("Authorization"))
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"ok"}`))
	}))
	defer srv.Close()
	const recorded = "recorded-token-0123456789"
	if _, err := auth.RecordServerToken(strings.TrimPrefix(srv.URL, "http://"), recorded); err != nil {
		t.Fatal(err)
	}
	squatted := func(string) error {
		return errors.New("the process listening on ADDR belongs to another user (uid 4242): refusing to send your drover token; pass --token to override")
	}

	g := &globals{server: srv.URL}
	_, err := g.clientChecked(squatted).Health(t.Context())
	if err == nil || !strings.Contains(err.Error(), "uid 4242") {
		t.Fatalf("want the listener refusal, got %v", err)
	}
	if n := requests.Load(); n != 0 {
		t.Fatalf("%d requests reached the squatter", n)
	}

	// The user's own listener gets the recorded token.
	if _, err := g.clientChecked(func(string) error { return nil }).Health(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := sent.Load(); got != "Bearer "+recorded {
		t.Errorf("own listener got Authorization %q", got)
	}
	// The real check passes for this test's own listener.
	if _, err := g.client().Health(t.Context()); err != nil {
		t.Errorf("own listener refused by the real check: %v", err)
	}

	// --token overrides: no check.
	g.token = "given-token-0123456789"
	if _, err := g.clientChecked(squatted).Health(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := sent.Load(); got != "Bearer given-token-0123456789" {
		t.Errorf("--token: Authorization %q", got)
	}
}
