package e2e

// End-to-end test of the Terraform runner (docs/custom-runtimes.md,
// "Terraform runner") with a real terraform (or OpenTofu) binary and a module
// that needs no provider download (testdata/terraform/module).

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	apiv1 "github.com/drover-dev/drover/api/v1"
)

// crStartServer starts `drover server` like newServer, with env added to
// its environment (the harness gives every server the test's environment).
// The returned server serves the CLI helpers (ok, status, events, ...); it
// cannot be restarted.
func crStartServer(t *testing.T, env []string, flags ...string) *server {
	t.Helper()
	base := t.TempDir()
	s := &server{t: t, data: filepath.Join(base, "data"), logPath: filepath.Join(base, "server.log"), flags: flags}
	deadline := time.Now().Add(15 * time.Second)
	for {
		s.addr = freeAddr(t)
		cmd, exited, url, err := crStartOnce(s, env)
		if err == nil {
			s.url = url
			t.Cleanup(func() { crStop(s, cmd, exited) })
			return s
		}
		if !strings.Contains(err.Error(), "address already in use") || time.Now().After(deadline) {
			t.Fatalf("start server: %v\n%s", err, s.logTail(40))
		}
	}
}

func crStartOnce(s *server, env []string) (*exec.Cmd, chan struct{}, string, error) {
	logf, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, nil, "", err
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		_ = logf.Close()
		return nil, nil, "", err
	}
	cmd := exec.Command(droverBin, append([]string{"server", "--data", s.data, "--listen", s.addr}, s.flags...)...)
	cmd.Env = append(cleanEnv(), env...) // later entries win
	cmd.Stdout, cmd.Stderr = pw, logf
	err = cmd.Start()
	_ = pw.Close()
	if err != nil {
		_ = pr.Close()
		_ = logf.Close()
		return nil, nil, "", err
	}
	exited := make(chan struct{})
	urlc := make(chan string, 1)
	go func() {
		defer func() { _ = pr.Close() }()
		defer func() { _ = logf.Close() }()
		sc := bufio.NewScanner(pr)
		sent := false
		for sc.Scan() {
			fmt.Fprintln(logf, "stdout: "+sc.Text())
			if m := listeningRE.FindStringSubmatch(sc.Text()); m != nil && !sent {
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
		if want := "http://" + s.addr; url != want {
			crStop(s, cmd, exited)
			return nil, nil, "", fmt.Errorf("server printed address %s, want %s", url, want)
		}
		return cmd, exited, url, nil
	case <-exited:
		return nil, nil, "", fmt.Errorf("server exited (%v) before listening: %s", cmd.ProcessState, s.logTail(20))
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-exited
		return nil, nil, "", fmt.Errorf("server did not print its address within 30s")
	}
}

// crStop stops the server with SIGTERM and fails the test if it reported a
// data race or a panic.
func crStop(s *server, cmd *exec.Cmd, exited chan struct{}) { stopServer(s, cmd, exited) }

// crTerraformBinary skips the test when neither terraform nor tofu is on PATH.
func crTerraformBinary(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"terraform", "tofu"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("neither terraform nor tofu is on PATH: install one to run the Terraform runner test")
	return ""
}

// TestTerraformRunner: a module built on terraform_data converges in
// staging then production; a change to a file it reads, made by hand, is
// seen by the steady-state plan (exit 2) and healed by an apply.
func TestTerraformRunner(t *testing.T) {
	requireE2E(t)
	bin := crTerraformBinary(t)
	tmp := t.TempDir()
	const app, svc, steady = "infra", "network", 2 * time.Second
	src, err := os.ReadFile(filepath.Join(repoRoot, "test", "e2e", "testdata", "terraform", "module", "main.tf"))
	if err != nil {
		t.Fatal(err)
	}
	channels := []string{"staging", "production"}
	for _, rc := range channels {
		writeTree(t, filepath.Join(tmp, "modules", rc), map[string]string{"main.tf": string(src), "external.txt": "v1\n"})
	}
	applyLog, envDir := filepath.Join(tmp, "apply.log"), filepath.Join(tmp, "env")
	if err := os.MkdirAll(envDir, 0o755); err != nil {
		t.Fatal(err)
	}
	dir := crWriteConfigs(t, filepath.Join(tmp, "config"), map[string]crObj{
		"runtime": {"runtime": crObj{"name": "tf", "terraformRunner": crObj{
			"pollInterval": "1s", "steadyStatePollInterval": steady.String(),
			"env": crObj{"APPLY_LOG": crObj{"value": applyLog}, "ENV_DIR": crObj{"value": envDir}},
		}}},
		"app":     crApp(app, crChannel("staging", "tf"), crChannel("production", "tf", "staging")),
		"service": crService(app, svc, "path", tmp+"/modules/{{.Builtins.ReleaseChannel.Name}}"),
	})
	// An empty CLI config: no provider installation settings or credentials
	// of the machine's, and no warning about a missing ~/.terraformrc.
	tfrc := filepath.Join(tmp, "empty.tfrc")
	if err := os.WriteFile(tfrc, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	s := crStartServer(t, []string{"TF_CLI_CONFIG_FILE=" + tfrc, "CHECKPOINT_DISABLE=1"}, "--terraform-module-root", tmp)
	s.ok("alice", "apply", dir+"/...")
	version, dsID := s.push("alice", app, svc)
	crWait(s, app, svc, 0)
	st := s.status(app, svc)
	if !converged(version)(st) {
		t.Fatalf("not converged:\n%s", dump(st))
	}
	t.Run("Environment", func(t *testing.T) {
		crCheckTerraformEnv(t, envDir, app, svc, version, dsID, channels)
	})

	runs := crRuns(s, app, svc)
	applies := crRuns(s, app, svc, "--kind", "apply")
	evs := s.events(app, svc)
	stagingConverged := crEvent(evs, 0, "converged", "staging")
	if stagingConverged == nil {
		t.Fatalf("no converged event for staging:\n%s", strings.Join(crEventLines(evs), "\n"))
	}
	for _, rc := range channels {
		a := crRunsOf(applies, rc, "apply")
		if len(a) != 1 || a[0].ExitCode != 0 || a[0].Version != version || len(a[0].Command) < 2 || a[0].Command[0] != bin || a[0].Command[1] != "apply" {
			t.Fatalf("%s: want one successful terraform apply run of %s by %s, got %s", rc, version, bin, dump(a))
		}
		// Planned with changes (2) before the apply, and clean (0) after.
		plans := crRunsOf(runs, rc, "plan")
		var before, after bool
		for _, p := range plans {
			before = before || p.ExitCode == 2 && !p.StartedAt.After(a[0].StartedAt)
			after = after || p.ExitCode == 0 && p.StartedAt.After(a[0].FinishedAt)
		}
		if !before || !after {
			t.Errorf("%s: want a plan exiting 2 before the apply and one exiting 0 after it: %s", rc, dump(plans))
		}
		if len(crRunsOf(runs, rc, "init")) == 0 {
			t.Errorf("%s: no terraform init run", rc)
		}
	}
	// The second channel follows the first.
	prodApply := crRunsOf(applies, "production", "apply")[0]
	if !prodApply.StartedAt.After(stagingConverged.Time) {
		t.Errorf("production's apply started at %s, before staging converged at %s", prodApply.StartedAt, stagingConverged.Time)
	}
	if e := crEvent(evs, 0, "applying", "production"); e == nil || e.Seq < stagingConverged.Seq {
		t.Errorf("production applying before staging converged:\n%s", strings.Join(crEventLines(evs), "\n"))
	}
	wantLog := fmt.Sprintf("staging %s v1\nproduction %s v1\n", version, version)
	if got := crReadFile(t, applyLog); got != wantLog {
		t.Fatalf("terraform applies logged by the module:\n%q\nwant\n%q", got, wantLog)
	}

	// Drift: staging's module reads external.txt; change it by hand.
	last := crLastSeq(evs)
	changedAt := time.Now()
	if err := os.WriteFile(filepath.Join(tmp, "modules", "staging", "external.txt"), []byte("v2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	evs = crWaitEvents(s, app, svc, 30*time.Second, "staging drift, applied and converged again", func(evs []apiv1.Event) bool {
		d := crEvent(evs, last, "drift", "staging")
		return d != nil && crEvent(evs, d.Seq, "applied", "staging") != nil && crEvent(evs, d.Seq, "converged", "staging") != nil
	})
	drift := crEvent(evs, last, "drift", "staging")
	healed := crEvent(evs, drift.Seq, "converged", "staging")
	t.Logf("drift seen after %s, healed after %s", drift.Time.Sub(changedAt).Round(time.Millisecond), healed.Time.Sub(changedAt).Round(time.Millisecond))
	if d := healed.Time.Sub(changedAt); d > steady+6*time.Second {
		t.Errorf("healed %s after the change; the steady-state interval is %s", d, steady)
	}
	if got := crReadFile(t, applyLog); got != wantLog+fmt.Sprintf("staging %s v2\n", version) {
		t.Errorf("terraform applies logged by the module after the drift:\n%q", got)
	}
	if e := crEvent(evs, last, "drift", "production"); e != nil {
		t.Errorf("production reported drift: %+v", *e)
	}
	st = s.status(app, svc)
	if !converged(version)(st) {
		t.Errorf("status after healing:\n%s", dump(st))
	}

	runs = crRuns(s, app, svc)
	stagingApplies := crRunsOf(runs, "staging", "apply")
	if len(stagingApplies) != 2 || stagingApplies[1].ExitCode != 0 || !stagingApplies[1].StartedAt.After(changedAt) {
		t.Fatalf("staging apply runs: want the rollout's and one after the change: %s", dump(stagingApplies))
	}
	if n := len(crRunsOf(runs, "production", "apply")); n != 1 {
		t.Errorf("production applied %d times, want once", n)
	}
	heal := stagingApplies[1]
	var sawDrift, sawClean bool
	for _, p := range crRunsOf(runs, "staging", "plan") {
		sawDrift = sawDrift || p.ExitCode == 2 && p.StartedAt.After(changedAt) && !p.StartedAt.After(heal.StartedAt)
		sawClean = sawClean || p.ExitCode == 0 && p.StartedAt.After(heal.FinishedAt)
	}
	if !sawDrift || !sawClean {
		t.Errorf("want a plan exiting 2 after the change and one exiting 0 after the healing apply (%v, %v): %s", sawDrift, sawClean, dump(crRunsOf(runs, "staging", "plan")))
	}
	// The state lives in the instance's working directory.
	state := crReadFile(t, filepath.Join(s.data, "terraform", "tf", app, svc, "staging", "module", "terraform.tfstate"))
	if !strings.Contains(state, `"v2"`) {
		t.Errorf("staging's terraform state does not hold the healed input:\n%s", state)
	}

	// With requireApprovalBeforeApply, a drifted production waits for the
	// approval of its apply, and its status previews the plan it would
	// apply.
	dir = crWriteConfigs(t, filepath.Join(tmp, "config"), map[string]crObj{
		"runtime": {"runtime": crObj{"name": "tf", "terraformRunner": crObj{
			"pollInterval": "1s", "steadyStatePollInterval": steady.String(), "requireApprovalBeforeApply": true,
			"env": crObj{"APPLY_LOG": crObj{"value": applyLog}, "ENV_DIR": crObj{"value": envDir}},
		}}},
		"app":     crApp(app, crChannel("staging", "tf"), crChannel("production", "tf", "staging")),
		"service": crService(app, svc, "path", tmp+"/modules/{{.Builtins.ReleaseChannel.Name}}"),
	})
	s.ok("alice", "apply", dir+"/...")
	version, _ = s.push("alice", app, svc)
	s.waitStatus(app, svc, 60*time.Second, "both channels at the new version (their applies approved)", func(st *apiv1.ServiceStatus) bool {
		for _, c := range st.ReleaseChannels {
			if c.Status == "WAITING_MANUAL_APPROVAL" {
				s.ok("bob", "approve", svc, "--app", app, "--release-channel", c.Name)
			}
		}
		return converged(version)(st)
	})
	if err := os.WriteFile(filepath.Join(tmp, "modules", "production", "external.txt"), []byte("v3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	st = s.waitStatus(app, svc, 30*time.Second, "production's drift waiting for the approval of its apply", func(st *apiv1.ServiceStatus) bool {
		return findChannel(st, "production").Status == "WAITING_MANUAL_APPROVAL"
	})
	pv := findChannel(st, "production").Preview
	if pv == nil || !strings.HasPrefix(pv.Plan, "Plan: ") || !strings.Contains(pv.Plan, "to change") {
		t.Errorf("production's preview while its apply waits for approval: %s", dump(pv))
	}
}

// crCheckTerraformEnv checks the environment the module's apply ran with
// (dumped by a local-exec provisioner): the identity variables with their
// DROVER_ twins and TF_VAR_pvn_service_version.
func crCheckTerraformEnv(t *testing.T, envDir, app, svc, version, dsID string, channels []string) {
	envs := map[string]map[string]string{}
	for _, rc := range channels {
		env := map[string]string{}
		for _, line := range strings.Split(crReadFile(t, filepath.Join(envDir, rc+".env")), "\n") {
			if k, v, ok := strings.Cut(line, "="); ok {
				env[k] = v
			}
		}
		if len(env) == 0 {
			t.Fatalf("%s: no environment dumped by the module", rc)
		}
		envs[rc] = env
		for k, v := range map[string]string{
			"PVN_SERVICE": svc, "PVN_SERVICE_ID": app + "/" + svc, "PVN_APPLICATION": app, "PVN_APPLICATION_ID": app,
			"PVN_RELEASE_CHANNEL": rc, "PVN_RELEASE_CHANNEL_ID": app + "/" + rc, "PVN_SERVICE_VERSION": version,
			"DROVER_SERVICE": svc, "DROVER_APPLICATION": app, "DROVER_RELEASE_CHANNEL": rc, "DROVER_SERVICE_VERSION": version,
			"DROVER_DESIRED_STATE_ID": dsID, "TF_VAR_pvn_service_version": version,
		} {
			if got, ok := envs[rc][k]; !ok || got != v {
				t.Errorf("%s: %s=%q (set: %v), want %q", rc, k, got, ok, v)
			}
		}
	}
	// The package documentation promises every PVN_ identity variable's
	// DROVER_ twin, like custom runtimes give them.
	for _, rc := range channels {
		for k, v := range map[string]string{
			"DROVER_SERVICE_ID": app + "/" + svc, "DROVER_APPLICATION_ID": app, "DROVER_RELEASE_CHANNEL_ID": app + "/" + rc,
		} {
			if got, ok := envs[rc][k]; !ok || got != v {
				t.Errorf("%s: %s=%q (set: %v), want %q", rc, k, got, ok, v)
			}
		}
	}
}
