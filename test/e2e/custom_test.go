package e2e

// End-to-end tests of custom runtimes (docs/custom-runtimes.md): real
// `drover server` processes running real shell commands on this host.
// Configs are written as JSON (which is YAML) so scripts need no indenting.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	apiv1 "github.com/drover-dev/drover/api/v1"
)

// crObj is a config object (marshalled to JSON, read as YAML by drover).
type crObj = map[string]any

// crWriteConfigs writes each object as dir/NAME.pvn.yaml and returns dir.
func crWriteConfigs(t *testing.T, dir string, objs map[string]crObj) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, obj := range objs {
		b, err := json.MarshalIndent(obj, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name+".pvn.yaml"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// crProgram is a taskConfig running script with sh -c and env (plain values).
func crProgram(script string, env map[string]string) crObj {
	p := crObj{"cmd": []string{"sh", "-c", script}}
	if len(env) > 0 {
		e := crObj{}
		for k, v := range env {
			e[k] = crObj{"value": v}
		}
		p["env"] = e
	}
	return crObj{"taskConfig": crObj{"program": p}}
}

// crWith returns a copy of o with extra fields.
func crWith(o crObj, kv ...any) crObj {
	out := crObj{}
	for k, v := range o {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i].(string)] = kv[i+1]
	}
	return out
}

// crRuntime is a custom runtime with required string parameters params.
func crRuntime(name string, params []string, custom crObj) crObj {
	var defs []crObj
	for _, p := range params {
		defs = append(defs, crObj{"name": p, "required": true, "string": crObj{}})
	}
	if len(defs) > 0 {
		custom = crWith(custom, "parameters", defs)
	}
	return crObj{"runtime": crObj{"name": name, "custom": custom}}
}

// crService is a service of app on the channel's custom runtime, with
// parameterValues given as name, template pairs.
func crService(app, name string, values ...string) crObj {
	var pvs []crObj
	for i := 0; i+1 < len(values); i += 2 {
		pvs = append(pvs, crObj{"name": values[i], "string": values[i+1]})
	}
	return crObj{"service": crObj{"name": name, "application": app, "customRuntime": crObj{"parameterValues": pvs}}}
}

// crChannel is a release channel on runtime rt, after the channels in after.
func crChannel(name, rt string, after ...string) crObj {
	c := crObj{"name": name, "runtimes": []crObj{{"runtime": rt}}}
	var pre []crObj
	for _, a := range after {
		pre = append(pre, crObj{"releaseChannelStable": crObj{"releaseChannel": a}})
	}
	if len(pre) > 0 {
		c["preconditions"] = pre
	}
	return c
}

func crApp(name string, channels ...crObj) crObj {
	return crObj{"application": crObj{"name": name, "releaseChannels": channels}}
}

// Scripts shared by the tests. The version file is $STATE_DIR/version.
const (
	crApplyScript = `set -eu
mkdir -p "$STATE_DIR"
printf '%s\n' "$PVN_SERVICE_VERSION" > "$STATE_DIR/version"
echo "deployed $PVN_SERVICE $PVN_SERVICE_VERSION to $PVN_RELEASE_CHANNEL"
`
	crFetchScript = `running=$(cat "$STATE_DIR/version" 2>/dev/null || true)
echo "running: ${running:-nothing}"
[ "$running" = "$PVN_SERVICE_VERSION" ] || exit 2
`
)

// crFetch is an exit-code fetch of the version file polled every 1s while
// converging and every steady once converged.
func crFetch(steady string) crObj {
	return crWith(crProgram(crFetchScript, map[string]string{"STATE_DIR": "{{.Params.stateDir}}"}),
		"pollInterval", "1s", "steadyStatePollInterval", steady)
}

// crDrover runs the CLI without a *testing.T (safe in goroutines).
func crDrover(args ...string) (result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, droverBin, args...)
	cmd.Env = cleanEnv()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := result{args: args, stdout: stdout.String(), stderr: stderr.String()}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		r.code, err = exit.ExitCode(), nil
	}
	return r, err
}

// crRuns lists every kept run of svc (newest first), filtered by extra flags.
func crRuns(s *server, app, svc string, extra ...string) []apiv1.Run {
	s.t.Helper()
	r := s.ok("e2e", append([]string{"runs", svc, "--app", app, "--limit", "0", "-o", "json"}, extra...)...)
	var list apiv1.RunList
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil {
		s.t.Fatalf("decode runs: %v\n%s", err, r)
	}
	return list.Runs
}

// crRunsOf keeps the runs of release channel rc and kind, oldest first.
func crRunsOf(runs []apiv1.Run, rc, kind string) []apiv1.Run {
	var out []apiv1.Run
	for _, r := range runs {
		if (rc == "" || r.ReleaseChannel == rc) && (kind == "" || r.Kind == kind) {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// crWaitEvents polls the service's events until cond holds.
func crWaitEvents(s *server, app, svc string, timeout time.Duration, what string, cond func([]apiv1.Event) bool) []apiv1.Event {
	s.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		evs := s.events(app, svc)
		if cond(evs) {
			return evs
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("timed out after %s waiting for %s; events:\n%s", timeout, what, strings.Join(crEventLines(evs), "\n"))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func crEventLines(evs []apiv1.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = fmt.Sprintf("%d %s %s %s/%s: %s", e.Seq, e.Time.Format("15:04:05.000"), e.Type, e.ReleaseChannel, e.DesiredStateID, e.Message)
	}
	return out
}

// crEvent returns the first event after seq of type typ in channel rc, or nil.
func crEvent(evs []apiv1.Event, after int64, typ, rc string) *apiv1.Event {
	for i := range evs {
		if e := &evs[i]; e.Seq > after && e.Type == typ && (rc == "" || e.ReleaseChannel == rc) {
			return e
		}
	}
	return nil
}

func crLastSeq(evs []apiv1.Event) int64 {
	if len(evs) == 0 {
		return 0
	}
	return evs[len(evs)-1].Seq
}

// crWait runs drover wait and checks its exit code.
func crWait(s *server, app, svc string, wantCode int) result {
	s.t.Helper()
	r := s.as("e2e", "wait", svc, "--app", app, "--timeout", "60s")
	if r.code != wantCode {
		s.t.Fatalf("drover wait: want exit %d, got %s\nstatus:\n%s", wantCode, r, dump(s.status(app, svc)))
	}
	return r
}

// crReadFile returns a file's content ("" if it does not exist).
func crReadFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return string(b)
}

// crWaitFile waits until path exists.
func crWaitFile(t *testing.T, path string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear within %s", path, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestCustomTwoChannelPromotion: a shell runtime writing a version file;
// production follows staging only once staging converged, and a SIGKILL of
// the server between the two neither loses the rollout nor re-applies
// staging. Production also needs an approval, which holds it still while
// the server is killed.
func TestCustomTwoChannelPromotion(t *testing.T) {
	requireE2E(t)
	tmp := t.TempDir()
	const app, svc = "shop", "site"
	// The apply holds until its channel's gate file exists, so the test can
	// look at production while staging's apply runs.
	apply := `set -eu
mkdir -p "$STATE_DIR"
: > "$STATE_DIR/applying"
i=0
while [ ! -e "$GATE" ]; do
  i=$((i+1)); [ "$i" -lt 1200 ] || { echo "gate $GATE never opened" >&2; exit 1; }
  sleep 0.05
done
` + strings.TrimPrefix(crApplyScript, "set -eu\nmkdir -p \"$STATE_DIR\"\n")
	prod := crChannel("production", "shell", "staging")
	prod["preconditions"] = append(prod["preconditions"].([]crObj), crObj{"manualApproval": crObj{}})
	dir := crWriteConfigs(t, filepath.Join(tmp, "config"), map[string]crObj{
		"runtime": crRuntime("shell", []string{"stateDir", "gate"}, crObj{
			"apply": crProgram(apply, map[string]string{"STATE_DIR": "{{.Params.stateDir}}", "GATE": "{{.Params.gate}}"}),
			"fetch": crFetch("2s"),
		}),
		"app": crApp(app, crChannel("staging", "shell"), prod),
		"service": crService(app, svc,
			"stateDir", tmp+"/state/{{.Builtins.ReleaseChannel.Name}}",
			"gate", tmp+"/gate-{{.Builtins.ReleaseChannel.Name}}"),
	})
	stagingFile, prodFile := tmp+"/state/staging/version", tmp+"/state/production/version"
	if err := os.WriteFile(tmp+"/gate-production", nil, 0o644); err != nil {
		t.Fatal(err)
	}

	s := newServer(t)
	s.ok("alice", "apply", dir+"/...")
	version, _ := s.push("alice", app, svc)

	// While staging's apply runs, production waits for staging.
	crWaitFile(t, tmp+"/state/staging/applying", 30*time.Second)
	st := s.waitStatus(app, svc, 20*time.Second, "staging applying, production waiting for it", func(st *apiv1.ServiceStatus) bool {
		return channelIs("staging", "CONVERGING", "")(st) && channelIs("production", "WAITING_PRECONDITIONS", "")(st)
	})
	if p := channel(t, st, "production"); p.Reason != "RELEASE_CHANNEL_DEPENDENCY_UNMET" || !strings.Contains(p.Message, "staging") || p.TargetVersion != "" {
		t.Errorf("production while staging applies: %s", dump(p))
	}
	if runs := crRunsOf(crRuns(s, app, svc), "production", "apply"); len(runs) != 0 {
		t.Fatalf("production applied before staging converged: %s", dump(runs))
	}
	if err := os.WriteFile(tmp+"/gate-staging", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	s.waitStatus(app, svc, 30*time.Second, "staging converged, production waiting for approval", func(st *apiv1.ServiceStatus) bool {
		return channelIs("staging", "CONVERGED", version)(st) && channelIs("production", "WAITING_MANUAL_APPROVAL", "")(st)
	})
	if got := strings.TrimSpace(crReadFile(t, stagingFile)); got != version {
		t.Errorf("staging version file: %q, want %q", got, version)
	}
	if got := crReadFile(t, prodFile); got != "" {
		t.Errorf("production was deployed before its turn: version file %q", got)
	}

	// SIGKILL between staging and production, restart on the same data.
	before := s.events(app, svc)
	stagingApplies := crRunsOf(crRuns(s, app, svc), "staging", "apply")
	if len(stagingApplies) != 1 || stagingApplies[0].ExitCode != 0 {
		t.Fatalf("staging apply runs before the restart: %s", dump(stagingApplies))
	}
	s.restart()
	restartedAt := time.Now()
	st = s.status(app, svc)
	if !channelIs("staging", "CONVERGED", version)(st) || !channelIs("production", "WAITING_MANUAL_APPROVAL", "")(st) {
		t.Fatalf("status after the restart:\n%s", dump(st))
	}
	s.ok("bob", "approve", svc, "--app", app, "--release-channel", "production")
	crWait(s, app, svc, 0)
	st = s.status(app, svc)
	if !converged(version)(st) {
		t.Fatalf("not converged:\n%s", dump(st))
	}
	if got := strings.TrimSpace(crReadFile(t, prodFile)); got != version {
		t.Errorf("production version file: %q, want %q", got, version)
	}

	runs := crRuns(s, app, svc)
	stagingApplies = crRunsOf(runs, "staging", "apply")
	prodApplies := crRunsOf(runs, "production", "apply")
	if len(stagingApplies) != 1 {
		t.Errorf("staging was applied again after the restart: %s", dump(stagingApplies))
	}
	if len(prodApplies) != 1 || prodApplies[0].ExitCode != 0 || prodApplies[0].Version != version {
		t.Fatalf("production apply runs: %s", dump(prodApplies))
	}
	if n := len(crRunsOf(runs, "staging", "fetch")); n == 0 {
		t.Errorf("no staging fetch runs")
	}
	evs := s.events(app, svc)
	checkSeqs(t, evs)
	stagingConverged := crEvent(evs, 0, "converged", "staging")
	prodApplying := crEvent(evs, 0, "applying", "production")
	if stagingConverged == nil || prodApplying == nil || crEvent(evs, 0, "applied", "production") == nil {
		t.Fatalf("missing events:\n%s", strings.Join(crEventLines(evs), "\n"))
	}
	if prodApplying.Seq < stagingConverged.Seq {
		t.Errorf("production's apply (seq %d) before staging converged (seq %d)", prodApplying.Seq, stagingConverged.Seq)
	}
	if p := prodApplies[0]; !p.StartedAt.After(stagingConverged.Time) || !p.StartedAt.After(stagingApplies[0].FinishedAt) || p.StartedAt.Before(restartedAt.Add(-time.Second)) {
		t.Errorf("production apply started %s; staging apply finished %s, staging converged %s, server restarted %s",
			p.StartedAt, stagingApplies[0].FinishedAt, stagingConverged.Time, restartedAt)
	}
	if e := crEvent(evs, crLastSeq(before), "applying", "staging"); e != nil {
		t.Errorf("staging re-applied after the restart: %+v", *e)
	}
}

// TestCustomDriftHealed: a version file changed by hand is seen by the
// steady-state fetch (2s) and healed.
func TestCustomDriftHealed(t *testing.T) {
	requireE2E(t)
	crDrift(t, false)
}

// TestCustomDriftHealedAfterQuietPeriod: the same, with the change made
// once the service has been converged for a while (longer than three
// steady-state intervals, after which the runtime stops polling an instance
// nobody fetched).
func TestCustomDriftHealedAfterQuietPeriod(t *testing.T) {
	requireE2E(t)
	crDrift(t, true)
}

// crDrift converges a one-channel service whose fetch polls every 2s once
// converged, changes its version file by hand (after a quiet period when
// late is set) and checks that the change is healed within the interval.
func crDrift(t *testing.T, late bool) {
	tmp := t.TempDir()
	const app, svc, steady = "drifty", "site", 2 * time.Second
	dir := crWriteConfigs(t, filepath.Join(tmp, "config"), map[string]crObj{
		"runtime": crRuntime("shell", []string{"stateDir"}, crObj{
			"apply": crProgram(crApplyScript, map[string]string{"STATE_DIR": "{{.Params.stateDir}}"}),
			"fetch": crFetch(steady.String()),
		}),
		"app":     crApp(app, crChannel("live", "shell")),
		"service": crService(app, svc, "stateDir", tmp+"/state"),
	})
	versionFile := tmp + "/state/version"
	s := newServer(t)
	s.ok("alice", "apply", dir+"/...")
	version, _ := s.push("alice", app, svc)
	crWait(s, app, svc, 0)
	if got := strings.TrimSpace(crReadFile(t, versionFile)); got != version {
		t.Fatalf("version file %q, want %q", got, version)
	}
	if n := len(crRunsOf(crRuns(s, app, svc), "live", "apply")); n != 1 {
		t.Fatalf("%d apply runs after the rollout, want 1", n)
	}
	evs := s.events(app, svc)
	last := crLastSeq(evs)
	if late {
		// Wait until the steady-state fetch has kept running for more than
		// three intervals after the rollout converged.
		convergedAt := crEvent(evs, 0, "converged", "live").Time
		quiet := convergedAt.Add(3*steady + steady/2)
		deadline := quiet.Add(2 * steady).Add(5 * time.Second)
		for {
			fetches := crRunsOf(crRuns(s, app, svc), "live", "fetch")
			if len(fetches) > 0 && fetches[len(fetches)-1].StartedAt.After(quiet) {
				break
			}
			if time.Now().After(deadline) {
				lastFetch := time.Time{}
				if len(fetches) > 0 {
					lastFetch = fetches[len(fetches)-1].StartedAt
				}
				t.Errorf("the steady-state fetch (every %s) stopped: converged at %s, last fetch at %s, now %s",
					steady, convergedAt.Format("15:04:05.000"), lastFetch.Format("15:04:05.000"), time.Now().Format("15:04:05.000"))
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
	}

	tamperedAt := time.Now()
	if err := os.WriteFile(versionFile, []byte("tampered\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	evs = crWaitEvents(s, app, svc, steady+10*time.Second, "drift, applied, converged", func(evs []apiv1.Event) bool {
		d := crEvent(evs, last, "drift", "live")
		return d != nil && crEvent(evs, d.Seq, "applied", "live") != nil && crEvent(evs, d.Seq, "converged", "live") != nil
	})
	drift := crEvent(evs, last, "drift", "live")
	applied := crEvent(evs, drift.Seq, "applied", "live")
	healed := crEvent(evs, drift.Seq, "converged", "live")
	t.Logf("drift seen after %s, healed after %s", drift.Time.Sub(tamperedAt).Round(time.Millisecond), healed.Time.Sub(tamperedAt).Round(time.Millisecond))
	if !strings.Contains(drift.Message, "changed outside drover") {
		t.Errorf("drift event: %q", drift.Message)
	}
	if !strings.Contains(applied.Message, version) {
		t.Errorf("applied event: %q", applied.Message)
	}
	// The fetch that sees it runs at most steady after the previous one;
	// allow for a loaded machine, but far less than the engine's 5m poll.
	if d := healed.Time.Sub(tamperedAt); d > steady+4*time.Second {
		t.Errorf("healed %s after the file changed; the steady-state interval is %s", d, steady)
	}
	if got := strings.TrimSpace(crReadFile(t, versionFile)); got != version {
		t.Errorf("version file after healing: %q, want %q", got, version)
	}
	st := s.status(app, svc)
	if !converged(version)(st) {
		t.Errorf("status after healing:\n%s", dump(st))
	}
	runs := crRuns(s, app, svc)
	applies := crRunsOf(runs, "live", "apply")
	if len(applies) != 2 || !applies[1].StartedAt.After(tamperedAt) || applies[1].ExitCode != 0 {
		t.Errorf("apply runs: want the rollout's and one after the change, got %s", dump(applies))
	}
	sawDrift := false
	for _, f := range crRunsOf(runs, "live", "fetch") {
		if f.StartedAt.After(tamperedAt) && f.ExitCode == 2 {
			sawDrift = true
		}
	}
	if !sawDrift {
		t.Errorf("no fetch exited 2 after the file changed")
	}
}

// TestCustomApplyFailure: an apply that always fails fails the channel
// after the engine's attempts, with its stderr in the message.
func TestCustomApplyFailure(t *testing.T) {
	requireE2E(t)
	tmp := t.TempDir()
	const app, svc = "broken", "site"
	apply := `echo "starting the deployment of $PVN_SERVICE"
echo "E42: quota exceeded for $PVN_SERVICE in $PVN_RELEASE_CHANNEL" >&2
exit 3
`
	dir := crWriteConfigs(t, filepath.Join(tmp, "config"), map[string]crObj{
		"runtime": crRuntime("shell", []string{"stateDir"}, crObj{
			"apply": crProgram(apply, nil),
			"fetch": crFetch("2s"),
		}),
		"app":     crApp(app, crChannel("staging", "shell"), crChannel("production", "shell", "staging")),
		"service": crService(app, svc, "stateDir", tmp+"/state/{{.Builtins.ReleaseChannel.Name}}"),
	})
	s := newServer(t, "--apply-attempts", "2")
	s.ok("alice", "apply", dir+"/...")
	version, _ := s.push("alice", app, svc)
	r := crWait(s, app, svc, 2)
	if !strings.Contains(r.stderr+r.stdout, "failed") {
		t.Errorf("wait output does not say it failed: %s", r)
	}
	st := s.status(app, svc)
	stg := channel(t, st, "staging")
	const stderrLine = "E42: quota exceeded for site in staging"
	if st.Status != "FAILED" || stg.Status != "FAILED" || stg.Reason != "APPLY_FAILED" {
		t.Errorf("want service and staging FAILED with reason APPLY_FAILED:\n%s", dump(st))
	}
	for _, want := range []string{stderrLine, "exit code 3", "2 apply attempts"} {
		if !strings.Contains(stg.Message, want) {
			t.Errorf("staging message lacks %q: %q", want, stg.Message)
		}
	}
	if strings.Contains(stg.Message, "starting the deployment") {
		t.Errorf("the message quotes stdout, want stderr: %q", stg.Message)
	}
	if p := channel(t, st, "production"); p.Status == "CONVERGED" || p.TargetVersion != "" {
		t.Errorf("production moved although staging failed: %s", dump(p))
	}
	runs := crRuns(s, app, svc)
	applies := crRunsOf(runs, "staging", "apply")
	if len(applies) != 2 {
		t.Errorf("want 2 apply runs (--apply-attempts 2), got %s", dump(applies))
	}
	for _, a := range applies {
		if a.ExitCode != 3 || a.Version != version {
			t.Errorf("apply run: %s", dump(a))
		}
	}
	if len(crRunsOf(runs, "production", "apply")) != 0 {
		t.Errorf("production was applied")
	}
	evs := s.events(app, svc)
	failed := crEvent(evs, 0, "failed", "staging")
	if failed == nil || !strings.Contains(failed.Message, stderrLine) {
		t.Errorf("no failed event quoting stderr:\n%s", strings.Join(crEventLines(evs), "\n"))
	}
	n := 0
	for _, e := range evs {
		if e.Type == "apply-failed" && e.ReleaseChannel == "staging" {
			n++
		}
	}
	if n != 2 {
		t.Errorf("%d apply-failed events, want 2", n)
	}
}

// TestCustomMaxConcurrency: four services on a runtime with
// apply.maxConcurrency 1 never apply at the same time.
func TestCustomMaxConcurrency(t *testing.T) {
	requireE2E(t)
	tmp := t.TempDir()
	const app = "crowd"
	logDir := filepath.Join(tmp, "intervals")
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		t.Fatal(err)
	}
	apply := `set -eu
start=$(date +%s.%N)
sleep 0.3
end=$(date +%s.%N)
echo "$start $end" > "$LOG_DIR/$PVN_SERVICE.$$"
`
	svcs := []string{"svc-a", "svc-b", "svc-c", "svc-d"}
	objs := map[string]crObj{
		"runtime": crRuntime("serial", nil, crObj{
			"apply": crWith(crProgram(apply, map[string]string{"LOG_DIR": logDir}), "maxConcurrency", 1),
		}),
		"app": crApp(app, crChannel("live", "serial")),
	}
	for _, name := range svcs {
		objs[name] = crService(app, name)
	}
	dir := crWriteConfigs(t, filepath.Join(tmp, "config"), objs)
	s := newServer(t)
	s.ok("alice", "apply", dir+"/...")

	// Push all four at once, so their applies are due together.
	var wg sync.WaitGroup
	errs := make([]error, len(svcs))
	for i, name := range svcs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := crDrover("push", name, "--app", app, "--server", s.url, "--token", s.tokenOf("alice"))
			if err == nil && r.code != 0 {
				err = errors.New(r.String())
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	for _, name := range svcs {
		crWait(s, app, name, 0)
	}

	type interval struct {
		name       string
		start, end float64
	}
	var fromFiles []interval
	entries, err := os.ReadDir(logDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(logDir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		f := strings.Fields(string(b))
		if len(f) != 2 {
			t.Fatalf("%s: %q", e.Name(), b)
		}
		a, err1 := strconv.ParseFloat(f[0], 64)
		z, err2 := strconv.ParseFloat(f[1], 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("%s: %q", e.Name(), b)
		}
		fromFiles = append(fromFiles, interval{e.Name(), a, z})
	}
	var fromRuns []interval
	for _, name := range svcs {
		applies := crRunsOf(crRuns(s, app, name), "live", "apply")
		if len(applies) != 1 || applies[0].ExitCode != 0 {
			t.Fatalf("%s: apply runs %s", name, dump(applies))
		}
		a := applies[0]
		fromRuns = append(fromRuns, interval{name, float64(a.StartedAt.UnixNano()) / 1e9, float64(a.FinishedAt.UnixNano()) / 1e9})
	}
	for src, list := range map[string][]interval{"the scripts' timestamps": fromFiles, "drover runs": fromRuns} {
		if len(list) != len(svcs) {
			t.Errorf("%s: %d applies, want %d: %+v", src, len(list), len(svcs), list)
			continue
		}
		sort.Slice(list, func(i, j int) bool { return list[i].start < list[j].start })
		for i := 1; i < len(list); i++ {
			if list[i].start < list[i-1].end {
				t.Errorf("%s: apply of %s (%.3f-%.3f) overlaps %s (%.3f-%.3f)", src,
					list[i].name, list[i].start, list[i].end, list[i-1].name, list[i-1].start, list[i-1].end)
			}
		}
	}
	// Not vacuous: applies were due together and had to wait for the slot.
	if !strings.Contains(crReadFile(t, s.logPath), "apply waiting for a slot") {
		t.Errorf("no apply waited for a slot: the applies never competed, the test proves nothing")
	}
}

// TestCustomEnvironment: the commands get the PVN_* and DROVER_* variables,
// the channel's, service's, program's and command's env, and nothing else
// of the server's environment but PATH, HOME, TMPDIR and LANG.
func TestCustomEnvironment(t *testing.T) {
	requireE2E(t)
	tmp := t.TempDir()
	const app, svc = "envapp", "envsvc"
	apply := `set -eu
env > "$OUT_DIR/env-$PVN_RELEASE_CHANNEL"
pwd > "$OUT_DIR/pwd-$PVN_RELEASE_CHANNEL"
`
	applyCmd := crProgram(apply, map[string]string{
		"OUT_DIR": "{{.Params.outDir}}", "PROGRAM_VAR": "from-program", "SHARED_ALL": "program", "RENDERED": "{{.Builtins.ReleaseChannel.Name}}-{{.Params.outDir}}",
	})
	applyCmd["env"] = crObj{"APPLY_VAR": crObj{"value": "from-apply"}, "SHARED_ALL": crObj{"value": "apply"}}
	channelEnv := func(name string) crObj {
		c := crChannel(name, "shell")
		c["policy"] = crObj{"defaultEnv": crObj{
			"CHANNEL_VAR": crObj{"value": "channel-" + name}, "SHARED_CS": crObj{"value": "channel"}, "SHARED_ALL": crObj{"value": "channel"},
		}}
		return c
	}
	service := crService(app, svc, "outDir", tmp+"/out")
	service["service"].(crObj)["env"] = crObj{
		"SERVICE_VAR": crObj{"value": "from-service"}, "SHARED_CS": crObj{"value": "service"}, "SHARED_ALL": crObj{"value": "service"},
	}
	dir := crWriteConfigs(t, filepath.Join(tmp, "config"), map[string]crObj{
		"runtime": crRuntime("shell", []string{"outDir"}, crObj{"apply": applyCmd}),
		"app":     crApp(app, channelEnv("staging"), channelEnv("production")),
		"service": service,
	})
	if err := os.MkdirAll(tmp+"/out", 0o755); err != nil {
		t.Fatal(err)
	}
	s := newServer(t)
	s.ok("alice", "apply", dir+"/...")
	version, dsID := s.push("alice", app, svc)
	crWait(s, app, svc, 0)
	st := s.status(app, svc)

	for _, rc := range []string{"staging", "production"} {
		c := channel(t, st, rc)
		if c.DesiredVersion != version {
			t.Fatalf("%s desiredVersion %q, push said %q", rc, c.DesiredVersion, version)
		}
		env := map[string]string{}
		text := crReadFile(t, tmp+"/out/env-"+rc)
		if text == "" {
			t.Fatalf("%s: the apply wrote no env dump", rc)
		}
		for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
			if k, v, ok := strings.Cut(line, "="); ok {
				env[k] = v
			}
		}
		want := map[string]string{
			"SERVICE": svc, "SERVICE_ID": app + "/" + svc, "APPLICATION": app, "APPLICATION_ID": app,
			"RELEASE_CHANNEL": rc, "RELEASE_CHANNEL_ID": app + "/" + rc, "SERVICE_VERSION": c.DesiredVersion,
			"DESIRED_STATE_ID": dsID,
		}
		for k, v := range want {
			for _, prefix := range []string{"PVN_", "DROVER_"} {
				if got, ok := env[prefix+k]; !ok || got != v {
					t.Errorf("%s: %s%s=%q (set: %v), want %q", rc, prefix, k, got, ok, v)
				}
			}
		}
		for k, v := range map[string]string{
			"CHANNEL_VAR": "channel-" + rc, "SERVICE_VAR": "from-service", "PROGRAM_VAR": "from-program", "APPLY_VAR": "from-apply",
			"SHARED_CS": "service", "SHARED_ALL": "apply", "OUT_DIR": tmp + "/out", "RENDERED": rc + "-" + tmp + "/out",
		} {
			if env[k] != v {
				t.Errorf("%s: %s=%q, want %q", rc, k, env[k], v)
			}
		}
		if env["PATH"] == "" {
			t.Errorf("%s: no PATH", rc)
		}
		// The server runs with the test's environment (and GORACE): only
		// PATH, HOME, TMPDIR and LANG of it may reach a command.
		if _, leaked := env["GORACE"]; leaked {
			t.Errorf("%s: the server's GORACE reached the command", rc)
		}
		for _, kv := range cleanEnv() {
			k, _, _ := strings.Cut(kv, "=")
			if _, ok := env[k]; ok && !slices.Contains([]string{"PATH", "HOME", "TMPDIR", "LANG", "PWD", "SHLVL", "OLDPWD", "_"}, k) &&
				!strings.HasPrefix(k, "PVN_") && !strings.HasPrefix(k, "DROVER_") {
				t.Errorf("%s: the server's %s reached the command", rc, k)
			}
		}
		wantDir := filepath.Join(s.data, "custom", "shell", app, svc, rc)
		if got := strings.TrimSpace(crReadFile(t, tmp+"/out/pwd-"+rc)); got != wantDir {
			t.Errorf("%s: working directory %q, want %q", rc, got, wantDir)
		}
	}
}

// TestCustomInfoAndRunOutput: getInfo outputs show in the status, and
// drover run shows a run's stdout and stderr apart.
func TestCustomInfoAndRunOutput(t *testing.T) {
	requireE2E(t)
	tmp := t.TempDir()
	const app, svc = "infoapp", "site"
	apply := crApplyScript + `echo "OUT: stdout line of $PVN_RELEASE_CHANNEL"
echo "ERR: stderr line of $PVN_RELEASE_CHANNEL" >&2
`
	getInfo := `v=$(cat "$STATE_DIR/version" 2>/dev/null || echo none)
echo "getInfo logs go to stderr" >&2
printf '{"outputs":[{"name":"deployed","text":"%s"},{"name":"channel","text":"%s"}]}\n' "$v" "$PVN_RELEASE_CHANNEL"
`
	dir := crWriteConfigs(t, filepath.Join(tmp, "config"), map[string]crObj{
		"runtime": crRuntime("shell", []string{"stateDir"}, crObj{
			"apply":   crProgram(apply, map[string]string{"STATE_DIR": "{{.Params.stateDir}}"}),
			"fetch":   crFetch("2s"),
			"getInfo": crProgram(getInfo, map[string]string{"STATE_DIR": "{{.Params.stateDir}}"}),
		}),
		"app":     crApp(app, crChannel("staging", "shell"), crChannel("production", "shell", "staging")),
		"service": crService(app, svc, "stateDir", tmp+"/state/{{.Builtins.ReleaseChannel.Name}}"),
	})
	s := newServer(t)
	s.ok("alice", "apply", dir+"/...")
	version, _ := s.push("alice", app, svc)
	crWait(s, app, svc, 0)
	infoOf := func(c *apiv1.ChannelStatus) map[string]string {
		m := map[string]string{}
		for _, o := range c.Info {
			m[o.Name] = o.Text
		}
		return m
	}
	// getInfo runs again after each successful apply.
	st := s.waitStatus(app, svc, 20*time.Second, "getInfo outputs with the deployed version", func(st *apiv1.ServiceStatus) bool {
		for _, rc := range []string{"staging", "production"} {
			if c := findChannel(st, rc); c == nil || infoOf(c)["deployed"] != version {
				return false
			}
		}
		return true
	})
	for _, rc := range []string{"staging", "production"} {
		c := channel(t, st, rc)
		if got := infoOf(c); len(c.Info) != 2 || got["channel"] != rc {
			t.Errorf("%s info: %s", rc, dump(c.Info))
		}
	}
	r := s.ok("e2e", "status", svc, "--app", app)
	if !strings.Contains(r.stdout, "deployed: "+version) {
		t.Errorf("drover status does not show the info:\n%s", r.stdout)
	}

	runs := crRuns(s, app, svc)
	applies := crRunsOf(runs, "staging", "apply")
	if len(applies) != 1 {
		t.Fatalf("staging apply runs: %s", dump(applies))
	}
	if len(crRunsOf(runs, "staging", "getInfo")) == 0 {
		t.Errorf("no getInfo runs listed")
	}
	id := strconv.FormatInt(applies[0].ID, 10)
	text := s.ok("e2e", "run", id).stdout
	outPart, errPart, ok := strings.Cut(text, "--- stderr\n")
	_, outPart, ok2 := strings.Cut(outPart, "--- stdout\n")
	if !ok || !ok2 {
		t.Fatalf("drover run %s: no stdout and stderr sections:\n%s", id, text)
	}
	if !strings.Contains(outPart, "OUT: stdout line of staging") || !strings.Contains(outPart, "deployed site "+version) || strings.Contains(outPart, "ERR:") {
		t.Errorf("stdout section:\n%s", outPart)
	}
	if strings.TrimSpace(errPart) != "ERR: stderr line of staging" {
		t.Errorf("stderr section:\n%s", errPart)
	}
	if !strings.Contains(text, "apply of "+app+"/"+svc+" in staging") || !strings.Contains(text, "exit:     0") {
		t.Errorf("drover run %s header:\n%s", id, text)
	}
	var run apiv1.Run
	if err := json.Unmarshal([]byte(s.ok("e2e", "run", id, "-o", "json").stdout), &run); err != nil {
		t.Fatal(err)
	}
	if run.Stdout != "deployed site "+version+" to staging\nOUT: stdout line of staging\n" || run.Stderr != "ERR: stderr line of staging\n" || run.Kind != "apply" {
		t.Errorf("drover run -o json: %s", dump(run))
	}
}

// TestCustomApplyOnly: without fetch, apply runs once per version (and
// applyId): a re-push of the same version applies nothing.
func TestCustomApplyOnly(t *testing.T) {
	requireE2E(t)
	tmp := t.TempDir()
	const app, svc, rc = "once", "job", "live"
	counter := tmp + "/applies"
	rt := crRuntime("oneshot", []string{"rev"}, crObj{
		"apply":   crProgram(`echo "$PVN_SERVICE_VERSION $REV" >> "$COUNTER"`, map[string]string{"COUNTER": counter, "REV": "{{.Params.rev}}"}),
		"applyId": "rev-{{.Params.rev}}",
	})
	service := crService(app, svc, "rev", "{{.Params.rev}}")
	service["service"].(crObj)["parameters"] = []crObj{{"name": "rev", "string": crObj{"defaultValue": "1"}}}
	dir := crWriteConfigs(t, filepath.Join(tmp, "config"), map[string]crObj{
		"runtime": rt, "app": crApp(app, crChannel(rc, "oneshot")), "service": service,
	})
	s := newServer(t)
	s.ok("alice", "apply", dir+"/...")
	appliedFile := filepath.Join(s.data, "custom", "oneshot", app, svc, rc+".applied.json")
	applied := func() (rec struct {
		Version string `json:"version"`
		ApplyID string `json:"applyId"`
	}) {
		if err := json.Unmarshal([]byte(crReadFile(t, appliedFile)), &rec); err != nil {
			t.Fatalf("%s: %v", appliedFile, err)
		}
		return rec
	}

	v1, _ := s.push("alice", app, svc, "rev=1")
	crWait(s, app, svc, 0)
	if got := crReadFile(t, counter); got != v1+" 1\n" {
		t.Fatalf("applies after the first push: %q", got)
	}
	if rec := applied(); rec.Version != v1 || rec.ApplyID != "rev-1" {
		t.Errorf("last apply record: %+v", rec)
	}

	// The same version again: a new desired state, nothing to apply.
	before := crLastSeq(s.events(app, svc))
	again, ds2 := s.push("alice", app, svc, "rev=1")
	if again != v1 {
		t.Fatalf("re-push gave version %s, want %s", again, v1)
	}
	crWaitEvents(s, app, svc, 20*time.Second, "the re-push converged", func(evs []apiv1.Event) bool {
		e := crEvent(evs, before, "converged", rc)
		return e != nil && e.DesiredStateID == ds2
	})
	if st := s.status(app, svc); st.DesiredStateID != ds2 || !converged(v1)(st) {
		t.Errorf("status after the re-push:\n%s", dump(st))
	}
	if got := crReadFile(t, counter); got != v1+" 1\n" {
		t.Errorf("the re-push of %s ran apply again: %q", v1, got)
	}
	if n := len(crRunsOf(crRuns(s, app, svc), rc, "apply")); n != 1 {
		t.Errorf("%d apply runs after the re-push, want 1", n)
	}

	// A new applyId (it is part of what is deployed, so the version changes
	// with it) applies again, once.
	v2, _ := s.push("alice", app, svc, "rev=2")
	if v2 == v1 {
		t.Fatalf("a new applyId kept version %s", v1)
	}
	crWait(s, app, svc, 0)
	if got := crReadFile(t, counter); got != v1+" 1\n"+v2+" 2\n" {
		t.Errorf("applies after the new applyId: %q", got)
	}
	if rec := applied(); rec.Version != v2 || rec.ApplyID != "rev-2" {
		t.Errorf("last apply record: %+v", rec)
	}
	applies := crRunsOf(crRuns(s, app, svc), rc, "apply")
	if len(applies) != 2 || applies[1].Version != v2 {
		t.Errorf("apply runs: %s", dump(applies))
	}
	if slices.ContainsFunc(crRuns(s, app, svc), func(r apiv1.Run) bool { return r.Kind == "fetch" }) {
		t.Errorf("an apply-only runtime ran a fetch command")
	}
}
