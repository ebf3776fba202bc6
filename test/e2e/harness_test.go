package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	apiv1 "github.com/drover-dev/drover/api/v1"
	"github.com/drover-dev/drover/internal/sealing"
)

// cliTimeout bounds every CLI invocation (wait commands pass a shorter --timeout).
const cliTimeout = 90 * time.Second

// server is one `drover server` process on a fixed data directory and
// address; it can be killed and started again on both.
type server struct {
	t       *testing.T
	data    string
	addr    string // 127.0.0.1:PORT, the same across restarts
	url     string
	flags   []string
	env     []string // added to the server's environment
	logPath string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	starts int
	// tokens are the API tokens of the identities tests act as (as),
	// made one at a time (under tokMu).
	tokMu  sync.Mutex
	tokens map[string]string
}

// newServer starts a server with its own data directory on a free port.
// extra flags (e.g. --poll-interval) are passed on every start.
func newServer(t *testing.T, flags ...string) *server {
	t.Helper()
	return newServerAt(t, freeAddr(t), flags...)
}

// newServerAt is newServer on addr (from freeAddr), for a test that must
// know the address before the server starts.
func newServerAt(t *testing.T, addr string, flags ...string) *server {
	t.Helper()
	return newServerEnv(t, addr, nil, flags...)
}

// newServerEnv is newServerAt with env added to the server's environment
// (an emulator's endpoint and credentials, say).
func newServerEnv(t *testing.T, addr string, env []string, flags ...string) *server {
	t.Helper()
	base := t.TempDir()
	s := &server{
		t:       t,
		data:    filepath.Join(base, "data"),
		addr:    addr,
		flags:   flags,
		env:     env,
		logPath: filepath.Join(base, "server.log"),
	}
	// Registered after TempDir, so it runs before the directory is removed.
	t.Cleanup(s.cleanup)
	s.start()
	return s
}

// freeAddr picks a free port on 127.0.0.1 and releases it for the server.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("pick a free port: %v", err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

var listeningRE = regexp.MustCompile(`drover server listening on (https?://\S+)`)

// start runs the server and waits for its "listening" line. A port that is
// briefly held by a stray client socket is retried for a few seconds.
func (s *server) start() {
	s.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		url, err := s.startOnce()
		if err == nil {
			if want := s.scheme() + "://" + s.addr; url != want {
				s.t.Fatalf("server printed address %s, want %s", url, want)
			}
			s.url = url
			return
		}
		if strings.Contains(err.Error(), "address already in use") && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		s.t.Fatalf("start server (start #%d): %v\n%s", s.starts, err, s.logTail(60))
	}
}

func (s *server) startOnce() (string, error) {
	logf, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return "", err
	}
	defer func() { _ = logf.Close() }()
	s.starts++
	fmt.Fprintf(logf, "=== e2e: start #%d at %s\n", s.starts, time.Now().Format(time.RFC3339Nano))
	pr, pw, err := os.Pipe()
	if err != nil {
		return "", err
	}
	args := append([]string{"server", "--data", s.data, "--listen", s.addr}, s.flags...)
	cmd := exec.Command(droverBin, args...)
	cmd.Stdout = pw
	cmd.Stderr = logf
	cmd.Env = append(cleanEnv(), s.env...)
	if err := cmd.Start(); err != nil {
		_ = pr.Close()
		_ = pw.Close()
		return "", err
	}
	_ = pw.Close()
	exited := make(chan struct{})
	s.mu.Lock()
	s.cmd, s.exited = cmd, exited
	s.mu.Unlock()
	urlc := make(chan string, 1)
	// The reader copies stdout to the log after the listening line; its file
	// is a dup so it outlives logf.
	outLog, _ := os.OpenFile(s.logPath, os.O_APPEND|os.O_WRONLY, 0o644)
	go func() {
		defer func() { _ = pr.Close() }()
		if outLog != nil {
			defer func() { _ = outLog.Close() }()
		}
		sc := bufio.NewScanner(pr)
		sent := false
		for sc.Scan() {
			line := sc.Text()
			if outLog != nil {
				fmt.Fprintln(outLog, "stdout: "+line)
			}
			if m := listeningRE.FindStringSubmatch(line); m != nil && !sent {
				urlc <- m[1]
				sent = true
			}
		}
	}()
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	select {
	case url := <-urlc:
		return url, nil
	case <-exited:
		tail := s.logTail(20)
		return "", fmt.Errorf("server exited (%v) before listening:\n%s", cmd.ProcessState, tail)
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-exited
		return "", errors.New("server did not print its address within 30s")
	}
}

// kill sends SIGKILL and waits for the process to be gone.
func (s *server) kill() {
	s.t.Helper()
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.mu.Unlock()
	if cmd == nil {
		s.t.Fatal("kill: server not running")
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		s.t.Fatalf("kill -9 server: %v", err)
	}
	<-exited
	s.mu.Lock()
	s.cmd = nil
	s.mu.Unlock()
}

// stop stops the server gracefully (SIGTERM), to be started again.
func (s *server) stop() {
	s.t.Helper()
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.mu.Unlock()
	if cmd == nil {
		s.t.Fatal("stop: server not running")
	}
	stopServer(s, cmd, exited)
	s.mu.Lock()
	s.cmd = nil
	s.mu.Unlock()
}

// pid is the running server's process id (0 when it is not running).
func (s *server) pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// restart is kill -9 followed by a start on the same data directory and address.
func (s *server) restart() {
	s.t.Helper()
	s.kill()
	s.start()
}

// cleanup stops the server gracefully (SIGTERM, the Ctrl-C path) and fails
// the test if the server reported a data race or a panic.
func (s *server) cleanup() {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.mu.Unlock()
	if cmd != nil {
		stopServer(s, cmd, exited)
		return
	}
	s.checkLog()
}

// stopServer stops a server process with SIGTERM (SIGKILL after 45s: an
// apply in flight may run for the default --shutdown-grace of 30s) and
// checks its log.
func stopServer(s *server, cmd *exec.Cmd, exited chan struct{}) {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(45 * time.Second):
		s.t.Errorf("server did not stop within 45s of SIGTERM; killing it")
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-exited
	}
	s.checkLog()
}

// checkLog fails the test if the server log reports a data race or a panic,
// and shows the log's end when the test failed.
func (s *server) checkLog() {
	logText, _ := os.ReadFile(s.logPath)
	for _, bad := range []string{"WARNING: DATA RACE", "panic:"} {
		if i := bytes.Index(logText, []byte(bad)); i >= 0 {
			s.t.Errorf("server log contains %q:\n%s", bad, logText[i:min(len(logText), i+6000)])
		}
	}
	if s.t.Failed() {
		s.t.Logf("server log (%s), last lines:\n%s", s.logPath, s.logTail(80))
	}
}

func (s *server) logTail(n int) string {
	data, err := os.ReadFile(s.logPath)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// cleanEnv is the environment without DROVER_* variables and KUBECONFIG, so
// a developer's settings cannot leak into the tests (every runtime names its
// cluster). A binary built with -race sleeps 1s
// at exit by default (atexit_sleep_ms); every CLI call would pay it.
func cleanEnv() []string {
	var env []string
	gorace := "atexit_sleep_ms=0"
	for _, kv := range os.Environ() {
		switch {
		case strings.HasPrefix(kv, "DROVER_"), strings.HasPrefix(kv, "XDG_CONFIG_HOME="), strings.HasPrefix(kv, "KUBECONFIG="):
		case strings.HasPrefix(kv, "GORACE="):
			gorace = strings.TrimPrefix(kv, "GORACE=") + " " + gorace
		default:
			env = append(env, kv)
		}
	}
	if configHome != "" {
		env = append(env, "XDG_CONFIG_HOME="+configHome)
	}
	return append(env, "GORACE="+gorace)
}

// result is one CLI run.
type result struct {
	args           []string
	stdout, stderr string
	code           int
}

func (r result) String() string {
	return fmt.Sprintf("drover %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(r.args, " "), r.code, r.stdout, r.stderr)
}

// runDrover runs the binary with args (no implicit flags).
func runDrover(t *testing.T, args ...string) result {
	t.Helper()
	r, err := execDrover(cliTimeout, args)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// execDrover runs the binary with args within timeout; err reports a run
// that could not start or did not finish (a non-zero exit is r.code).
func execDrover(timeout time.Duration, args []string) (result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, droverBin, args...)
	cmd.Env = cleanEnv()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := result{args: args, stdout: stdout.String(), stderr: stderr.String()}
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		return r, fmt.Errorf("drover %v did not finish within %s", args, timeout)
	case err == nil:
	case errors.As(err, &exit):
		r.code = exit.ExitCode()
	default:
		return r, fmt.Errorf("run drover %v: %w", args, err)
	}
	return r, nil
}

// as runs a CLI verb against this server as the identity user: with an
// API token named user (lower-cased), an admin of everything, made with the
// server's local token the first time.
func (s *server) as(user string, args ...string) result {
	s.t.Helper()
	return runDrover(s.t, append(args, "--server", s.url, "--token", s.tokenOf(user))...)
}

// tokenOf returns the API token of the identity name (lower-cased), an
// admin of everything, creating it the first time.
func (s *server) tokenOf(name string) string {
	s.t.Helper()
	name = strings.ToLower(name)
	s.tokMu.Lock()
	defer s.tokMu.Unlock()
	if tok, ok := s.tokens[name]; ok {
		return tok
	}
	r := runDrover(s.t, "tokens", "create", name, "--role", "admin", "-o", "json", "--server", s.url)
	if r.code != 0 && strings.Contains(r.stderr, "exists") {
		// Another server of this test shares the store and made it.
		testTokensMu.Lock()
		tok, ok := testTokens[topTest(s.t)+"\x00"+name]
		testTokensMu.Unlock()
		if ok {
			return tok
		}
	}
	if r.code != 0 {
		s.t.Fatalf("create the token of %s: %s", name, r)
	}
	var resp apiv1.CreateTokenResponse
	if err := json.Unmarshal([]byte(r.stdout), &resp); err != nil || resp.Token == "" {
		s.t.Fatalf("create the token of %s: %v: %s", name, err, r)
	}
	if s.tokens == nil {
		s.tokens = map[string]string{}
	}
	s.tokens[name] = resp.Token
	testTokensMu.Lock()
	testTokens[topTest(s.t)+"\x00"+name] = resp.Token
	testTokensMu.Unlock()
	return resp.Token
}

// topTest is the name of t's top-level test.
func topTest(t *testing.T) string {
	name, _, _ := strings.Cut(t.Name(), "/")
	return name
}

// testTokens are the tokens tokenOf made, by top-level test and name:
// servers of one test sharing a store (replicas, views of one server in
// subtests) share them.
var (
	testTokensMu sync.Mutex
	testTokens   = map[string]string{}
)

// ok runs a verb as user and fails the test unless it exits 0.
func (s *server) ok(user string, args ...string) result {
	s.t.Helper()
	r := s.as(user, args...)
	if r.code != 0 {
		s.t.Fatalf("unexpected failure: %s", r)
	}
	return r
}

var pushedRE = regexp.MustCompile(`pushed \S+ (?:\S+ \()?(v-[0-9a-f]+)\)?: desired state (ds-\S+)`)

// push runs drover push and returns the bundle version and desired state id.
func (s *server) push(user, app, svc string, params ...string) (version, dsID string) {
	s.t.Helper()
	args := []string{"push", svc, "--app", app}
	for _, p := range params {
		args = append(args, "--param", p)
	}
	r := s.ok(user, args...)
	m := pushedRE.FindStringSubmatch(r.stdout)
	if m == nil {
		s.t.Fatalf("cannot parse the push output: %s", r)
	}
	return m[1], m[2]
}

// status runs drover status -o json.
func (s *server) status(app, svc string) *apiv1.ServiceStatus {
	s.t.Helper()
	r := s.ok("e2e", "status", svc, "--app", app, "-o", "json")
	var st apiv1.ServiceStatus
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
		s.t.Fatalf("decode status: %v\n%s", err, r)
	}
	return &st
}

// waitStatus polls the status until cond holds, failing after timeout. It
// reads the API directly (s.status runs the CLI): a CLI run per sample
// takes long enough on a loaded machine to miss a state that lasts a
// second (a rollback, a rollout step).
func (s *server) waitStatus(app, svc string, timeout time.Duration, what string, cond func(*apiv1.ServiceStatus) bool) *apiv1.ServiceStatus {
	s.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		st := s.statusHTTP(app, svc)
		if cond(st) {
			return st
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("timed out after %s waiting for %s; last status:\n%s", timeout, what, dump(st))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// statusHTTP fetches the status from the API directly: much cheaper than a
// CLI run, for dense sampling of an invariant.
func (s *server) statusHTTP(app, svc string) *apiv1.ServiceStatus {
	s.t.Helper()
	var st apiv1.ServiceStatus
	if err := s.getJSON("/v1/apps/"+app+"/services/"+svc, &st); err != nil {
		s.t.Fatalf("status: %v", err)
	}
	return &st
}

// sampleStatus polls the API every 20ms, calling check on each sample, until
// check returns true (it may fail the test); it fails after timeout.
func (s *server) sampleStatus(app, svc string, timeout time.Duration, what string, check func(*apiv1.ServiceStatus) bool) {
	s.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		st := s.statusHTTP(app, svc)
		if check(st) {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("timed out after %s waiting for %s; last status:\n%s", timeout, what, dump(st))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// events runs drover events -o json.
func (s *server) events(app, svc string) []apiv1.Event {
	s.t.Helper()
	r := s.ok("e2e", "events", svc, "--app", app, "-o", "json")
	var out []apiv1.Event
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	for {
		var e apiv1.Event
		if err := dec.Decode(&e); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			s.t.Fatalf("decode events: %v\n%s", err, r)
		}
		out = append(out, e)
	}
	return out
}

// token is the server's token, from its data directory.
func (s *server) token() string {
	s.t.Helper()
	return readToken(s.t, s.data)
}

func readToken(t testing.TB, data string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(data, "token"))
	if err != nil {
		t.Fatalf("read the server's token: %v", err)
	}
	return strings.TrimSpace(string(raw))
}

// newAPIRequest builds every raw API request of the tests, with the
// server's token and, for a body, the JSON content type.
func newAPIRequest(method, url, token string, body io.Reader) (*http.Request, error) {
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return req, nil
}

// scheme is the server's: https when its flags ask for TLS.
func (s *server) scheme() string {
	for _, f := range s.flags {
		if f == "--tls" || f == "--tls-cert" {
			return "https"
		}
	}
	return "http"
}

// fingerprint is the SHA-256 (hex) of the self-signed certificate a server
// with --tls made in its data directory.
func (s *server) fingerprint() string {
	s.t.Helper()
	raw, err := os.ReadFile(filepath.Join(s.data, "api-tls", "cert.pem"))
	if err != nil {
		s.t.Fatalf("the server's certificate: %v", err)
	}
	block, _ := pem.Decode(raw)
	if block == nil {
		s.t.Fatalf("the server's certificate: no PEM block")
	}
	sum := sha256.Sum256(block.Bytes)
	return hex.EncodeToString(sum[:])
}

// httpClient is a client of the server's API: for https, pinning its
// certificate.
func (s *server) httpClient() *http.Client {
	if !strings.HasPrefix(s.url, "https://") {
		return http.DefaultClient
	}
	want := s.fingerprint()
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{
		MinVersion: tls.VersionTLS12, InsecureSkipVerify: true, //nolint:gosec // the certificate is pinned below
		VerifyConnection: func(cs tls.ConnectionState) error {
			sum := sha256.Sum256(cs.PeerCertificates[0].Raw)
			if hex.EncodeToString(sum[:]) != want {
				return errors.New("not the server's certificate")
			}
			return nil
		},
	}}}
}

// getJSON fetches a GET endpoint of the API directly.
func (s *server) getJSON(path string, out any) error {
	return getJSONAs(s, path, s.token(), out)
}

// getJSONAs is getJSON with the API token tok.
func getJSONAs(s *server, path, tok string, out any) error {
	req, err := newAPIRequest(http.MethodGet, s.url+path, tok, nil)
	if err != nil {
		return err
	}
	resp, err := s.httpClient().Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", path, resp.Status, body)
	}
	if raw, ok := out.(*[]byte); ok {
		*raw = body
		return nil
	}
	return json.Unmarshal(body, out)
}

// channel returns the named channel of a status, failing the test if absent.
func channel(t *testing.T, st *apiv1.ServiceStatus, name string) *apiv1.ChannelStatus {
	t.Helper()
	if c := findChannel(st, name); c != nil {
		return c
	}
	t.Fatalf("status has no release channel %q:\n%s", name, dump(st))
	return nil
}

func findChannel(st *apiv1.ServiceStatus, name string) *apiv1.ChannelStatus {
	for i := range st.ReleaseChannels {
		if st.ReleaseChannels[i].Name == name {
			return &st.ReleaseChannels[i]
		}
	}
	return nil
}

// converged reports whether every channel runs version converged.
func converged(version string) func(*apiv1.ServiceStatus) bool {
	return func(st *apiv1.ServiceStatus) bool {
		if st.Status != "CONVERGED" || len(st.ReleaseChannels) == 0 {
			return false
		}
		for _, c := range st.ReleaseChannels {
			if c.Status != "CONVERGED" || c.Version != version {
				return false
			}
		}
		return true
	}
}

// channelIs reports whether channel name has the given status and version.
func channelIs(name, status, version string) func(*apiv1.ServiceStatus) bool {
	return func(st *apiv1.ServiceStatus) bool {
		c := findChannel(st, name)
		return c != nil && c.Status == status && c.Version == version
	}
}

func approvedBy(c *apiv1.ChannelStatus) []string {
	var out []string
	for _, a := range c.Approvals {
		out = append(out, a.ApprovedBy...)
	}
	return out
}

func dump(v any) string {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// writeTree writes files (relative path -> content) under dir.
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for rel, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// copyQuickstart copies examples/quickstart into a new directory, with
// rollouts of rollout instead of the default 3s.
func copyQuickstart(t *testing.T, rollout string) string {
	t.Helper()
	src := filepath.Join(repoRoot, "examples", "quickstart")
	dst := filepath.Join(t.TempDir(), "quickstart")
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if strings.HasPrefix(rel, "runtimes"+string(filepath.Separator)) {
			if !bytes.Contains(data, []byte("fake: {}")) {
				return fmt.Errorf("%s: no `fake: {}` to set the rollout duration in", rel)
			}
			data = bytes.ReplaceAll(data, []byte("fake: {}"), []byte(`fake: {rolloutDuration: "`+rollout+`"}`))
		}
		return os.WriteFile(target, data, 0o644)
	})
	if err != nil {
		t.Fatalf("copy the quickstart: %v", err)
	}
	return dst
}

// Service files shared by the trees the tests write: the quickstart's web
// service under another application.
func webService(app string) map[string]string { return serviceFiles(app, "web") }

// serviceFiles is a service like the quickstart's web, named name.
func serviceFiles(app, name string) map[string]string {
	return map[string]string{
		"services/" + name + "/" + name + ".pvn.yaml": `service:
  name: ` + name + `
  application: ` + app + `
  kubernetesConfig:
    type: KUBERNETES
    local:
      path: .
    patches:
      - target:
          kind: Deployment
          name: ` + name + `
        replace:
          path: /spec/replicas
          intAsString: "{{.Constants.replicas}}"
  parameters:
    - name: image
      description: container image
      required: true
      dockerImage:
        imageRegistryInfo:
          containerRegistry: dockerhub-public
          imageRepository: library/nginx
`,
		"services/" + name + "/deployment.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: ` + name + `
spec:
  replicas: 1
  selector:
    matchLabels:
      app: ` + name + `
  template:
    metadata:
      labels:
        app: ` + name + `
    spec:
      containers:
        - name: ` + name + `
          image: "{{.Params.image}}"
          env:
            - name: RELEASE_CHANNEL
              value: "{{.Builtins.ReleaseChannel.Name}}"
`,
	}
}

// fakeRuntime is a fake runtime config.
func fakeRuntime(name, rollout, failVersions string) string {
	extra := ""
	if failVersions != "" {
		extra = fmt.Sprintf(", failVersions: %q", failVersions)
	}
	return fmt.Sprintf("runtime:\n  name: %s\n  fake: {rolloutDuration: %q%s}\n", name, rollout, extra)
}

// twoChannelTree is the quickstart's shape under application app: staging,
// then prod after staging is stable and one approval.
func twoChannelTree(t *testing.T, app, rollout string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), app)
	files := webService(app)
	files["runtimes/staging.pvn.yaml"] = fakeRuntime("staging", rollout, "")
	files["runtimes/prod.pvn.yaml"] = fakeRuntime("prod", rollout, "")
	files["app.pvn.yaml"] = `application:
  name: ` + app + `
  releaseChannels:
    - name: staging
      runtimes:
        - runtime: staging
      constants:
        - name: replicas
          string:
            value: "1"
    - name: prod
      runtimes:
        - runtime: prod
      constants:
        - name: replicas
          string:
            value: "3"
      preconditions:
        - releaseChannelStable:
            releaseChannel: staging
        - manualApproval: {}
`
	writeTree(t, dir, files)
	return dir
}

// compiledVersion compiles the service locally (drover compile) and returns
// the bundle version a push with params would get.
func compiledVersion(t *testing.T, dir, app, svc string, params ...string) string {
	t.Helper()
	args := []string{"compile", dir + "/...", "--app", app, "--service", svc, "-o", "json"}
	for _, p := range params {
		args = append(args, "--param", p)
	}
	r := runDrover(t, args...)
	if r.code != 0 {
		t.Fatalf("compile failed: %s", r)
	}
	var out struct {
		BundleVersion string `json:"bundleVersion"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || out.BundleVersion == "" {
		t.Fatalf("no bundleVersion in the compile output (%v): %s", err, r)
	}
	return out.BundleVersion
}

// eventTypes returns the events' types in order, with their channel.
func eventKeys(evs []apiv1.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Type
		if e.ReleaseChannel != "" {
			out[i] += "/" + e.ReleaseChannel
		}
	}
	return out
}

// indexOf returns the index of the first event with type typ (and channel
// rc, when not empty) at or after from, or -1.
func indexOf(evs []apiv1.Event, from int, typ, rc string) int {
	for i := from; i < len(evs); i++ {
		if evs[i].Type == typ && (rc == "" || evs[i].ReleaseChannel == rc) {
			return i
		}
	}
	return -1
}

// checkSeqs fails unless the events' seqs strictly increase.
func checkSeqs(t *testing.T, evs []apiv1.Event) {
	t.Helper()
	for i := 1; i < len(evs); i++ {
		if evs[i].Seq <= evs[i-1].Seq {
			t.Errorf("event seqs not strictly increasing at %d: %d then %d", i, evs[i-1].Seq, evs[i].Seq)
		}
	}
}

// sharedKeyring is a keyring file for the servers of a test sharing a
// PostgreSQL database (each replica must hold the same key).
func sharedKeyring(t *testing.T) string {
	t.Helper()
	keyringsMu.Lock()
	defer keyringsMu.Unlock()
	if path, ok := keyrings[t.Name()]; ok {
		return path
	}
	path := filepath.Join(t.TempDir(), "secrets.key")
	if err := os.WriteFile(path, []byte(sealing.NewKey()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	keyrings[t.Name()] = path
	return path
}

var (
	keyringsMu sync.Mutex
	keyrings   = map[string]string{}
)

// atRest passes check every file of the stopped server's data directory
// but its keyring (the database and its WAL included), and its log: where
// a secret must not be in clear.
func (s *server) atRest(t *testing.T, check func(where, text string)) {
	t.Helper()
	err := filepath.WalkDir(s.data, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() == "secrets.key" {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		check(path, string(b))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	logText, err := os.ReadFile(s.logPath)
	if err != nil {
		t.Fatal(err)
	}
	check("the server log", string(logText))
}
