package sealing

import (
	"bytes"
	"errors"
	"testing"
)

// TestSealOpenRotate: a sealed value holds no plain text and opens again;
// values not sealed pass through; a keyring with a new key first seals
// with it and still opens what the old key sealed; one without the old key
// cannot; damage is detected.
func TestSealOpenRotate(t *testing.T) {
	oldKey, newKey := NewKey(), NewKey()
	old, err := ParseKeyring("# the first key\n" + oldKey + "\n")
	if err != nil {
		t.Fatal(err)
	}
	secret := []byte(`{"rawSecret":"hunter2-very-secret"}`)
	sealed, err := old.Seal(secret)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(sealed, []byte("hunter2")) {
		t.Fatal("the sealed value holds the secret")
	}
	again, _ := old.Seal(secret)
	if bytes.Equal(sealed, again) {
		t.Error("two seals of one value are equal (no fresh data key or nonce)")
	}
	if got, err := old.Open(sealed); err != nil || !bytes.Equal(got, secret) {
		t.Fatalf("open: %q %v", got, err)
	}
	if got, err := old.Open([]byte(`{"plain":true}`)); err != nil || string(got) != `{"plain":true}` {
		t.Errorf("a value stored before sealing: %q %v", got, err)
	}
	if v, err := old.Seal(nil); v != nil || err != nil {
		t.Errorf("nil sealed as %v %v", v, err)
	}
	rotated, err := ParseKeyring(newKey + "\n" + oldKey)
	if err != nil {
		t.Fatal(err)
	}
	if s, cur := rotated.IsSealed(sealed); !s || cur {
		t.Errorf("IsSealed after rotation: %v %v, want sealed, not by the current key", s, cur)
	}
	if got, err := rotated.Open(sealed); err != nil || !bytes.Equal(got, secret) {
		t.Errorf("the rotated keyring opens the old value: %q %v", got, err)
	}
	resealed, _ := rotated.Seal(secret)
	if s, cur := rotated.IsSealed(resealed); !s || !cur {
		t.Errorf("IsSealed of a new seal: %v %v", s, cur)
	}
	onlyNew, _ := ParseKeyring(newKey)
	if _, err := onlyNew.Open(sealed); !errors.Is(err, ErrUnknownKey) {
		t.Errorf("a keyring without the old key: %v", err)
	}
	damaged := bytes.Clone(sealed)
	damaged[len(damaged)-1] ^= 1
	if _, err := old.Open(damaged); err == nil {
		t.Error("a damaged value opened")
	}
	for _, bad := range []string{"", "# only a comment", "not base64!", "c2hvcnQ="} {
		if _, err := ParseKeyring(bad); err == nil {
			t.Errorf("keyring %q accepted", bad)
		}
	}
}
