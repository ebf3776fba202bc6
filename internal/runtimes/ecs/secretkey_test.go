package ecs

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/runtimes"
)

// TestStaticKeyFromStoredSecret: a static key whose secret is a stored
// secret (Prodvana's accessKey.awsSecretAccessKey.secret) signs with the
// value Options.Secret reads; without a secret store (an agent), or when
// the version is missing, the runtime is not built and says why.
func TestStaticKeyFromStoredSecret(t *testing.T) {
	t.Parallel()
	cfg := &config.Runtime{Name: "ecs-key", AwsEcs: &config.AwsEcsRuntime{Region: "us-east-1", EcsCluster: "prod",
		AccessKey: &config.AwsAccessKey{AwsAccessKeyID: "AKIDEXAMPLE",
			AwsSecretAccessKey: config.AwsSecretValue{Secret: &config.SecretRef{Key: "aws-key", Version: "aws-key-1"}}}}}
	var asked []string
	opts := runtimes.Options{Secret: func(_ context.Context, key, version string) (string, error) {
		asked = append(asked, key+"@"+version)
		if version != "aws-key-1" {
			return "", errors.New("secret aws-key has no version " + version)
		}
		return "stored-secret-access-key", nil
	}}
	r, err := New(t.Context(), cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	creds, err := r.client.Options().Credentials.Retrieve(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if creds.AccessKeyID != "AKIDEXAMPLE" || creds.SecretAccessKey != "stored-secret-access-key" || strings.Join(asked, ",") != "aws-key@aws-key-1" {
		t.Errorf("credentials %s/%s after asking %v, want the stored secret's value", creds.AccessKeyID, creds.SecretAccessKey, asked)
	}

	if _, err := New(t.Context(), cfg, runtimes.Options{}); err == nil || !strings.Contains(err.Error(), "accessKey.awsSecretAccessKey.secret: stored secrets are read by the drover server") {
		t.Errorf("without a secret store: %v", err)
	}
	missing := *cfg.AwsEcs
	missing.AccessKey = &config.AwsAccessKey{AwsAccessKeyID: "AKIDEXAMPLE",
		AwsSecretAccessKey: config.AwsSecretValue{Secret: &config.SecretRef{Key: "aws-key", Version: "aws-key-7"}}}
	if _, err := New(t.Context(), &config.Runtime{Name: "ecs-key", AwsEcs: &missing}, opts); err == nil ||
		!strings.Contains(err.Error(), "runtime ecs-key: accessKey.awsSecretAccessKey.secret: secret aws-key has no version aws-key-7") {
		t.Errorf("a missing version: %v", err)
	}
}
