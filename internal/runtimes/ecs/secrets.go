package ecs

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	"github.com/aws/aws-sdk-go-v2/service/ecs/types"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	smtypes "github.com/aws/aws-sdk-go-v2/service/secretsmanager/types"

	"github.com/drover-dev/drover/internal/ecsspec"
	"github.com/drover-dev/drover/internal/runtimes"
)

// Secret env on ECS: the compiler lists a service's secret env (rawSecret,
// stored secret references) in ecsspec.Object.SecretEnv and never puts a
// value in the task definition. Apply keeps each value in an AWS Secrets
// Manager secret of the instance (ecsspec.SecretName, tagged
// drover:instance), writing a new secret version only when the value
// changed, and adds {name, valueFrom: the secret's ARN} to every container
// definition's secrets that does not set the name itself. The task
// execution role must be allowed secretsmanager:GetSecretValue on them.
// The secrets' version ids are part of the task definition's spec tag, so
// a changed value registers a new revision (and rolls the tasks), and an
// unchanged one reuses it. Secrets of the instance that it no longer has
// are deleted (with Secrets Manager's recovery window) and restored if
// they come back.

// secretRef is one stored secret env variable.
type secretRef struct {
	name, arn, versionID string
	// secret is the Secrets Manager secret's name, action what storing
	// the value did to it.
	secret string
	action runtimes.Action
}

// envSecrets stores o's secret env from t and returns the references,
// sorted by name.
func (r *Runtime) envSecrets(ctx context.Context, t runtimes.Target, o ecsspec.Object) ([]secretRef, error) {
	refs := make([]secretRef, 0, len(o.SecretEnv))
	for _, key := range o.SecretEnv {
		value, ok := t.Env[key]
		if !ok {
			return nil, runtimes.Permanent(fmt.Errorf("%s: secret env %s has no value (a secret reference drover did not resolve?)", t.InstanceKey, key))
		}
		ref, err := r.storeSecret(ctx, t.InstanceKey, ecsspec.SecretName(t.Application, t.Service, t.ReleaseChannel, key), value)
		if err != nil {
			return nil, err
		}
		ref.name, ref.secret = key, ecsspec.SecretName(t.Application, t.Service, t.ReleaseChannel, key)
		refs = append(refs, ref)
	}
	slices.SortFunc(refs, func(a, b secretRef) int { return strings.Compare(a.name, b.name) })
	return refs, nil
}

// storeSecret makes the secret name hold value and returns its ARN and
// current version. Errors name the secret, never the value.
func (r *Runtime) storeSecret(ctx context.Context, key runtimes.InstanceKey, name, value string) (secretRef, error) {
	desc, err := r.secrets.DescribeSecret(ctx, &secretsmanager.DescribeSecretInput{SecretId: aws.String(name)})
	var nf *smtypes.ResourceNotFoundException
	switch {
	case errors.As(err, &nf):
		out, err := r.secrets.CreateSecret(ctx, &secretsmanager.CreateSecretInput{
			Name: aws.String(name), SecretString: aws.String(value),
			Description: aws.String("secret env of drover service instance " + key.String()),
			Tags:        []smtypes.Tag{{Key: aws.String(TagInstance), Value: aws.String(key.String())}},
		})
		if err != nil {
			return secretRef{}, permanent(fmt.Errorf("create secret %s in AWS Secrets Manager: %w", name, err))
		}
		return secretRef{arn: aws.ToString(out.ARN), versionID: aws.ToString(out.VersionId), action: runtimes.ActionCreated}, nil
	case err != nil:
		return secretRef{}, permanent(fmt.Errorf("describe secret %s in AWS Secrets Manager: %w", name, err))
	}
	owner := ""
	for _, tg := range desc.Tags {
		if aws.ToString(tg.Key) == TagInstance {
			owner = aws.ToString(tg.Value)
		}
	}
	if owner != key.String() {
		return secretRef{}, runtimes.Permanent(fmt.Errorf("secret %s in AWS Secrets Manager is not drover's for %s (tag %s is %q); not changed", name, key, TagInstance, owner))
	}
	if desc.DeletedDate != nil {
		if _, err := r.secrets.RestoreSecret(ctx, &secretsmanager.RestoreSecretInput{SecretId: desc.ARN}); err != nil {
			return secretRef{}, permanent(fmt.Errorf("restore secret %s in AWS Secrets Manager: %w", name, err))
		}
	}
	cur, err := r.secrets.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: desc.ARN})
	if err == nil && aws.ToString(cur.SecretString) == value {
		return secretRef{arn: aws.ToString(desc.ARN), versionID: aws.ToString(cur.VersionId), action: runtimes.ActionUnchanged}, nil
	}
	if err != nil && !errors.As(err, &nf) {
		return secretRef{}, permanent(fmt.Errorf("read secret %s in AWS Secrets Manager: %w", name, err))
	}
	out, err := r.secrets.PutSecretValue(ctx, &secretsmanager.PutSecretValueInput{SecretId: desc.ARN, SecretString: aws.String(value)})
	if err != nil {
		return secretRef{}, permanent(fmt.Errorf("update secret %s in AWS Secrets Manager: %w", name, err))
	}
	return secretRef{arn: aws.ToString(desc.ARN), versionID: aws.ToString(out.VersionId), action: runtimes.ActionConfigured}, nil
}

// withSecrets adds refs to every container definition of reg that does
// not set the name itself (in environment or secrets).
func withSecrets(reg *ecs.RegisterTaskDefinitionInput, refs []secretRef) {
	for i := range reg.ContainerDefinitions {
		c := &reg.ContainerDefinitions[i]
		set := map[string]bool{}
		for _, e := range c.Environment {
			set[aws.ToString(e.Name)] = true
		}
		for _, s := range c.Secrets {
			set[aws.ToString(s.Name)] = true
		}
		for _, ref := range refs {
			if !set[ref.name] {
				c.Secrets = append(c.Secrets, types.Secret{Name: aws.String(ref.name), ValueFrom: aws.String(ref.arn)})
			}
		}
	}
}

// secretsSpec is what the spec tag covers of refs: which secret, at which
// version, each variable reads.
func secretsSpec(refs []secretRef) string {
	var b strings.Builder
	for _, ref := range refs {
		fmt.Fprintf(&b, "\n%s=%s@%s", ref.name, ref.arn, ref.versionID)
	}
	return b.String()
}

// pruneSecrets deletes the instance's secrets of variables it no longer
// has (Secrets Manager keeps them for its recovery window; storeSecret
// restores one that comes back).
func (r *Runtime) pruneSecrets(ctx context.Context, t runtimes.Target, keep []string) error {
	prefix := ecsspec.SecretName(t.Application, t.Service, t.ReleaseChannel, "")
	p := secretsmanager.NewListSecretsPaginator(r.secrets, &secretsmanager.ListSecretsInput{
		Filters: []smtypes.Filter{{Key: smtypes.FilterNameStringTypeName, Values: []string{prefix}}},
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return permanent(fmt.Errorf("list the secrets of %s in AWS Secrets Manager: %w", t.InstanceKey, err))
		}
		for _, s := range page.SecretList {
			name := aws.ToString(s.Name)
			key, ok := strings.CutPrefix(name, prefix)
			if !ok || s.DeletedDate != nil || slices.Contains(keep, key) || !taggedFor(s.Tags, t.InstanceKey) {
				continue
			}
			if _, err := r.secrets.DeleteSecret(ctx, &secretsmanager.DeleteSecretInput{SecretId: s.ARN}); err != nil {
				return permanent(fmt.Errorf("delete secret %s in AWS Secrets Manager: %w", name, err))
			}
			r.log.InfoContext(ctx, "deleted secret env no longer used", "secret", name, "instance", t.String())
		}
	}
	return nil
}

func taggedFor(tags []smtypes.Tag, key runtimes.InstanceKey) bool {
	for _, tg := range tags {
		if aws.ToString(tg.Key) == TagInstance && aws.ToString(tg.Value) == key.String() {
			return true
		}
	}
	return false
}

// readsSecrets reports whether the task definition arn reads a secret
// drover keeps (one whose ARN names a drover/ secret).
func (r *Runtime) readsSecrets(ctx context.Context, arn string) bool {
	if arn == "" {
		return false
	}
	td, err := r.taskDefinition(ctx, arn, false)
	if err != nil || td.def == nil {
		return false
	}
	for _, c := range td.def.ContainerDefinitions {
		for _, s := range c.Secrets {
			if strings.Contains(aws.ToString(s.ValueFrom), ":secret:drover/") {
				return true
			}
		}
	}
	return false
}
