package runtimehost

import (
	"context"
	"errors"
	"fmt"

	"github.com/drover-dev/drover/internal/store"
)

// secretStore is what a host reads stored secrets from (drover secrets):
// a store.Store is one. A host whose store has none (an agent's) gives its
// runtimes no Options.Secret.
type secretStore interface {
	GetSecret(ctx context.Context, key string, version int64) (store.Secret, error)
}

// storedSecret is Options.Secret over st: version is a version name
// (KEY-N).
func storedSecret(st secretStore) func(ctx context.Context, key, version string) (string, error) {
	return func(ctx context.Context, key, version string) (string, error) {
		n, ok := store.ParseSecretVersion(key, version)
		if !ok {
			return "", fmt.Errorf("version %q is not a version of secret %s: versions are named %s-N (drover secrets list shows them)", version, key, key)
		}
		sec, err := st.GetSecret(ctx, key, n)
		switch {
		case errors.Is(err, store.ErrNotFound):
			return "", fmt.Errorf("secret %s has no version %s (drover secrets list shows them)", key, version)
		case err != nil:
			return "", fmt.Errorf("read secret %s: %w", version, err)
		}
		return string(sec.Value), nil
	}
}
