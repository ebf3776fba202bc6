// Package kubetest gives tests a real Kubernetes control plane: etcd, kube-apiserver,
// kube-controller-manager and kube-scheduler (v1.33.13) plus kwok simulating 2 Ready nodes, all
// on 127.0.0.1, started by hack/kube/up.sh. Pods on the simulated nodes turn Running and Ready at
// once (no containers run), so Deployments roll out and Jobs complete. See hack/kube/up.sh for the
// labels that simulate failures.
//
// Most tests share one cluster per test binary:
//
//	func TestMain(m *testing.M) { kubetest.Main(m) } // runs the tests, then Stop
//
//	func TestDeploy(t *testing.T) {
//		c := kubetest.Shared(t)
//		// use c.Kubeconfig; give each test its own namespace
//	}
//
// Start gives a test a cluster of its own instead (~6-8 s to start with cached binaries).
//
// The binaries are built from the Go module proxy by hack/kube/build.sh on first use and cached in
// ~/.cache/drover-kube (DROVER_KUBE_CACHE); a cold build takes ~10 minutes, longer than go test's
// default -timeout, so on a new machine run `bash hack/kube/build.sh` (or make e2e) first.
// DROVER_SKIP_KUBE=1 skips every test that asks for a cluster. The processes of a cluster are
// stopped when the test binary exits even if Stop never runs (a watchdog started by up.sh).
package kubetest

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// SkipEnv is the environment variable that, set to 1, makes Start and Shared skip the test.
const SkipEnv = "DROVER_SKIP_KUBE"

// Cluster is a running local control plane.
type Cluster struct {
	// Kubeconfig is the path of the admin kubeconfig (user in group system:masters: allowed
	// everything, including GET /metrics). It is JSON, which is valid kubeconfig YAML.
	Kubeconfig string
	// Server is the apiserver URL from Kubeconfig, https://127.0.0.1:PORT.
	Server string
	// StateDir holds the kubeconfig, certificates (pki/), logs (logs/), recorded pids and
	// cluster.env (ports and paths as DROVER_KUBE_* shell variables).
	StateDir string

	tlsConfig *tls.Config
	repo      string
}

// Start starts a cluster for this test alone and stops it when the test ends.
func Start(t testing.TB) *Cluster {
	t.Helper()
	skipUnlessSupported(t)
	dir := t.TempDir() // registered first, so its removal runs after the stop below
	c, err := start(t, dir)
	if c != nil {
		t.Cleanup(func() {
			if err := c.stop(); err != nil {
				t.Errorf("kubetest: stopping the cluster: %v", err)
			}
		})
	}
	if err != nil {
		t.Fatalf("kubetest: %v", err)
	}
	return c
}

var shared struct {
	mu      sync.Mutex
	cluster *Cluster
	dir     string
	err     error
}

// Shared returns the test binary's shared cluster, starting it on first use. Give each test its
// own namespace. The caller's TestMain must call Stop after m.Run (Main does that); if it does
// not, the cluster still stops once the test binary exits, but its state dir stays in the
// temporary directory.
func Shared(t testing.TB) *Cluster {
	t.Helper()
	skipUnlessSupported(t)
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.err != nil {
		t.Fatalf("kubetest: the shared cluster failed to start earlier: %v", shared.err)
	}
	if shared.cluster != nil {
		return shared.cluster
	}
	dir, err := os.MkdirTemp("", "drover-kube-shared-")
	if err != nil {
		t.Fatalf("kubetest: %v", err)
	}
	shared.dir = dir
	c, err := start(t, dir)
	shared.cluster = c
	if err != nil {
		shared.err = err
		t.Fatalf("kubetest: %v", err)
	}
	return c
}

// Stop stops the shared cluster, if Shared started one, and removes its state dir. Call it from
// TestMain after m.Run. A later Shared starts a new cluster.
func Stop() {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.cluster != nil {
		if err := shared.cluster.stop(); err != nil {
			fmt.Fprintf(os.Stderr, "kubetest: stopping the shared cluster: %v (state kept in %s)\n", err, shared.dir)
			shared.cluster, shared.err = nil, nil
			return
		}
	}
	if shared.dir != "" {
		_ = os.RemoveAll(shared.dir)
	}
	shared.cluster, shared.dir, shared.err = nil, "", nil
}

// Main runs the tests and then stops the shared cluster: use it as the whole of TestMain.
func Main(m *testing.M) {
	code := m.Run()
	Stop()
	os.Exit(code)
}

// Wait polls cond every 100 ms until it returns true, and fails the test when timeout passes
// first.
func Wait(t testing.TB, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("kubetest: condition not met within %v", timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TLSConfig returns a TLS configuration that trusts the cluster's CA and authenticates as the
// admin user. It is a clone; callers may change it.
func (c *Cluster) TLSConfig() *tls.Config { return c.tlsConfig.Clone() }

// HTTPClient returns an HTTP client for c.Server authenticated as the admin user.
func (c *Cluster) HTTPClient() *http.Client {
	return &http.Client{
		Timeout:   30 * time.Second,
		Transport: &http.Transport{TLSClientConfig: c.TLSConfig()},
	}
}

// Get requests path (e.g. "/api/v1/nodes" or "/metrics") from the apiserver as the admin user
// and returns the body; it fails the test unless the status is 2xx.
func (c *Cluster) Get(t testing.TB, path string) []byte {
	t.Helper()
	resp, err := c.HTTPClient().Get(c.Server + path)
	if err != nil {
		t.Fatalf("kubetest: GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("kubetest: GET %s: reading the body: %v", path, err)
	}
	if resp.StatusCode/100 != 2 {
		t.Fatalf("kubetest: GET %s: %s: %s", path, resp.Status, bytes.TrimSpace(body))
	}
	return body
}

// KubectlCommand returns a kubectl command (not started) for the cluster with the admin
// kubeconfig. kubectl is $DROVER_KUBECTL or the one on PATH; without one the test is skipped.
func (c *Cluster) KubectlCommand(t testing.TB, args ...string) *exec.Cmd {
	t.Helper()
	kubectl := os.Getenv("DROVER_KUBECTL")
	if kubectl == "" {
		var err error
		if kubectl, err = exec.LookPath("kubectl"); err != nil {
			t.Skip("kubetest: kubectl not found on PATH (set DROVER_KUBECTL)")
		}
	}
	cmd := exec.Command(kubectl, append([]string{"--kubeconfig", c.Kubeconfig}, args...)...) //nolint:gosec // running kubectl is the point
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.Kubeconfig)
	return cmd
}

// Kubectl runs kubectl with args against the cluster and returns its stdout; it fails the test
// when kubectl fails, and skips it when there is no kubectl (see KubectlCommand).
func (c *Cluster) Kubectl(t testing.TB, args ...string) string {
	t.Helper()
	cmd := c.KubectlCommand(t, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubetest: kubectl %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.Bytes())
	}
	return string(out)
}

// LoadKubeconfig reads a kubeconfig written by hack/kube/up.sh and returns the server URL and a
// TLS configuration with its CA and client certificate.
func LoadKubeconfig(path string) (server string, cfg *tls.Config, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", nil, err
	}
	var kc struct {
		CurrentContext string `json:"current-context"`
		Contexts       []struct {
			Name    string `json:"name"`
			Context struct {
				Cluster string `json:"cluster"`
				User    string `json:"user"`
			} `json:"context"`
		} `json:"contexts"`
		Clusters []struct {
			Name    string `json:"name"`
			Cluster struct {
				Server string `json:"server"`
				CA     []byte `json:"certificate-authority-data"`
			} `json:"cluster"`
		} `json:"clusters"`
		Users []struct {
			Name string `json:"name"`
			User struct {
				Cert []byte `json:"client-certificate-data"`
				Key  []byte `json:"client-key-data"`
			} `json:"user"`
		} `json:"users"`
	}
	if err := json.Unmarshal(data, &kc); err != nil {
		return "", nil, fmt.Errorf("%s: not a kubeconfig written by hack/kube/up.sh (JSON): %w", path, err)
	}
	var clusterName, userName string
	for _, ctx := range kc.Contexts {
		if ctx.Name == kc.CurrentContext {
			clusterName, userName = ctx.Context.Cluster, ctx.Context.User
		}
	}
	cfg = &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: x509.NewCertPool()}
	for _, cl := range kc.Clusters {
		if cl.Name == clusterName {
			server = cl.Cluster.Server
			if !cfg.RootCAs.AppendCertsFromPEM(cl.Cluster.CA) {
				return "", nil, fmt.Errorf("%s: no CA certificate for cluster %q", path, clusterName)
			}
		}
	}
	for _, u := range kc.Users {
		if u.Name == userName {
			cert, err := tls.X509KeyPair(u.User.Cert, u.User.Key)
			if err != nil {
				return "", nil, fmt.Errorf("%s: client certificate of user %q: %w", path, userName, err)
			}
			cfg.Certificates = []tls.Certificate{cert}
		}
	}
	if server == "" || len(cfg.Certificates) == 0 {
		return "", nil, fmt.Errorf("%s: current context %q has no server or no client certificate", path, kc.CurrentContext)
	}
	return server, cfg, nil
}

func skipUnlessSupported(t testing.TB) {
	t.Helper()
	if os.Getenv(SkipEnv) == "1" {
		t.Skipf("kubetest: %s=1", SkipEnv)
	}
	if runtime.GOOS != "linux" {
		t.Skipf("kubetest: the local Kubernetes cluster needs Linux, not %s", runtime.GOOS)
	}
}

// start builds the binaries if needed and runs up.sh on dir. A non-nil Cluster is returned
// whenever up.sh ran, so the caller can stop whatever it started.
func start(t testing.TB, dir string) (*Cluster, error) {
	t.Helper()
	repo, err := repoRoot()
	if err != nil {
		return nil, err
	}
	scripts := filepath.Join(repo, "hack", "kube")
	if err := exec.Command("bash", filepath.Join(scripts, "build.sh"), "--check").Run(); err != nil { //nolint:gosec // our own script
		msg := "kubetest: building the Kubernetes binaries with hack/kube/build.sh; on a cold machine this takes ~10 minutes"
		fmt.Fprintln(os.Stderr, msg)
		t.Log(msg)
		if _, err := runScript(t, filepath.Join(scripts, "build.sh")); err != nil {
			return nil, fmt.Errorf("hack/kube/build.sh: %w", err)
		}
	}
	c := &Cluster{StateDir: dir, repo: repo}
	began := time.Now()
	out, err := runScript(t, filepath.Join(scripts, "up.sh"), dir)
	if err != nil {
		return c, fmt.Errorf("hack/kube/up.sh %s: %w", dir, err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	c.Kubeconfig = lines[len(lines)-1]
	if c.Server, c.tlsConfig, err = LoadKubeconfig(c.Kubeconfig); err != nil {
		return c, err
	}
	t.Logf("kubetest: cluster up in %v: %s (state in %s)", time.Since(began).Round(100*time.Millisecond), c.Server, dir)
	return c, nil
}

func (c *Cluster) stop() error {
	_, err := runScript(nil, filepath.Join(c.repo, "hack", "kube", "down.sh"), c.StateDir)
	return err
}

// runScript runs a bash script, logging its stderr line by line to t (when not nil), and returns
// its stdout. On failure the error includes the end of stderr.
func runScript(t testing.TB, script string, args ...string) (string, error) {
	cmd := exec.Command("bash", append([]string{script}, args...)...) //nolint:gosec // our own scripts
	// The cluster's watchdog stops it when this process exits, even if Stop or a cleanup never runs.
	cmd.Env = append(os.Environ(),
		"DROVER_KUBE_OWNER_PID="+strconv.Itoa(os.Getpid()),
		"DROVER_KUBE_PURGE_ON_OWNER_EXIT=1", // the state dirs are temporary ones of ours
	)
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	tail := &lineLog{t: t}
	cmd.Stderr = tail
	// The scripts' background processes write only to their own log files; this is a safety net
	// so that a stray inherited pipe can never hang the test.
	cmd.WaitDelay = 10 * time.Second
	err := cmd.Run()
	tail.flush()
	if err != nil {
		return stdout.String(), fmt.Errorf("%w; last output:\n%s", err, strings.Join(tail.last, "\n"))
	}
	return stdout.String(), nil
}

// lineLog logs complete lines to t and keeps the last 40 for error messages.
type lineLog struct {
	t       testing.TB
	partial []byte
	last    []string
}

func (l *lineLog) Write(p []byte) (int, error) {
	l.partial = append(l.partial, p...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			return len(p), nil
		}
		l.line(string(l.partial[:i]))
		l.partial = l.partial[i+1:]
	}
}

func (l *lineLog) flush() {
	if len(l.partial) > 0 {
		l.line(string(l.partial))
		l.partial = nil
	}
}

func (l *lineLog) line(s string) {
	if l.t != nil {
		l.t.Log(s)
	}
	l.last = append(l.last, s)
	if len(l.last) > 40 {
		l.last = l.last[1:]
	}
}

// repoRoot finds the repository root: from this file's path, else from `go env GOMOD` (the
// working directory of a test is its package directory).
func repoRoot() (string, error) {
	isRoot := func(dir string) bool {
		_, err := os.Stat(filepath.Join(dir, "hack", "kube", "up.sh"))
		return err == nil
	}
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		if dir := filepath.Join(filepath.Dir(file), "..", "..", ".."); isRoot(dir) {
			return filepath.Clean(dir), nil
		}
	}
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("finding the repository root with go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("finding the repository root: not inside the drover module")
	}
	if dir := filepath.Dir(gomod); isRoot(dir) {
		return dir, nil
	}
	return "", fmt.Errorf("finding the repository root: no hack/kube/up.sh next to %s", gomod)
}
