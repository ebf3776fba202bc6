package mototest

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestMain(m *testing.M) { Main(m) }

// ecs calls the ECS API action at endpoint and decodes the JSON answer, failing t unless the
// status is want.
func ecs(t *testing.T, endpoint, action, body string, want int) map[string]any {
	t.Helper()
	code, out := Call(t, endpoint, "ecs", ECSTarget+action, body)
	if code != want {
		t.Fatalf("%s: status %d, want %d: %s", action, code, want, out)
	}
	var v map[string]any
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("%s: %v: %s", action, err, out)
	}
	return v
}

func clusterARNs(t *testing.T, endpoint string) []any {
	t.Helper()
	arns, ok := ecs(t, endpoint, "ListClusters", "", http.StatusOK)["clusterArns"].([]any)
	if !ok {
		t.Fatal("ListClusters: no clusterArns")
	}
	return arns
}

// TestListClustersAndReset: moto answers an ECS call made with plain net/http (no SDK, no
// signature: only the credential scope of the Authorization header matters), keeps what is
// created, and forgets it on Reset.
func TestListClustersAndReset(t *testing.T) {
	s := Shared(t)
	if !strings.HasPrefix(s.URL(), "http://127.0.0.1:") {
		t.Fatalf("URL %q", s.URL())
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL()+"/", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Amz-Target", "AmazonEC2ContainerServiceV20141113.ListClusters")
	req.Header.Set("Content-Type", "application/x-amz-json-1.1")
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=test/20240101/us-east-1/ecs/aws4_request, SignedHeaders=host, Signature=0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		ClusterArns *[]string `json:"clusterArns"`
	}
	err = json.NewDecoder(resp.Body).Decode(&list)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || err != nil || list.ClusterArns == nil {
		t.Fatalf("ListClusters: %s, %v, clusterArns %v", resp.Status, err, list.ClusterArns)
	}

	ecs(t, s.URL(), "CreateCluster", `{"clusterName":"mototest"}`, http.StatusOK)
	if arns := clusterARNs(t, s.URL()); !slices.ContainsFunc(arns, func(a any) bool { return strings.HasSuffix(a.(string), "/mototest") }) {
		t.Fatalf("clusters after CreateCluster: %v", arns)
	}
	s.Reset(t)
	if arns := clusterARNs(t, s.URL()); len(arns) != 0 {
		t.Fatalf("clusters after Reset: %v", arns)
	}
}

// TestStartEnvAndStop: Start passes its environment to moto (MOTO_ECS_SERVICE_RUNNING makes
// services report running tasks; the shared server, without it, reports none), and the server
// is gone when the test that started it ends.
func TestStartEnvAndStop(t *testing.T) {
	runningCount := func(t *testing.T, endpoint string) float64 {
		ecs(t, endpoint, "CreateCluster", `{"clusterName":"env"}`, http.StatusOK)
		ecs(t, endpoint, "RegisterTaskDefinition", `{"family":"web","containerDefinitions":[{"name":"web","image":"nginx","memory":128}]}`, http.StatusOK)
		ecs(t, endpoint, "CreateService", `{"cluster":"env","serviceName":"web","taskDefinition":"web","desiredCount":1}`, http.StatusOK)
		out := ecs(t, endpoint, "DescribeServices", `{"cluster":"env","services":["web"]}`, http.StatusOK)
		svcs, _ := out["services"].([]any)
		if len(svcs) != 1 {
			t.Fatalf("DescribeServices: %v", out)
		}
		n, _ := svcs[0].(map[string]any)["runningCount"].(float64)
		return n
	}

	var s *Server
	t.Run("start", func(t *testing.T) {
		s = Start(t, "MOTO_ECS_SERVICE_RUNNING=1")
		if n := runningCount(t, s.URL()); n != 1 {
			t.Errorf("runningCount %v with MOTO_ECS_SERVICE_RUNNING=1, want 1", n)
		}
	})
	if s == nil {
		return // skipped
	}
	select {
	case <-s.done:
	default:
		t.Fatal("moto_server still running after its test ended")
	}
	u, _ := url.Parse(s.URL())
	if c, err := net.DialTimeout("tcp", u.Host, time.Second); err == nil {
		_ = c.Close()
		t.Fatalf("%s still accepts connections after its test ended", u.Host)
	}

	shared := Shared(t)
	t.Cleanup(func() { shared.Reset(t) })
	if n := runningCount(t, shared.URL()); n != 0 {
		t.Errorf("runningCount %v on the shared server (no MOTO_ECS_SERVICE_RUNNING), want 0", n)
	}
}

// TestThrottle: the first n requests get the AWS JSON protocol's ThrottlingException, the
// rest reach moto; all are counted.
func TestThrottle(t *testing.T) {
	p := NewProxy(t, Shared(t).URL(), ThrottleFirst(2))
	proxy, count := p.URL(), p.Count
	for i := range 2 {
		if code, out := Call(t, proxy, "ecs", ECSTarget+"ListClusters", ""); code != http.StatusBadRequest || string(out) != ThrottlingBody {
			t.Fatalf("request %d: %d %s, want 400 %s", i+1, code, out, ThrottlingBody)
		}
	}
	clusterARNs(t, proxy) // the third reaches moto
	if n := count(); n != 3 {
		t.Fatalf("count %d, want 3", n)
	}
}

// TestProxyHeaders: a throttled answer looks like AWS's (status, content type, JSON body).
func TestProxyHeaders(t *testing.T) {
	p := NewProxy(t, "http://127.0.0.1:1", ThrottleFirst(1)) // never forwarded to
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.URL()+"/", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Amz-Target", ECSTarget+"DescribeServices")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	var e struct {
		Type    string `json:"__type"`
		Message string `json:"message"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("Content-Type") != "application/x-amz-json-1.1" ||
		e.Type != "ThrottlingException" || e.Message != "Rate exceeded" {
		t.Fatalf("throttled answer: %s, Content-Type %q, %+v", resp.Status, resp.Header.Get("Content-Type"), e)
	}
}

// TestProxyCalls: requests are counted per X-Amz-Target, ThrottleOnly limits throttling to
// its targets, and Throttle re-arms it mid-test.
func TestProxyCalls(t *testing.T) {
	describe := ECSTarget + "DescribeClusters"
	list := ECSTarget + "ListClusters"
	p := NewProxy(t, Shared(t).URL(), ThrottleFirst(1), ThrottleOnly(describe))

	clusterARNs(t, p.URL()) // not throttled: not a ThrottleOnly target
	if code, out := Call(t, p.URL(), "ecs", describe, ""); code != http.StatusBadRequest || string(out) != ThrottlingBody {
		t.Fatalf("first DescribeClusters: %d %s, want throttled", code, out)
	}
	ecs(t, p.URL(), "DescribeClusters", "", http.StatusOK)
	p.Throttle(1)
	clusterARNs(t, p.URL())
	if code, _ := Call(t, p.URL(), "ecs", describe, ""); code != http.StatusBadRequest {
		t.Fatalf("DescribeClusters after Throttle(1): %d, want 400", code)
	}

	if got := p.Calls(); got[describe] != 3 || got[list] != 2 || len(got) != 2 {
		t.Fatalf("Calls() = %v, want %s: 3, %s: 2", got, describe, list)
	}
	if p.Count() != 5 || p.Throttled() != 2 {
		t.Fatalf("Count() %d, Throttled() %d, want 5, 2", p.Count(), p.Throttled())
	}
	p.Reset()
	if p.Count() != 0 || p.Throttled() != 0 || len(p.Calls()) != 0 {
		t.Fatalf("after Reset: Count() %d, Throttled() %d, Calls() %v", p.Count(), p.Throttled(), p.Calls())
	}
}

// TestEnv: the environment points the SDK at the endpoint with fake credentials.
func TestEnv(t *testing.T) {
	env := Env("http://127.0.0.1:9")
	for _, want := range []string{
		"AWS_ENDPOINT_URL=http://127.0.0.1:9",
		"AWS_ACCESS_KEY_ID=test",
		"AWS_SECRET_ACCESS_KEY=test",
		"AWS_REGION=us-east-1",
		"AWS_EC2_METADATA_DISABLED=true",
	} {
		if !slices.Contains(env, want) {
			t.Errorf("Env lacks %s: %v", want, env)
		}
	}
}

// TestMissingBinary: without moto_server on PATH (and without DROVER_REQUIRE_MOTO), Start and
// Shared skip.
func TestMissingBinary(t *testing.T) {
	for name, start := range map[string]func(testing.TB){
		"Start":  func(t testing.TB) { Start(t) },
		"Shared": func(t testing.TB) { Shared(t) },
	} {
		var skipped bool
		t.Run(name, func(t *testing.T) {
			t.Setenv("PATH", t.TempDir())
			t.Setenv(RequireEnv, "")
			t.Cleanup(func() { skipped = t.Skipped() })
			start(t)
		})
		if !skipped {
			t.Errorf("%s without moto_server: not skipped", name)
		}
	}
}

// TestTailBuffer: the log keeps the last bytes, from a line boundary.
func TestTailBuffer(t *testing.T) {
	b := &tailBuffer{max: 10}
	_, _ = b.Write([]byte("short\n"))
	if b.String() != "short\n" {
		t.Fatalf("%q", b.String())
	}
	_, _ = b.Write([]byte("line two\nend\n"))
	if got := b.String(); got != "[…]\nend\n" {
		t.Fatalf("%q", got)
	}
}
