package storetest

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/drover-dev/drover/internal/store"
)

// secretTests are the conformance cases of secrets.
var secretTests = []struct {
	name string
	fn   func(t *testing.T, s store.Store)
}{
	{"Secret/PutGetList", testSecretPutGetList},
	{"Secret/Invalid", testSecretInvalid},
	{"Secret/Delete", testSecretDelete},
	{"Secret/ConcurrentPutsDistinctVersions", testSecretConcurrent},
}

func testSecretPutGetList(t *testing.T, s store.Store) {
	ctx := t.Context()
	a, err := s.PutSecret(ctx, store.Secret{Key: "db-password", Value: []byte("hunter2"), CreatedBy: "alice", CreatedAt: ts(1)})
	must(t, err)
	same(t, a, store.Secret{Key: "db-password", Version: 0, CreatedBy: "alice", CreatedAt: ts(1)}, "first version")
	if a.VersionName() != "db-password-0" {
		t.Errorf("version name %q, want db-password-0", a.VersionName())
	}
	b, err := s.PutSecret(ctx, store.Secret{Key: "db-password", Value: []byte("correct horse\x00\xff"), CreatedBy: "bob"})
	must(t, err)
	if b.Version != 1 || b.CreatedAt.IsZero() || b.Value != nil {
		t.Errorf("second version %+v, want version 1 with a creation time and no value", b)
	}
	_, err = s.PutSecret(ctx, store.Secret{Key: "api.token", Value: []byte("t0k3n"), CreatedAt: ts(3)})
	must(t, err)
	got, err := s.GetSecret(ctx, "db-password", 0)
	must(t, err)
	same(t, got, store.Secret{Key: "db-password", Version: 0, Value: []byte("hunter2"), CreatedBy: "alice", CreatedAt: ts(1)}, "get version 0")
	got, err = s.GetSecret(ctx, "db-password", 1)
	must(t, err)
	if !bytes.Equal(got.Value, []byte("correct horse\x00\xff")) || got.CreatedBy != "bob" {
		t.Errorf("get version 1: %+v, want the bytes as given", got)
	}
	_, err = s.GetSecret(ctx, "db-password", 2)
	wantErr(t, err, store.ErrNotFound, "a version not made yet")
	_, err = s.GetSecret(ctx, "nothing", 0)
	wantErr(t, err, store.ErrNotFound, "an unknown key")
	list, err := s.ListSecrets(ctx)
	must(t, err)
	var names []string
	for _, sec := range list {
		if sec.Value != nil {
			t.Errorf("listed %s with its value", sec.VersionName())
		}
		names = append(names, sec.VersionName())
	}
	if !slices.Equal(names, []string{"api.token-0", "db-password-0", "db-password-1"}) {
		t.Errorf("list %q, want by key and version", names)
	}
	same(t, list[1], store.Secret{Key: "db-password", Version: 0, CreatedBy: "alice", CreatedAt: ts(1)}, "listed version")
}

func testSecretInvalid(t *testing.T, s store.Store) {
	ctx := t.Context()
	for _, sec := range []store.Secret{
		{Key: "", Value: []byte("v")},
		{Key: "-lead", Value: []byte("v")},
		{Key: "has space", Value: []byte("v")},
		{Key: "empty"},
		{Key: "big", Value: bytes.Repeat([]byte("x"), store.MaxSecretSize+1)},
	} {
		_, err := s.PutSecret(ctx, sec)
		if err == nil || errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrConflict) {
			t.Errorf("put %q (%d bytes): %v, want a validation error", sec.Key, len(sec.Value), err)
		}
	}
	list, err := s.ListSecrets(ctx)
	must(t, err)
	if len(list) != 0 {
		t.Errorf("refused puts stored %+v", list)
	}
}

func testSecretDelete(t *testing.T, s store.Store) {
	ctx := t.Context()
	for _, v := range []string{"one", "two", "three"} {
		_, err := s.PutSecret(ctx, store.Secret{Key: "k", Value: []byte(v)})
		must(t, err)
	}
	_, err := s.PutSecret(ctx, store.Secret{Key: "other", Value: []byte("kept")})
	must(t, err)
	n, err := s.DeleteSecret(ctx, "k", 1)
	must(t, err)
	if n != 1 {
		t.Errorf("delete one version: %d deleted, want 1", n)
	}
	_, err = s.GetSecret(ctx, "k", 1)
	wantErr(t, err, store.ErrNotFound, "a deleted version")
	_, err = s.DeleteSecret(ctx, "k", 1)
	wantErr(t, err, store.ErrNotFound, "deleting a deleted version again")
	if err != nil && strings.Contains(err.Error(), "two") {
		t.Errorf("the error shows the value: %v", err)
	}
	n, err = s.DeleteSecret(ctx, "k", store.AllSecretVersions)
	must(t, err)
	if n != 2 {
		t.Errorf("delete the key: %d deleted, want the 2 versions left", n)
	}
	_, err = s.DeleteSecret(ctx, "k", store.AllSecretVersions)
	wantErr(t, err, store.ErrNotFound, "deleting a deleted key again")
	// A version's number is never given again: a reference k-0 does not
	// come to mean a new value.
	again, err := s.PutSecret(ctx, store.Secret{Key: "k", Value: []byte("four")})
	must(t, err)
	if again.Version != 3 {
		t.Errorf("a put after the key was deleted made version %d, want 3", again.Version)
	}
	_, err = s.GetSecret(ctx, "k", 0)
	wantErr(t, err, store.ErrNotFound, "version 0 after the key was deleted")
	list, err := s.ListSecrets(ctx)
	must(t, err)
	var names []string
	for _, sec := range list {
		names = append(names, sec.VersionName())
	}
	if !slices.Equal(names, []string{"k-3", "other-0"}) {
		t.Errorf("list %q, want k-3 and other-0", names)
	}
}

func testSecretConcurrent(t *testing.T, s store.Store) {
	ctx := t.Context()
	const n = 8
	versions := make([]int64, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			sec, err := s.PutSecret(ctx, store.Secret{Key: "shared", Value: []byte("abcdefgh"[i : i+1])})
			versions[i], errs[i] = sec.Version, err
		})
	}
	wg.Wait()
	must(t, errors.Join(errs...))
	slices.Sort(versions)
	for i, v := range versions {
		if v != int64(i) {
			t.Fatalf("concurrent puts made versions %v, want 0 to %d once each", versions, n-1)
		}
	}
	for i := range n {
		got, err := s.GetSecret(ctx, "shared", int64(i))
		must(t, err)
		if len(got.Value) != 1 {
			t.Errorf("version %d: %q", i, got.Value)
		}
	}
}
