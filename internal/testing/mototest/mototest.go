// Package mototest runs moto's AWS emulator (moto_server, from PyPI's moto) on 127.0.0.1 for
// tests, mainly for its ECS API, and puts a counting, throttling proxy in front of it.
//
// A server costs about a second to start, so tests share one per test binary where they can:
//
//	func TestMain(m *testing.M) { mototest.Main(m) } // runs the tests, then stops the server
//
//	func TestDeploy(t *testing.T) {
//		s := mototest.Shared(t) // started on first use; state persists across tests
//		cmd.Env = append(os.Environ(), s.Env()...)
//	}
//
// A test that needs moto configured differently (MOTO_ECS_SERVICE_RUNNING=1, say) or a clean
// server of its own calls Start, which stops the server when the test ends. Moto keeps all state
// in memory; Reset empties it (on a shared server only when no other test is using it), or tests
// use names of their own.
//
// Requests need an Authorization header whose SigV4 credential scope names the service
// (".../us-east-1/ecs/aws4_request"): that is how moto routes a request to an emulated service.
// It checks no signature, so the AWS SDK's signing with the fake credentials of Env will do, and
// Call builds such a header for plain HTTP.
//
// Without moto_server on PATH the tests are skipped, unless DROVER_REQUIRE_MOTO is set (CI sets
// it): then they fail.
package mototest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Env names and the binary.
const (
	// RequireEnv, set to anything, turns a missing moto_server into a test failure.
	RequireEnv = "DROVER_REQUIRE_MOTO"
	// Binary is the program started, looked up on PATH (pip install 'moto[server]').
	Binary = "moto_server"
)

// Region is the region Env configures.
const Region = "us-east-1"

// ECSTarget prefixes the X-Amz-Target of ECS API calls: ECSTarget + "DescribeServices".
const ECSTarget = "AmazonEC2ContainerServiceV20141113."

const (
	// readyTimeout bounds the wait for a server to answer (it starts in ~1s on an idle machine).
	readyTimeout = 30 * time.Second
	// logTail is how much of a server's output is kept, and logged when a test using it fails.
	logTail = 16 << 10
)

// Server is a running moto_server.
type Server struct {
	url  string
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited and its output is drained
	log  *tailBuffer
}

// URL returns the server's base URL, http://127.0.0.1:PORT.
func (s *Server) URL() string { return s.url }

// Env returns the environment a drover process (or the AWS SDK) needs to talk to the server:
// Env(s.URL()).
func (s *Server) Env() []string { return Env(s.url) }

// Log returns the tail of the server's output (its request log, and tracebacks).
func (s *Server) Log() string { return s.log.String() }

// Reset empties the server: every emulated service forgets all it holds.
func (s *Server) Reset(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url+"/moto-api/reset", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("mototest: reset: %v", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("mototest: reset: %s", resp.Status)
	}
}

// stop kills the server (its whole process group) and waits for it to exit.
func (s *Server) stop() {
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	<-s.done
}

// logOnFailure logs the tail of the server's output when t has failed.
func (s *Server) logOnFailure(t testing.TB) {
	t.Helper()
	if t.Failed() {
		t.Logf("mototest: tail of moto_server's output (%s):\n%s", s.url, s.Log())
	}
}

// Env returns the environment that points a drover process (or the AWS SDK for Go v2) at an
// emulator at endpoint (a Server's URL, or a Proxy's): fake static credentials, the region,
// no instance metadata, and no shared config or credentials files, so a developer's ~/.aws
// does not leak into the test.
func Env(endpoint string) []string {
	return []string{
		"AWS_ENDPOINT_URL=" + endpoint,
		"AWS_ACCESS_KEY_ID=test",
		"AWS_SECRET_ACCESS_KEY=test",
		"AWS_SESSION_TOKEN=",
		"AWS_REGION=" + Region,
		"AWS_EC2_METADATA_DISABLED=true",
		"AWS_PROFILE=",
		"AWS_CONFIG_FILE=" + os.DevNull,
		"AWS_SHARED_CREDENTIALS_FILE=" + os.DevNull,
	}
}

// Start starts a moto_server of t's own, with env (KEY=VALUE, e.g. "MOTO_ECS_SERVICE_RUNNING=1")
// added to this process's environment, and kills it when t ends. If t fails, the tail of the
// server's output is logged. Without moto_server, t is skipped (see RequireEnv).
func Start(t testing.TB, env ...string) *Server {
	t.Helper()
	bin := lookBinary(t)
	s, err := launch(bin, env)
	if err != nil {
		t.Fatalf("mototest: %v", err)
	}
	t.Cleanup(func() {
		s.stop()
		s.logOnFailure(t)
	})
	return s
}

var (
	sharedMu  sync.Mutex
	shared    *Server
	sharedErr error
	sharedRan bool
)

// Main runs the tests, then stops the server Shared started. Call it from TestMain.
func Main(m *testing.M) {
	code := m.Run()
	Stop()
	os.Exit(code)
}

// Shared returns the test binary's shared moto_server (default configuration), starting it on
// first use. Main stops it; without Main it lives until the test binary exits, when the kernel
// kills it (it is started with a parent-death signal). State persists across the tests that use
// it. If t fails, the tail of the server's output is logged. Without moto_server, t is skipped
// (see RequireEnv).
func Shared(t testing.TB) *Server {
	t.Helper()
	bin := lookBinary(t)
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if !sharedRan {
		sharedRan = true
		shared, sharedErr = launch(bin, nil)
	}
	if sharedErr != nil {
		t.Fatalf("mototest: %v", sharedErr)
	}
	s := shared
	t.Cleanup(func() { s.logOnFailure(t) })
	return s
}

// Stop stops the server Shared started, if any; a later Shared starts a new one.
func Stop() {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared != nil {
		shared.stop()
	}
	shared, sharedErr, sharedRan = nil, nil, false
}

// lookBinary finds moto_server on PATH, or skips (fails under RequireEnv) t.
func lookBinary(t testing.TB) string {
	t.Helper()
	bin, err := exec.LookPath(Binary)
	if err != nil {
		if os.Getenv(RequireEnv) != "" {
			t.Fatalf("mototest: no %s on PATH, and %s is set (install moto's server: pip install 'moto[server]', or Debian's python3-moto)", Binary, RequireEnv)
		}
		t.Skipf("mototest: no %s on PATH (install moto's server: pip install 'moto[server]'; set %s=1 to fail instead)", Binary, RequireEnv)
	}
	return bin
}

// launch starts bin on a free port of 127.0.0.1 and waits until it answers.
func launch(bin string, env []string) (*Server, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	host, port, _ := net.SplitHostPort(addr)
	log := &tailBuffer{max: logTail}
	cmd := exec.Command(bin, "-H", host, "-p", port) //nolint:gosec // moto_server from PATH, with our own arguments
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = log, log
	// Its own process group, so stop kills whatever it runs (the pyenv shim execs, but other
	// wrappers may not); and killed with the test binary, should that die without cleaning up.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	s := &Server{url: "http://" + addr, cmd: cmd, done: make(chan struct{}), log: log}
	go func() { _ = cmd.Wait(); close(s.done) }()
	if err := s.waitReady(); err != nil {
		s.stop()
		return nil, fmt.Errorf("%w; its output:\n%s", err, s.Log())
	}
	return s, nil
}

// waitReady polls GET /moto-api/ until it answers 200, the process exits or readyTimeout passes.
func (s *Server) waitReady() error {
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(readyTimeout)
	for {
		resp, err := client.Get(s.url + "/moto-api/")
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-s.done:
			return fmt.Errorf("moto_server exited before it was ready (%v)", s.cmd.ProcessState)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("moto_server at %s not ready after %s", s.url, readyTimeout)
		}
	}
}

// Call posts an AWS JSON-protocol request to endpoint (a Server's URL, or a Proxy's), as the
// AWS SDK would but unsigned: X-Amz-Target target (e.g. ECSTarget+"ListClusters"), body (JSON;
// "" means {}), and an Authorization header naming service ("ecs") so moto routes it. It
// returns the status code and response body.
func Call(t testing.TB, endpoint, service, target, body string) (int, []byte) {
	t.Helper()
	if body == "" {
		body = "{}"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint+"/", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-amz-json-1.1")
	req.Header.Set("X-Amz-Target", target)
	req.Header.Set("Authorization", AuthorizationHeader(service))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("mototest: call %s: %v", target, err)
	}
	defer func() { _ = resp.Body.Close() }()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("mototest: call %s: read response: %v", target, err)
	}
	return resp.StatusCode, out
}

// AuthorizationHeader returns a SigV4-shaped Authorization header (with a bogus signature)
// whose credential scope names service in Region: all moto needs to route a request.
func AuthorizationHeader(service string) string {
	return fmt.Sprintf("AWS4-HMAC-SHA256 Credential=test/20240101/%s/%s/aws4_request, SignedHeaders=host;x-amz-date, Signature=0", Region, service)
}

// ThrottlingBody is what a throttled request is answered with (HTTP 400, Content-Type
// application/x-amz-json-1.1): the AWS JSON protocol's throttling error, which the AWS SDK for
// Go v2 retries with backoff (a standard retryer's quota allows about 100 such retries).
const ThrottlingBody = `{"__type":"ThrottlingException","message":"Rate exceeded"}`

// Proxy is an HTTP server on 127.0.0.1 that forwards requests to a target (a moto Server),
// counts them, and can answer some with a ThrottlingException instead.
type Proxy struct {
	srv *httptest.Server

	mu        sync.Mutex
	throttle  int             // the next this many requests (matching only) are throttled
	only      map[string]bool // X-Amz-Targets that can be throttled; nil: all
	total     int
	throttled int
	calls     map[string]int
}

// ProxyOption configures a Proxy.
type ProxyOption func(*Proxy)

// ThrottleFirst makes the proxy answer the first n requests (of the targets given to
// ThrottleOnly, if any) with HTTP 400 ThrottlingException instead of forwarding them.
func ThrottleFirst(n int) ProxyOption { return func(p *Proxy) { p.throttle = n } }

// ThrottleOnly restricts throttling to requests with these X-Amz-Targets (full, e.g.
// ECSTarget+"DescribeServices"); other requests are forwarded and counted but never throttled.
func ThrottleOnly(targets ...string) ProxyOption {
	return func(p *Proxy) {
		p.only = make(map[string]bool, len(targets))
		for _, tg := range targets {
			p.only[tg] = true
		}
	}
}

// NewProxy starts a Proxy to target (a base URL, e.g. a Server's) and closes it when t ends.
// Without options it forwards and counts every request.
func NewProxy(t testing.TB, target string, opts ...ProxyOption) *Proxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil || u.Scheme == "" || u.Host == "" {
		t.Fatalf("mototest: proxy target %q is not a base URL (%v)", target, err)
	}
	p := &Proxy{calls: map[string]int{}}
	for _, o := range opts {
		o(p)
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(u) },
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			http.Error(w, "mototest proxy: "+err.Error(), http.StatusBadGateway)
		},
	}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p.count(r.Header.Get("X-Amz-Target")) {
			w.Header().Set("Content-Type", "application/x-amz-json-1.1")
			w.Header().Set("X-Amzn-Requestid", "mototest-throttled")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, ThrottlingBody)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

// count records a request with X-Amz-Target target and reports whether to throttle it.
func (p *Proxy) count(target string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.total++
	p.calls[target]++
	if p.throttle > 0 && (p.only == nil || p.only[target]) {
		p.throttle--
		p.throttled++
		return true
	}
	return false
}

// URL returns the proxy's base URL, http://127.0.0.1:PORT: the endpoint to give the code under
// test (Env(p.URL())).
func (p *Proxy) URL() string { return p.srv.URL }

// Env returns Env(p.URL()).
func (p *Proxy) Env() []string { return Env(p.srv.URL) }

// Throttle makes the proxy throttle the next n requests (of the ThrottleOnly targets, if any),
// replacing what was left of an earlier count.
func (p *Proxy) Throttle(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.throttle = n
}

// Count returns how many requests the proxy received, throttled or forwarded.
func (p *Proxy) Count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.total
}

// Throttled returns how many requests the proxy answered with a ThrottlingException.
func (p *Proxy) Throttled() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.throttled
}

// Calls returns how many requests the proxy received (throttled or forwarded) per X-Amz-Target,
// e.g. Calls()[ECSTarget+"DescribeServices"]; requests without one count under "".
func (p *Proxy) Calls() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]int, len(p.calls))
	for k, v := range p.calls {
		out[k] = v
	}
	return out
}

// Reset zeroes the proxy's counts (not what is left to throttle).
func (p *Proxy) Reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.total, p.throttled, p.calls = 0, 0, map[string]int{}
}

// tailBuffer is an io.Writer that keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
	cut bool
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.max; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
		b.cut = true
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.cut {
		return string(b.buf)
	}
	// Start at a line boundary, and say that the beginning is gone.
	rest := b.buf
	if i := bytes.IndexByte(rest, '\n'); i >= 0 {
		rest = rest[i+1:]
	}
	return "[…]\n" + string(rest)
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String(), nil
}
