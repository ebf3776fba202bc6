package terraform

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/runtimes"
	"github.com/drover-dev/drover/internal/runtimes/runtimestest"
)

// requireBinary skips the test when there is no terraform or tofu to run.
func requireBinary(t *testing.T) string {
	t.Helper()
	bin, err := findBinary()
	if err != nil {
		t.Skipf("skipping: %v (CI installs one: see .ci/run and hack/install-tofu.sh)", err)
	}
	return bin
}

// versionModule is a module whose one resource holds the service version.
const versionModule = `
variable "pvn_service_version" { type = string }

resource "terraform_data" "deploy" {
  input = var.pvn_service_version
}

output "version" { value = terraform_data.deploy.output }
`

// driftModule adds a resource fed by a file that can change out of band.
const driftModule = versionModule + `
resource "terraform_data" "external" {
  input = trimspace(file("${path.module}/external.txt"))
}
`

// writeModule writes files (name -> content) into a new module directory.
func writeModule(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// cliConfig is an empty terraform CLI configuration, so terraform does not
// warn about a missing ~/.terraformrc named by TF_CLI_CONFIG_FILE.
func cliConfig(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "terraformrc")
	if err := os.WriteFile(p, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// runnerConfig is a runner config for tests: short intervals, quiet CLI.
func runnerConfig(t *testing.T, poll, steady time.Duration) *config.TerraformRunner {
	return &config.TerraformRunner{
		Env: map[string]config.EnvValue{
			"TF_CLI_CONFIG_FILE": {Value: cliConfig(t)},
			"CHECKPOINT_DISABLE": {Value: "1"},
		},
		PollInterval:            config.Duration{Duration: poll},
		SteadyStatePollInterval: config.Duration{Duration: steady},
	}
}

// recorder keeps the runs it is given.
type recorder struct {
	mu   sync.Mutex
	runs []runtimes.Run
}

func (r *recorder) RecordRun(_ context.Context, run runtimes.Run) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.runs = append(r.runs, run)
	return nil
}

func (r *recorder) of(key runtimes.InstanceKey) []runtimes.Run {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []runtimes.Run
	for _, run := range r.runs {
		if run.InstanceKey == key {
			out = append(out, run)
		}
	}
	return out
}

func kinds(runs []runtimes.Run) []string {
	var out []string
	for _, r := range runs {
		out = append(out, r.Kind)
	}
	return out
}

// testSettings allows the modules of tests, which live in temporary
// directories.
func testSettings(t testing.TB) Settings {
	t.Helper()
	roots, err := ResolveModuleRoots([]string{os.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	return Settings{ModuleRoots: roots}
}

// newRuntime builds a runtime named tf over dataDir.
func newRuntime(t *testing.T, dataDir string, runner *config.TerraformRunner, rec *recorder) *Runtime {
	t.Helper()
	opts := runtimes.Options{DataDir: dataDir}
	if rec != nil {
		opts.Runs = rec
	}
	r, err := NewWith(&config.Runtime{Name: "tf", TerraformRunner: runner}, opts, testSettings(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Error(err)
		}
	})
	return r
}

// target is a compiled terraformRunner target for the module at path.
func target(t testing.TB, key runtimes.InstanceKey, version, path string, runner *config.TerraformRunner, params map[string]any) runtimes.Target {
	t.Helper()
	pv := map[string]any{"path": path, "image": "", "extraInitArgs": ""}
	for k, v := range params {
		pv[k] = v
	}
	obj, err := json.Marshal(map[string]any{"kind": "terraformRunner", "runtime": "tf", "parameterValues": pv, "terraformRunner": runner})
	if err != nil {
		t.Fatal(err)
	}
	return runtimes.Target{InstanceKey: key, Version: version, DesiredStateID: "ds-" + version, Backend: "customRuntime", Objects: []json.RawMessage{obj}}
}

func key(svc, rc string) runtimes.InstanceKey {
	return runtimes.InstanceKey{Application: "infra", Service: svc, ReleaseChannel: rc}
}

func mustFetch(t *testing.T, rt runtimes.Runtime, tg runtimes.Target) runtimes.State {
	t.Helper()
	st, err := rt.Fetch(t.Context(), tg)
	if err != nil {
		t.Fatalf("Fetch(%s, %s): %v", tg.InstanceKey, tg.Version, err)
	}
	return st
}

func mustApply(t *testing.T, rt runtimes.Runtime, tg runtimes.Target) []runtimes.Change {
	t.Helper()
	res, err := rt.Apply(t.Context(), tg)
	if err != nil {
		t.Fatalf("Apply(%s, %s): %v", tg.InstanceKey, tg.Version, err)
	}
	return res.Changes
}

func actions(changes []runtimes.Change) map[string]runtimes.Action {
	out := map[string]runtimes.Action{}
	for _, c := range changes {
		out[c.Object] = c.Action
	}
	return out
}

func TestConformance(t *testing.T) {
	requireBinary(t)
	module := writeModule(t, map[string]string{"main.tf": versionModule})
	runner := runnerConfig(t, time.Second, time.Minute)
	runtimestest.Run(t, runtimestest.Harness{
		New: func(t *testing.T) runtimes.Runtime {
			return newRuntime(t, t.TempDir(), runner, nil)
		},
		Target: func(k runtimes.InstanceKey, version string) runtimes.Target {
			return target(t, k, version, module, runner, nil)
		},
		Timeout:          2 * time.Minute,
		Goroutines:       2,
		KeysPerGoroutine: 2,
	})
}

// TestConvergeAndHealDrift: plan 2 -> apply -> plan 0; an input of the
// module changes out of band -> a background poll reports the drift and
// notifies -> apply heals it.
func TestConvergeAndHealDrift(t *testing.T) {
	requireBinary(t)
	t.Parallel()
	module := writeModule(t, map[string]string{"main.tf": driftModule, "external.txt": "a\n"})
	runner := runnerConfig(t, 200*time.Millisecond, 200*time.Millisecond)
	rec := &recorder{}
	rt := newRuntime(t, t.TempDir(), runner, rec)
	k := key("vm", "staging")
	v1 := target(t, k, "v1", module, runner, nil)

	st := mustFetch(t, rt, v1)
	if st.Version != "" || st.Converged || st.Drifted || !strings.Contains(st.Message, "Plan: 2 to add, 0 to change, 0 to destroy.") {
		t.Fatalf("before apply: %+v, want nothing deployed and the plan summary", st)
	}
	got := actions(mustApply(t, rt, v1))
	want := map[string]runtimes.Action{"terraform_data.deploy": runtimes.ActionCreated, "terraform_data.external": runtimes.ActionCreated}
	if !sameActions(got, want) {
		t.Fatalf("first apply: %v, want %v", got, want)
	}
	if st := mustFetch(t, rt, v1); !runtimestest.Converged(st, "v1") {
		t.Fatalf("after apply: %+v, want converged at v1", st)
	}
	state, err := os.ReadFile(filepath.Join(rt.Root, "infra", "vm", "staging", "module", "terraform.tfstate"))
	if err != nil || !strings.Contains(string(state), `"v1"`) {
		t.Fatalf("state file: %v; want it to hold the version from TF_VAR_pvn_service_version:\n%s", err, state)
	}

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	notified := make(chan runtimes.InstanceKey, 16)
	go func() {
		_ = rt.Watch(ctx, func(k runtimes.InstanceKey) { notified <- k })
	}()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if rt.Watchers() > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Watch did not start")
		}
	}
	// Out of band: the module's input changes.
	if err := os.WriteFile(filepath.Join(module, "external.txt"), []byte("b\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-notified:
		if got != k {
			t.Fatalf("notified %s, want %s", got, k)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no notification of the drift")
	}
	st = runtimestest.Eventually(t, rt, v1, 30*time.Second, nil, "drifted", func(st runtimes.State) bool { return st.Drifted })
	if st.Version != "v1" || st.Converged || !strings.Contains(st.Message, "Plan: 0 to add, 1 to change, 0 to destroy.") {
		t.Fatalf("drifted state: %+v", st)
	}
	got = actions(mustApply(t, rt, v1))
	want = map[string]runtimes.Action{"terraform_data.deploy": runtimes.ActionUnchanged, "terraform_data.external": runtimes.ActionConfigured}
	if !sameActions(got, want) {
		t.Fatalf("healing apply: %v, want %v", got, want)
	}
	if st := mustFetch(t, rt, v1); !runtimestest.Converged(st, "v1") {
		t.Fatalf("after healing: %+v, want converged at v1", st)
	}

	// Upgrade: v1 runs while v2 is planned, then v2 converges.
	v2 := target(t, k, "v2", module, runner, nil)
	if st := mustFetch(t, rt, v2); st.Version != "v1" || st.Drifted || st.Converged {
		t.Fatalf("v2 before its apply: %+v, want v1 running, not drifted", st)
	}
	if got := actions(mustApply(t, rt, v2)); got["terraform_data.deploy"] != runtimes.ActionConfigured {
		t.Fatalf("upgrade: %v, want the deploy resource configured", got)
	}
	if st := mustFetch(t, rt, v2); !runtimestest.Converged(st, "v2") {
		t.Fatalf("after the upgrade: %+v", st)
	}

	// Every command is recorded, plans with their exit codes.
	runs := rec.of(k)
	for _, want := range []string{kindInit, kindPlan, kindShow, kindApply} {
		if !slices.Contains(kinds(runs), want) {
			t.Errorf("runs %v: no %s", kinds(runs), want)
		}
	}
	var exits []int
	for _, r := range runs {
		if r.Kind == kindPlan {
			exits = append(exits, r.ExitCode)
			if !strings.Contains(r.Stdout, "No changes.") && !strings.Contains(r.Stdout, "Plan: ") {
				t.Errorf("plan run stdout: %q", r.Stdout)
			}
		}
		if r.Runtime != "tf" || r.Command[0] != rt.Binary() || r.StartedAt.IsZero() || r.FinishedAt.Before(r.StartedAt) {
			t.Errorf("run %+v", r)
		}
		if r.Kind == kindShow && r.Stdout != "" {
			t.Errorf("show run keeps stdout (the JSON plan): %q", r.Stdout)
		}
	}
	if !slices.Contains(exits, 0) || !slices.Contains(exits, 2) {
		t.Errorf("plan exit codes %v, want both 0 and 2", exits)
	}
}

func sameActions(a, b map[string]runtimes.Action) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestBadModule(t *testing.T) {
	requireBinary(t)
	t.Parallel()
	module := writeModule(t, map[string]string{"main.tf": `resource "terraform_data" "x" {`})
	runner := runnerConfig(t, time.Minute, time.Minute)
	rec := &recorder{}
	rt := newRuntime(t, t.TempDir(), runner, rec)
	k := key("broken", "staging")
	tg := target(t, k, "v1", module, runner, nil)
	_, err := rt.Fetch(t.Context(), tg)
	if err == nil || !strings.Contains(err.Error(), "Error:") {
		t.Fatalf("Fetch of a broken module: %v, want terraform's error", err)
	}
	_, err = rt.Apply(t.Context(), tg)
	if err == nil || runtimes.IsPermanent(err) {
		t.Fatalf("Apply of a broken module: %v, want a retryable error", err)
	}
	runs := rec.of(k)
	if len(runs) == 0 || runs[0].ExitCode == 0 || runs[0].Error == "" || runs[0].Stderr == "" {
		t.Fatalf("runs: %+v, want the failed command with its stderr", runs)
	}

	// Fixing the module fixes the fetch: errors are not cached.
	if err := os.WriteFile(filepath.Join(module, "main.tf"), []byte(versionModule), 0o600); err != nil {
		t.Fatal(err)
	}
	if st := mustFetch(t, rt, tg); st.Version != "" || st.Converged {
		t.Fatalf("fixed module: %+v", st)
	}
}

func TestBadTargets(t *testing.T) {
	requireBinary(t)
	t.Parallel()
	runner := runnerConfig(t, time.Minute, time.Minute)
	rt := newRuntime(t, t.TempDir(), runner, nil)
	k := key("x", "staging")
	module := writeModule(t, map[string]string{"main.tf": versionModule})
	for name, tg := range map[string]runtimes.Target{
		"no path":         target(t, k, "v1", "", runner, nil),
		"no version":      target(t, k, "", module, runner, nil),
		"bad init args":   target(t, k, "v1", module, runner, map[string]any{"extraInitArgs": `-backend-config="x`}),
		"no objects":      {InstanceKey: k, Version: "v1"},
		"not a terraform": {InstanceKey: k, Version: "v1", Objects: []json.RawMessage{json.RawMessage(`{"kind":"custom"}`)}},
	} {
		if _, err := rt.Apply(t.Context(), tg); !runtimes.IsPermanent(err) {
			t.Errorf("%s: Apply: %v, want a permanent error", name, err)
		}
	}
	if _, err := rt.Fetch(t.Context(), target(t, k, "v1", filepath.Join(module, "missing"), runner, nil)); err == nil {
		t.Error("Fetch of a missing module: no error")
	}
}

// TestStateSurvivesRestart: a new runtime on the same data directory finds
// the state (and the applied version) the old one left.
func TestStateSurvivesRestart(t *testing.T) {
	requireBinary(t)
	t.Parallel()
	module := writeModule(t, map[string]string{"main.tf": versionModule})
	runner := runnerConfig(t, time.Minute, time.Minute)
	dataDir := t.TempDir()
	k := key("db", "production")
	v1 := target(t, k, "v1", module, runner, nil)

	first, err := NewWith(&config.Runtime{Name: "tf", TerraformRunner: runner}, runtimes.Options{DataDir: dataDir}, testSettings(t))
	if err != nil {
		t.Fatal(err)
	}
	mustApply(t, first, v1)
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := first.Fetch(t.Context(), v1); err == nil {
		t.Error("Fetch after Close: no error")
	}

	rec := &recorder{}
	second := newRuntime(t, dataDir, runner, rec)
	if st := mustFetch(t, second, v1); !runtimestest.Converged(st, "v1") {
		t.Fatalf("after restart: %+v, want converged at v1", st)
	}
	if slices.Contains(kinds(rec.of(k)), kindInit) {
		t.Errorf("runs after restart %v: init again though nothing changed", kinds(rec.of(k)))
	}
	if st := mustFetch(t, second, target(t, k, "v2", module, runner, nil)); st.Version != "v1" || st.Drifted {
		t.Fatalf("v2 after restart: %+v, want v1 running", st)
	}
	if changes := mustApply(t, second, v1); actions(changes)["terraform_data.deploy"] != runtimes.ActionUnchanged {
		t.Fatalf("re-apply after restart: %v", changes)
	}
}

func TestPreRunAndEnv(t *testing.T) {
	requireBinary(t)
	t.Parallel()
	module := writeModule(t, map[string]string{"main.tf": versionModule + `
variable "greeting" { type = string }
resource "terraform_data" "greeting" { input = var.greeting }
`})
	runner := runnerConfig(t, time.Minute, time.Minute)
	runner.Env["TF_VAR_greeting"] = config.EnvValue{Value: "from the runner"}
	runner.PreRun = []config.RunnerCommand{
		{Cmd: `printf '%s %s %s %s' "$PVN_SERVICE_ID" "$PVN_RELEASE_CHANNEL_ID" "$PVN_SERVICE_VERSION" "$SERVICE_SETTING" > prerun.txt; echo ran`},
	}
	rec := &recorder{}
	rt := newRuntime(t, t.TempDir(), runner, rec)
	k := key("web", "staging")
	tg := target(t, k, "v7", module, runner, nil)
	tg.Env = map[string]string{"SERVICE_SETTING": "s1", "TF_VAR_greeting": "from the service"}
	mustApply(t, rt, tg)
	if st := mustFetch(t, rt, tg); !runtimestest.Converged(st, "v7") {
		t.Fatalf("%+v", st)
	}
	dir := filepath.Join(rt.Root, "infra", "web", "staging", "module")
	b, err := os.ReadFile(filepath.Join(dir, "prerun.txt"))
	if err != nil || string(b) != "infra/web infra/staging v7 s1" {
		t.Fatalf("preRun output file: %q, %v", b, err)
	}
	state, err := os.ReadFile(filepath.Join(dir, "terraform.tfstate"))
	if err != nil || !strings.Contains(string(state), "from the runner") {
		t.Fatalf("state: %v, want the runner's TF_VAR_greeting (it overrides the service env):\n%s", err, state)
	}
	runs := rec.of(k)
	if len(runs) == 0 || runs[0].Kind != kindPreRun || runs[0].Stdout != "ran\n" || runs[0].Command[0] != "sh" {
		t.Fatalf("first run: %+v, want the preRun command", runs)
	}

	// A failing preRun fails the fetch with its message.
	runner.PreRun = []config.RunnerCommand{{Cmd: "echo broken >&2; exit 3"}}
	bad := target(t, k, "v8", module, runner, nil)
	if _, err := rt.Fetch(t.Context(), bad); err == nil || !strings.Contains(err.Error(), "broken") {
		t.Fatalf("failing preRun: %v", err)
	}
}

// TestStalePlan: the state changes between the fetch's plan and the apply;
// the apply fails retryably, and the next one plans again.
func TestStalePlan(t *testing.T) {
	bin := requireBinary(t)
	t.Parallel()
	module := writeModule(t, map[string]string{"main.tf": driftModule, "external.txt": "a"})
	runner := runnerConfig(t, time.Minute, time.Minute)
	rt := newRuntime(t, t.TempDir(), runner, nil)
	k := key("net", "staging")
	v1 := target(t, k, "v1", module, runner, nil)
	mustApply(t, rt, v1)
	if err := os.WriteFile(filepath.Join(module, "external.txt"), []byte("b"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A target differing only in its env makes a fresh synchronous plan.
	v1b := v1
	v1b.Env = map[string]string{"X": "1"}
	if st := mustFetch(t, rt, v1b); !st.Drifted {
		t.Fatalf("%+v, want drifted", st)
	}
	// Someone applies by hand meanwhile.
	cmd := exec.CommandContext(t.Context(), bin, "apply", "-auto-approve", "-input=false", "-no-color")
	cmd.Dir = filepath.Join(rt.Root, "infra", "net", "staging", "module")
	cmd.Env = append(os.Environ(), "TF_VAR_pvn_service_version=v0", "TF_CLI_CONFIG_FILE="+runner.Env["TF_CLI_CONFIG_FILE"].Value)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("terraform apply by hand: %v\n%s", err, out)
	}
	_, err := rt.Apply(t.Context(), v1b)
	if err == nil || runtimes.IsPermanent(err) || !strings.Contains(err.Error(), "Saved plan is stale") {
		t.Fatalf("Apply of a stale plan: %v, want a retryable stale-plan error", err)
	}
	got := actions(mustApply(t, rt, v1b))
	if got["terraform_data.deploy"] != runtimes.ActionConfigured {
		t.Fatalf("retry: %v, want the hand-applied v0 configured back to v1", got)
	}
	if st := mustFetch(t, rt, v1b); !runtimestest.Converged(st, "v1") {
		t.Fatalf("%+v", st)
	}
}

func TestExtraInitArgs(t *testing.T) {
	requireBinary(t)
	t.Parallel()
	module := writeModule(t, map[string]string{"main.tf": versionModule})
	runner := runnerConfig(t, time.Minute, time.Minute)
	rec := &recorder{}
	rt := newRuntime(t, t.TempDir(), runner, rec)
	k := key("args", "staging")
	tg := target(t, k, "v1", module, runner, map[string]any{"extraInitArgs": "-upgrade -lock-timeout=5s"})
	if st := mustFetch(t, rt, tg); st.Version != "" {
		t.Fatalf("%+v", st)
	}
	runs := rec.of(k)
	if len(runs) == 0 || runs[0].Kind != kindInit || !slices.Contains(runs[0].Command, "-lock-timeout=5s") {
		t.Fatalf("runs %+v, want init with the extra args", runs)
	}
	// Unknown flags reach terraform (through TF_CLI_ARGS_init), which judges them.
	bad := target(t, k, "v1", module, runner, map[string]any{"extraInitArgs": "-no-such-flag"})
	if _, err := rt.Fetch(t.Context(), bad); err == nil || !strings.Contains(err.Error(), "terraform init") {
		t.Fatalf("init with an unknown flag: %v", err)
	}
}

func TestBinaryLookup(t *testing.T) {
	cfg := &config.Runtime{Name: "tf", TerraformRunner: &config.TerraformRunner{}}
	t.Setenv(BinaryEnv, filepath.Join(t.TempDir(), "nope"))
	if _, err := New(cfg, runtimes.Options{DataDir: t.TempDir()}); err == nil || !strings.Contains(err.Error(), BinaryEnv) {
		t.Errorf("New with a missing %s: %v", BinaryEnv, err)
	}
	t.Setenv(BinaryEnv, "")
	t.Setenv("PATH", t.TempDir())
	if _, err := New(cfg, runtimes.Options{DataDir: t.TempDir()}); !errors.Is(err, ErrNoBinary) ||
		!strings.Contains(err.Error(), "terraform not found: install terraform or OpenTofu, or set DROVER_TERRAFORM") {
		t.Errorf("New without a binary: %v", err)
	}
	fake := filepath.Join(t.TempDir(), "tofu")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", filepath.Dir(fake))
	r, err := New(cfg, runtimes.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Binary() != fake {
		t.Errorf("binary %s, want tofu from PATH %s", r.Binary(), fake)
	}
	tmp := r.TempDir
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Errorf("temporary data directory %s left behind: %v", tmp, err)
	}
	if _, err := New(&config.Runtime{Name: "tf"}, runtimes.Options{}); err == nil {
		t.Error("New of a runtime without terraformRunner: no error")
	}
}
