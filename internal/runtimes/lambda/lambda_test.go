package lambda

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/lambdaspec"
	"github.com/drover-dev/drover/internal/runtimes"
	"github.com/drover-dev/drover/internal/runtimes/runtimestest"
	"github.com/drover-dev/drover/internal/testing/mototest"
)

// The execution role the tests' functions name: moto's CreateFunction
// wants a role its IAM knows.
const role = "arn:aws:iam::123456789012:role/drover-test-lambda"

// createRole creates the tests' execution role in moto's IAM (a Query
// protocol call: form-encoded).
func createRole(t *testing.T, endpoint string) {
	t.Helper()
	form := url.Values{"Action": {"CreateRole"}, "Version": {"2010-05-08"}, "RoleName": {"drover-test-lambda"},
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
	if resp.StatusCode != 200 && resp.StatusCode != 409 {
		t.Fatalf("create role: %s", resp.Status)
	}
}

// counter counts the Lambda API's operations a client calls.
type counter struct {
	mu    sync.Mutex
	calls map[string]int
}

func (c *counter) add(op string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls[op]++
}

func (c *counter) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for k, v := range c.calls {
		out[k] = v
	}
	return out
}

func (c *counter) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = map[string]int{}
}

func (c *counter) option(o *lambda.Options) {
	o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error {
		return s.Initialize.Add(middleware.InitializeMiddlewareFunc("droverCount", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			c.add(middleware.GetOperationName(ctx))
			return next.HandleInitialize(ctx, in)
		}), middleware.After)
	})
}

var runtimesMade atomic.Int64

// newRuntime returns a runtime on the emulator at endpoint with fast polls,
// and its call counter.
func newRuntime(t *testing.T, endpoint string, steady time.Duration) (*Runtime, *counter) {
	t.Helper()
	createRole(t, endpoint)
	cfg := &config.Runtime{Name: fmt.Sprintf("lambda-%d", runtimesMade.Add(1)), AwsLambda: &config.AwsLambdaRuntime{Region: mototest.Region,
		AccessKey:    &config.AwsAccessKey{AwsAccessKeyID: "test", AwsSecretAccessKey: config.AwsSecretValue{RawSecret: "test"}},
		PollInterval: config.Duration{Duration: 200 * time.Millisecond}, SteadyStatePollInterval: config.Duration{Duration: steady}}}
	c := &counter{calls: map[string]int{}}
	r, err := New(t.Context(), cfg, runtimes.Options{}, func(o *lambda.Options) { o.BaseEndpoint = aws.String(endpoint) }, c.option)
	if err != nil {
		t.Fatal(err)
	}
	r.wait = 50 * time.Millisecond
	t.Cleanup(func() { _ = r.Close() })
	return r, c
}

// zipOf is a deployment package holding one file.
func zipOf(t testing.TB, body string) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := zip.NewWriter(&buf)
	f, err := w.Create("index.py")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte(body)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// spec is what a target deploys.
type spec struct {
	code   string  // the handler's source (the zip's content)
	memory int     // MemorySize (128 when 0)
	layer  string  // a layer ARN, when set
	weight float64 // previousVersionWeight
}

// target is a service instance on Lambda: the function named after the
// key, the code after the version (unless spec says).
func target(t testing.TB, key runtimes.InstanceKey, version string, s spec) runtimes.Target {
	if s.code == "" {
		s.code = "def handler(event, ctx):\n    return " + fmt.Sprintf("%q", version) + "\n"
	}
	if s.memory == 0 {
		s.memory = 128
	}
	name := strings.ReplaceAll(key.Service+"-"+key.ReleaseChannel, "/", "-")
	fn := map[string]any{"FunctionName": name, "Role": role, "Runtime": "python3.12", "Handler": "index.handler", "MemorySize": s.memory,
		"Environment": map[string]any{"Variables": map[string]string{"PVN_VERSION": version}}}
	if s.layer != "" {
		fn["Layers"] = []string{s.layer}
	}
	text, _ := json.Marshal(fn)
	z := zipOf(t, s.code)
	obj, _ := json.Marshal(lambdaspec.Object{Kind: lambdaspec.Kind, Runtime: "lambda", FunctionName: name, Function: text,
		ZipBase64: base64.StdEncoding.EncodeToString(z), CodeSha256: lambdaspec.ZipSha256(z), Alias: "live", PreviousVersionWeight: s.weight})
	return runtimes.Target{InstanceKey: key, Version: version, DesiredStateID: "ds-" + version, Backend: lambdaspec.Kind, Objects: []json.RawMessage{obj}}
}

func key(svc string) runtimes.InstanceKey {
	return runtimes.InstanceKey{Application: "shop", Service: svc, ReleaseChannel: "prod"}
}

func waitState(t *testing.T, r *Runtime, tg runtimes.Target, what string, cond func(runtimes.State) bool) runtimes.State {
	t.Helper()
	return runtimestest.Eventually(t, r, tg, 30*time.Second, func() { time.Sleep(50 * time.Millisecond) }, what, cond)
}

func apply(t *testing.T, r *Runtime, tg runtimes.Target) runtimes.ApplyResult {
	t.Helper()
	res, err := r.Apply(t.Context(), tg)
	if err != nil {
		t.Fatalf("apply %s: %v", tg.Version, err)
	}
	return res
}

func actions(res runtimes.ApplyResult) string {
	var parts []string
	for _, c := range res.Changes {
		parts = append(parts, fmt.Sprintf("%s %s", strings.SplitN(c.Object, " ", 2)[0], c.Action))
	}
	return strings.Join(parts, ", ")
}

// The runtime conformance suite, against moto: a server per case, as
// functions are the account's (cases share keys).
func TestConformance(t *testing.T) {
	t.Parallel()
	runtimestest.Run(t, runtimestest.Harness{
		New: func(t *testing.T) runtimes.Runtime {
			r, _ := newRuntime(t, mototest.Start(t).URL(), time.Second)
			return r
		},
		Target:           func(k runtimes.InstanceKey, v string) runtimes.Target { return target(t, k, v, spec{}) },
		Timeout:          60 * time.Second,
		Goroutines:       4,
		KeysPerGoroutine: 6,
	})
}

// Create, reuse, update, roll back: the version's description carries the
// drover version; rolling back moves the alias to the version published
// for the earlier drover version without publishing again.
func TestApplyPublishesReusesAndRollsBack(t *testing.T) {
	t.Parallel()
	r, _ := newRuntime(t, mototest.Start(t).URL(), time.Second)
	k := key("web")
	v1 := target(t, k, "v1", spec{})
	if got := actions(apply(t, r, v1)); got != "Function created, Version created, Alias created" {
		t.Errorf("first apply: %s", got)
	}
	st := waitState(t, r, v1, "v1 converged", func(s runtimes.State) bool { return runtimestest.Converged(s, "v1") })
	if o := st.Objects[0]; o.ObjectType != "Lambda" || o.Name != "web-prod:live" || o.Status != runtimes.ObjectSucceeded {
		t.Errorf("object: %+v", o)
	}
	if !strings.Contains(st.Message, "v1 serving (alias live on version 1)") {
		t.Errorf("message: %s", st.Message)
	}
	fn, err := r.client.GetFunction(t.Context(), &lambda.GetFunctionInput{FunctionName: aws.String("web-prod")})
	if err != nil {
		t.Fatal(err)
	}
	if fn.Tags[TagInstance] != "shop/web/prod" || fn.Tags[TagVersion] != "v1" || fn.Tags[TagFunctionVersion] != "1" || fn.Tags[TagSpec] == "" {
		t.Errorf("function tags: %v", fn.Tags)
	}
	if got := actions(apply(t, r, v1)); got != "Function unchanged, Version unchanged, Alias unchanged" {
		t.Errorf("the same apply again: %s", got)
	}
	v2 := target(t, k, "v2", spec{})
	if got := actions(apply(t, r, v2)); got != "Function configured, Version created, Alias configured" {
		t.Errorf("v2: %s", got)
	}
	waitState(t, r, v2, "v2 converged", func(s runtimes.State) bool { return runtimestest.Converged(s, "v2") })
	info, _ := r.Info(t.Context(), k)
	if len(info) != 1 || info[0].Name != "Lambda" || !strings.Contains(info[0].Text, `"aliasVersion": "2"`) || !strings.Contains(info[0].Text, `"droverVersion": "v2"`) {
		t.Errorf("info: %+v", info)
	}
	// Roll back: version 1 is reused.
	res := apply(t, r, v1)
	if got := actions(res); got != "Function configured, Version unchanged, Alias configured" || res.Changes[1].Object != "Version web-prod:1" {
		t.Errorf("rollback to v1: %s (%v)", got, res.Changes)
	}
	waitState(t, r, v1, "back on v1", func(s runtimes.State) bool { return runtimestest.Converged(s, "v1") })
	vs, err := r.client.ListVersionsByFunction(t.Context(), &lambda.ListVersionsByFunctionInput{FunctionName: aws.String("web-prod")})
	if err != nil {
		t.Fatal(err)
	}
	if len(vs.Versions) != 3 { // $LATEST, 1, 2
		t.Errorf("versions after the rollback: %d", len(vs.Versions))
	}
	for _, v := range vs.Versions {
		if n := aws.ToString(v.Version); n != "$LATEST" && !strings.HasPrefix(aws.ToString(v.Description), "drover v") {
			t.Errorf("version %s's description: %q", n, aws.ToString(v.Description))
		}
	}
}

// Drift: an alias moved by hand reports the version it serves (the
// engine applies again, which moves it back); a $LATEST changed by hand is
// drift, healed by the next apply.
func TestDriftHealed(t *testing.T) {
	t.Parallel()
	r, _ := newRuntime(t, mototest.Start(t).URL(), time.Second)
	k := key("api")
	v1, v2 := target(t, k, "v1", spec{}), target(t, k, "v2", spec{})
	apply(t, r, v1)
	apply(t, r, v2)
	waitState(t, r, v2, "v2 converged", func(s runtimes.State) bool { return runtimestest.Converged(s, "v2") })
	if _, err := r.client.UpdateAlias(t.Context(), &lambda.UpdateAliasInput{FunctionName: aws.String("api-prod"), Name: aws.String("live"), FunctionVersion: aws.String("1")}); err != nil {
		t.Fatal(err)
	}
	r.kick()
	waitState(t, r, v2, "the alias seen on v1", func(s runtimes.State) bool { return s.Version == "v1" })
	if got := actions(apply(t, r, v2)); got != "Function unchanged, Version unchanged, Alias configured" {
		t.Errorf("heal the alias: %s", got)
	}
	waitState(t, r, v2, "v2 again", func(s runtimes.State) bool { return runtimestest.Converged(s, "v2") })

	if _, err := r.client.UpdateFunctionConfiguration(t.Context(), &lambda.UpdateFunctionConfigurationInput{FunctionName: aws.String("api-prod"), MemorySize: aws.Int32(512)}); err != nil {
		t.Fatal(err)
	}
	st := waitState(t, r, v2, "drift seen", func(s runtimes.State) bool { return s.Drifted })
	if st.Version != "v2" || !strings.Contains(st.Message, "$LATEST's MemorySize changed") {
		t.Errorf("drift: %+v", st)
	}
	if got := actions(apply(t, r, v2)); got != "Function configured, Version unchanged, Alias unchanged" {
		t.Errorf("heal $LATEST: %s", got)
	}
	waitState(t, r, v2, "healed", func(s runtimes.State) bool { return runtimestest.Converged(s, "v2") && !s.Drifted })
}

// A version whose configuration Lambda refuses (a layer version that does
// not exist) fails its apply permanently; the alias stays where it was.
func TestRefusedVersion(t *testing.T) {
	t.Parallel()
	r, _ := newRuntime(t, mototest.Start(t).URL(), time.Second)
	k := key("jobs")
	v1 := target(t, k, "v1", spec{})
	apply(t, r, v1)
	bad := target(t, k, "v2", spec{layer: "arn:aws:lambda:us-east-1:123456789012:layer:missing:1"})
	_, err := r.Apply(t.Context(), bad)
	if err == nil || !runtimes.IsPermanent(err) || !strings.Contains(err.Error(), "update the configuration of Lambda function jobs-prod") {
		t.Fatalf("apply of a version with a missing layer: %v", err)
	}
	st := waitState(t, r, bad, "still v1", func(s runtimes.State) bool { return s.Version == "v1" })
	if st.Converged && st.Version == "v2" {
		t.Errorf("state: %+v", st)
	}
	// Rolling back publishes nothing.
	if got := actions(apply(t, r, v1)); got != "Function configured, Version unchanged, Alias unchanged" {
		t.Errorf("roll back: %s", got)
	}
	waitState(t, r, v1, "v1", func(s runtimes.State) bool { return runtimestest.Converged(s, "v1") })
}

// A canary: the alias keeps previousVersionWeight on the version it
// served before.
func TestCanaryWeights(t *testing.T) {
	t.Parallel()
	r, _ := newRuntime(t, mototest.Start(t).URL(), time.Second)
	k := key("canary")
	apply(t, r, target(t, k, "v1", spec{}))
	v2 := target(t, k, "v2", spec{weight: 0.9})
	apply(t, r, v2)
	st := waitState(t, r, v2, "v2 converged", func(s runtimes.State) bool { return runtimestest.Converged(s, "v2") })
	if !strings.Contains(st.Message, "alias live: 10% to version 2, 90% to version 1") {
		t.Errorf("message: %s", st.Message)
	}
	al, err := r.client.GetAlias(t.Context(), &lambda.GetAliasInput{FunctionName: aws.String("canary-prod"), Name: aws.String("live")})
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToString(al.FunctionVersion) != "2" || al.RoutingConfig == nil || al.RoutingConfig.AdditionalVersionWeights["1"] != 0.9 {
		t.Errorf("alias: %s %+v", aws.ToString(al.FunctionVersion), al.RoutingConfig)
	}
	if got := actions(apply(t, r, v2)); got != "Function unchanged, Version unchanged, Alias unchanged" {
		t.Errorf("reapply the canary: %s", got)
	}
	// The full release: the weights go.
	v2full := target(t, k, "v2", spec{})
	if got := actions(apply(t, r, v2full)); got != "Function unchanged, Version unchanged, Alias configured" {
		t.Errorf("full release: %s", got)
	}
	st = waitState(t, r, v2full, "v2 alone", func(s runtimes.State) bool { return runtimestest.Converged(s, "v2") })
	if !strings.Contains(st.Message, "alias live on version 2") {
		t.Errorf("message: %s", st.Message)
	}
}

// A function that is not drover's is left alone unless adopted.
func TestNotOurs(t *testing.T) {
	t.Parallel()
	moto := mototest.Start(t)
	r, _ := newRuntime(t, moto.URL(), time.Second)
	z := zipOf(t, "x")
	if _, err := r.client.CreateFunction(t.Context(), &lambda.CreateFunctionInput{FunctionName: aws.String("own-prod"), Role: aws.String(role),
		Runtime: types.RuntimePython312, Handler: aws.String("index.handler"), Code: &types.FunctionCode{ZipFile: z}}); err != nil {
		t.Fatal(err)
	}
	tg := target(t, key("own"), "v1", spec{})
	_, err := r.Apply(t.Context(), tg)
	if err == nil || !runtimes.IsPermanent(err) || !strings.Contains(err.Error(), "is not drover's") {
		t.Fatalf("apply over a function drover does not own: %v", err)
	}
	st, err := r.Fetch(t.Context(), tg)
	if err != nil || st.Version != "" || !strings.Contains(st.Message, "is not drover's") {
		t.Errorf("fetch: %+v %v", st, err)
	}
}

// Steady state: one GetFunction and one GetAlias per instance per
// steadyStatePollInterval (published versions are read once).
func TestSteadyStateCalls(t *testing.T) {
	t.Parallel()
	r, c := newRuntime(t, mototest.Start(t).URL(), time.Second)
	var tgs []runtimes.Target
	for i := range 3 {
		tg := target(t, key(fmt.Sprintf("s%d", i)), "v1", spec{})
		apply(t, r, tg)
		tgs = append(tgs, tg)
	}
	for _, tg := range tgs {
		waitState(t, r, tg, "converged", func(s runtimes.State) bool { return runtimestest.Converged(s, "v1") })
	}
	time.Sleep(1500 * time.Millisecond)
	c.reset()
	const window = 5 * time.Second
	time.Sleep(window)
	calls := c.snapshot()
	total := 0
	for _, n := range calls {
		total += n
	}
	perMinute := float64(total) / 3 / window.Minutes()
	t.Logf("steady state, 3 functions, %s at a 1s interval: %v: %.0f calls per function per minute (%.1f at the default 1m)", window, calls, perMinute, perMinute/60)
	if calls["GetFunctionConfiguration"] > 0 || total > 3*2*6+6 {
		t.Errorf("steady state: %v", calls)
	}
}

// A version Lambda failed (State Failed: a VPC or image problem) is a
// failure with Lambda's reason; a pending one is rolling out. moto never
// fails a version, so this feeds observe what the API would return.
func TestObserveFailedAndPending(t *testing.T) {
	t.Parallel()
	sn := seen{key: key("f"), obj: lambdaspec.Object{FunctionName: "f-prod", Alias: "live"}}
	v := View{AliasVersion: "3", Version: published{Number: "3", State: "Failed", StateReason: "The image manifest could not be read"}}
	v.Deployed.Version, v.Deployed.FunctionVersion = "v3", "3"
	st := observe(sn, v)
	if !st.Failed || st.Version != "v3" || !strings.Contains(st.Message, "state Failed: The image manifest could not be read") {
		t.Errorf("failed: %+v", st)
	}
	v.Version.State, v.Version.StateReason = "Pending", "creating network interfaces"
	if st := observe(sn, v); st.Converged || st.Failed || !strings.Contains(st.Message, "pending") {
		t.Errorf("pending: %+v", st)
	}
	v.Deployed.FunctionVersion, v.Version.State = "2", "Active"
	if st := observe(sn, v); st.Version != "" || !strings.Contains(st.Message, "which drover did not publish") {
		t.Errorf("moved by hand: %+v", st)
	}
}
