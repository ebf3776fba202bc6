package e2e

// End-to-end tests of the Pulumi runner (docs/pulumi.md) with a real pulumi
// CLI, its YAML language host and drover's test provider (built by
// hack/pulumi-tools.sh), a local file backend and no cloud: the program's
// resource is a file on this machine.

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apiv1 "github.com/drover-dev/drover/api/v1"
	"github.com/drover-dev/drover/internal/testing/pulumitest"
)

// pulumiWaitErr is why CI's background build of the Pulumi tools failed
// (TestMain waits for it).
var pulumiWaitErr error

// pulumiBinary is the pulumi CLI the tests use: $DROVER_PULUMI_BIN, else
// pulumi on PATH. Without one the tests skip, unless
// DROVER_REQUIRE_PULUMI=1 (CI), where they fail.
func pulumiBinary(t *testing.T) string {
	t.Helper()
	if pulumiWaitErr != nil {
		t.Fatal(pulumiWaitErr)
	}
	bin, err := pulumitest.Binary()
	switch {
	case err == nil:
		return bin
	case pulumitest.Required():
		t.Fatalf("%v (%s=1)", err, pulumitest.RequireEnv)
	default:
		t.Skipf("skipping: %v", err)
	}
	return ""
}

// pulumiEnv is what a drover process needs to run the test tools: their
// directory first on PATH (the language host and the provider are found
// there), no update checks and no plugin downloads.
func pulumiEnv(t *testing.T) []string {
	bin := pulumiBinary(t)
	return []string{"DROVER_PULUMI_BIN=" + bin, "PATH=" + filepath.Dir(bin) + ":" + os.Getenv("PATH"),
		"PULUMI_SKIP_UPDATE_CHECK=true", "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION=true"}
}

// pulumiSecret is the value of the program's secret config value; it must
// never be found in clear on disk or in what drover answers.
const pulumiSecret = "pulumi-e2e-secret-token-4711"

// pulumiPassphrase encrypts the stacks' secrets.
const pulumiPassphrase = "e2e-passphrase-0815"

// pulumiTree writes the program (a YAML program writing one file per
// stack) and the configs: staging on runtime pulumi, production on
// pulumi-prod after staging and an approval; proxy, when set, is the
// linked runtime whose agent runs pulumi.
func pulumiTree(t *testing.T, tmp, proxy string) string {
	t.Helper()
	writeTree(t, filepath.Join(tmp, "programs", "site"), map[string]string{
		"Pulumi.yaml": `name: site
runtime: yaml
config:
  message: {type: string}
  outDir: {type: string}
  failWith: {type: string, default: ""}
  token: {type: string, secret: true}
resources:
  page:
    type: drovertest:File
    properties:
      path: ${outDir}/${pulumi.stack}.txt
      content: ${message}
      failWith: ${failWith}
outputs:
  page: ${page.path}
  token: ${token}
`,
	})
	if err := os.MkdirAll(filepath.Join(tmp, "backend"), 0o755); err != nil {
		t.Fatal(err)
	}
	runtime := func(name string, approve bool) crObj {
		env := crObj{"PULUMI_BACKEND_URL": crObj{"value": "file://" + filepath.Join(tmp, "backend")}}
		if proxy != "" {
			// Through an agent, the stacks' passphrase is a file on the
			// agent's host: the server never holds it.
			env["PULUMI_CONFIG_PASSPHRASE_FILE"] = crObj{"value": filepath.Join(tmp, "agent-only", "passphrase")}
		} else {
			env["PULUMI_CONFIG_PASSPHRASE"] = crObj{"rawSecret": pulumiPassphrase}
		}
		r := crObj{"pollInterval": "1s", "steadyStatePollInterval": "3s", "requireApprovalBeforeApply": approve, "env": env}
		if proxy != "" {
			r["proxyRuntime"] = crObj{"runtime": proxy}
		}
		return crObj{"runtime": crObj{"name": name, "pulumiRunner": r}}
	}
	prod := crChannel("production", "pulumi-prod", "staging")
	prod["preconditions"] = append(prod["preconditions"].([]crObj), crObj{"manualApproval": crObj{}})
	return crWriteConfigs(t, filepath.Join(tmp, "config"), map[string]crObj{
		"runtime":      runtime("pulumi", false),
		"runtime-prod": runtime("pulumi-prod", true),
		"app":          crApp("web", crChannel("staging", "pulumi"), prod),
		"service": {"service": crObj{"name": "site", "application": "web",
			"parameters": []crObj{{"name": "message", "required": true, "string": crObj{}}, {"name": "fail", "string": crObj{}}},
			"customRuntime": crObj{"parameterValues": []crObj{
				{"name": "path", "string": filepath.Join(tmp, "programs", "site")},
				{"name": "stack", "string": "{{.Builtins.ReleaseChannel.Name}}"},
				{"name": "message", "string": "{{.Params.message}}"},
				{"name": "outDir", "string": filepath.Join(tmp, "out")},
				{"name": "failWith", "string": "{{.Params.fail}}"},
				{"name": "token", "secret": crObj{"rawSecret": pulumiSecret}},
			}}}},
	})
}

// noSecretIn fails if any file under dir holds the program's secret.
func noSecretIn(t *testing.T, dir string) {
	t.Helper()
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, []byte(pulumiSecret)) {
			t.Errorf("%s holds the secret config value in clear", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestPulumiRunner: a Pulumi stack per release channel, released through
// staging and an approval to production; a file the program wrote,
// changed by hand, is seen by the steady-state preview and put back; a
// version whose resource fails is rolled back in staging; the secret
// config value is set as a Pulumi secret, never in clear on disk.
func TestPulumiRunner(t *testing.T) {
	requireE2E(t)
	env := pulumiEnv(t)
	tmp := t.TempDir()
	dir := pulumiTree(t, tmp, "")
	s := crStartServer(t, env, "--program-root", tmp)
	s.ok("alice", "apply", dir+"/...")
	if info := runtimeInfo(t, s, "pulumi-prod"); info.Kind != "pulumiRunner" {
		t.Errorf("drover runtimes: pulumi-prod is %+v", info)
	}
	page := func(stack string) string {
		b, _ := os.ReadFile(filepath.Join(tmp, "out", stack+".txt"))
		return string(b)
	}

	pushed := time.Now()
	v1, _ := s.push("alice", "web", "site", "message=one")
	st := s.waitStatus("web", "site", 120*time.Second, "staging converged, production waiting for approval", func(st *apiv1.ServiceStatus) bool {
		return findChannel(st, "staging").Status == "CONVERGED" && findChannel(st, "production").Status == "WAITING_MANUAL_APPROVAL"
	})
	stagingAt := time.Now()
	for _, r := range crRunsOf(crRuns(s, "web", "site"), "staging", "") {
		t.Logf("staging run %-8s %-40.40s exit %d, %s", r.Kind, strings.Join(r.Command, " "), r.ExitCode, r.FinishedAt.Sub(r.StartedAt).Round(time.Millisecond))
	}
	if got := page("staging"); got != "one" {
		t.Errorf("staging's page: %q", got)
	}
	if pv := findChannel(st, "production").Preview; pv == nil || !strings.Contains(pv.Plan, "to create") {
		t.Errorf("production's preview while it waits for approval: %s", dump(pv))
	}
	s.ok("bob", "approve", "site", "--app", "web", "--release-channel", "production")
	approved := time.Now()
	// pulumi-prod also asks for an approval of every update
	// (requireApprovalBeforeApply): approve while production waits.
	st = s.waitStatus("web", "site", 120*time.Second, "production converged", func(st *apiv1.ServiceStatus) bool {
		if findChannel(st, "production").Status == "WAITING_MANUAL_APPROVAL" {
			s.ok("bob", "approve", "site", "--app", "web", "--release-channel", "production")
		}
		return converged(v1)(st)
	})
	t.Logf("push -> staging converged %s; approval -> production converged %s", stagingAt.Sub(pushed).Round(time.Millisecond), time.Since(approved).Round(time.Millisecond))
	if got := page("production"); got != "one" {
		t.Errorf("production's page: %q", got)
	}
	if ch := findChannel(st, "production"); !strings.Contains(dump(ch.Info), "page") {
		t.Errorf("production's runtime info does not show the stack's outputs: %s", dump(ch.Info))
	}
	if strings.Contains(dump(st), pulumiSecret) {
		t.Errorf("the status shows the secret")
	}

	// Steady state: the runner previews each stack once a steady interval
	// (3s here, 1h by default), no more, and at least once.
	previews := func() int { return len(crRunsOf(crRuns(s, "web", "site"), "", "preview")) }
	before := previews()
	const window = 12 * time.Second
	time.Sleep(window)
	n := previews() - before
	t.Logf("steady state, 2 stacks, %s at a 3s interval: %d previews: %.1f per stack per minute (%.3f at the default 1h)",
		window, n, float64(n)/2/window.Minutes(), float64(n)/2/window.Minutes()*3/3600)
	if most := 2 * (int(window/(3*time.Second)) + 1); n < 2 || n > most {
		t.Errorf("steady state: %d previews of 2 stacks in %s at a 3s interval, want 2 to %d", n, window, most)
	}

	// Drift: staging's page changed by hand is written again.
	last := crLastSeq(s.events("web", "site"))
	if err := os.WriteFile(filepath.Join(tmp, "out", "staging.txt"), []byte("changed by hand"), 0o644); err != nil {
		t.Fatal(err)
	}
	crWaitEvents(s, "web", "site", 60*time.Second, "staging's drift healed", func(evs []apiv1.Event) bool {
		d := crEvent(evs, last, "drift", "staging")
		return d != nil && crEvent(evs, d.Seq, "converged", "staging") != nil && page("staging") == "one"
	})

	// Production's page changed by hand: with requireApprovalBeforeApply
	// the update that heals it waits for an approval, whose preview is
	// pulumi's plan.
	if err := os.WriteFile(filepath.Join(tmp, "out", "production.txt"), []byte("changed by hand"), 0o644); err != nil {
		t.Fatal(err)
	}
	st = s.waitStatus("web", "site", 60*time.Second, "production's drift waiting for the approval of its update", func(st *apiv1.ServiceStatus) bool {
		return findChannel(st, "production").Status == "WAITING_MANUAL_APPROVAL"
	})
	if pv := findChannel(st, "production").Preview; pv == nil || !strings.HasPrefix(pv.Plan, "Preview: ") || !strings.Contains(pv.Plan, "1 to update") {
		t.Errorf("production's preview while its update waits for approval: %s", dump(pv))
	}
	if got := page("production"); got != "changed by hand" {
		t.Errorf("production's page was put back before the approval: %q", got)
	}
	s.ok("bob", "approve", "site", "--app", "web", "--release-channel", "production")
	s.waitStatus("web", "site", 60*time.Second, "production's drift healed once approved", func(st *apiv1.ServiceStatus) bool {
		return findChannel(st, "production").Status == "CONVERGED" && page("production") == "one"
	})

	// drover preview shows what v2 would change.
	preview := s.ok("alice", "preview", "site", "--app", "web", "--param", "message=two").stdout
	if !strings.Contains(preview, "-  message: one") || !strings.Contains(preview, "+  message: two") || strings.Contains(preview, pulumiSecret) {
		t.Errorf("preview of v2:\n%s", preview)
	}
	v2, _ := s.push("alice", "web", "site", "message=two")
	s.waitStatus("web", "site", 120*time.Second, "staging on v2", channelIs("staging", "CONVERGED", v2))
	if got := page("staging"); got != "two" {
		t.Errorf("staging's page on v2: %q", got)
	}
	// v3's resource fails: staging is rolled back to v2.
	v3, _ := s.push("alice", "web", "site", "message=three", "fail=the disk is full")
	st = s.waitStatus("web", "site", 180*time.Second, "staging rolled back to v2", channelIs("staging", "ROLLED_BACK", v2))
	if ch := findChannel(st, "staging"); !strings.Contains(ch.Message, "rolled back from "+v3+" to "+v2) {
		t.Errorf("staging after the rollback: %s", dump(ch))
	}
	failed := false
	for _, e := range s.events("web", "site") {
		failed = failed || e.ReleaseChannel == "staging" && strings.Contains(e.Message, "the disk is full")
	}
	if !failed {
		t.Errorf("no event says why %s failed: %s", v3, dump(eventKeys(s.events("web", "site"))))
	}
	if got := page("staging"); got != "two" {
		t.Errorf("staging's page after the rollback: %q", got)
	}
	if ch := findChannel(s.status("web", "site"), "production"); ch.Version != v1 {
		t.Errorf("production moved: %s", dump(ch))
	}
	noSecretIn(t, s.data)
	noSecretIn(t, filepath.Join(tmp, "backend"))
	noSecretIn(t, filepath.Join(tmp, "programs"))
}

// TestPulumiThroughAgent: the runners' proxyRuntime is a linked runtime
// whose commands agent runs pulumi on its own host, with the passphrase
// and backend of its configs; the server runs no pulumi (it has none on
// its PATH) and its data directory holds no stack.
func TestPulumiThroughAgent(t *testing.T) {
	requireE2E(t)
	env := pulumiEnv(t)
	tmp := t.TempDir()
	s := newServerEnv(t, freeAddr(t), []string{"DROVER_PULUMI_BIN=/nonexistent/pulumi"}, "--agent-listen", freeAddr(t))
	writeTree(t, filepath.Join(tmp, "agent-only"), map[string]string{"passphrase": pulumiPassphrase})
	resp, tok := link(t, s, "iac-host")
	startAgentEnv(t, "iac-host", env, agentArgs(resp, tok, "--mode", "commands", "--program-root", tmp, "--data", filepath.Join(tmp, "agent-data"))...)
	waitAgent(t, s, "iac-host", "connected")
	s.ok("alice", "apply", pulumiTree(t, tmp, "iac-host")+"/...")
	pushed := time.Now()
	v1, _ := s.push("alice", "web", "site", "message=one")
	s.waitStatus("web", "site", 120*time.Second, "staging converged through the agent", channelIs("staging", "CONVERGED", v1))
	t.Logf("through the agent: push -> staging converged %s", time.Since(pushed).Round(time.Millisecond))
	s.ok("bob", "approve", "site", "--app", "web", "--release-channel", "production")
	s.waitStatus("web", "site", 120*time.Second, "production converged through the agent", converged(v1))
	for _, stack := range []string{"staging", "production"} {
		if b, err := os.ReadFile(filepath.Join(tmp, "out", stack+".txt")); err != nil || string(b) != "one" {
			t.Errorf("%s's page: %q %v", stack, b, err)
		}
	}
	if info := runtimeInfo(t, s, "pulumi"); info.Via != "iac-host" {
		t.Errorf("pulumi as the server lists it: %+v", info)
	}
	if _, err := os.Stat(filepath.Join(s.data, "pulumi")); err == nil {
		t.Errorf("the server's data directory has a pulumi directory: %s", filepath.Join(s.data, "pulumi"))
	}
	noSecretIn(t, s.data)
	// The stacks' passphrase, the agent's own, is nowhere in the server's
	// data directory.
	err := filepath.WalkDir(s.data, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, []byte(pulumiPassphrase)) {
			t.Errorf("%s holds the agent's passphrase", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
