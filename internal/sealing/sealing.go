// Package sealing encrypts what the store keeps that may hold secrets
// (config bodies, desired states' parameters and compiled forms) with
// envelope encryption: each value gets a data key of its own (AES-256-GCM),
// and the data key is kept wrapped by a key-encryption key of a keyring
// read from a file or the environment, never from the store. A keyring
// lists keys one per line: the first seals, every one opens, so a key is
// rotated by putting a new one first (drover admin reseal then seals what
// is stored with it, and the old key can go).
package sealing

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// magic starts every sealed value; a value without it is read as it is
// (stored before sealing was on).
var magic = []byte("\x00drover-sealed-v1\x00")

const (
	keySize   = 32
	idSize    = 8
	nonceSize = 12
	// wrappedSize is a data key sealed by a key-encryption key: the key
	// and GCM's tag.
	wrappedSize = keySize + 16
)

// ErrUnknownKey: a value was sealed with a key the keyring does not hold.
var ErrUnknownKey = errors.New("sealed with a key this keyring does not hold")

// Keyring holds key-encryption keys; the first seals.
type Keyring struct {
	keys []kek
}

type kek struct {
	id   [idSize]byte
	aead cipher.AEAD
}

// ParseKeyring reads a keyring: one base64 (standard) 32-byte key per line;
// blank lines and lines starting with # are skipped. The first key seals.
func ParseKeyring(text string) (*Keyring, error) {
	var k Keyring
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		raw, err := base64.StdEncoding.DecodeString(line)
		if err != nil || len(raw) != keySize {
			return nil, fmt.Errorf("keyring line %d: want a base64 32-byte key", i+1)
		}
		key, err := newKEK(raw)
		if err != nil {
			return nil, err
		}
		k.keys = append(k.keys, key)
	}
	if len(k.keys) == 0 {
		return nil, errors.New("the keyring holds no key")
	}
	return &k, nil
}

func newKEK(raw []byte) (kek, error) {
	block, err := aes.NewCipher(raw)
	if err != nil {
		return kek{}, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return kek{}, err
	}
	sum := sha256.Sum256(raw)
	var k kek
	copy(k.id[:], sum[:idSize])
	k.aead = aead
	return k, nil
}

// NewKey returns a new random key as a keyring line.
func NewKey() string {
	b := make([]byte, keySize)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return base64.StdEncoding.EncodeToString(b)
}

// KeyID names the key that seals (hex), for messages.
func (k *Keyring) KeyID() string { return hex.EncodeToString(k.keys[0].id[:]) }

// Seal encrypts plain with a new data key, wrapped by the first key. nil
// stays nil.
func (k *Keyring) Seal(plain []byte) ([]byte, error) {
	if plain == nil {
		return nil, nil
	}
	dek := make([]byte, keySize)
	_, _ = rand.Read(dek)
	block, err := aes.NewCipher(dek)
	if err != nil {
		return nil, err
	}
	data, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	kk := k.keys[0]
	out := make([]byte, 0, len(magic)+idSize+2*nonceSize+wrappedSize+len(plain)+16)
	out = append(out, magic...)
	out = append(out, kk.id[:]...)
	wrapNonce := make([]byte, nonceSize)
	_, _ = rand.Read(wrapNonce)
	out = append(out, wrapNonce...)
	out = kk.aead.Seal(out, wrapNonce, dek, kk.id[:])
	dataNonce := make([]byte, nonceSize)
	_, _ = rand.Read(dataNonce)
	out = append(out, dataNonce...)
	return data.Seal(out, dataNonce, plain, magic), nil
}

// IsSealed reports whether b is a sealed value, and whether the keyring's
// first key sealed it (then it needs no resealing).
func (k *Keyring) IsSealed(b []byte) (sealed, current bool) {
	if !bytes.HasPrefix(b, magic) || len(b) < len(magic)+idSize {
		return false, false
	}
	return true, bytes.Equal(b[len(magic):len(magic)+idSize], k.keys[0].id[:])
}

// Open decrypts a sealed value; a value that is not sealed is returned as
// it is.
func (k *Keyring) Open(b []byte) ([]byte, error) {
	if !bytes.HasPrefix(b, magic) {
		return b, nil
	}
	rest := b[len(magic):]
	if len(rest) < idSize+nonceSize+wrappedSize+nonceSize+16 {
		return nil, errors.New("sealed value: truncated")
	}
	id, rest := rest[:idSize], rest[idSize:]
	var kk *kek
	for i := range k.keys {
		if bytes.Equal(k.keys[i].id[:], id) {
			kk = &k.keys[i]
			break
		}
	}
	if kk == nil {
		return nil, fmt.Errorf("key %s: %w", hex.EncodeToString(id), ErrUnknownKey)
	}
	wrapNonce, rest := rest[:nonceSize], rest[nonceSize:]
	wrapped, rest := rest[:wrappedSize], rest[wrappedSize:]
	dek, err := kk.aead.Open(nil, wrapNonce, wrapped, id)
	if err != nil {
		return nil, fmt.Errorf("sealed value: its data key does not open: %w", err)
	}
	block, err := aes.NewCipher(dek)
	if err != nil {
		return nil, err
	}
	data, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	dataNonce, ct := rest[:nonceSize], rest[nonceSize:]
	plain, err := data.Open(nil, dataNonce, ct, magic)
	if err != nil {
		return nil, fmt.Errorf("sealed value: damaged: %w", err)
	}
	return plain, nil
}
