package e2e

import (
	"bufio"
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/testing/pgtest"
)

// TestReplicasDocFirstCommandRuns runs the first command block of
// docs/replicas.md as written, in bash, with only its host-specific parts
// replaced (the key's and data directory's paths, the database URL, the
// port): the server must start on the shared database and answer its
// readiness probe.
func TestReplicasDocFirstCommandRuns(t *testing.T) {
	requireE2E(t)
	raw, err := os.ReadFile(filepath.Join(repoRoot, "docs", "replicas.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(raw), "```sh\n")
	block, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 || !strings.Contains(block, "drover server") {
		t.Fatalf("docs/replicas.md has no sh block with drover server")
	}
	tmp := t.TempDir()
	if err := os.MkdirAll(filepath.Join(tmp, "etc"), 0o700); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	script := strings.NewReplacer(
		"/etc/drover/", filepath.Join(tmp, "etc")+"/",
		"/var/lib/drover", filepath.Join(tmp, "data"),
		"postgres://drover@db.internal:5432/drover", pgtest.NewDatabase(t),
		"0.0.0.0:7420", "0.0.0.0:"+strconv.Itoa(port),
	).Replace(block)
	for _, part := range []string{"/etc/drover", "/var/lib/drover", "db.internal", ":7420"} {
		if strings.Contains(script, part) {
			t.Fatalf("the block changed: %q is left in\n%s", part, script)
		}
	}
	binDir := t.TempDir()
	if err := os.Symlink(droverBin, filepath.Join(binDir, "drover")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-eu", "-c", script)
	cmd.Env = append(cleanEnv(), "PATH="+binDir+":"+os.Getenv("PATH"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	cmd.WaitDelay = 15 * time.Second
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		_ = cmd.Wait()
	}()
	listening := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "drover server listening on ") {
				listening <- sc.Text()
			}
		}
		close(listening)
	}()
	line, ok := <-listening
	if !ok {
		_ = cmd.Wait()
		t.Fatalf("the documented command did not start a server:\n%s\nstderr:\n%s", script, stderr.String())
	}
	if !strings.HasPrefix(line, "drover server listening on https://") || !strings.Contains(line, ":"+strconv.Itoa(port)+" ") {
		t.Errorf("listening line %q: want TLS on port %d", line, port)
	}
	if fi, err := os.Stat(filepath.Join(tmp, "etc", "secrets.key")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the key file: %v %v, want mode 0600", fi, err)
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // the self-signed certificate of a test server
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://127.0.0.1:"+strconv.Itoa(port)+"/readyz", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "ok\n" {
		t.Errorf("GET /readyz of the documented server: %d %q", resp.StatusCode, body)
	}
}
