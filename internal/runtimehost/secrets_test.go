package runtimehost

import (
	"strings"
	"testing"

	"github.com/drover-dev/drover/internal/store"
	"github.com/drover-dev/drover/internal/store/sqlite"
)

// TestStoredSecret: runtimes read a stored secret by its version name
// (KEY-N) through the host's store; a name of another form and a version
// that does not exist are errors that say what to look at.
func TestStoredSecret(t *testing.T) {
	t.Parallel()
	st, err := sqlite.Open(t.Context(), sqlite.MemoryPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	if _, err := st.PutSecret(t.Context(), store.Secret{Key: "aws-key", Value: []byte("v0")}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.PutSecret(t.Context(), store.Secret{Key: "aws-key", Value: []byte("v1")}); err != nil {
		t.Fatal(err)
	}
	get := storedSecret(st)
	if v, err := get(t.Context(), "aws-key", "aws-key-1"); err != nil || v != "v1" {
		t.Errorf("aws-key-1 = %q, %v; want v1", v, err)
	}
	for version, want := range map[string]string{
		"aws-key-7": "secret aws-key has no version aws-key-7",
		"latest":    `version "latest" is not a version of secret aws-key`,
	} {
		if _, err := get(t.Context(), "aws-key", version); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", version, err, want)
		}
	}
	var _ secretStore = st // the host's stores give their runtimes Options.Secret
}
