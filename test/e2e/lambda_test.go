package e2e

import (
	"archive/zip"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	apiv1 "github.com/drover-dev/drover/api/v1"
	"github.com/drover-dev/drover/internal/testing/mototest"
)

// lambdaTree is an application of two release channels, staging then
// production after staging is stable and an approval, each on an AWS
// Lambda runtime (drover's kind); the service is one function per
// channel (thumbs-staging, thumbs-production) from a CreateFunction JSON
// file and a zip, its description from a parameter and, when the layer
// parameter names one, a layer. With proxy, the runtimes are reached
// through that linked runtime's agent.
func lambdaTree(t *testing.T, proxy string) string {
	t.Helper()
	dir := t.TempDir()
	runtime := func(name string) string {
		text := fmt.Sprintf("runtime:\n  name: %s\n  awsLambda:\n    region: us-east-1\n    pollInterval: 1s\n    steadyStatePollInterval: 5s\n", name)
		if proxy != "" {
			text += "    proxyRuntime:\n      runtime: " + proxy + "\n"
		}
		return text
	}
	var buf bytes.Buffer
	w := zip.NewWriter(&buf)
	f, _ := w.Create("app.py")
	_, _ = f.Write([]byte("def handler(event, context):\n    return {'ok': True}\n"))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	writeTree(t, dir, map[string]string{
		"runtimes/lambda-staging.pvn.yaml": runtime("lambda-staging"),
		"runtimes/lambda-prod.pvn.yaml":    runtime("lambda-prod"),
		"app.pvn.yaml": `application:
  name: media
  releaseChannels:
    - name: staging
      runtimes:
        - runtime: lambda-staging
    - name: production
      runtimes:
        - runtime: lambda-prod
      preconditions:
        - releaseChannelStable:
            releaseChannel: staging
        - manualApproval: {}
`,
		"services/thumbs/thumbs.pvn.yaml": `service:
  name: thumbs
  application: media
  awsLambda:
    function:
      local:
        path: function.json
    code:
      zip:
        local:
          path: app.zip
  parameters:
    - name: message
      required: true
      string: {}
    - name: layer
      string: {}
`,
		"services/thumbs/function.json": `{
  "FunctionName": "thumbs-{{.Builtins.ReleaseChannel.Name}}",
  "Role": "` + lambdaRole + `",
  "Runtime": "python3.12",
  "Handler": "app.handler",
  "MemorySize": 256,
  {{- if .Params.layer}}
  "Layers": ["{{.Params.layer}}"],
  {{- end}}
  "Description": "thumbnails: {{.Params.message}}"
}
`,
		"services/thumbs/app.zip": buf.String(),
	})
	return dir
}

const lambdaRole = "arn:aws:iam::123456789012:role/thumbs"

// lambdaSetup creates the functions' execution role in moto's IAM (moto's
// CreateFunction wants a role its IAM knows), and returns a Lambda client
// on the emulator.
func lambdaSetup(t *testing.T, endpoint string) *lambda.Client {
	t.Helper()
	form := url.Values{"Action": {"CreateRole"}, "Version": {"2010-05-08"}, "RoleName": {"thumbs"},
		"AssumeRolePolicyDocument": {`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"lambda.amazonaws.com"},"Action":"sts:AssumeRole"}]}`}}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, endpoint+"/", strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", mototest.AuthorizationHeader("iam"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("create role: %s", resp.Status)
	}
	return lambda.New(lambda.Options{Region: mototest.Region, BaseEndpoint: aws.String(endpoint),
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")})
}

// aliasVersion is the version alias live of a function points at.
func aliasVersion(t *testing.T, c *lambda.Client, function string) string {
	t.Helper()
	out, err := c.GetAlias(context.Background(), &lambda.GetAliasInput{FunctionName: aws.String(function), Name: aws.String("live")})
	if err != nil {
		t.Fatalf("alias of %s: %v", function, err)
	}
	return aws.ToString(out.FunctionVersion)
}

// TestLambdaReleaseChannels: a Lambda function released through staging,
// an approval and production on moto's Lambda API by the drover binary
// (credentials and endpoint from the environment); drift made out of band
// is healed; a version Lambda refuses (a layer version that does not
// exist) fails in staging and is rolled back to the version before, by
// moving the alias back without publishing again; at steady state the
// server calls the Lambda API twice a steady interval per function.
func TestLambdaReleaseChannels(t *testing.T) {
	requireE2E(t)
	moto := mototest.Start(t)
	c := lambdaSetup(t, moto.URL())
	proxy := mototest.NewProxy(t, moto.URL())
	s := newServerEnv(t, freeAddr(t), proxy.Env())
	dir := lambdaTree(t, "")
	s.ok("alice", "apply", dir+"/...")
	if info := runtimeInfo(t, s, "lambda-prod"); info.Kind != "awsLambda" {
		t.Errorf("drover runtimes: lambda-prod is %+v", info)
	}
	pushed := time.Now()
	v1, _ := s.push("alice", "media", "thumbs", "message=one")
	st := s.waitStatus("media", "thumbs", 60*time.Second, "staging converged, production waiting for approval", func(st *apiv1.ServiceStatus) bool {
		return findChannel(st, "staging").Status == "CONVERGED" && findChannel(st, "production").Status == "WAITING_MANUAL_APPROVAL"
	})
	stagingAt := time.Now()
	if ch := findChannel(st, "staging"); ch.Version != v1 || len(ch.Objects) != 1 || ch.Objects[0].ObjectType != "Lambda" || !strings.Contains(ch.Message+ch.Objects[0].Message, "alias live on version 1") {
		t.Errorf("staging: %s", dump(ch))
	}
	s.ok("bob", "approve", "thumbs", "--app", "media", "--release-channel", "production")
	approved := time.Now()
	st = s.waitStatus("media", "thumbs", 60*time.Second, "production converged", converged(v1))
	t.Logf("push -> staging converged %s; approval -> production converged %s", stagingAt.Sub(pushed).Round(time.Millisecond), time.Since(approved).Round(time.Millisecond))
	if ch := findChannel(st, "production"); len(ch.Info) == 0 || ch.Info[0].Name != "Lambda" || !strings.Contains(ch.Info[0].Text, `"droverVersion": "`+v1+`"`) {
		t.Errorf("production's runtime info: %s", dump(ch.Info))
	}
	for _, fn := range []string{"thumbs-staging", "thumbs-production"} {
		if v := aliasVersion(t, c, fn); v != "1" {
			t.Errorf("%s's alias is on version %s", fn, v)
		}
	}

	// Steady state: what the server asks the Lambda API for two converged
	// functions (steadyStatePollInterval 5s here; 1m by default).
	time.Sleep(6 * time.Second)
	proxy.Reset()
	const window = 20 * time.Second
	time.Sleep(window)
	calls := proxy.Count()
	t.Logf("steady state, 2 functions, %s at a 5s interval: %d calls: %.1f per function per minute (%.2f at the default 1m)",
		window, calls, float64(calls)/2/window.Minutes(), float64(calls)/2/window.Minutes()*5/60)
	if calls > 2*2*int(window/(5*time.Second))+4 {
		t.Errorf("steady state: %d calls in %s for 2 functions", calls, window)
	}

	// Drift: production's memory changed by hand is put back.
	if _, err := c.UpdateFunctionConfiguration(t.Context(), &lambda.UpdateFunctionConfigurationInput{FunctionName: aws.String("thumbs-production"), MemorySize: aws.Int32(1024)}); err != nil {
		t.Fatal(err)
	}
	s.waitStatus("media", "thumbs", 60*time.Second, "the drift healed", func(st *apiv1.ServiceStatus) bool {
		cfg, err := c.GetFunctionConfiguration(t.Context(), &lambda.GetFunctionConfigurationInput{FunctionName: aws.String("thumbs-production")})
		return err == nil && aws.ToInt32(cfg.MemorySize) == 256 && findChannel(st, "production").Status == "CONVERGED"
	})
	drift := false
	for _, e := range s.events("media", "thumbs") {
		if e.Type == "drift" && e.ReleaseChannel == "production" && strings.Contains(e.Message, "MemorySize") {
			drift = true
		}
	}
	if !drift {
		t.Errorf("no drift event for production: %s", dump(eventKeys(s.events("media", "thumbs"))))
	}

	// v2 goes to staging; then v3, which Lambda refuses, fails there and is
	// rolled back to v2: the alias moves back to version 2, and nothing is
	// published for it again.
	// drover preview shows what v2 would change: the function's
	// description (and the PVN_SERVICE_VERSION its environment carries).
	preview := s.ok("alice", "preview", "thumbs", "--app", "media", "--param", "message=two").stdout
	if !strings.Contains(preview, "-  Description: 'thumbnails: one'") || !strings.Contains(preview, "+  Description: 'thumbnails: two'") {
		t.Errorf("preview of v2 does not show the description's change:\n%s", preview)
	}
	v2, _ := s.push("alice", "media", "thumbs", "message=two")
	s.waitStatus("media", "thumbs", 60*time.Second, "staging on v2", channelIs("staging", "CONVERGED", v2))
	if v := aliasVersion(t, c, "thumbs-staging"); v != "2" {
		t.Errorf("thumbs-staging's alias is on version %s after v2", v)
	}
	v3, _ := s.push("alice", "media", "thumbs", "message=three", "layer=arn:aws:lambda:us-east-1:123456789012:layer:missing:1")
	st = s.waitStatus("media", "thumbs", 90*time.Second, "staging rolled back to v2", channelIs("staging", "ROLLED_BACK", v2))
	if ch := findChannel(st, "staging"); !strings.Contains(ch.Message, "rolled back from "+v3+" to "+v2) {
		t.Errorf("staging after the rollback: %s", dump(ch))
	}
	evs := s.events("media", "thumbs")
	if i := indexOf(evs, 0, "rollback", "staging"); i < 0 {
		t.Errorf("no rollback event: %v", eventKeys(evs))
	}
	failed := false
	for _, e := range evs {
		if e.ReleaseChannel == "staging" && strings.Contains(e.Message, v3) && strings.Contains(e.Message, "LayerVersion does not exist") {
			failed = true
		}
	}
	if !failed {
		t.Errorf("no event says why %s failed: %s", v3, dump(eventKeys(evs)))
	}
	if v := aliasVersion(t, c, "thumbs-staging"); v != "2" {
		t.Errorf("thumbs-staging's alias is on version %s after the rollback", v)
	}
	vs, err := c.ListVersionsByFunction(t.Context(), &lambda.ListVersionsByFunctionInput{FunctionName: aws.String("thumbs-staging")})
	if err != nil || len(vs.Versions) != 3 { // $LATEST, 1, 2
		t.Errorf("thumbs-staging's versions after the rollback: %d (%v)", len(vs.Versions), err)
	}
	if ch := findChannel(s.status("media", "thumbs"), "production"); ch.Version != v1 {
		t.Errorf("production moved: %s", dump(ch))
	}
}

// TestLambdaThroughAgent: the Lambda runtimes' proxyRuntime is a linked
// runtime whose agent has the AWS endpoint and credentials in its
// environment; the server has none, and its data directory never holds the
// agent's key.
func TestLambdaThroughAgent(t *testing.T) {
	requireE2E(t)
	moto := mototest.Start(t)
	c := lambdaSetup(t, moto.URL())
	// The server's AWS settings lead nowhere: were it to call Lambda
	// itself, nothing would converge.
	s := newServerEnv(t, freeAddr(t), []string{"AWS_ENDPOINT_URL=http://127.0.0.1:9", "AWS_ACCESS_KEY_ID=server-has-none", "AWS_SECRET_ACCESS_KEY=none", "AWS_EC2_METADATA_DISABLED=true"},
		"--agent-listen", freeAddr(t))
	resp, tok := link(t, s, "aws-account")
	const agentKey = "agent-only-lambda-secret-key"
	env := append(moto.Env(), "AWS_SECRET_ACCESS_KEY="+agentKey)
	startAgentEnv(t, "aws-account", env, agentArgs(resp, tok, "--mode", "commands")...)
	waitAgent(t, s, "aws-account", "connected")
	s.ok("alice", "apply", lambdaTree(t, "aws-account")+"/...")
	pushed := time.Now()
	v1, _ := s.push("alice", "media", "thumbs", "message=one")
	s.waitStatus("media", "thumbs", 60*time.Second, "staging converged through the agent", func(st *apiv1.ServiceStatus) bool {
		ch := findChannel(st, "staging")
		return ch.Status == "CONVERGED" && ch.Version == v1
	})
	t.Logf("through the agent: push -> staging converged %s", time.Since(pushed).Round(time.Millisecond))
	s.ok("bob", "approve", "thumbs", "--app", "media", "--release-channel", "production")
	s.waitStatus("media", "thumbs", 60*time.Second, "production converged through the agent", converged(v1))
	if v := aliasVersion(t, c, "thumbs-production"); v != "1" {
		t.Errorf("thumbs-production's alias: %s", v)
	}
	if info := runtimeInfo(t, s, "lambda-prod"); info.Via != "aws-account" || info.Kind != "awsLambda" {
		t.Errorf("lambda-prod as the server lists it: %+v", info)
	}
	// The agent's credential is nowhere in the server's store.
	err := filepath.WalkDir(s.data, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err == nil && bytes.Contains(b, []byte(agentKey)) {
			t.Errorf("%s holds the agent's AWS key", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
