package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apiv1 "github.com/drover-dev/drover/api/v1"
	"github.com/drover-dev/drover/internal/auth"
	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/engine"
	"github.com/drover-dev/drover/internal/store"
	"github.com/drover-dev/drover/internal/store/sqlite"
)

// The value every test here sets; no answer, audit record or event may
// hold it.
const secretValue = "s3cr3t-hunter2-value"

// secretTree is an application on a custom runtime whose service takes
// secrets by reference: in its env, in the runtime's command env and as a
// secret parameter of the runtime.
func secretTree(version string) map[string]string {
	return map[string]string{
		"runtime.pvn.yaml": `runtime:
  name: shell
  custom:
    parameters:
      - name: token
        secret: {}
    apply:
      taskConfig:
        program:
          cmd: [sh, -c, 'echo token={{.Params.token}}']
          env:
            CMD_SECRET: {secret: {key: db, version: ` + version + `}}
    fetch:
      taskConfig:
        program:
          cmd: [sh, -c, 'exit 0']
`,
		"app.pvn.yaml": `application:
  name: shop
  releaseChannels:
    - name: staging
      runtimes: [{runtime: shell}]
      policy:
        defaultEnv:
          RC_SECRET: {secret: {key: db, version: ` + version + `}}
`,
		"svc.pvn.yaml": `service:
  name: web
  application: shop
  env:
    PLAIN: {value: hello}
    SVC_SECRET: {secret: {key: db, version: db-0}}
  customRuntime:
    parameterValues:
      - name: token
        secret: {secretRef: {key: db, version: db-0}}
`,
	}
}

// applyTree applies files (name -> text) to s.
func applyTree(t *testing.T, s *Server, files map[string]string) {
	t.Helper()
	dir := t.TempDir()
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	sources, err := config.Load([]string{dir + "/..."})
	if err != nil {
		t.Fatal(err)
	}
	var req apiv1.ApplyConfigsRequest
	for _, src := range sources {
		body, err := json.Marshal(src.File)
		if err != nil {
			t.Fatal(err)
		}
		req.Configs = append(req.Configs, apiv1.Config{Source: src.Path, Body: body})
	}
	if _, err := s.applyConfigs(local(t.Context()), req); err != nil {
		t.Fatal(err)
	}
}

func newSecretServer(t *testing.T) (*Server, store.Store) {
	t.Helper()
	st, err := sqlite.Open(t.Context(), sqlite.MemoryPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	s, _ := newTestServer(t, st, t.TempDir(), EdgeConfig{})
	return s, st
}

// callAs sends one request under ctx's identity and returns the status and
// body.
func callAs(ctx context.Context, t *testing.T, s *Server, method, path string, body any) (int, string) {
	t.Helper()
	if method == http.MethodPost {
		return postAs(ctx, t, s, path, body)
	}
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequestWithContext(ctx, method, path, nil))
	return rec.Code, rec.Body.String()
}

// TestSecretsSetListDelete: versions are named KEY-N, lists and answers
// never hold the value, and deleting a version or a key says what went.
func TestSecretsSetListDelete(t *testing.T) {
	t.Parallel()
	s, st := newSecretServer(t)
	ctx := as(t.Context(), "alice")
	code, body := callAs(ctx, t, s, http.MethodPost, "/v1/secrets/db:set", apiv1.SetSecretRequest{Value: secretValue})
	if code != http.StatusOK || !strings.Contains(body, `"version":"db-0"`) {
		t.Fatalf("set: %d %s", code, body)
	}
	code, body = callAs(ctx, t, s, http.MethodPost, "/v1/secrets/db:set", apiv1.SetSecretRequest{Value: secretValue + "-2"})
	if code != http.StatusOK || !strings.Contains(body, `"version":"db-1"`) {
		t.Fatalf("set again: %d %s", code, body)
	}
	code, body = callAs(ctx, t, s, http.MethodGet, "/v1/secrets", nil)
	var list apiv1.SecretList
	if err := json.Unmarshal([]byte(body), &list); code != http.StatusOK || err != nil {
		t.Fatalf("list: %d %s", code, body)
	}
	if len(list.Secrets) != 1 || list.Secrets[0].Latest != "db-1" || len(list.Secrets[0].Versions) != 2 || list.Secrets[0].Versions[0].CreatedBy != "alice" {
		t.Errorf("list: %s", body)
	}
	for _, bad := range []struct {
		path string
		req  apiv1.SetSecretRequest
		want string
	}{
		{"/v1/secrets/db:set", apiv1.SetSecretRequest{}, "the value is empty"},
		{"/v1/secrets/-x:set", apiv1.SetSecretRequest{Value: "v"}, "use 1 to 128 letters"},
		{"/v1/secrets/db:set", apiv1.SetSecretRequest{Value: "a\x00b"}, "without NUL bytes"},
	} {
		if code, body := callAs(ctx, t, s, http.MethodPost, bad.path, bad.req); code != http.StatusBadRequest || !strings.Contains(body, bad.want) {
			t.Errorf("set %s %q: %d %s, want 400 saying %q", bad.path, bad.req.Value, code, body, bad.want)
		}
	}
	code, body = callAs(ctx, t, s, http.MethodPost, "/v1/secrets/db:delete", apiv1.DeleteSecretRequest{Version: "db-0"})
	if code != http.StatusOK || !strings.Contains(body, `"deleted":["db-0"]`) {
		t.Errorf("delete db-0: %d %s", code, body)
	}
	if code, body = callAs(ctx, t, s, http.MethodPost, "/v1/secrets/db:delete", apiv1.DeleteSecretRequest{Version: "db-0"}); code != http.StatusNotFound {
		t.Errorf("delete db-0 again: %d %s, want 404", code, body)
	}
	if code, body = callAs(ctx, t, s, http.MethodPost, "/v1/secrets/db:delete", apiv1.DeleteSecretRequest{Version: "other-1"}); code != http.StatusBadRequest {
		t.Errorf("delete a version of another key: %d %s, want 400", code, body)
	}
	code, body = callAs(ctx, t, s, http.MethodPost, "/v1/secrets/db:delete", apiv1.DeleteSecretRequest{})
	if code != http.StatusOK || !strings.Contains(body, `"deleted":["db-1"]`) {
		t.Errorf("delete db: %d %s", code, body)
	}
	audit, err := st.ListAudit(t.Context(), store.AuditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	targets := map[string]bool{}
	for _, rec := range audit {
		targets[rec.Target] = true
		if raw, _ := json.Marshal(rec); strings.Contains(string(raw), secretValue) {
			t.Errorf("audit record holds the value: %s", raw)
		}
	}
	for _, want := range []string{"secret db-0", "secret db-1", "secret db"} {
		if !targets[want] {
			t.Errorf("no audit record of target %q in %v", want, targets)
		}
	}
}

// TestSecretsAuthorization: deployers and admins of every application set
// and delete secrets; one application's deployer and viewers may not; any
// role on every application lists them.
func TestSecretsAuthorization(t *testing.T) {
	t.Parallel()
	s, _ := newSecretServer(t)
	for _, c := range []struct {
		b                 auth.Binding
		set, list, delete bool
	}{
		{auth.Binding{Role: auth.RoleAdmin}, true, true, true},
		{auth.Binding{Role: auth.RoleDeployer}, true, true, true},
		{auth.Binding{Role: auth.RoleViewer}, false, true, false},
		{auth.Binding{Role: auth.RoleApprover}, false, true, false},
		{auth.Binding{Role: auth.RoleDeployer, Application: "shop"}, false, false, false},
		{auth.Binding{Role: auth.RoleAdmin, Application: "shop"}, false, false, false},
	} {
		ctx := as(t.Context(), "who", c.b)
		code, body := callAs(ctx, t, s, http.MethodPost, "/v1/secrets/k:set", apiv1.SetSecretRequest{Value: secretValue})
		if (code == http.StatusOK) != c.set || (!c.set && code != http.StatusForbidden) {
			t.Errorf("%s set: %d %s", c.b, code, body)
		}
		if code, body := callAs(ctx, t, s, http.MethodGet, "/v1/secrets", nil); (code == http.StatusOK) != c.list {
			t.Errorf("%s list: %d %s", c.b, code, body)
		}
		code, body = callAs(ctx, t, s, http.MethodPost, "/v1/secrets/k:delete", apiv1.DeleteSecretRequest{Version: "k-0"})
		if c.delete && code != http.StatusOK && code != http.StatusNotFound || !c.delete && code != http.StatusForbidden {
			t.Errorf("%s delete: %d %s", c.b, code, body)
		}
	}
}

// TestSecretsResolvedAtPush: a push resolves secret{key, version} in the
// channel's env, the runtime's command env and a secret parameter's
// secretRef into raw secrets in the stored desired state; the compiled
// answer, the push's answer and events never hold the value; an unknown
// version refuses the push naming the field and the key.
func TestSecretsResolvedAtPush(t *testing.T) {
	t.Parallel()
	s, st := newSecretServer(t)
	ctx := as(t.Context(), "alice")
	if _, err := s.setSecret(ctx, "db", apiv1.SetSecretRequest{Value: secretValue}); err != nil {
		t.Fatal(err)
	}
	applyTree(t, s, secretTree("db-7"))
	code, body := callAs(ctx, t, s, http.MethodPost, "/v1/apps/shop/services/web:push", apiv1.PushRequest{})
	if code != http.StatusBadRequest || !strings.Contains(body, "release channel staging: env.RC_SECRET.secret: secret db has no version db-7") ||
		!strings.Contains(body, "custom.custom.apply.taskConfig.program.env.CMD_SECRET.secret: secret db has no version db-7") {
		t.Fatalf("push with db-7: %d %s, want 400 naming the fields and the key", code, body)
	}
	code, body = callAs(ctx, t, s, http.MethodPost, "/v1/apps/shop/services/web:preview", apiv1.PushRequest{})
	if code != http.StatusBadRequest || !strings.Contains(body, "db-7") {
		t.Errorf("preview with db-7: %d %s, want 400", code, body)
	}
	applyTree(t, s, secretTree("db-0"))
	code, body = callAs(ctx, t, s, http.MethodPost, "/v1/apps/shop/services/web:push", apiv1.PushRequest{})
	if code != http.StatusOK {
		t.Fatalf("push: %d %s", code, body)
	}
	var pushed apiv1.PushResponse
	if err := json.Unmarshal([]byte(body), &pushed); err != nil {
		t.Fatal(err)
	}
	rec, err := st.GetDesiredState(t.Context(), pushed.DesiredStateID)
	if err != nil {
		t.Fatal(err)
	}
	d, err := engine.NewStateCache(st).Decode(t.Context(), rec)
	if err != nil {
		t.Fatal(err)
	}
	ch := d.Channels[0].Channel
	for _, k := range []string{"RC_SECRET", "SVC_SECRET"} {
		if ch.Env[k] != secretValue {
			t.Errorf("env %s = %q, want the secret's value", k, ch.Env[k])
		}
	}
	if ch.Env["PLAIN"] != "hello" || strings.Join(ch.SecretEnv, ",") != "RC_SECRET,SVC_SECRET" {
		t.Errorf("env %v, secret env %v", ch.Env, ch.SecretEnv)
	}
	var obj struct {
		ParameterValues map[string]string          `json:"parameterValues"`
		Secrets         map[string]config.EnvValue `json:"secrets"`
		Custom          *config.CustomRuntime      `json:"custom"`
	}
	if err := json.Unmarshal(ch.Objects[0], &obj); err != nil {
		t.Fatal(err)
	}
	if v := obj.Custom.Apply.TaskConfig.Program.Env["CMD_SECRET"]; v.RawSecret != secretValue || v.Secret != nil {
		t.Errorf("command env CMD_SECRET %+v, want the raw secret", v)
	}
	if obj.Secrets["token"].RawSecret != secretValue || obj.ParameterValues["token"] != "(secret:token)" {
		t.Errorf("secret parameter: values %v, secrets %v", obj.ParameterValues, obj.Secrets)
	}
	if cmd := strings.Join(obj.Custom.Apply.TaskConfig.Program.Cmd, " "); !strings.Contains(cmd, "token=(secret:token)") {
		t.Errorf("command %q, want the parameter's marker", cmd)
	}
	for _, path := range []string{"/v1/apps/shop/services/web/compiled", "/v1/apps/shop/services/web", "/v1/apps/shop/services/web/events"} {
		code, body := callAs(ctx, t, s, http.MethodGet, path, nil)
		if code != http.StatusOK || strings.Contains(body, secretValue) {
			t.Errorf("GET %s: %d, holds the value: %v", path, code, strings.Contains(body, secretValue))
		}
	}
	code, body = callAs(ctx, t, s, http.MethodPost, "/v1/apps/shop/services/web:preview", apiv1.PushRequest{})
	if code != http.StatusOK || strings.Contains(body, secretValue) {
		t.Errorf("preview: %d, holds the value: %v", code, strings.Contains(body, secretValue))
	}
	events, err := st.ListEvents(t.Context(), store.EventFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range events {
		if raw, _ := json.Marshal(ev); strings.Contains(string(raw), secretValue) {
			t.Errorf("event holds the value: %s", raw)
		}
	}
}

// TestRuntimeSecretRefCheckedAtApply: an ECS runtime whose static key's
// secret is a stored secret (Prodvana's accessKey.awsSecretAccessKey.secret)
// is refused at apply while the version does not exist, naming the field;
// once it does, the config is stored with the reference, never the value.
func TestRuntimeSecretRefCheckedAtApply(t *testing.T) {
	t.Parallel()
	s, st := newSecretServer(t)
	ctx := as(t.Context(), "alice")
	runtime := func(version string) []byte {
		return []byte(`{"runtime": {"name": "ecs-prod", "awsEcs": {"region": "us-east-1", "ecsCluster": "prod",
  "accessKey": {"awsAccessKeyId": "AKIDEXAMPLE", "awsSecretAccessKey": {"secret": {"key": "aws-key", "version": "` + version + `"}}}}}}`)
	}
	apply := func(version string) (*apiv1.ApplyConfigsResponse, error) {
		return s.applyConfigs(local(t.Context()), apiv1.ApplyConfigsRequest{Configs: []apiv1.Config{{Source: "ecs.pvn.yaml", Body: runtime(version)}}})
	}
	_, err := apply("aws-key-0")
	var verr *validationError
	if !errors.As(err, &verr) || len(verr.details) != 1 || verr.details[0].Field != "runtime.awsEcs.accessKey.awsSecretAccessKey.secret" ||
		verr.details[0].File != "ecs.pvn.yaml" || !strings.Contains(verr.details[0].Message, "secret aws-key has no version aws-key-0") {
		t.Fatalf("apply before the secret exists: %v (%+v), want a validation error naming the field", err, verr)
	}
	if _, err := st.GetConfig(t.Context(), "runtime", "ecs-prod"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a refused apply stored the runtime: %v", err)
	}
	if _, err := s.setSecret(ctx, "aws-key", apiv1.SetSecretRequest{Value: secretValue}); err != nil {
		t.Fatal(err)
	}
	if _, err := apply("aws-key-0"); err != nil {
		t.Fatalf("apply once the secret exists: %v", err)
	}
	obj, err := st.GetConfig(t.Context(), "runtime", "ecs-prod")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(obj.Body), secretValue) || !strings.Contains(string(obj.Body), "aws-key-0") {
		t.Errorf("the stored runtime config holds the value, or lost the reference: %s", obj.Body)
	}
}

// TestRuntimeSecretRefsOfEveryKind: the stored secrets a Lambda runtime's
// access key and a Cloud Run runtime's service account key reference are
// checked at apply as an ECS runtime's are (RuntimeKind.SecretRefs).
func TestRuntimeSecretRefsOfEveryKind(t *testing.T) {
	t.Parallel()
	s, _ := newSecretServer(t)
	for _, tc := range []struct{ file, body, field string }{
		{"lambda.pvn.yaml", `{"runtime": {"name": "fn", "awsLambda": {"region": "us-east-1",
  "accessKey": {"awsAccessKeyId": "AKIDEXAMPLE", "awsSecretAccessKey": {"secret": {"key": "lambda-key", "version": "lambda-key-0"}}}}}}`,
			"runtime.awsLambda.accessKey.awsSecretAccessKey.secret"},
		{"run.pvn.yaml", `{"runtime": {"name": "run", "googleCloudRun": {"project": "shop-prod-1", "region": "us-central1",
  "serviceAccountJson": {"secret": {"key": "gcp-sa", "version": "gcp-sa-0"}}}}}`,
			"runtime.googleCloudRun.serviceAccountJson.secret"},
	} {
		_, err := s.applyConfigs(local(t.Context()), apiv1.ApplyConfigsRequest{Configs: []apiv1.Config{{Source: tc.file, Body: []byte(tc.body)}}})
		var verr *validationError
		if !errors.As(err, &verr) || len(verr.details) != 1 || verr.details[0].Field != tc.field || verr.details[0].File != tc.file ||
			!strings.Contains(verr.details[0].Message, "has no version") {
			t.Errorf("%s: apply before the secret exists: %v (%+v), want a validation error naming %s", tc.file, err, verr, tc.field)
		}
	}
}
