// Package amtest starts a real Prometheus Alertmanager (Debian's
// prometheus-alertmanager) on 127.0.0.1 for tests, with no receivers and no
// cluster port, and fires and resolves alerts in it.
//
// A test calls Start; without the binary the test is skipped, unless
// DROVER_REQUIRE_ALERTMANAGER is set (CI sets it): then it fails.
package amtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// Alertmanager is a running Alertmanager.
type Alertmanager struct {
	// URL is its base URL, http://127.0.0.1:PORT.
	URL string
	t   testing.TB
}

// binaries are where Debian and upstream put the binary.
var binaries = []string{"prometheus-alertmanager", "alertmanager"}

// Start starts an Alertmanager for t and stops it when t ends.
func Start(t testing.TB) *Alertmanager {
	t.Helper()
	bin := ""
	for _, b := range binaries {
		if p, err := exec.LookPath(b); err == nil {
			bin = p
			break
		}
	}
	if bin == "" {
		if os.Getenv("DROVER_REQUIRE_ALERTMANAGER") != "" {
			t.Fatal("no Alertmanager binary (prometheus-alertmanager) on PATH, and DROVER_REQUIRE_ALERTMANAGER is set")
		}
		t.Skip("no Alertmanager binary (install Debian's prometheus-alertmanager)")
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "am.yml")
	if err := os.WriteFile(cfg, []byte("route:\n  receiver: none\nreceivers:\n  - name: none\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	logf, err := os.Create(filepath.Join(dir, "alertmanager.log"))
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"--config.file=" + cfg, "--storage.path=" + filepath.Join(dir, "data"), "--web.listen-address=" + addr, "--cluster.listen-address="}
	cmd := exec.Command(bin, args...) //nolint:gosec // the Alertmanager on PATH, with the test's own arguments
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start alertmanager: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		_ = logf.Close()
	})
	am := &Alertmanager{URL: "http://" + addr, t: t}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(am.URL + "/-/ready")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return am
			}
		}
		select {
		case <-done:
			log, _ := os.ReadFile(logf.Name())
			t.Fatalf("alertmanager exited: %s", log)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("alertmanager at %s not ready after 30s", addr)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Fire posts an alert with labels (firing from now on).
func (a *Alertmanager) Fire(labels map[string]string) { a.post(labels, time.Time{}) }

// Resolve posts the alert with labels as resolved (ended a second ago).
func (a *Alertmanager) Resolve(labels map[string]string) {
	a.post(labels, time.Now().Add(-time.Second))
}

func (a *Alertmanager) post(labels map[string]string, ends time.Time) {
	a.t.Helper()
	alert := map[string]any{"labels": labels}
	if !ends.IsZero() {
		alert["startsAt"] = ends.Add(-time.Minute).UTC().Format(time.RFC3339Nano)
		alert["endsAt"] = ends.UTC().Format(time.RFC3339Nano)
	}
	body, err := json.Marshal([]any{alert})
	if err != nil {
		a.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.URL+"/api/v2/alerts", bytes.NewReader(body))
	if err != nil {
		a.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatalf("post alert: %v", err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		a.t.Fatalf("post alert: %s", resp.Status)
	}
}

func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return fmt.Sprint(l.Addr())
}
