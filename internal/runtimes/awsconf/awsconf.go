// Package awsconf builds the AWS SDK configuration of an AWS runtime kind
// (awsEcs, awsLambda): one region, a patient retryer, and the static access
// key when the runtime names one, else the SDK's default chain
// (environment, shared config, web identity, container or instance role).
package awsconf

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/runtimes"
)

// Load returns the SDK configuration of runtime name in region, with key's
// credentials when key is set (its secret a stored secret read through
// opts.Secret, or its rawSecret).
func Load(ctx context.Context, name, region string, key *config.AwsAccessKey, opts runtimes.Options) (aws.Config, error) {
	loads := []func(*awsconfig.LoadOptions) error{
		awsconfig.WithRegion(region),
		awsconfig.WithRetryer(func() aws.Retryer {
			// Throttling and 5xx are retried with jittered backoff, more
			// patiently than the SDK's default 3 attempts.
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.MaxAttempts = 8
				o.MaxBackoff = 20 * time.Second
			})
		}),
	}
	if key != nil {
		secret := key.AwsSecretAccessKey.RawSecret
		if ref := key.AwsSecretAccessKey.Secret; ref != nil {
			if opts.Secret == nil {
				return aws.Config{}, fmt.Errorf("runtime %s: accessKey.awsSecretAccessKey.secret: stored secrets are read by the drover server, not here; an agent uses the credentials of its own environment (leave accessKey out)", name)
			}
			v, err := opts.Secret(ctx, ref.Key, ref.Version)
			if err != nil {
				return aws.Config{}, fmt.Errorf("runtime %s: accessKey.awsSecretAccessKey.secret: %w", name, err)
			}
			secret = v
		}
		loads = append(loads, awsconfig.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(key.AwsAccessKeyID, secret, "")))
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx, loads...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("runtime %s: AWS configuration: %w", name, err)
	}
	return cfg, nil
}
