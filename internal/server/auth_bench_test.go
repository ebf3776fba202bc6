package server

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	apiv1 "github.com/drover-dev/drover/api/v1"
	"github.com/drover-dev/drover/internal/auth"
	"github.com/drover-dev/drover/internal/store"
)

// BenchmarkStatusAuth measures what authentication adds to GET status (the
// handler run in process, no network): with no check at all (the identity
// put in the context), with the server's local token, and with an API
// token or an OIDC session looked up in the store. It reports the median and the 99th
// percentile of the requests' durations.
//
//	go test ./internal/server -run - -bench StatusAuth -benchtime 20000x
func BenchmarkStatusAuth(b *testing.B) {
	s, _ := newPushedServer(b)
	created, err := s.createToken(local(context.Background()), apiv1.CreateTokenRequest{Name: "bench", Roles: []string{"viewer"}})
	if err != nil {
		b.Fatal(err)
	}
	const local = "drover_local-bench-token"
	hosts, err := auth.NewHosts(&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 7420})
	if err != nil {
		b.Fatal(err)
	}
	guard := func(a auth.Authenticator) http.Handler {
		return (&auth.Guard{Hosts: hosts, Authenticator: a}).Wrap(s.mux)
	}
	session := SessionPrefix + "bench-session-secret"
	if _, err := s.store.CreateSession(context.Background(), store.Session{Hash: auth.HashToken(session), Identity: "ann@example.com",
		Roles: []string{"viewer"}, Via: "device", ExpiresAt: time.Now().Add(time.Hour)}); err != nil {
		b.Fatal(err)
	}
	// As a server composes it (internal/daemon): local, sessions, tokens.
	chain := auth.Chain{auth.NewTokenAuthenticator(local, auth.LocalIdentity), NewSessionAuthenticator(s.store, nil), NewTokenAuthenticator(s.store, nil)}
	noAuth := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mux.ServeHTTP(w, r.WithContext(auth.WithIdentity(r.Context(), auth.LocalIdentity)))
	})
	for _, tc := range []struct {
		name  string
		h     http.Handler
		token string
	}{
		{"none", noAuth, ""},
		{"local-token", guard(chain), local},
		{"api-token", guard(chain), created.Token},
		{"oidc-session", guard(chain), session},
	} {
		b.Run(tc.name, func(b *testing.B) {
			durations := make([]time.Duration, 0, b.N)
			for b.Loop() {
				req := httptest.NewRequest(http.MethodGet, "http://127.0.0.1:7420/v1/apps/quickstart/services/web", nil)
				if tc.token != "" {
					req.Header.Set("Authorization", "Bearer "+tc.token)
				}
				rec := httptest.NewRecorder()
				began := time.Now()
				tc.h.ServeHTTP(rec, req)
				durations = append(durations, time.Since(began))
				if rec.Code != http.StatusOK {
					b.Fatalf("status %d %s", rec.Code, rec.Body)
				}
			}
			slices.Sort(durations)
			b.ReportMetric(float64(durations[len(durations)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(durations[len(durations)*99/100].Microseconds()), "p99-µs")
		})
	}
}
