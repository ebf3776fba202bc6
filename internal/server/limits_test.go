package server

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	apiv1 "github.com/drover-dev/drover/api/v1"
	"github.com/drover-dev/drover/internal/auth"
	"github.com/drover-dev/drover/internal/store/sqlite"
)

// newLimitedServer is a pushed quickstart server with the edge limits of
// edge.
func newLimitedServer(t *testing.T, edge EdgeConfig) *Server {
	t.Helper()
	st, err := sqlite.Open(t.Context(), sqlite.MemoryPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	s, _ := newTestServer(t, st, t.TempDir(), edge)
	if _, err := s.applyConfigs(local(t.Context()), quickstartConfigs(t)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.push(local(t.Context()), "quickstart", "web", apiv1.PushRequest{Params: []apiv1.Param{{Name: "image", Value: "1.27"}}}); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestLimits: a body over the limit is 413 naming it; an identity sending
// changes faster than its rate gets 429 with Retry-After, others and the
// local token do not; an identity holds at most MaxStreams event streams.
func TestLimits(t *testing.T) {
	s := newLimitedServer(t, EdgeConfig{MutationRate: 0.5, MutationBurst: 2, MaxStreams: 1, MaxBody: 1 << 10})

	big := apiv1.PushRequest{Params: []apiv1.Param{{Name: "image", Value: strings.Repeat("x", 2<<10)}}}
	if code, body := post(t, s, "/v1/apps/quickstart/services/web:push", big); code != http.StatusRequestEntityTooLarge || !strings.Contains(body, "larger than 1024 bytes") {
		t.Errorf("a 2 KiB body over a 1 KiB limit: %d %s", code, body)
	}

	bob := as(t.Context(), "bob")
	pause := apiv1.ChannelRequest{ReleaseChannel: "prod"}
	for i := range 2 {
		if code, body := postAs(bob, t, s, "/v1/apps/quickstart/services/web:pause", pause); code != http.StatusOK {
			t.Fatalf("change %d within the burst: %d %s", i, code, body)
		}
	}
	req := httptest.NewRequestWithContext(bob, http.MethodPost, "/v1/apps/quickstart/services/web:resume", strings.NewReader(`{"releaseChannel":"prod"}`))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, req)
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") == "" || !strings.Contains(rec.Body.String(), "faster than 0.5 per second") {
		t.Errorf("a third change at once: %d %q %s", rec.Code, rec.Header().Get("Retry-After"), rec.Body)
	}
	if code, body := postAs(as(t.Context(), "carol"), t, s, "/v1/apps/quickstart/services/web:resume", pause); code != http.StatusOK {
		t.Errorf("another identity: %d %s", code, body)
	}
	for i := range 5 {
		if code, body := post(t, s, "/v1/apps/quickstart/services/web:pause", pause); code != http.StatusOK {
			t.Fatalf("local change %d: %d %s", i, code, body)
		}
	}

	// Streams: bob's first is open; his second is refused; carol's opens.
	ctx, cancel := context.WithCancel(bob)
	var wg sync.WaitGroup
	opened := make(chan struct{})
	wg.Go(func() {
		req := httptest.NewRequestWithContext(ctx, http.MethodGet, "/v1/watch", nil)
		w := &notifyRecorder{ResponseRecorder: httptest.NewRecorder(), flushed: opened}
		s.Handler().ServeHTTP(w, req)
	})
	<-opened
	second := httptest.NewRecorder()
	s.Handler().ServeHTTP(second, httptest.NewRequestWithContext(bob, http.MethodGet, "/v1/watch", nil))
	if second.Code != http.StatusTooManyRequests || !strings.Contains(second.Body.String(), "event streams") {
		t.Errorf("bob's second stream: %d %s", second.Code, second.Body)
	}
	cctx, ccancel := context.WithTimeout(as(t.Context(), "carol", auth.Binding{Role: auth.RoleViewer}), 100*time.Millisecond)
	defer ccancel()
	third := httptest.NewRecorder()
	s.Handler().ServeHTTP(third, httptest.NewRequestWithContext(cctx, http.MethodGet, "/v1/watch", nil))
	if third.Code != http.StatusOK {
		t.Errorf("carol's stream: %d %s", third.Code, third.Body)
	}
	cancel()
	wg.Wait()
	again, acancel := context.WithTimeout(bob, 100*time.Millisecond)
	defer acancel()
	fourth := httptest.NewRecorder()
	s.Handler().ServeHTTP(fourth, httptest.NewRequestWithContext(again, http.MethodGet, "/v1/watch", nil))
	if fourth.Code != http.StatusOK {
		t.Errorf("bob's stream once the first closed: %d %s", fourth.Code, fourth.Body)
	}
}

// notifyRecorder closes flushed at its first flush (the stream is open).
type notifyRecorder struct {
	*httptest.ResponseRecorder
	flushed chan struct{}
	once    sync.Once
}

func (r *notifyRecorder) Flush() {
	r.ResponseRecorder.Flush()
	r.once.Do(func() { close(r.flushed) })
}
