package pulumi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/runtimes"
	"github.com/drover-dev/drover/internal/runtimes/runtimestest"
	"github.com/drover-dev/drover/internal/testing/kubetest"
	"github.com/drover-dev/drover/internal/testing/pulumitest"
)

// RequireEnv makes the tests that need pulumi fail, rather than skip,
// when no pulumi binary is found (CI sets it).
const RequireEnv = pulumitest.RequireEnv

// pulumiHome is the PULUMI_HOME of every test (its workspace settings).
var pulumiHome string

func TestMain(m *testing.M) {
	// CI builds the tools in the background: wait for them before any
	// test's timeout starts.
	if err := pulumitest.Wait(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// pulumi finds the YAML language host and the test provider beside
	// itself (hack/pulumi-tools.sh builds the three into one directory),
	// on the PATH drover passes.
	if bin, err := findBinary(); err == nil {
		_ = os.Setenv("PATH", filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"))
	}
	dir, err := os.MkdirTemp("", "drover-pulumi-home-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	pulumiHome = dir
	// kubetest.Main runs the tests, then stops the shared cluster of the
	// Jobs tests.
	kubetest.Main(m)
}

// needPulumi skips t without a pulumi binary, unless RequireEnv is 1.
func needPulumi(t *testing.T) {
	t.Helper()
	if _, err := findBinary(); err != nil {
		if os.Getenv(RequireEnv) == "1" {
			t.Fatalf("%v (%s=1)", err, RequireEnv)
		}
		t.Skipf("skipping: %v (CI builds one: see .ci/run and hack/pulumi-tools.sh)", err)
	}
}

// program is the test program: one drovertest:File beside the program's
// copy (site.txt in the instance's directory) holding "<greeting>
// <version>", failing with config fail when set.
const program = `name: drovertest
runtime: yaml
config:
  version:
    type: string
  greeting:
    type: string
    default: hello
  fail:
    type: string
    default: ""
  dbPassword:
    type: string
    default: ""
variables:
  file: ${pulumi.cwd}/../site.txt
resources:
  site:
    type: drovertest:File
    properties:
      path: ${file}
      content: ${greeting} ${version}
      failWith: ${fail}
outputs:
  path: ${site.path}
  content: ${site.content}
  password: ${dbPassword}
`

// fixture is one test's program, runtime and records.
type fixture struct {
	t       *testing.T
	program string // the program directory
	runner  *config.PulumiRunner
	rt      *Runtime

	mu   sync.Mutex
	runs []runtimes.Run
}

// newFixture writes the program (the test program when src is "") and
// builds a runtime over a new data directory.
func newFixture(t *testing.T, src string) *fixture {
	t.Helper()
	needPulumi(t)
	if src == "" {
		src = program
	}
	f := &fixture{t: t, program: t.TempDir(), runner: &config.PulumiRunner{
		PollInterval:            config.Duration{Duration: time.Minute},
		SteadyStatePollInterval: config.Duration{Duration: time.Hour},
	}}
	if err := os.WriteFile(filepath.Join(f.program, "Pulumi.yaml"), []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	f.rt = f.build(t)
	return f
}

// build builds a runtime over a new data directory that records into f.
func (f *fixture) build(t *testing.T) *Runtime {
	t.Helper()
	rt, err := NewWith(&config.Runtime{Name: "pu", PulumiRunner: f.runner}, runtimes.Options{DataDir: t.TempDir(), Runs: f}, testSettings(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := rt.Close(); err != nil {
			t.Error(err)
		}
	})
	return rt
}

// testSettings allows the programs of tests, in temporary directories.
func testSettings(t testing.TB) Settings {
	t.Helper()
	return Settings{Roots: []string{os.TempDir()}}
}

func (f *fixture) RecordRun(_ context.Context, run runtimes.Run) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.runs = append(f.runs, run)
	return nil
}

// recorded is what was recorded for key, and its kinds in order.
func (f *fixture) recorded(key runtimes.InstanceKey) ([]runtimes.Run, []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var runs []runtimes.Run
	var kinds []string
	for _, r := range f.runs {
		if r.InstanceKey == key {
			runs = append(runs, r)
			kinds = append(kinds, r.Kind)
		}
	}
	return runs, kinds
}

// obj is a compiled pulumiRunner object; change edits it.
type obj struct {
	prefix  []string
	stack   string
	config  map[string]string
	secrets map[string]string
}

// target is the compiled target of version for key: the object's config
// carries the version.
func (f *fixture) target(key runtimes.InstanceKey, version string, edits ...func(*obj)) runtimes.Target {
	f.t.Helper()
	o := &obj{stack: key.Service + "-" + key.ReleaseChannel, config: map[string]string{
		"version": version,
	}}
	for _, e := range edits {
		e(o)
	}
	secret := map[string]config.EnvValue{}
	for k, v := range o.secrets {
		secret[k] = config.EnvValue{RawSecret: v}
	}
	b, err := json.Marshal(map[string]any{
		"kind": "pulumiRunner", "runtime": "pu", "path": f.program, "stack": o.stack, "image": "", "commandPrefix": o.prefix,
		"config": o.config, "secretConfig": secret, "pulumiRunner": f.runner,
	})
	if err != nil {
		f.t.Fatal(err)
	}
	return runtimes.Target{InstanceKey: key, Version: version, DesiredStateID: "ds-" + version, Objects: []json.RawMessage{b},
		Env: map[string]string{
			"PULUMI_CONFIG_PASSPHRASE":                    "test passphrase",
			"PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
			"PULUMI_HOME": pulumiHome,
		}}
}

// file is what the instance's resource wrote.
func (f *fixture) file(key runtimes.InstanceKey) string {
	b, err := os.ReadFile(f.path(key))
	if err != nil {
		return "(" + err.Error() + ")"
	}
	return string(b)
}

// path is the file of key's resource.
func (f *fixture) path(key runtimes.InstanceKey) string {
	return filepath.Join(f.rt.Root, key.Application, key.Service, key.ReleaseChannel, "site.txt")
}

func (f *fixture) fetch(tg runtimes.Target) runtimes.State {
	f.t.Helper()
	st, err := f.rt.Fetch(f.t.Context(), tg)
	if err != nil {
		f.t.Fatalf("Fetch(%s, %s): %v", tg.InstanceKey, tg.Version, err)
	}
	return st
}

// apply applies tg and returns its changes as object -> action.
func (f *fixture) apply(tg runtimes.Target) map[string]runtimes.Action {
	f.t.Helper()
	res, err := f.rt.Apply(f.t.Context(), tg)
	if err != nil {
		f.t.Fatalf("Apply(%s, %s): %v", tg.InstanceKey, tg.Version, err)
	}
	got := map[string]runtimes.Action{}
	for _, c := range res.Changes {
		got[c.Object] = c.Action
	}
	return got
}

func ikey(svc, rc string) runtimes.InstanceKey {
	return runtimes.InstanceKey{Application: "web", Service: svc, ReleaseChannel: rc}
}

const site = "drovertest:index:File/site"

func TestConformance(t *testing.T) {
	f := newFixture(t, "")
	runtimestest.Run(t, runtimestest.Harness{
		New:              func(t *testing.T) runtimes.Runtime { return f.build(t) },
		Target:           func(k runtimes.InstanceKey, version string) runtimes.Target { return f.target(k, version) },
		Timeout:          3 * time.Minute,
		Goroutines:       2,
		KeysPerGoroutine: 2,
	})
}

// TestPreviewUpDrift: a preview proposes the resource, up creates it,
// the next preview finds nothing to do; the file changed by hand is drift
// of the applied version, healed by the next up; a new version is an
// update.
func TestPreviewUpDrift(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	k := ikey("site", "staging")
	v1 := f.target(k, "v1")
	st := f.fetch(v1)
	if st.Version != "" || st.Converged || st.Drifted || st.Message != "Preview: 1 to create, 0 to update, 0 to delete." {
		t.Fatalf("before up: %+v, want nothing applied and the preview's summary", st)
	}
	if got := f.apply(v1); !maps.Equal(got, map[string]runtimes.Action{site: runtimes.ActionCreated}) {
		t.Fatalf("first up: %v", got)
	}
	if got := f.file(k); got != "hello v1" {
		t.Fatalf("file %q", got)
	}
	if st := f.fetch(v1); !runtimestest.Converged(st, "v1") {
		t.Fatalf("after up: %+v, want converged at v1", st)
	}
	info, err := f.rt.Info(t.Context(), k)
	if err != nil || !slices.Contains(info, runtimes.InfoOutput{Name: "content", Text: "hello v1"}) {
		t.Fatalf("info %+v, %v; want the stack's outputs", info, err)
	}
	_, kinds := f.recorded(k)
	// The fetch's plan is the one applied: no preview between them.
	if want := []string{"stack", "config", "preview", "up", "output", "preview"}; !slices.Equal(kinds, want) {
		t.Errorf("runs %q, want %q", kinds, want)
	}

	// Out of band: the file changes; a preview (with refresh) sees drift.
	if err := os.WriteFile(f.path(k), []byte("changed by hand"), 0o600); err != nil {
		t.Fatal(err)
	}
	f.rt.Forget(k)
	st = f.fetch(v1)
	if st.Version != "v1" || !st.Drifted || st.Converged || st.Message != "Preview: 0 to create, 1 to update, 0 to delete." {
		t.Fatalf("drifted: %+v", st)
	}
	if got := f.apply(v1); !maps.Equal(got, map[string]runtimes.Action{site: runtimes.ActionConfigured}) {
		t.Fatalf("healing up: %v", got)
	}
	if got := f.file(k); got != "hello v1" {
		t.Fatalf("file after healing %q", got)
	}

	v2 := f.target(k, "v2", func(o *obj) { o.config["greeting"] = "hi" })
	if st := f.fetch(v2); st.Version != "v1" || st.Drifted || st.Converged {
		t.Fatalf("v2 before up: %+v, want v1 running, not drifted", st)
	}
	if got := f.apply(v2); !maps.Equal(got, map[string]runtimes.Action{site: runtimes.ActionConfigured}) {
		t.Fatalf("v2 up: %v", got)
	}
	if got := f.file(k); got != "hi v2" {
		t.Fatalf("file after v2 %q", got)
	}
	if st := f.fetch(v2); !runtimestest.Converged(st, "v2") {
		t.Fatalf("after v2: %+v", st)
	}
	// The greeting removed: drover removes the key it set.
	v3 := f.target(k, "v3")
	f.apply(v3)
	if got := f.file(k); got != "hello v3" {
		t.Fatalf("file after v3 %q, want the default greeting back", got)
	}
}

// TestUpFails: a resource that fails to create fails the apply with the
// provider's message (retryable), and the state is not converged. (Its
// commands run after a commandPrefix, and a preRun command first.)
func TestUpFails(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	f.runner.PreRun = []config.RunnerCommand{{Cmd: "echo prepared > ../prerun.txt"}}
	k := ikey("broken", "staging")
	v1 := f.target(k, "v1", func(o *obj) {
		o.config["fail"] = "disk on fire"
		o.prefix = []string{"env", "DROVER_PREFIXED=1"}
	})
	_, err := f.rt.Apply(t.Context(), v1)
	if err == nil || !strings.Contains(err.Error(), "pulumi up failed") || !strings.Contains(err.Error(), site+": disk on fire") {
		t.Fatalf("Apply: %v, want the provider's error", err)
	}
	if runtimes.IsPermanent(err) {
		t.Errorf("a failed up is permanent: %v", err)
	}
	if st := f.fetch(v1); st.Converged || st.Version != "" {
		t.Fatalf("after the failure: %+v", st)
	}
	runs, kinds := f.recorded(k)
	if kinds[0] != "preRun" {
		t.Errorf("runs %q, want the preRun command first", kinds)
	}
	for _, r := range runs {
		if r.Kind == "preview" && !slices.Equal(r.Command[:3], []string{"env", "DROVER_PREFIXED=1", f.rt.Binary()}) {
			t.Errorf("preview ran %q, want the command prefix first", r.Command)
		}
	}
	if b, err := os.ReadFile(filepath.Join(filepath.Dir(f.path(k)), "prerun.txt")); err != nil || string(b) != "prepared\n" {
		t.Errorf("preRun: %q, %v", b, err)
	}
}

// TestEnv: commands get the allow-listed part of drover's environment,
// the target's env, the default file backend unless one is given, and no
// forced plugin setting.
func TestEnv(t *testing.T) {
	t.Setenv("AWS_SECRET_ACCESS_KEY", "the server's own")
	t.Setenv("PULUMI_HOME", "/var/lib/pulumi-home")
	r, err := build(&config.Runtime{Name: "pu", PulumiRunner: &config.PulumiRunner{}}, runtimes.Options{DataDir: t.TempDir()}, func() (string, error) { return "pulumi", nil })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	tg := runtimes.Target{InstanceKey: ikey("env", "staging"), Version: "v1", Env: map[string]string{"FROM_TARGET": "yes"}}
	sp := &spec{runner: &config.PulumiRunner{}}
	env, err := r.env(tg, sp)
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{
		"FROM_TARGET": "yes", "PULUMI_HOME": "/var/lib/pulumi-home", "PULUMI_SKIP_UPDATE_CHECK": "true",
		"PULUMI_BACKEND_URL": "file://" + filepath.Join(r.Root, backendDirName, "web", "env"), "PVN_SERVICE_VERSION": "v1",
		"AWS_SECRET_ACCESS_KEY": "", "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "",
	} {
		if env[k] != want {
			t.Errorf("%s=%q, want %q", k, env[k], want)
		}
	}
	sp.runner.Env = map[string]config.EnvValue{"PULUMI_BACKEND_URL": {Value: "s3://bucket"}, "PULUMI_ACCESS_TOKEN": {RawSecret: "pul-token"}}
	if env, _ = r.env(tg, sp); env["PULUMI_BACKEND_URL"] != "s3://bucket" || env["PULUMI_ACCESS_TOKEN"] != "pul-token" {
		t.Errorf("given backend: %v", env)
	}
}

// TestPreviewError: a program that does not load fails the fetch with
// pulumi's message, not its whole output.
func TestPreviewError(t *testing.T) {
	t.Parallel()
	f := newFixture(t, program+"  broken: ${nowhere.path}\n")
	_, err := f.rt.Fetch(t.Context(), f.target(ikey("bad", "staging"), "v1"))
	if err == nil || !strings.Contains(err.Error(), "pulumi preview failed") || !strings.Contains(err.Error(), "nowhere") || strings.Contains(err.Error(), `"steps"`) {
		t.Fatalf("Fetch: %v, want pulumi's error", err)
	}
}

// TestSecretsNeverInClear: a secret config value and a raw secret of the
// runner's env are in no recorded run (arguments, output), no error, and
// only encrypted in the stack's settings and the saved plan.
func TestSecretsNeverInClear(t *testing.T) {
	t.Parallel()
	const secret, envSecret = "s3cr3t-db-password-4711", "env-s3cr3t-token-0815"
	f := newFixture(t, "")
	f.runner.Env = map[string]config.EnvValue{"SOME_TOKEN": {RawSecret: envSecret}}
	k := ikey("secret", "staging")
	v1 := f.target(k, "v1", func(o *obj) { o.secrets = map[string]string{"dbPassword": secret} })
	f.fetch(v1)
	plan, err := os.ReadFile(filepath.Join(f.rt.Root, "web", "secret", "staging", planFileName))
	if err != nil {
		t.Fatal(err)
	}
	f.apply(v1)
	if st := f.fetch(v1); !runtimestest.Converged(st, "v1") {
		t.Fatalf("%+v", st)
	}
	stackFile, err := os.ReadFile(filepath.Join(f.rt.Root, "web", "secret", "staging", programDirName, "Pulumi.secret-staging.yaml"))
	if err != nil || !strings.Contains(string(stackFile), "secure:") {
		t.Fatalf("stack file: %v\n%s\nwant the secret encrypted", err, stackFile)
	}
	info, _ := f.rt.Info(t.Context(), k)
	if !slices.Contains(info, runtimes.InfoOutput{Name: "password", Text: "[secret]"}) {
		t.Errorf("info %+v, want the secret output as [secret]", info)
	}
	runs, _ := f.recorded(k)
	seen, err := json.Marshal(runs)
	if err != nil {
		t.Fatal(err)
	}
	for what, b := range map[string][]byte{"stack file": stackFile, "plan": plan, "runs": seen, "info": fmt.Appendf(nil, "%v", info)} {
		for _, s := range []string{secret, envSecret} {
			if strings.Contains(string(b), s) {
				t.Errorf("%s holds the secret %s in clear", what, s)
			}
		}
	}
	// Nothing drover wrote holds it either (the state is encrypted too).
	_ = filepath.WalkDir(f.rt.Root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if b, err := os.ReadFile(p); err == nil && strings.Contains(string(b), secret) {
			t.Errorf("%s holds the secret in clear", p)
		}
		return nil
	})
	// A failure's error is redacted too.
	_, err = f.rt.Apply(t.Context(), f.target(k, "v2", func(o *obj) {
		o.secrets = map[string]string{"dbPassword": secret}
		o.config["fail"] = "cannot use " + envSecret
	}))
	if err == nil || strings.Contains(err.Error(), envSecret) || !strings.Contains(err.Error(), "(redacted)") {
		t.Errorf("failed up: %v, want the secret redacted", err)
	}
}

// TestLockedStack: an up of a stack another update holds fails with a
// retryable error; once the lock is gone the next Apply works.
func TestLockedStack(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	k := ikey("locked", "staging")
	f.apply(f.target(k, "v1"))
	lock := filepath.Join(f.rt.Root, backendDirName, "web", "locked", ".pulumi", "locks", "organization", "drovertest", "locked-staging", "00000000-0000-4000-8000-000000000000.json")
	if err := os.MkdirAll(filepath.Dir(lock), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(lock, []byte(`{"pid":1,"username":"someone","hostname":"elsewhere","timestamp":"2026-01-01T00:00:00Z"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	v2 := f.target(k, "v2")
	_, err := f.rt.Apply(t.Context(), v2)
	if err == nil || !strings.Contains(err.Error(), "the stack is currently locked") || !strings.Contains(err.Error(), "retrying") || runtimes.IsPermanent(err) {
		t.Fatalf("Apply of a locked stack: %v, want a retryable error", err)
	}
	if err := os.Remove(lock); err != nil {
		t.Fatal(err)
	}
	f.apply(v2)
	if got := f.file(k); got != "hello v2" {
		t.Fatalf("file %q", got)
	}
	// A version with the same config: converged by a preview alone, the
	// config not set again.
	_, before := f.recorded(k)
	if st := f.fetch(f.target(k, "v3", func(o *obj) { o.config["version"] = "v2" })); !runtimestest.Converged(st, "v3") {
		t.Fatalf("v3 of v2's config: %+v", st)
	}
	if _, kinds := f.recorded(k); !slices.Equal(kinds[len(before):], []string{"preview"}) {
		t.Errorf("runs for v3 %q, want one preview", kinds[len(before):])
	}
}

// TestProgramRoots: a program outside the roots, or the data directory, is
// refused naming the path and the flag, before pulumi runs.
func TestProgramRoots(t *testing.T) {
	t.Parallel()
	needPulumi(t)
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(root, "data")
	rt, err := NewWith(&config.Runtime{Name: "pu", PulumiRunner: &config.PulumiRunner{}}, runtimes.Options{DataDir: data}, Settings{Roots: []string{filepath.Join(root, "programs")}})
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a missing root: %v", err)
	}
	if err := os.MkdirAll(filepath.Join(root, "programs"), 0o750); err != nil {
		t.Fatal(err)
	}
	if rt, err = NewWith(&config.Runtime{Name: "pu", PulumiRunner: &config.PulumiRunner{}}, runtimes.Options{DataDir: data}, Settings{Roots: []string{root}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close() })
	f := &fixture{t: t, program: t.TempDir(), runner: &config.PulumiRunner{}}
	tg := f.target(ikey("outside", "staging"), "v1")
	_, err = rt.Fetch(t.Context(), tg)
	if err == nil || !strings.Contains(err.Error(), "parameter path: program directory "+f.program) || !strings.Contains(err.Error(), ProgramRootFlag) {
		t.Errorf("outside the roots: %v", err)
	}
	f.program = data
	_, err = rt.Fetch(t.Context(), f.target(ikey("data", "staging"), "v1"))
	if err == nil || !strings.Contains(err.Error(), "lies in the data directory") {
		t.Errorf("the data directory: %v", err)
	}
}
