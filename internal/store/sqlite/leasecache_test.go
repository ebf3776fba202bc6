package sqlite

import (
	"errors"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/store"
)

// The lease cache follows every change of a token: a claim by another
// owner fences the old token at once, a request rolled back to its
// savepoint leaves the cache as it was, a token noted earlier in the same
// transaction counts, and a reopened store reads the file.
func TestLeaseCacheFollowsCommits(t *testing.T) {
	s, path := openTemp(t)
	ctx := t.Context()
	const key = "service/shop/web"
	write := func(token int64) error {
		return s.Write(ctx, &store.Batch{Fence: &store.Fence{Key: key, Token: token},
			Events: []store.Event{{Application: "shop", Service: "web", Type: "pushed", Message: "m"}}})
	}
	a, err := s.ClaimLease(ctx, key, "a", 20*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if err := write(a.Token); err != nil {
		t.Fatalf("write under the lease: %v", err)
	}
	time.Sleep(40 * time.Millisecond)
	b, err := s.ClaimLease(ctx, key, "b", time.Minute)
	if err != nil || b.Token == a.Token {
		t.Fatalf("claim after expiry: %+v %v", b, err)
	}
	if err := write(a.Token); !errors.Is(err, store.ErrFenced) {
		t.Errorf("write with the old token after another claim: %v, want fenced", err)
	}
	if err := write(b.Token); err != nil {
		t.Errorf("write with the new token: %v", err)
	}

	failed := errors.New("rolled back")
	if err := s.writeTx(ctx, func(tx *wtx) error {
		tx.noteLease(key, b.Token+10)
		return failed
	}); !errors.Is(err, failed) {
		t.Fatal(err)
	}
	if err := write(b.Token); err != nil {
		t.Errorf("a rolled-back note changed the cache: %v", err)
	}

	if err := s.writeTx(ctx, func(tx *wtx) error {
		tx.noteLease(key, b.Token+1)
		return checkFence(ctx, tx, &store.Fence{Key: key, Token: b.Token})
	}); !errors.Is(err, store.ErrFenced) {
		t.Errorf("a token changed earlier in the transaction: %v, want fenced", err)
	}
	if err := write(b.Token); err != nil {
		t.Errorf("after the refused transaction: %v", err)
	}
	if err := write(b.Token + 5); !errors.Is(err, store.ErrFenced) {
		t.Errorf("a token never given: %v, want fenced", err)
	}

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s2.Close() }()
	if err := s2.Write(ctx, &store.Batch{Fence: &store.Fence{Key: key, Token: a.Token}}); !errors.Is(err, store.ErrFenced) {
		t.Errorf("reopened, the old token: %v, want fenced", err)
	}
	if err := s2.Write(ctx, &store.Batch{Fence: &store.Fence{Key: key, Token: b.Token}}); err != nil {
		t.Errorf("reopened, the held token: %v", err)
	}
	if err := s2.Write(ctx, &store.Batch{Fence: &store.Fence{Key: "service/none", Token: 1}}); !errors.Is(err, store.ErrFenced) {
		t.Errorf("a lease never claimed: %v, want fenced", err)
	}
}
