package storetest

import (
	"context"
	"testing"

	"github.com/drover-dev/drover/internal/sealing"
	"github.com/drover-dev/drover/internal/store"
)

// Resealer is a store whose sealed values can be sealed again with its
// keyring's first key (both stores' Reseal).
type Resealer interface {
	store.Store
	Reseal(ctx context.Context) (int, error)
}

// Reseal checks a store's key rotation: after a new key goes first in the
// keyring, Reseal seals every value with it (and then has nothing left to
// do), so a keyring of the new key alone reads the store. open opens the
// same store each time, sealing with keys.
func Reseal(t *testing.T, open func(keys *sealing.Keyring) (Resealer, error)) {
	t.Helper()
	ctx := t.Context()
	oldKey, newKey := sealing.NewKey(), sealing.NewKey()
	ring := func(text string) *sealing.Keyring {
		k, err := sealing.ParseKeyring(text)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	s, err := open(ring(oldKey))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.PutConfig(ctx, store.ConfigObject{Kind: "service", Name: "shop/web", Body: []byte(`{"a":1}`), Hash: "h1"}); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateDesiredState(ctx, store.DesiredState{ID: "ds-1", Application: "shop", Service: "web", Compiled: []byte(`{"c":1}`), Params: []byte(`[1]`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutSecret(ctx, store.Secret{Key: "db", Value: []byte("hunter2")}); err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	if s, err = open(ring(newKey + "\n" + oldKey)); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Reseal(ctx); err != nil || n != 4 {
		t.Fatalf("reseal: %d %v, want 4 values", n, err)
	}
	if n, err := s.Reseal(ctx); err != nil || n != 0 {
		t.Fatalf("reseal again: %d %v, want nothing left", n, err)
	}
	_ = s.Close()
	if s, err = open(ring(newKey)); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	c, err := s.GetConfig(ctx, "service", "shop/web")
	if err != nil || string(c.Body) != `{"a":1}` {
		t.Errorf("config with the new key alone: %q %v", c.Body, err)
	}
	ds, err := s.GetDesiredState(ctx, "ds-1")
	if err != nil || string(ds.Compiled) != `{"c":1}` || string(ds.Params) != `[1]` {
		t.Errorf("desired state with the new key alone: %+v %v", ds, err)
	}
	sec, err := s.GetSecret(ctx, "db", 0)
	if err != nil || string(sec.Value) != "hunter2" {
		t.Errorf("secret with the new key alone: %q %v", sec.Value, err)
	}
}
