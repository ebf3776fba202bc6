package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/store"
)

// identityTests are the conformance cases of API tokens and the audit log.
var identityTests = []struct {
	name string
	fn   func(t *testing.T, s store.Store)
}{
	{"APIToken/CreateGetList", testTokenCreateGetList},
	{"APIToken/Conflicts", testTokenConflicts},
	{"APIToken/RevokeThenReuseName", testTokenRevoke},
	{"APIToken/Touch", testTokenTouch},
	{"APIToken/Invalid", testTokenInvalid},
	{"APIToken/ConcurrentCreatesOneWinner", testTokenConcurrent},
	{"Audit/AppendList", testAuditAppendList},
	{"Audit/Filter", testAuditFilter},
	{"Audit/Invalid", testAuditInvalid},
}

// apiToken is a token with roles, an expiry and times in tz.
func apiToken(name string, i int) store.APIToken {
	return store.APIToken{
		Name: name, Hash: tokenHash(fmt.Sprintf("api-%s-%d", name, i)),
		Roles:     []string{"viewer", "deployer@shop", "approver@shop/prod"},
		CreatedBy: "admin ü", CreatedAt: ts(i), ExpiresAt: ts(1000 + i),
	}
}

func testTokenCreateGetList(t *testing.T, s store.Store) {
	ctx := t.Context()
	a, err := s.CreateAPIToken(ctx, apiToken("ci", 1))
	must(t, err)
	if a.ID == 0 {
		t.Fatal("created token has no id")
	}
	want := apiToken("ci", 1)
	want.ID = a.ID
	same(t, a, want, "created token")
	b, err := s.CreateAPIToken(ctx, store.APIToken{Name: "alice", Hash: tokenHash("alice")})
	must(t, err)
	if b.ID <= a.ID || b.CreatedAt.IsZero() || b.CreatedAt.Location() != time.UTC {
		t.Errorf("second token: id %d after %d, created %v; want a higher id and a UTC creation time", b.ID, a.ID, b.CreatedAt)
	}
	got, err := s.APITokenByHash(ctx, want.Hash)
	must(t, err)
	same(t, got, want, "token by hash")
	_, err = s.APITokenByHash(ctx, tokenHash("nobody"))
	wantErr(t, err, store.ErrNotFound, "unknown hash")
	list, err := s.ListAPITokens(ctx)
	must(t, err)
	if len(list) != 2 || list[0].Name != "ci" || list[1].Name != "alice" {
		t.Fatalf("list %+v, want ci then alice", list)
	}
	same(t, list[0], want, "listed token")
}

func testTokenConflicts(t *testing.T, s store.Store) {
	ctx := t.Context()
	_, err := s.CreateAPIToken(ctx, apiToken("ci", 1))
	must(t, err)
	_, err = s.CreateAPIToken(ctx, apiToken("ci", 2))
	wantErr(t, err, store.ErrConflict, "a second live token of one name")
	other := apiToken("other", 3)
	other.Hash = apiToken("ci", 1).Hash
	_, err = s.CreateAPIToken(ctx, other)
	wantErr(t, err, store.ErrConflict, "a second token of one hash")
	list, err := s.ListAPITokens(ctx)
	must(t, err)
	if len(list) != 1 {
		t.Errorf("refused tokens were stored: %+v", list)
	}
}

func testTokenRevoke(t *testing.T, s store.Store) {
	ctx := t.Context()
	first, err := s.CreateAPIToken(ctx, apiToken("ci", 1))
	must(t, err)
	before := time.Now().Add(-time.Second)
	r, err := s.RevokeAPIToken(ctx, "ci", "alice")
	must(t, err)
	if r.ID != first.ID || r.RevokedBy != "alice" || r.RevokedAt.Before(before) || r.RevokedAt.Location() != time.UTC {
		t.Errorf("revoked %+v", r)
	}
	_, err = s.RevokeAPIToken(ctx, "ci", "alice")
	wantErr(t, err, store.ErrNotFound, "revoking a revoked token")
	_, err = s.RevokeAPIToken(ctx, "nobody", "alice")
	wantErr(t, err, store.ErrNotFound, "revoking an unknown token")
	got, err := s.APITokenByHash(ctx, first.Hash)
	must(t, err)
	same(t, got, r, "revoked token by hash")
	// The name is free again; the hash is not.
	second, err := s.CreateAPIToken(ctx, apiToken("ci", 2))
	must(t, err)
	if second.ID == first.ID {
		t.Error("the new token has the revoked one's id")
	}
	again := apiToken("ci-2", 3)
	again.Hash = first.Hash
	_, err = s.CreateAPIToken(ctx, again)
	wantErr(t, err, store.ErrConflict, "a revoked token's hash given again")
	list, err := s.ListAPITokens(ctx)
	must(t, err)
	if len(list) != 2 || list[0].RevokedAt.IsZero() || !list[1].RevokedAt.IsZero() {
		t.Errorf("list %+v, want the revoked token and the new one", list)
	}
}

func testTokenTouch(t *testing.T, s store.Store) {
	ctx := t.Context()
	tok, err := s.CreateAPIToken(ctx, apiToken("ci", 1))
	must(t, err)
	must(t, s.TouchAPIToken(ctx, tok.ID, ts(50)))
	must(t, s.TouchAPIToken(ctx, tok.ID, ts(40))) // earlier: ignored
	got, err := s.APITokenByHash(ctx, tok.Hash)
	must(t, err)
	if !got.LastUsedAt.Equal(ts(50)) || got.LastUsedAt.Location() != time.UTC {
		t.Errorf("last used %v, want %v in UTC", got.LastUsedAt, ts(50))
	}
	must(t, s.TouchAPIToken(ctx, tok.ID+1000, ts(60))) // unknown: nothing to do
}

func testTokenInvalid(t *testing.T, s store.Store) {
	ctx := t.Context()
	_, err := s.CreateAPIToken(ctx, store.APIToken{Hash: tokenHash("x")})
	wantInvalid(t, err, "no name")
	_, err = s.CreateAPIToken(ctx, store.APIToken{Name: "x"})
	wantInvalid(t, err, "no hash")
}

func testTokenConcurrent(t *testing.T, s store.Store) {
	ctx := t.Context()
	const n = 8
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { _, errs[i] = s.CreateAPIToken(ctx, apiToken("ci", i)) })
	}
	wg.Wait()
	won := 0
	for i, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, store.ErrConflict):
			t.Errorf("create %d: %v, want success or ErrConflict", i, err)
		}
	}
	if won != 1 {
		t.Errorf("%d concurrent creates of one name succeeded, want 1", won)
	}
}

// auditRecord is a record with every field set, its time in tz.
func auditRecord(app, who string, i int) store.AuditRecord {
	return store.AuditRecord{
		Time: ts(i), Identity: who, IdentityKind: "token", Source: "192.0.2.7:51234",
		Action: "POST /v1/apps/{app}/services/{svc}:approve", Application: app, Service: "web", ReleaseChannel: "prod",
		Target: "approval", Status: 403, Outcome: "permission_denied", Message: "bob lacks permission \"approve\" ✗",
	}
}

func testAuditAppendList(t *testing.T, s store.Store) {
	ctx := t.Context()
	var last int64
	for i := range 3 {
		seq, err := s.AppendAudit(ctx, auditRecord("shop", "bob", i))
		must(t, err)
		if seq <= last {
			t.Fatalf("seq %d after %d", seq, last)
		}
		last = seq
	}
	seq, err := s.AppendAudit(ctx, store.AuditRecord{Identity: "alice", Action: "POST /v1/tokens", Outcome: "ok", Status: 200})
	must(t, err)
	got, err := s.ListAudit(ctx, store.AuditFilter{})
	must(t, err)
	if len(got) != 4 {
		t.Fatalf("%d records, want 4", len(got))
	}
	want := auditRecord("shop", "bob", 0)
	want.Seq = got[0].Seq
	same(t, got[0], want, "audit record")
	if got[3].Seq != seq || got[3].Time.IsZero() || got[3].Time.Location() != time.UTC {
		t.Errorf("last record %+v: want seq %d and its time set in UTC", got[3], seq)
	}
}

func testAuditFilter(t *testing.T, s store.Store) {
	ctx := t.Context()
	for _, r := range []store.AuditRecord{auditRecord("shop", "bob", 0), auditRecord("blog", "bob", 1), auditRecord("shop", "alice", 2), auditRecord("shop", "bob", 3)} {
		_, err := s.AppendAudit(ctx, r)
		must(t, err)
	}
	count := func(f store.AuditFilter) int {
		t.Helper()
		got, err := s.ListAudit(ctx, f)
		must(t, err)
		return len(got)
	}
	all, err := s.ListAudit(ctx, store.AuditFilter{})
	must(t, err)
	for _, tc := range []struct {
		f    store.AuditFilter
		want int
	}{
		{store.AuditFilter{Application: "shop"}, 3},
		{store.AuditFilter{Identity: "bob"}, 3},
		{store.AuditFilter{Application: "shop", Identity: "bob"}, 2},
		{store.AuditFilter{Since: ts(2)}, 2},
		{store.AuditFilter{Since: ts(2).Add(time.Nanosecond)}, 1},
		{store.AuditFilter{AfterSeq: all[1].Seq}, 2},
		{store.AuditFilter{Limit: 3}, 3},
		{store.AuditFilter{Application: "none"}, 0},
	} {
		if got := count(tc.f); got != tc.want {
			t.Errorf("filter %+v: %d records, want %d", tc.f, got, tc.want)
		}
	}
}

func testAuditInvalid(t *testing.T, s store.Store) {
	ctx := t.Context()
	for _, r := range []store.AuditRecord{
		{Identity: "a", Outcome: "ok"},
		{Action: "POST /v1/x", Outcome: "ok"},
		{Action: "POST /v1/x", Identity: "a"},
	} {
		_, err := s.AppendAudit(ctx, r)
		wantInvalid(t, err, fmt.Sprintf("audit record %+v", r))
	}
}
