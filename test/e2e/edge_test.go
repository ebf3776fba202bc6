package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	apiv1 "github.com/drover-dev/drover/api/v1"
)

// TestS1CrossSiteRequestsRefused sends the report's S1 repro to a real
// server: a text/plain POST with a foreign Origin and a rebinding Host that
// defines a custom runtime running `id`, and the push that would run it. Both
// are refused, as is every variant that lacks one of the defences, and no
// command runs.
func TestS1CrossSiteRequestsRefused(t *testing.T) {
	requireE2E(t)
	s := newServer(t)
	pwned := filepath.Join(t.TempDir(), "pwned")
	csrf := `{"user":"mallory","configs":[
 {"source":"rt","body":{"runtime":{"name":"evil","custom":{"apply":{"taskConfig":{"program":{"cmd":["sh","-c","id > ` + pwned + `"]}}}}}}},
 {"source":"app","body":{"application":{"name":"evil","releaseChannels":[{"name":"x","runtimes":[{"runtime":"evil"}]}]}}},
 {"source":"svc","body":{"service":{"name":"s","application":"evil","customRuntime":{}}}}]}`
	push := `{"user":"mallory"}`
	port := s.addr[strings.LastIndex(s.addr, ":")+1:]
	rebind := "rebind.evil.example:" + port
	token := s.token()

	// send makes a request as a browser page (or a local process) would;
	// the token is sent only where the case says so.
	send := func(t *testing.T, path, host, contentType, origin, token, body string) (int, apiv1.Error) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, s.url+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if host != "" {
			req.Host = host
		}
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		var er apiv1.ErrorResponse
		raw, _ := io.ReadAll(resp.Body)
		if err := json.Unmarshal(raw, &er); err != nil {
			t.Errorf("%s: not a JSON error body: %q", path, raw)
		}
		return resp.StatusCode, er.Error
	}
	const apply, pushPath = "/v1/configs:apply", "/v1/apps/evil/services/s:push"
	cases := []struct {
		name                                   string
		path, host, ctype, origin, token, body string
		want                                   int
		about                                  string
	}{
		{"the report's apply", apply, rebind, "text/plain;charset=UTF-8", "http://evil.example", "", csrf, 403, "does not name this server"},
		{"the report's push", pushPath, "", "text/plain", "http://evil.example", "", push, 403, "cross-origin"},
		{"the apply from the rebinding name alone", apply, rebind, "application/json", "", "", csrf, 403, "does not name this server"},
		{"the apply as a simple cross-origin request", apply, "", "text/plain", "http://evil.example", "", csrf, 403, "cross-origin"},
		{"the apply as text/plain from a local process", apply, "", "text/plain", "", "", csrf, 415, "application/json"},
		{"the apply as JSON without the token", apply, "", "application/json", "", "", csrf, 401, "DROVER_TOKEN"},
		{"the apply with a wrong token", apply, "", "application/json", "", "drover_NOTTHETOKEN0000000000", csrf, 401, "not valid"},
		{"the apply with the token from a foreign origin", apply, "", "application/json", "http://evil.example", token, csrf, 403, "cross-origin"},
		{"the apply with the token through a rebinding name", apply, rebind, "application/json", "", token, csrf, 403, "does not name this server"},
		{"the push as JSON without the token", pushPath, "", "application/json", "", "", push, 401, "DROVER_TOKEN"},
	}
	for _, c := range cases {
		code, e := send(t, c.path, c.host, c.ctype, c.origin, c.token, c.body)
		if code != c.want || !strings.Contains(e.Message, c.about) {
			t.Errorf("%s: status %d %q, want %d about %q", c.name, code, e.Message, c.want, c.about)
		}
	}

	// Nothing was stored, so nothing can run: no runtime or service "evil",
	// no run, no file.
	var configs apiv1.ConfigList
	if err := s.getJSON("/v1/configs", &configs); err != nil {
		t.Fatal(err)
	}
	if len(configs.Configs) != 0 {
		t.Errorf("configs were stored: %s", dump(configs))
	}
	var services apiv1.ServiceList
	if err := s.getJSON("/v1/services", &services); err != nil {
		t.Fatal(err)
	}
	if len(services.Services) != 0 {
		t.Errorf("services were pushed: %s", dump(services))
	}
	if _, err := os.Stat(pwned); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the command ran: %s exists (%v)", pwned, err)
	}

	// Health answers probes without a credential, with nothing but "ok" (and
	// whether the store works, not why),
	// and only under the server's own names.
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, s.url+"/v1/health", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var health apiv1.Health
	err = json.NewDecoder(resp.Body).Decode(&health)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || err != nil || health != (apiv1.Health{Status: "ok", Store: "ok"}) {
		t.Errorf("health without a credential: %s %+v (%v), want only the status and the store's state", resp.Status, health, err)
	}
	req.Host = rebind
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("health through a rebinding name: %v %v", resp, err)
	} else {
		_ = resp.Body.Close()
	}
}

// TestS1CLIFindsTheToken: the CLI run by the server's OS user needs no setup,
// under the loopback names of the server too; without the record it is
// refused with a message saying what to do, and --token/DROVER_TOKEN work.
func TestS1CLIFindsTheToken(t *testing.T) {
	requireE2E(t)
	dir := twoChannelTree(t, "shop", "1s")
	s := newServer(t)
	s.ok("alice", "apply", dir+"/...")
	s.push("alice", "shop", "web", "image=1.0")
	port := s.addr[strings.LastIndex(s.addr, ":")+1:]
	for _, url := range []string{s.url, "http://localhost:" + port} {
		if r := runDrover(t, "status", "web", "--app", "shop", "--server", url); r.code != 0 {
			t.Errorf("status via %s: %s", url, r)
		}
	}
	elsewhere := "XDG_CONFIG_HOME=" + t.TempDir() // a user with no record
	r := runDroverEnv(t, []string{elsewhere}, "status", "web", "--app", "shop", "--server", s.url)
	if r.code != 1 || !strings.Contains(r.stderr, "--token") || !strings.Contains(r.stderr, "DROVER_TOKEN") {
		t.Errorf("without a token: want exit 1 saying how to get one: %s", r)
	}
	if r := runDroverEnv(t, []string{elsewhere, "DROVER_TOKEN=" + s.token()}, "status", "web", "--app", "shop", "--server", s.url); r.code != 0 {
		t.Errorf("with DROVER_TOKEN: %s", r)
	}
	if r := runDroverEnv(t, []string{elsewhere}, "status", "web", "--app", "shop", "--server", s.url, "--token", s.token()); r.code != 0 {
		t.Errorf("with --token: %s", r)
	}
	// The token is the server's across restarts (the CLI's record stays valid).
	before := s.token()
	s.restart()
	if s.token() != before {
		t.Error("the token changed across a restart")
	}
	if fi, err := os.Stat(filepath.Join(s.data, "token")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("token file: %v %v, want mode 0600", fi, err)
	}
	s.ok("alice", "status", "web", "--app", "shop")
}

// TestS1DevFlowNeedsNoSetup: drover dev on a port and data directory of its
// own, then the commands it prints, as they are printed (started the way
// drover dev itself was: this binary's path); the first admin token goes
// to a file of mode 0600, not to the terminal. A second run on the same
// directory says what it resumed: each channel's actual status.
func TestS1DevFlowNeedsNoSetup(t *testing.T) {
	requireE2E(t)
	addr := freeAddr(t)
	data := filepath.Join(t.TempDir(), "dev")
	lines, stop := startDev(t, addr, data)
	printed := map[string]string{}
	var all []string
	for line := range lines {
		all = append(all, line)
		if rest, ok := strings.CutPrefix(line, droverBin+" "); ok {
			printed[strings.Fields(rest)[0]] = line
		}
		if strings.HasPrefix(line, "Ctrl-C stops the server") {
			break
		}
	}
	for _, verb := range []string{"status", "approve", "wait", "push", "events"} {
		if printed[verb] == "" {
			t.Errorf("drover dev printed no %s command:\n%s", verb, strings.Join(all, "\n"))
		}
	}
	text := strings.Join(all, "\n")
	adminFile := filepath.Join(data, "admin-token")
	if !strings.Contains(text, "first admin token written to "+adminFile) || strings.Contains(text, "drover_") {
		t.Errorf("drover dev should name the admin token's file and not print the token:\n%s", text)
	}
	if strings.Contains(text, "drover login") {
		t.Errorf("drover dev on a loopback address should not suggest drover login from another machine:\n%s", text)
	}
	if fi, err := os.Stat(adminFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("admin token file: %v %v, want mode 0600", fi, err)
	}
	args := strings.Fields(printed["status"])[1:]
	if r := runDrover(t, args...); r.code != 0 || !strings.Contains(r.stdout, "staging") {
		t.Errorf("the printed %q: %s", printed["status"], r)
	}
	// Let staging converge, so that the second run has something to report.
	deadline := time.Now().Add(60 * time.Second)
	for {
		r := runDrover(t, "status", "web", "--app", "quickstart", "-o", "json", "--server", "http://"+addr)
		var st apiv1.ServiceStatus
		if r.code == 0 && json.Unmarshal([]byte(r.stdout), &st) == nil && len(st.ReleaseChannels) == 2 &&
			findChannel(&st, "staging").Status == "CONVERGED" && findChannel(&st, "prod").Status == "WAITING_MANUAL_APPROVAL" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("staging did not converge: %s", r)
		}
		time.Sleep(200 * time.Millisecond)
	}
	stop()

	lines, stop = startDev(t, addr, data)
	defer stop()
	all = nil
	for line := range lines {
		all = append(all, line)
		if strings.HasPrefix(line, "Ctrl-C stops the server") {
			break
		}
	}
	text = strings.Join(all, "\n")
	for _, want := range []string{"web was pushed in an earlier run", "resuming: quickstart/web is WAITING_MANUAL_APPROVAL", "staging  CONVERGED", "prod     WAITING_MANUAL_APPROVAL"} {
		if !strings.Contains(text, want) {
			t.Errorf("second drover dev lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "converges now") || strings.Contains(text, "first admin token") {
		t.Errorf("second drover dev repeats what only a first run does:\n%s", text)
	}
}

// startDev starts drover dev on addr and data and returns its stdout's
// lines (trimmed) and a function that stops it (SIGTERM) and waits.
func startDev(t *testing.T, addr, data string) (<-chan string, func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	cmd := exec.CommandContext(ctx, droverBin, "dev", "--listen", addr, "--data", data)
	cmd.Env = cleanEnv()
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 15 * time.Second
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			select {
			case lines <- strings.TrimSpace(sc.Text()):
			case <-ctx.Done():
			}
		}
	}()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			go func() {
				for range lines {
				}
			}()
			if err := cmd.Wait(); err != nil && ctx.Err() == nil {
				t.Errorf("drover dev: %v; stderr:\n%s", err, stderr.String())
			}
			cancel()
		})
	}
	t.Cleanup(stop)
	return lines, stop
}

// runDroverEnv is runDrover with env added (later entries win).
func runDroverEnv(t *testing.T, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), cliTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, droverBin, args...)
	cmd.Env = append(cleanEnv(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := result{args: args, stdout: stdout.String(), stderr: stderr.String()}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		r.code = exit.ExitCode()
	case err != nil:
		t.Fatalf("drover %v: %v", args, err)
	}
	return r
}
