package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	apiv1 "github.com/drover-dev/drover/api/v1"
)

// TestPushWaitReturnsWhenAPersonMustAct: the README's push … --wait
// returns once staging converged and prod waits for its approval (exit 4),
// naming the approve command, instead of hanging until --timeout; -o json
// tells the same to a script. Approving, then wait -o json, ends converged.
func TestPushWaitReturnsWhenAPersonMustAct(t *testing.T) {
	requireE2E(t)
	dir := copyQuickstart(t, "1s")
	s := newServer(t)

	r := s.ok("alice", "apply", dir+"/...", "-o", "json")
	var applied apiv1.ApplyConfigsResponse
	if err := json.Unmarshal([]byte(r.stdout), &applied); err != nil || len(applied.Results) != 4 {
		t.Fatalf("apply -o json: %v: %s", err, r)
	}

	start := time.Now()
	r = s.as("alice", "push", "web", "--app", "quickstart", "--param", "image=1.27", "--wait", "--timeout", "60s")
	if r.code != 4 || time.Since(start) > 45*time.Second {
		t.Fatalf("push --wait with prod gated: want exit 4 soon after staging converged, got %s", r)
	}
	for _, want := range []string{
		"waiting for quickstart/web to converge in every release channel (staging, prod), or until one waits for a manual approval",
		"prod waits for a manual approval; give it with:",
		"drover approve web --app quickstart --release-channel prod --server " + s.url,
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("push --wait output lacks %q:\n%s", want, r)
		}
	}
	if !strings.Contains(r.stderr, "quickstart/web waits for a manual approval (of prod)") {
		t.Errorf("push --wait's error: %s", r)
	}

	// The same as JSON: the push, then the wait's result.
	r = s.as("alice", "push", "web", "--app", "quickstart", "--param", "image=1.28", "--wait", "--timeout", "60s", "-o", "json")
	var pushed struct {
		Application     string   `json:"application"`
		DesiredStateID  string   `json:"desiredStateId"`
		BundleVersion   string   `json:"bundleVersion"`
		ReleaseChannels []string `json:"releaseChannels"`
		Replaced        string   `json:"replaced"`
		Wait            struct {
			Result    string `json:"result"`
			Approvals []struct {
				ReleaseChannel, Command string
			} `json:"approvals"`
			Status apiv1.ServiceStatus `json:"status"`
		} `json:"wait"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &pushed); err != nil || r.code != 4 {
		t.Fatalf("push --wait -o json: %v: %s", err, r)
	}
	if !strings.HasPrefix(pushed.DesiredStateID, "ds-") || !strings.HasPrefix(pushed.BundleVersion, "v-") || pushed.Replaced == "" ||
		strings.Join(pushed.ReleaseChannels, ",") != "staging,prod" || pushed.Wait.Result != "waiting_for_approval" ||
		len(pushed.Wait.Approvals) != 1 || pushed.Wait.Approvals[0].ReleaseChannel != "prod" ||
		pushed.Wait.Status.DesiredStateID != pushed.DesiredStateID {
		t.Errorf("push --wait -o json: %s", r.stdout)
	}

	r = s.ok("alice", "approve", "web", "--app", "quickstart", "--release-channel", "prod", "-o", "json")
	var answer struct {
		Action, ReleaseChannel, DesiredStateID, Version, User string
		Status                                                *apiv1.ServiceStatus
	}
	if err := json.Unmarshal([]byte(r.stdout), &answer); err != nil || answer.Action != "approved" || answer.ReleaseChannel != "prod" ||
		answer.DesiredStateID != pushed.DesiredStateID || answer.User != "alice" || answer.Status == nil {
		t.Errorf("approve -o json: %v: %s", err, r)
	}
	r = s.as("alice", "wait", "web", "--app", "quickstart", "--timeout", "60s", "-o", "json")
	var waited struct {
		Result, DesiredStateID string
	}
	if err := json.Unmarshal([]byte(r.stdout), &waited); err != nil || r.code != 0 || waited.Result != "converged" || waited.DesiredStateID != pushed.DesiredStateID {
		t.Errorf("wait -o json after approving: %v: %s", err, r)
	}

	for _, verb := range []string{"pause", "resume"} {
		r = s.ok("alice", verb, "web", "--app", "quickstart", "--release-channel", "prod", "-o", "json")
		var st apiv1.ServiceStatus
		if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || st.Service != "web" {
			t.Errorf("%s -o json: %v: %s", verb, err, r)
		}
	}
}

// TestServerJSONLogsAndProbes: drover server --log-format json writes only
// JSON lines (its start-up lines are log records, the first admin token
// goes to DATA/admin-token), and /livez and /readyz answer without a
// credential.
func TestServerJSONLogsAndProbes(t *testing.T) {
	requireE2E(t)
	addr := freeAddr(t)
	data := filepath.Join(t.TempDir(), "data")
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, droverBin, "server", "--log-format", "json", "--data", data, "--listen", addr)
	cmd.Env = cleanEnv()
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 15 * time.Second
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	outc := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(stdout)
		outc <- string(b)
	}()
	var records []map[string]any
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		var rec map[string]any
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("a log line that is not JSON: %q", sc.Text())
		}
		records = append(records, rec)
		if rec["msg"] == "drover server listening" {
			break
		}
	}
	if len(records) == 0 || records[len(records)-1]["url"] != "http://"+addr {
		t.Fatalf("no listening record with the url: %v", records)
	}
	for _, rec := range records {
		if rec["msg"] == "first admin token created" && rec["level"] != "INFO" {
			t.Errorf("record %v", rec)
		}
	}
	go func() {
		for sc.Scan() {
			var rec map[string]any
			if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
				t.Errorf("a log line that is not JSON: %q", sc.Text())
			}
		}
	}()
	if fi, err := os.Stat(filepath.Join(data, "admin-token")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("admin token file: %v %v, want mode 0600", fi, err)
	}
	for _, path := range []string{"/livez", "/readyz"} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK || string(raw) != "ok\n" {
			t.Errorf("GET %s without a credential: %d %q, want 200 ok", path, resp.StatusCode, raw)
		}
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	if out := <-outc; out != "" {
		t.Errorf("stdout with --log-format json should be empty (the token is in a file), got:\n%s", out)
	}
	_ = cmd.Wait()
}
