package ecs

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/drover-dev/drover/internal/ecsspec"
	"github.com/drover-dev/drover/internal/runtimes"
	"github.com/drover-dev/drover/internal/testing/mototest"
)

// withSecretEnv is target with secret env: the values in Env, the names
// in the object's SecretEnv (as the compiler lists them).
func withSecretEnv(t *testing.T, tg runtimes.Target, env map[string]string) runtimes.Target {
	t.Helper()
	var o ecsspec.Object
	if err := json.Unmarshal(tg.Objects[0], &o); err != nil {
		t.Fatal(err)
	}
	o.SecretEnv = nil
	for k := range env {
		o.SecretEnv = append(o.SecretEnv, k)
	}
	raw, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	tg.Objects = []json.RawMessage{raw}
	tg.Env = env
	for _, v := range env {
		tg.Secrets = append(tg.Secrets, v)
	}
	return tg
}

// Secret env goes to AWS Secrets Manager, referenced from the container
// definitions' secrets by ARN, never into the task definition; a changed
// value is a new secret version and task definition revision, an
// unchanged one reuses both; a variable dropped deletes its secret.
func TestSecretEnv(t *testing.T) {
	t.Parallel()
	moto := mototest.Start(t, movingMoto...)
	r, c := newCluster(t, moto.URL())
	k := key("vault")
	secretName := ecsspec.SecretName("shop", "vault", "prod", "DB_PASSWORD")
	v1 := withSecretEnv(t, target(k, "v1", "nginx:1.27", false), map[string]string{"DB_PASSWORD": "hunter2"})
	if got := actions(apply(t, r, v1)); got != "Secret created, TaskDefinition created, Service created" {
		t.Errorf("first apply: %s", got)
	}
	val, err := r.secrets.GetSecretValue(t.Context(), &secretsmanager.GetSecretValueInput{SecretId: aws.String(secretName)})
	if err != nil || aws.ToString(val.SecretString) != "hunter2" {
		t.Fatalf("stored secret: %v", err)
	}
	svc := describe(t, c, r.cluster, "vault-prod")
	td := describeTD(t, c, aws.ToString(svc.TaskDefinition))
	raw, _ := json.Marshal(td.def)
	if strings.Contains(string(raw), "hunter2") {
		t.Errorf("the task definition holds the value: %s", raw)
	}
	cd := td.def.ContainerDefinitions[0]
	if len(cd.Secrets) != 1 || aws.ToString(cd.Secrets[0].Name) != "DB_PASSWORD" || aws.ToString(cd.Secrets[0].ValueFrom) != aws.ToString(val.ARN) {
		t.Errorf("container secrets: %+v (want the ARN %s)", cd.Secrets, aws.ToString(val.ARN))
	}

	if got := actions(apply(t, r, v1)); got != "Secret unchanged, TaskDefinition unchanged, Service unchanged" {
		t.Errorf("the same apply again: %s", got)
	}
	v2 := withSecretEnv(t, target(k, "v2", "nginx:1.27", false), map[string]string{"DB_PASSWORD": "correct horse"})
	res, err := r.Apply(t.Context(), v2)
	if err != nil {
		t.Fatal(err)
	}
	if got := actions(res); got != "Secret configured, TaskDefinition created, Service configured" {
		t.Errorf("a new value: %s", got)
	}
	if strings.Contains(strings.Join(changeNames(res), " "), "correct horse") {
		t.Errorf("changes show the value: %v", res.Changes)
	}
	val, err = r.secrets.GetSecretValue(t.Context(), &secretsmanager.GetSecretValueInput{SecretId: aws.String(secretName)})
	if err != nil || aws.ToString(val.SecretString) != "correct horse" {
		t.Fatalf("updated secret: %v", err)
	}

	// A value drover could not resolve is an error naming the variable only.
	missing := withSecretEnv(t, target(k, "v3", "nginx:1.27", false), map[string]string{"DB_PASSWORD": "x"})
	missing.Env = map[string]string{}
	if _, err := r.Apply(t.Context(), missing); err == nil || !strings.Contains(err.Error(), "secret env DB_PASSWORD has no value") || !runtimes.IsPermanent(err) {
		t.Errorf("missing value: %v", err)
	}

	v4 := target(k, "v4", "nginx:1.27", false)
	apply(t, r, v4)
	desc, err := r.secrets.DescribeSecret(t.Context(), &secretsmanager.DescribeSecretInput{SecretId: aws.String(secretName)})
	if err != nil || desc.DeletedDate == nil {
		t.Errorf("the secret of a dropped variable is not deleted: %v", err)
	}
	// It comes back when the variable does.
	if got := actions(apply(t, r, withSecretEnv(t, target(k, "v5", "nginx:1.27", false), map[string]string{"DB_PASSWORD": "hunter2"}))); !strings.HasPrefix(got, "Secret configured") && !strings.HasPrefix(got, "Secret unchanged") {
		t.Errorf("restored: %s", got)
	}
}

func changeNames(res runtimes.ApplyResult) []string {
	var out []string
	for _, c := range res.Changes {
		out = append(out, c.Object)
	}
	return out
}
