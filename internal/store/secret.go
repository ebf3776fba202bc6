package store

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Secret is one version of a secret kept by drover (drover secrets set), as
// Prodvana's secret store keeps them: each set of a key makes a new version,
// numbered from 0 and named KEY-N ("db-password-0"), which configs reference
// as secret{key, version}. A version's value never changes; a deleted
// version's number is never given again, so a reference never comes to mean
// another value.
type Secret struct {
	Key     string `json:"key"`
	Version int64  `json:"version"`
	// Value is the secret (sealed at rest by the store's sealer; nil in
	// lists).
	Value     []byte    `json:"value,omitempty"`
	CreatedBy string    `json:"createdBy,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
}

// VersionName is the version's name, KEY-N, as references give it.
func (s Secret) VersionName() string { return SecretVersionName(s.Key, s.Version) }

// SecretVersionName names version n of key: KEY-N.
func SecretVersionName(key string, n int64) string { return key + "-" + strconv.FormatInt(n, 10) }

// ParseSecretVersion reads the number of a version name of key (KEY-N); it
// reports false for a name that is not one of key's.
func ParseSecretVersion(key, name string) (int64, bool) {
	rest, ok := strings.CutPrefix(name, key+"-")
	if !ok || rest == "" || (len(rest) > 1 && rest[0] == '0') {
		return 0, false
	}
	n, err := strconv.ParseInt(rest, 10, 64)
	if err != nil || n < 0 {
		return 0, false
	}
	return n, true
}

// secretKeyRE is what a secret's key may be: letters, digits, '_', '.' and
// '-', starting with a letter or digit, at most 128 characters.
var secretKeyRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)

// CheckSecretKey says what is wrong with a secret's key, or nil.
func CheckSecretKey(key string) error {
	if !secretKeyRE.MatchString(key) {
		return fmt.Errorf("secret key %q: use 1 to 128 letters, digits and _ . - (starting with a letter or digit)", key)
	}
	return nil
}

// MaxSecretSize bounds a secret's value.
const MaxSecretSize = 64 << 10

// CheckPut says what a secret to put lacks: a valid key and a value of 1
// byte to MaxSecretSize.
func (s Secret) CheckPut() error {
	if err := CheckSecretKey(s.Key); err != nil {
		return fmt.Errorf("put secret: %w", err)
	}
	if len(s.Value) == 0 {
		return fmt.Errorf("put secret %s: the value is empty", s.Key)
	}
	if len(s.Value) > MaxSecretSize {
		return fmt.Errorf("put secret %s: the value has %d bytes, more than %d", s.Key, len(s.Value), MaxSecretSize)
	}
	return nil
}

// AllSecretVersions asks DeleteSecret for every version of a key.
const AllSecretVersions int64 = -1

// UnsealSecret opens a kept secret's value.
func UnsealSecret(s Sealer, sec Secret) (Secret, error) {
	v, err := Unseal(s, sec.Value)
	if err != nil {
		return Secret{}, fmt.Errorf("secret %s: %w", sec.VersionName(), err)
	}
	sec.Value = v
	return sec, nil
}
