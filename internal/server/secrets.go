package server

import (
	"context"
	"errors"
	"strings"
	"unicode/utf8"

	apiv1 "github.com/drover-dev/drover/api/v1"
	"github.com/drover-dev/drover/internal/store"
)

// The secrets drover keeps (drover secrets set|list|delete), as Prodvana's
// secret store: each set of a key makes a new version, KEY-0, KEY-1, ...,
// which configs reference as secret{key, version}. The server seals values
// at rest (the store's keyring), resolves references at push (secretref.go)
// and never answers a value: lists give keys, versions, who and when.

func (s *Server) setSecret(ctx context.Context, key string, req apiv1.SetSecretRequest) (*apiv1.SecretVersion, error) {
	noteAudit(ctx, "secret "+key)
	if err := store.CheckSecretKey(key); err != nil {
		return nil, statusError(apiv1.CodeInvalidArgument, err)
	}
	switch {
	case req.Value == "":
		return nil, errorf(apiv1.CodeInvalidArgument, "secret %s: the value is empty", key)
	case len(req.Value) > store.MaxSecretSize:
		return nil, errorf(apiv1.CodeInvalidArgument, "secret %s: the value has %d bytes, more than %d", key, len(req.Value), store.MaxSecretSize)
	case !utf8.ValidString(req.Value) || strings.ContainsRune(req.Value, 0):
		// Values reach commands' and containers' environments, which
		// hold text without NUL bytes.
		return nil, errorf(apiv1.CodeInvalidArgument, "secret %s: the value must be UTF-8 text without NUL bytes (it is given to programs as an environment variable)", key)
	}
	sec, err := s.store.PutSecret(ctx, store.Secret{Key: key, Value: []byte(req.Value), CreatedBy: actor(ctx), CreatedAt: s.now()})
	if err != nil {
		return nil, err
	}
	noteAudit(ctx, "secret "+sec.VersionName())
	v := secretVersion(sec)
	return &v, nil
}

func (s *Server) listSecrets(ctx context.Context) (*apiv1.SecretList, error) {
	list, err := s.store.ListSecrets(ctx)
	if err != nil {
		return nil, err
	}
	out := &apiv1.SecretList{Secrets: []apiv1.SecretInfo{}}
	for _, sec := range list {
		if n := len(out.Secrets); n == 0 || out.Secrets[n-1].Key != sec.Key {
			out.Secrets = append(out.Secrets, apiv1.SecretInfo{Key: sec.Key})
		}
		info := &out.Secrets[len(out.Secrets)-1]
		info.Versions = append(info.Versions, secretVersion(sec))
		info.Latest = sec.VersionName()
	}
	return out, nil
}

func (s *Server) deleteSecret(ctx context.Context, key string, req apiv1.DeleteSecretRequest) (*apiv1.DeleteSecretResponse, error) {
	version := store.AllSecretVersions
	if req.Version != "" {
		noteAudit(ctx, "secret "+req.Version)
		n, ok := store.ParseSecretVersion(key, req.Version)
		if !ok {
			return nil, errorf(apiv1.CodeInvalidArgument, "version %q is not a version of secret %s: versions are named %s-N (drover secrets list shows them)", req.Version, key, key)
		}
		version = n
	} else {
		noteAudit(ctx, "secret "+key)
	}
	// The versions deleted, named from the list before (a concurrent put
	// makes a version after them, which is kept).
	list, err := s.store.ListSecrets(ctx)
	if err != nil {
		return nil, err
	}
	_, err = s.store.DeleteSecret(ctx, key, version)
	if errors.Is(err, store.ErrNotFound) {
		if req.Version != "" {
			return nil, errorf(apiv1.CodeNotFound, "secret %s has no version %s (drover secrets list shows them)", key, req.Version)
		}
		return nil, errorf(apiv1.CodeNotFound, "no secret %s (drover secrets list shows them)", key)
	}
	if err != nil {
		return nil, err
	}
	out := &apiv1.DeleteSecretResponse{Key: key, Deleted: []string{}}
	for _, sec := range list {
		if sec.Key == key && (version == store.AllSecretVersions || sec.Version == version) {
			out.Deleted = append(out.Deleted, sec.VersionName())
		}
	}
	return out, nil
}

// secretVersion is what the API shows of a version of a secret: never its
// value.
func secretVersion(sec store.Secret) apiv1.SecretVersion {
	return apiv1.SecretVersion{Key: sec.Key, Version: sec.VersionName(), CreatedBy: sec.CreatedBy, CreatedAt: sec.CreatedAt}
}
