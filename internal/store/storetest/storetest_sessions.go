package storetest

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/store"
)

// sessionTests are the conformance cases of sessions.
var sessionTests = []struct {
	name string
	fn   func(t *testing.T, s store.Store)
}{
	{"Session/CreateGetList", testSessionCreateGetList},
	{"Session/Invalid", testSessionInvalid},
	{"Session/Revoke", testSessionRevoke},
	{"Session/RevokeOf", testSessionRevokeOf},
	{"Session/Touch", testSessionTouch},
	{"Session/DeleteEnded", testSessionDeleteEnded},
	{"Session/ConcurrentRevokesOneWinner", testSessionRevokeConcurrent},
}

// session is a session of who with every field set, its times in tz: created
// at ts(i), expiring at ts(1000+i).
func session(who string, i int) store.Session {
	return store.Session{
		Hash: tokenHash(fmt.Sprintf("session-%s-%d", who, i)), Identity: who,
		Subject: "https://idp.example.com#" + who + "-sub", Roles: []string{"viewer", "deployer@shop", "approver@shop/prod"},
		Groups: []string{"platform", "shop-devs ü"}, Via: "device", Source: "192.0.2.7:51234",
		CreatedAt: ts(i), ExpiresAt: ts(1000 + i),
	}
}

func testSessionCreateGetList(t *testing.T, s store.Store) {
	ctx := t.Context()
	a, err := s.CreateSession(ctx, session("alice", 1))
	must(t, err)
	if a.ID == 0 {
		t.Fatal("created session has no id")
	}
	want := session("alice", 1)
	want.ID = a.ID
	same(t, a, want, "created session")
	got, err := s.SessionByHash(ctx, want.Hash)
	must(t, err)
	same(t, got, want, "session by hash")
	// A second session of one identity (a laptop and a browser), with the
	// creation time left to the store and no roles or groups.
	before := time.Now().Add(-time.Second)
	b, err := s.CreateSession(ctx, store.Session{Hash: tokenHash("alice, browser"), Identity: "alice", Via: "browser", ExpiresAt: ts(2000)})
	must(t, err)
	if b.ID <= a.ID || b.CreatedAt.Before(before) || b.CreatedAt.Location() != time.UTC {
		t.Errorf("second session: id %d after %d, created %v; want a higher id and a UTC creation time", b.ID, a.ID, b.CreatedAt)
	}
	got, err = s.SessionByHash(ctx, b.Hash)
	must(t, err)
	same(t, got, b, "second session by hash")
	_, err = s.SessionByHash(ctx, tokenHash("nobody"))
	wantErr(t, err, store.ErrNotFound, "unknown hash")
	// Any session with the hash of another is refused, whoever it is of.
	dup := session("bob", 3)
	dup.Hash = want.Hash
	_, err = s.CreateSession(ctx, dup)
	wantErr(t, err, store.ErrConflict, "a second session of one hash")
	if err != nil && strings.Contains(err.Error(), want.Hash) {
		t.Errorf("the error repeats the hash: %v", err)
	}
	list, err := s.ListSessions(ctx)
	must(t, err)
	if len(list) != 2 || list[0].ID != a.ID || list[1].ID != b.ID {
		t.Fatalf("list %+v, want alice's two sessions by id", list)
	}
	same(t, list[0], want, "listed session")
	same(t, list[1], b, "second listed session")
}

func testSessionInvalid(t *testing.T, s store.Store) {
	ctx := t.Context()
	ok := session("alice", 1)
	for what, change := range map[string]func(*store.Session){
		"no hash":     func(ss *store.Session) { ss.Hash = "" },
		"no identity": func(ss *store.Session) { ss.Identity = "" },
		"no expiry":   func(ss *store.Session) { ss.ExpiresAt = time.Time{} },
	} {
		ss := ok
		change(&ss)
		_, err := s.CreateSession(ctx, ss)
		wantInvalid(t, err, what)
	}
	list, err := s.ListSessions(ctx)
	must(t, err)
	if len(list) != 0 {
		t.Errorf("refused sessions were stored: %+v", list)
	}
}

func testSessionRevoke(t *testing.T, s store.Store) {
	ctx := t.Context()
	first, err := s.CreateSession(ctx, session("alice", 1))
	must(t, err)
	other, err := s.CreateSession(ctx, session("alice", 2))
	must(t, err)
	before := time.Now().Add(-time.Second)
	r, err := s.RevokeSession(ctx, first.ID, "alice ü")
	must(t, err)
	if r.ID != first.ID || r.Hash != first.Hash || r.RevokedBy != "alice ü" || r.RevokedAt.Before(before) || r.RevokedAt.Location() != time.UTC {
		t.Errorf("revoked %+v", r)
	}
	_, err = s.RevokeSession(ctx, first.ID, "alice")
	wantErr(t, err, store.ErrNotFound, "revoking a revoked session")
	_, err = s.RevokeSession(ctx, other.ID+1000, "alice")
	wantErr(t, err, store.ErrNotFound, "revoking an unknown session")
	got, err := s.SessionByHash(ctx, first.Hash)
	must(t, err)
	same(t, got, r, "revoked session by hash")
	got, err = s.SessionByHash(ctx, other.Hash)
	must(t, err)
	same(t, got, other, "the other session of the identity")
}

func testSessionRevokeOf(t *testing.T, s store.Store) {
	ctx := t.Context()
	var alice []store.Session
	live := func(who string, i int) store.Session {
		ss := session(who, i)
		ss.ExpiresAt = time.Now().Add(time.Hour).In(tz)
		return ss
	}
	for i := range 3 {
		ss, err := s.CreateSession(ctx, live("alice", i))
		must(t, err)
		alice = append(alice, ss)
	}
	bob, err := s.CreateSession(ctx, live("bob", 9))
	must(t, err)
	// An expired session of alice's is not counted, nor changed.
	expired, err := s.CreateSession(ctx, session("alice", 7))
	must(t, err)
	early, err := s.RevokeSession(ctx, alice[0].ID, "admin")
	must(t, err)
	before := time.Now().Add(-time.Second)
	n, err := s.RevokeSessionsOf(ctx, "alice", "security")
	must(t, err)
	if n != 2 {
		t.Errorf("revoked %d sessions of alice, want the 2 not revoked yet", n)
	}
	list, err := s.ListSessions(ctx)
	must(t, err)
	if len(list) != 5 {
		t.Fatalf("list %+v, want 5 sessions", list)
	}
	same(t, list[0], early, "the session revoked before")
	for _, ss := range list[1:3] {
		if ss.RevokedBy != "security" || ss.RevokedAt.Before(before) || ss.RevokedAt.Location() != time.UTC {
			t.Errorf("session %d of alice: revoked at %v by %q, want now by security", ss.ID, ss.RevokedAt, ss.RevokedBy)
		}
	}
	same(t, list[3], bob, "bob's session")
	same(t, list[4], expired, "alice's expired session")
	n, err = s.RevokeSessionsOf(ctx, "alice", "security")
	must(t, err)
	if n != 0 {
		t.Errorf("revoked %d sessions of alice again, want 0", n)
	}
	n, err = s.RevokeSessionsOf(ctx, "nobody", "security")
	must(t, err)
	if n != 0 {
		t.Errorf("revoked %d sessions of an unknown identity, want 0", n)
	}
}

func testSessionTouch(t *testing.T, s store.Store) {
	ctx := t.Context()
	ss, err := s.CreateSession(ctx, session("alice", 1))
	must(t, err)
	must(t, s.TouchSession(ctx, ss.ID, ts(50)))
	must(t, s.TouchSession(ctx, ss.ID, ts(40))) // earlier: ignored
	got, err := s.SessionByHash(ctx, ss.Hash)
	must(t, err)
	if !got.LastUsedAt.Equal(ts(50)) || got.LastUsedAt.Location() != time.UTC {
		t.Errorf("last used %v, want %v in UTC", got.LastUsedAt, ts(50))
	}
	must(t, s.TouchSession(ctx, ss.ID, ts(60))) // later: recorded
	got, err = s.SessionByHash(ctx, ss.Hash)
	must(t, err)
	if !got.LastUsedAt.Equal(ts(60)) {
		t.Errorf("last used %v, want %v", got.LastUsedAt, ts(60))
	}
	must(t, s.TouchSession(ctx, ss.ID+1000, ts(70))) // unknown: nothing to do
}

func testSessionDeleteEnded(t *testing.T, s store.Store) {
	ctx := t.Context()
	later := time.Now().Add(24 * time.Hour).In(tz)
	create := func(who string, expires time.Time) store.Session {
		t.Helper()
		ss := session(who, 1)
		ss.ExpiresAt = expires
		out, err := s.CreateSession(ctx, ss)
		must(t, err)
		return out
	}
	expired := create("expired", ts(10))  // expired before the first cut
	atCut := create("expires-at", ts(20)) // expires at the first cut: kept by it
	live := create("live", later)
	revoked := create("revoked", later) // revoked now, after the first cut
	_, err := s.RevokeSession(ctx, revoked.ID, "admin")
	must(t, err)
	n, err := s.DeleteEndedSessions(ctx, ts(20))
	must(t, err)
	if n != 1 {
		t.Errorf("deleted %d sessions ended before ts(20), want 1 (the expired one)", n)
	}
	_, err = s.SessionByHash(ctx, expired.Hash)
	wantErr(t, err, store.ErrNotFound, "the expired session after its deletion")
	list, err := s.ListSessions(ctx)
	must(t, err)
	if len(list) != 3 || list[0].ID != atCut.ID || list[1].ID != live.ID || list[2].ID != revoked.ID {
		t.Fatalf("list %+v, want the sessions not ended before the cut", list)
	}
	// A cut after the revocation (and before live's expiry) removes the
	// revoked session, which has not expired, and the one expired at ts(20).
	n, err = s.DeleteEndedSessions(ctx, time.Now().Add(time.Minute))
	must(t, err)
	if n != 2 {
		t.Errorf("deleted %d sessions, want 2 (the revoked one and the one expired at ts(20))", n)
	}
	list, err = s.ListSessions(ctx)
	must(t, err)
	if len(list) != 1 {
		t.Fatalf("list %+v, want the live session only", list)
	}
	same(t, list[0], live, "the live session")
	n, err = s.DeleteEndedSessions(ctx, time.Now().Add(time.Minute))
	must(t, err)
	if n != 0 {
		t.Errorf("deleted %d sessions again, want 0", n)
	}
}

func testSessionRevokeConcurrent(t *testing.T, s store.Store) {
	ctx := t.Context()
	ss, err := s.CreateSession(ctx, session("alice", 1))
	must(t, err)
	const n = 8
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { _, errs[i] = s.RevokeSession(ctx, ss.ID, fmt.Sprintf("admin-%d", i)) })
	}
	wg.Wait()
	won := 0
	for i, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, store.ErrNotFound):
			t.Errorf("revoke %d: %v, want success or ErrNotFound", i, err)
		}
	}
	if won != 1 {
		t.Errorf("%d concurrent revokes of one session succeeded, want 1", won)
	}
}
