package custom

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/runtimes"
)

func mustApply(t *testing.T, r *Runtime, tg runtimes.Target) runtimes.Action {
	t.Helper()
	res, err := r.Apply(t.Context(), tg)
	if err != nil {
		t.Fatalf("Apply(%s, %s): %v", tg.InstanceKey, tg.Version, err)
	}
	if len(res.Changes) != 1 {
		t.Fatalf("Apply: changes %+v", res.Changes)
	}
	return res.Changes[0].Action
}

func mustFetch(t *testing.T, r *Runtime, tg runtimes.Target) runtimes.State {
	t.Helper()
	st, err := r.Fetch(t.Context(), tg)
	if err != nil {
		t.Fatalf("Fetch(%s, %s): %v", tg.InstanceKey, tg.Version, err)
	}
	return st
}

func TestApplyOnlyOncePerVersionAndApplyID(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "applies.log")
	apply := script(t, dir, "apply.sh", `echo "$PVN_SERVICE_VERSION $APPLY_ID" >> "$LOG"`)
	cr := func(applyID string) *config.CustomRuntime {
		return &config.CustomRuntime{
			ApplyID: applyID,
			Apply:   &config.ApplyCommand{TaskConfig: task(apply), Env: plain("LOG", log, "APPLY_ID", applyID)},
		}
	}
	r := newRuntime(t, runtimes.Options{DataDir: t.TempDir()})
	k := key("vm", "staging")

	if st := mustFetch(t, r, target(k, "v1", cr("a"))); st.Version != "" || st.Converged {
		t.Fatalf("before apply: %+v", st)
	}
	if a := mustApply(t, r, target(k, "v1", cr("a"))); a != runtimes.ActionCreated {
		t.Errorf("first apply: %s", a)
	}
	if a := mustApply(t, r, target(k, "v1", cr("a"))); a != runtimes.ActionUnchanged {
		t.Errorf("same version and applyId: %s", a)
	}
	if st := mustFetch(t, r, target(k, "v1", cr("a"))); !st.Converged || st.Version != "v1" {
		t.Errorf("after apply: %+v", st)
	}
	// A new applyId for the same version needs an apply.
	st := mustFetch(t, r, target(k, "v1", cr("b")))
	if st.Converged || !st.Drifted || !strings.Contains(st.Message, "applyId") {
		t.Errorf("new applyId: %+v", st)
	}
	if a := mustApply(t, r, target(k, "v1", cr("b"))); a != runtimes.ActionConfigured {
		t.Errorf("new applyId: %s", a)
	}
	if a := mustApply(t, r, target(k, "v2", cr("b"))); a != runtimes.ActionConfigured {
		t.Errorf("new version: %s", a)
	}
	if a := mustApply(t, r, target(k, "v2", cr("b"))); a != runtimes.ActionUnchanged {
		t.Errorf("v2 again: %s", a)
	}
	if st := mustFetch(t, r, target(k, "v2", cr("b"))); !st.Converged || st.Version != "v2" {
		t.Errorf("after v2: %+v", st)
	}
	want := []string{"v1 a", "v1 b", "v2 b"}
	if got := lines(readFile(t, log)); !slices.Equal(got, want) {
		t.Errorf("applies %q, want %q", got, want)
	}
}

func TestRestartRemembersLastApply(t *testing.T) {
	dir, data := t.TempDir(), t.TempDir()
	log := filepath.Join(dir, "applies.log")
	apply := script(t, dir, "apply.sh", `echo "$PVN_SERVICE_VERSION" >> "$LOG"`)
	fetch := script(t, dir, "fetch.sh", `exit 2`)
	applyOnly := &config.CustomRuntime{ApplyID: "x", Apply: &config.ApplyCommand{TaskConfig: task(apply), Env: plain("LOG", log)}}
	withFetch := &config.CustomRuntime{
		Apply: &config.ApplyCommand{TaskConfig: task(apply), Env: plain("LOG", log)},
		Fetch: &config.FetchCommand{TaskConfig: task(fetch)},
	}
	k1, k2 := key("a", "staging"), key("b", "staging")

	r1, err := New(&config.Runtime{Name: testRuntime, Custom: &config.CustomRuntime{}}, runtimes.Options{DataDir: data})
	if err != nil {
		t.Fatal(err)
	}
	mustApply(t, r1, target(k1, "v1", applyOnly))
	mustApply(t, r1, target(k2, "v1", withFetch))
	if err := r1.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(data, "custom", testRuntime, "app", "a", "staging.applied.json")); err != nil {
		t.Errorf("state file: %v", err)
	}

	r2 := newRuntime(t, runtimes.Options{DataDir: data})
	if st := mustFetch(t, r2, target(k1, "v1", applyOnly)); !st.Converged || st.Version != "v1" {
		t.Errorf("after restart: %+v", st)
	}
	if a := mustApply(t, r2, target(k1, "v1", applyOnly)); a != runtimes.ActionUnchanged {
		t.Errorf("after restart, apply: %s", a)
	}
	// Exit 2 after restart: v1 was applied, so it drifted.
	if st := mustFetch(t, r2, target(k2, "v1", withFetch)); !st.Drifted || st.Version != "v1" {
		t.Errorf("exit 2 after restart: %+v", st)
	}
	if got := lines(readFile(t, log)); len(got) != 2 {
		t.Errorf("applies %q, want 2", got)
	}
}

func TestExitCodeFetch(t *testing.T) {
	dir := t.TempDir()
	apply := script(t, dir, "apply.sh", `exit 0`)
	fetch := script(t, dir, "fetch.sh", `echo "checking $PVN_SERVICE"; echo "state differs: $CODE" >&2; exit $CODE`)
	cr := func(code int) *config.CustomRuntime {
		return &config.CustomRuntime{
			Apply: &config.ApplyCommand{TaskConfig: task(apply)},
			Fetch: &config.FetchCommand{TaskConfig: task(fetch), FetchMode: config.FetchModeExitCode, Env: plain("CODE", fmt.Sprint(code))},
		}
	}
	r := newRuntime(t, runtimes.Options{DataDir: t.TempDir()})

	st := mustFetch(t, r, target(key("zero", "rc"), "v1", cr(0)))
	if !st.Converged || st.Version != "v1" || st.Drifted {
		t.Errorf("exit 0: %+v", st)
	}
	st = mustFetch(t, r, target(key("two", "rc"), "v1", cr(2)))
	if st.Converged || st.Version != "" || st.Drifted || !strings.Contains(st.Message, "exit 2") {
		t.Errorf("exit 2 before any apply: %+v", st)
	}
	// After v1 was applied, exit 2 is drift of v1.
	k := key("drift", "rc")
	mustApply(t, r, target(k, "v1", cr(2)))
	st = mustFetch(t, r, target(k, "v1", cr(2)))
	if st.Converged || st.Version != "v1" || !st.Drifted || !strings.Contains(st.Message, "fetch reports drift (exit 2): state differs: 2") {
		t.Errorf("exit 2 after apply: %+v", st)
	}
	// An older version applied: the runtime runs it.
	st = mustFetch(t, r, target(k, "v2", cr(2)))
	if st.Version != "v1" || st.Drifted || st.Converged {
		t.Errorf("exit 2, v1 applied, target v2: %+v", st)
	}
	_, err := r.Fetch(t.Context(), target(key("other", "rc"), "v1", cr(7)))
	if err == nil || !strings.Contains(err.Error(), "exit code 7") || !strings.Contains(err.Error(), "state differs: 7") {
		t.Errorf("exit 7: %v", err)
	}
	// The error is cached until the poller retries.
	if _, err2 := r.Fetch(t.Context(), target(key("other", "rc"), "v1", cr(7))); err2 == nil || err2.Error() != err.Error() {
		t.Errorf("exit 7 again: %v", err2)
	}
}

func TestStructuredFetch(t *testing.T) {
	dir := t.TempDir()
	apply := script(t, dir, "apply.sh", `exit 0`)
	fetch := script(t, dir, "fetch.sh", `cat "$OUT"; echo "log line" >&2; exit ${CODE:-0}`)
	obj := func(name, version string, active, drifted bool, status string) string {
		return fmt.Sprintf(`{"name":%q,"objectType":"svc","versions":[{"version":"old","replicas":1,"active":false},{"version":%q,"replicas":3,"availableReplicas":"2","targetReplicas":3,"active":%v,"drifted":%v}],"status":%q,"message":"%s is %s"}`,
			name, version, active, drifted, status, name, strings.ToLower(status))
	}
	objs := func(o ...string) string { return `{"objects":[` + strings.Join(o, ",") + `]}` }
	cases := []struct {
		name, out string
		code      int
		want      runtimes.State
		wantErr   string
	}{
		{name: "converged", out: objs(obj("a", "v1", true, false, "SUCCEEDED"), obj("b", "v1", true, false, "SUCCEEDED")),
			want: runtimes.State{Version: "v1", Converged: true}},
		{name: "pending", out: objs(obj("a", "v1", true, false, "PENDING")),
			want: runtimes.State{Version: "v1"}},
		{name: "drifted", out: objs(obj("a", "v1", true, true, "SUCCEEDED")),
			want: runtimes.State{Version: "v1", Drifted: true}},
		{name: "failed", out: objs(obj("a", "v1", true, false, "FAILED"), obj("b", "v1", true, false, "SUCCEEDED")),
			want: runtimes.State{Version: "v1", Failed: true}},
		{name: "wrong version", out: objs(obj("a", "v0", true, false, "SUCCEEDED")),
			want: runtimes.State{Version: "v0"}},
		{name: "old version failed", out: objs(obj("a", "v0", true, false, "FAILED")),
			want: runtimes.State{Version: "v0"}},
		{name: "mixed versions", out: objs(obj("a", "v1", true, false, "SUCCEEDED"), obj("b", "v0", true, false, "SUCCEEDED")),
			want: runtimes.State{}},
		{name: "none active", out: objs(obj("a", "v1", false, false, "SUCCEEDED")),
			want: runtimes.State{}},
		{name: "no objects", out: `{"objects":[]}`, want: runtimes.State{}},
		{name: "bad json", out: `{"objects":[`, wantErr: "not valid JSON"},
		{name: "not json", out: `deploying...`, wantErr: "not valid JSON"},
		{name: "trailing output", out: `{"objects":[]} done`, wantErr: "more than one JSON value"},
		{name: "wrong type", out: `{"objects":{}}`, wantErr: "field objects"},
		{name: "empty", out: ``, wantErr: "printed nothing"},
		{name: "unknown status", out: objs(obj("a", "v1", true, false, "GREAT")), wantErr: `unknown status "GREAT"`},
		{name: "non-zero exit", out: objs(obj("a", "v1", true, false, "SUCCEEDED")), code: 1, wantErr: "exit code 1: log line"},
	}
	r := newRuntime(t, runtimes.Options{DataDir: t.TempDir()})
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(dir, fmt.Sprintf("out%d.json", i))
			writeFile(t, out, c.out)
			cr := &config.CustomRuntime{
				Apply: &config.ApplyCommand{TaskConfig: task(apply)},
				Fetch: &config.FetchCommand{TaskConfig: task(fetch), FetchMode: config.FetchModeStructuredOutput, Env: plain("OUT", out, "CODE", fmt.Sprint(c.code))},
			}
			st, err := r.Fetch(t.Context(), target(key(fmt.Sprintf("s%d", i), "rc"), "v1", cr))
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if st.Version != c.want.Version || st.Converged != c.want.Converged || st.Drifted != c.want.Drifted || st.Failed != c.want.Failed {
				t.Errorf("got %+v, want %+v", st, c.want)
			}
			if c.name == "converged" {
				want := runtimes.Object{ObjectType: "svc", Name: "a", Version: "v1", Replicas: 3, AvailableReplicas: 2, TargetReplicas: 3, Status: runtimes.ObjectSucceeded, Message: "a is succeeded"}
				if len(st.Objects) != 2 || st.Objects[0] != want {
					t.Errorf("objects %+v, want first %+v", st.Objects, want)
				}
			}
			if c.name == "failed" && !strings.Contains(st.Message, "a: a is failed") {
				t.Errorf("message %q", st.Message)
			}
		})
	}
}

func TestDriftDetectedBySteadyStatePoller(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "deployed")
	apply := script(t, dir, "apply.sh", `printf '%s' "$PVN_SERVICE_VERSION" > "$STATE"`)
	fetch := script(t, dir, "fetch.sh", `[ "$(cat "$STATE" 2>/dev/null)" = "$PVN_SERVICE_VERSION" ] && exit 0; exit 2`)
	cr := &config.CustomRuntime{
		Apply: &config.ApplyCommand{TaskConfig: task(apply), Env: plain("STATE", state)},
		Fetch: &config.FetchCommand{TaskConfig: task(fetch), Env: plain("STATE", state), PollInterval: dur("20ms"), SteadyStatePollInterval: dur("50ms")},
	}
	r := newRuntime(t, runtimes.Options{DataDir: t.TempDir()})
	k := key("web", "prod")
	tg := target(k, "v1", cr)

	var notified atomic.Int32
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	watchDone := make(chan error, 1)
	go func() {
		watchDone <- r.Watch(ctx, func(got runtimes.InstanceKey) {
			if got == k {
				notified.Add(1)
			}
		})
	}()
	mustApply(t, r, tg)
	eventually(t, "converged", func() bool { return mustFetch(t, r, tg).Converged })
	eventually(t, "notified of the apply", func() bool { return notified.Load() > 0 })

	// Out of band change.
	before := notified.Load()
	writeFile(t, state, "tampered")
	eventually(t, "drift noticed by the poller", func() bool { return notified.Load() > before })
	eventually(t, "drift in the fetch result", func() bool {
		st := mustFetch(t, r, tg)
		return st.Drifted && !st.Converged && st.Version == "v1"
	})
	// The engine heals it.
	if a := mustApply(t, r, tg); a != runtimes.ActionConfigured {
		t.Errorf("heal: %s", a)
	}
	if st := mustFetch(t, r, tg); !st.Converged {
		t.Errorf("after healing: %+v", st)
	}
	cancel()
	if err := <-watchDone; err != nil {
		t.Errorf("Watch: %v", err)
	}
}

func TestFetchErrorRetriedWithBackoff(t *testing.T) {
	dir := t.TempDir()
	ctl := filepath.Join(dir, "code")
	writeFile(t, ctl, "1")
	fetch := script(t, dir, "fetch.sh", `exit $(cat "$CTL")`)
	cr := &config.CustomRuntime{
		Apply: &config.ApplyCommand{TaskConfig: task(script(t, dir, "apply.sh", "exit 0"))},
		Fetch: &config.FetchCommand{TaskConfig: task(fetch), Env: plain("CTL", ctl), PollInterval: dur("1h"), SteadyStatePollInterval: dur("1h"),
			RetryPolicy: &config.RetryPolicy{BaseInterval: dur("10ms"), MaxInterval: dur("20ms")}},
	}
	r := newRuntime(t, runtimes.Options{DataDir: t.TempDir()})
	tg := target(key("web", "rc"), "v1", cr)
	if _, err := r.Fetch(t.Context(), tg); err == nil {
		t.Fatal("want an error")
	}
	writeFile(t, ctl, "0")
	eventually(t, "retried after the error", func() bool {
		st, err := r.Fetch(t.Context(), tg)
		return err == nil && st.Converged
	})
}

func TestApplyFailureMessage(t *testing.T) {
	dir := t.TempDir()
	apply := script(t, dir, "apply.sh", `echo "progress on stdout"
i=1; while [ $i -le 20 ]; do echo "err$i" >&2; i=$((i+1)); done
exit 3`)
	cr := &config.CustomRuntime{Apply: &config.ApplyCommand{TaskConfig: task(apply)}}
	r := newRuntime(t, runtimes.Options{DataDir: t.TempDir()})
	_, err := r.Apply(t.Context(), target(key("web", "rc"), "v1", cr))
	if err == nil {
		t.Fatal("want an error")
	}
	msg := err.Error()
	for _, want := range []string{"apply failed with exit code 3", "err20", "err11"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
	if strings.Contains(msg, "err10\n") || strings.Contains(msg, "progress") {
		t.Errorf("error %q quotes more than the last 10 stderr lines", msg)
	}
	if runtimes.IsPermanent(err) {
		t.Error("a failed apply is retried: not permanent")
	}
	// Only stdout: it is quoted instead.
	cr = &config.CustomRuntime{Apply: &config.ApplyCommand{TaskConfig: task(script(t, dir, "a2.sh", `echo only stdout; exit 1`))}}
	if _, err := r.Apply(t.Context(), target(key("web2", "rc"), "v1", cr)); err == nil || !strings.HasSuffix(err.Error(), "exit code 1: only stdout") {
		t.Errorf("stdout only: %v", err)
	}
	// A command that cannot run.
	cr = &config.CustomRuntime{Apply: &config.ApplyCommand{TaskConfig: task("./no-such-script.sh")}}
	if _, err := r.Apply(t.Context(), target(key("web3", "rc"), "v1", cr)); err == nil || !strings.Contains(err.Error(), "apply could not start: ./no-such-script.sh: ") {
		t.Errorf("missing program: %v", err)
	}
	// A timeout.
	cr = &config.CustomRuntime{Apply: &config.ApplyCommand{TaskConfig: task(script(t, dir, "a3.sh", `echo started >&2; sleep 100`)), Timeout: dur("100ms")}}
	if _, err := r.Apply(t.Context(), target(key("web4", "rc"), "v1", cr)); err == nil || !strings.Contains(err.Error(), "apply timed out after 100ms: started") {
		t.Errorf("timeout: %v", err)
	}
}

func TestRetryableExitCodes(t *testing.T) {
	dir := t.TempDir()
	apply := script(t, dir, "apply.sh", `echo "state locked" >&2; exit $CODE`)
	cr := func(code string) *config.CustomRuntime {
		return &config.CustomRuntime{Apply: &config.ApplyCommand{TaskConfig: task(apply), Env: plain("CODE", code), RetryableExitCodes: []int32{2, 75}}}
	}
	r := newRuntime(t, runtimes.Options{DataDir: t.TempDir()})
	_, err := r.Apply(t.Context(), target(key("a", "rc"), "v1", cr("75")))
	if err == nil || !strings.Contains(err.Error(), "retryable exit code 75") || !strings.Contains(err.Error(), "state locked") || runtimes.IsPermanent(err) {
		t.Errorf("retryable: %v", err)
	}
	_, err = r.Apply(t.Context(), target(key("b", "rc"), "v1", cr("4")))
	if err == nil || strings.Contains(err.Error(), "retryable") || !strings.Contains(err.Error(), "exit code 4") {
		t.Errorf("not retryable: %v", err)
	}
	// A retryable failure is not a success: nothing is remembered.
	if st := mustFetch(t, r, target(key("a", "rc"), "v1", cr("75"))); st.Version != "" {
		t.Errorf("after a retryable failure: %+v", st)
	}
}

func TestMaxConcurrency(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "log")
	// Each apply writes when it starts and ends (appends of one short line
	// are atomic); they must never overlap.
	apply := script(t, dir, "apply.sh", `echo "start $PVN_SERVICE $(date +%s.%N)" >> "$LOG"; sleep 0.05; echo "end $PVN_SERVICE $(date +%s.%N)" >> "$LOG"`)
	cr := &config.CustomRuntime{Apply: &config.ApplyCommand{TaskConfig: task(apply), Env: plain("LOG", log), MaxConcurrency: 1}}
	r := newRuntime(t, runtimes.Options{DataDir: t.TempDir()})
	const n = 5
	var wg sync.WaitGroup
	var sawWaiting atomic.Bool
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			for i := range n {
				if r.ApplyWaiting(key(fmt.Sprintf("s%d", i), "rc")) {
					sawWaiting.Store(true)
				}
			}
			time.Sleep(time.Millisecond)
		}
	}()
	for i := range n {
		wg.Go(func() {
			if _, err := r.Apply(t.Context(), target(key(fmt.Sprintf("s%d", i), "rc"), "v1", cr)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	close(stop)
	got := lines(readFile(t, log))
	if len(got) != 2*n {
		t.Fatalf("log %q", got)
	}
	lastEnd := ""
	for i := 0; i < len(got); i += 2 {
		s, e := strings.Fields(got[i]), strings.Fields(got[i+1])
		if s[0] != "start" || e[0] != "end" || s[1] != e[1] {
			t.Fatalf("applies overlap: %q", got)
		}
		if lastEnd != "" && s[2] < lastEnd {
			t.Errorf("apply of %s started at %s before the previous ended at %s", s[1], s[2], lastEnd)
		}
		lastEnd = e[2]
	}
	if !sawWaiting.Load() {
		t.Error("ApplyWaiting never reported a waiting apply")
	}
	// A waiting apply honours its context.
	mark := filepath.Join(dir, "holding")
	hold := &config.CustomRuntime{Apply: &config.ApplyCommand{TaskConfig: task(script(t, dir, "hold.sh", `touch "$MARK"; sleep 100`)), Env: plain("MARK", mark), MaxConcurrency: 1}}
	ctx, cancel := context.WithCancel(t.Context())
	holding := make(chan error, 1)
	go func() {
		_, err := r.Apply(ctx, target(key("holder", "rc"), "v1", hold))
		holding <- err
	}()
	eventually(t, "holder running", func() bool { _, err := os.Stat(mark); return err == nil })
	wctx, wcancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer wcancel()
	_, err := r.Apply(wctx, target(key("waiter", "rc"), "v1", hold))
	if err == nil || !strings.Contains(err.Error(), "waiting for one of the 1 apply slots") {
		t.Errorf("waiting apply: %v", err)
	}
	cancel()
	if err := <-holding; err == nil || !errors.Is(err, context.Canceled) {
		t.Errorf("canceled apply: %v", err)
	}
}

func TestEnvironment(t *testing.T) {
	t.Setenv("DROVER_TEST_LEAK", "leaked")
	dir := t.TempDir()
	out := filepath.Join(dir, "env.txt")
	apply := script(t, dir, "apply.sh", `env > "$OUT"; pwd >> "$OUT"`)
	cr := &config.CustomRuntime{Apply: &config.ApplyCommand{
		TaskConfig: &config.TaskConfig{Program: &config.Program{
			Entrypoint: []string{"/bin/sh"},
			Cmd:        []string{apply},
			Image:      "ignored:latest",
			Env:        plain("FROM_PROGRAM", "p", "OVERRIDDEN", "program", "FROM_TARGET", "program-wins"),
		}},
		Env: plain("OUT", out, "OVERRIDDEN", "command", "PVN_SERVICE", "spoofed"),
	}}
	data := t.TempDir()
	r := newRuntime(t, runtimes.Options{DataDir: data})
	tg := target(runtimes.InstanceKey{Application: "shop", Service: "cart", ReleaseChannel: "prod"}, "v-123", cr)
	tg.Env = map[string]string{"FROM_TARGET": "target", "ONLY_TARGET": "t"}
	mustApply(t, r, tg)
	got := map[string]string{}
	ls := lines(readFile(t, out))
	pwd := ls[len(ls)-1]
	for _, l := range ls[:len(ls)-1] {
		k, v, _ := strings.Cut(l, "=")
		got[k] = v
	}
	want := map[string]string{
		"SERVICE":            "cart",
		"SERVICE_ID":         "shop/cart",
		"APPLICATION":        "shop",
		"APPLICATION_ID":     "shop",
		"RELEASE_CHANNEL":    "prod",
		"RELEASE_CHANNEL_ID": "shop/prod",
		"SERVICE_VERSION":    "v-123",
		"DESIRED_STATE_ID":   "ds-v-123",
	}
	for k, v := range want {
		for _, prefix := range []string{"PVN_", "DROVER_"} {
			if got[prefix+k] != v {
				t.Errorf("%s%s = %q, want %q", prefix, k, got[prefix+k], v)
			}
		}
	}
	for k, v := range map[string]string{"FROM_PROGRAM": "p", "OVERRIDDEN": "command", "FROM_TARGET": "program-wins", "ONLY_TARGET": "t", "PATH": os.Getenv("PATH")} {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	if _, ok := got["DROVER_TEST_LEAK"]; ok {
		t.Error("drover's environment leaked into the command")
	}
	wantDir := filepath.Join(data, "custom", testRuntime, "shop", "cart", "prod")
	if resolved, _ := filepath.EvalSymlinks(wantDir); pwd != wantDir && pwd != resolved {
		t.Errorf("working directory %q, want %q", pwd, wantDir)
	}
	if fi, err := os.Stat(wantDir); err != nil || fi.Mode().Perm() != 0o750 {
		t.Errorf("instance directory: %v %v", fi, err)
	}
}

func TestWorkingDirectory(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "pwd")
	apply := script(t, dir, "apply.sh", `pwd > "$OUT"`)
	prog := &config.Program{Cmd: []string{apply}, WorkingDirectory: "sub/dir"}
	cr := &config.CustomRuntime{Apply: &config.ApplyCommand{TaskConfig: &config.TaskConfig{Program: prog}, Env: plain("OUT", out)}}
	r := newRuntime(t, runtimes.Options{}) // no DataDir: a temporary directory
	mustApply(t, r, target(key("a", "rc"), "v1", cr))
	got := strings.TrimSpace(readFile(t, out))
	if !strings.HasSuffix(got, filepath.Join("app", "a", "rc", "sub", "dir")) || !strings.Contains(got, "drover-custom-") {
		t.Errorf("pwd %q", got)
	}
	prog.WorkingDirectory = dir
	mustApply(t, r, target(key("b", "rc"), "v1", cr))
	if got := strings.TrimSpace(readFile(t, out)); got != dir {
		if resolved, _ := filepath.EvalSymlinks(dir); got != resolved {
			t.Errorf("pwd %q, want %q", got, dir)
		}
	}
	base := r.baseDir
	_ = r.Close()
	if _, err := os.Stat(base); !os.IsNotExist(err) {
		t.Errorf("temporary directory left behind: %v", err)
	}
}

func TestUnsupported(t *testing.T) {
	dir := t.TempDir()
	apply := script(t, dir, "apply.sh", `exit 0`)
	r := newRuntime(t, runtimes.Options{DataDir: t.TempDir()})
	cases := map[string]struct {
		cr   *config.CustomRuntime
		want string
	}{
		"kubernetesConfig": {&config.CustomRuntime{Apply: &config.ApplyCommand{KubernetesConfig: &config.KubernetesConfig{}}},
			"kubernetesConfig commands run as Kubernetes Jobs, not supported yet; use taskConfig"},
		"secret": {&config.CustomRuntime{Apply: &config.ApplyCommand{TaskConfig: task(apply), Env: map[string]config.EnvValue{"T": {Secret: &config.SecretRef{Key: "k"}}}}},
			"apply.env.T: secret k (version \"\") arrived unresolved: the server resolves secret{key, version} at push"},
		"kubernetesSecret": {&config.CustomRuntime{Apply: &config.ApplyCommand{TaskConfig: task(apply), Env: map[string]config.EnvValue{"T": {KubernetesSecret: &config.KubernetesSecret{SecretName: "s", Key: "k"}}}}},
			"kubernetesSecret is not supported yet"},
		"no program": {&config.CustomRuntime{Apply: &config.ApplyCommand{TaskConfig: &config.TaskConfig{}}}, "taskConfig.program is required"},
		"no cmd":     {&config.CustomRuntime{Apply: &config.ApplyCommand{TaskConfig: task()}}, "no entrypoint or cmd"},
		"no apply":   {&config.CustomRuntime{}, "no apply command"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := r.Apply(t.Context(), target(key(strings.ReplaceAll(name, " ", "-"), "rc"), "v1", c.cr))
			if err == nil || !runtimes.IsPermanent(err) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want a permanent error with %q", err, c.want)
			}
		})
	}
	// A fetch with kubernetesConfig: a Fetch error.
	cr := &config.CustomRuntime{Apply: &config.ApplyCommand{TaskConfig: task(apply)}, Fetch: &config.FetchCommand{KubernetesConfig: &config.KubernetesConfig{}}}
	if _, err := r.Fetch(t.Context(), target(key("k8s-fetch", "rc"), "v1", cr)); err == nil || !strings.Contains(err.Error(), "not supported yet") {
		t.Errorf("kubernetesConfig fetch: %v", err)
	}
	// Not a custom runtime object.
	tg := target(key("x", "rc"), "v1", &config.CustomRuntime{})
	tg.Objects = nil
	if _, err := r.Fetch(t.Context(), tg); err == nil || !runtimes.IsPermanent(err) {
		t.Errorf("no objects: %v", err)
	}
	if _, err := New(&config.Runtime{Name: "x", Fake: &config.FakeRuntime{}}, runtimes.Options{}); err == nil {
		t.Error("New accepted a fake runtime config")
	}
}

func TestGetInfo(t *testing.T) {
	dir := t.TempDir()
	ctl := filepath.Join(dir, "fail")
	info := script(t, dir, "info.sh", `if [ -e "$CTL" ]; then echo "cannot reach api" >&2; exit 1; fi
printf '{"outputs":[{"name":"Version","text":"%s"},{"name":"URL","text":"https://example.com/%s"}]}\n' "$PVN_SERVICE_VERSION" "$PVN_SERVICE"`)
	cr := &config.CustomRuntime{
		Apply:   &config.ApplyCommand{TaskConfig: task(script(t, dir, "apply.sh", "exit 0"))},
		GetInfo: &config.GetInfoCommand{TaskConfig: task(info), Env: plain("CTL", ctl), PollInterval: dur("20ms"), RetryPolicy: &config.RetryPolicy{BaseInterval: dur("20ms")}},
	}
	r := newRuntime(t, runtimes.Options{DataDir: t.TempDir()})
	k := key("web", "rc")
	if outs, err := r.Info(t.Context(), k); err != nil || outs != nil {
		t.Fatalf("before any fetch: %v %v", outs, err)
	}
	// Watchers hear of each change of the outputs (the engine records them).
	var notified atomic.Int32
	go func() {
		_ = r.Watch(t.Context(), func(got runtimes.InstanceKey) {
			if got == k {
				notified.Add(1)
			}
		})
	}()
	mustFetch(t, r, target(k, "v7", cr))
	want := []runtimes.InfoOutput{{Name: "Version", Text: "v7"}, {Name: "URL", Text: "https://example.com/web"}}
	eventually(t, "getInfo outputs", func() bool {
		outs, err := r.Info(t.Context(), k)
		return err == nil && slices.Equal(outs, want)
	})
	writeFile(t, ctl, "")
	eventually(t, "getInfo error kept as an output", func() bool {
		outs, _ := r.Info(t.Context(), k)
		return len(outs) == 3 && outs[2].Name == "error" && strings.Contains(outs[2].Text, "cannot reach api") && outs[0] == want[0]
	})
	eventually(t, "watchers told of the change of the outputs", func() bool { return notified.Load() >= 1 })
	// getInfo never affects convergence.
	if st := mustFetch(t, r, target(k, "v7", cr)); st.Version != "" {
		t.Errorf("state %+v", st)
	}
}

func TestRunsRecorded(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	apply := script(t, dir, "apply.sh", `echo "applying $PVN_SERVICE_VERSION"; echo "warning: slow" >&2; printf '%s' "$PVN_SERVICE_VERSION" > "$STATE"`)
	fetch := script(t, dir, "fetch.sh", `echo "fetch out"; echo "fetch err" >&2; [ "$(cat "$STATE" 2>/dev/null)" = "$PVN_SERVICE_VERSION" ] && exit 0; exit 2`)
	info := script(t, dir, "info.sh", `echo '{"outputs":[]}'`)
	cr := &config.CustomRuntime{
		Apply:   &config.ApplyCommand{TaskConfig: task(apply, "--flag"), Env: plain("STATE", state)},
		Fetch:   &config.FetchCommand{TaskConfig: task(fetch), Env: plain("STATE", state)},
		GetInfo: &config.GetInfoCommand{TaskConfig: task(info)},
	}
	rec := &recorder{}
	r := newRuntime(t, runtimes.Options{DataDir: t.TempDir(), Runs: rec})
	k := key("web", "rc")
	tg := target(k, "v1", cr)
	if st := mustFetch(t, r, tg); st.Converged {
		t.Fatalf("converged before apply: %+v", st)
	}
	mustApply(t, r, tg)
	eventually(t, "three kinds of runs", func() bool {
		return len(rec.list(kindApply)) == 1 && len(rec.list(kindFetch)) >= 2 && len(rec.list(kindGetInfo)) >= 1
	})
	a := rec.list(kindApply)[0]
	if a.InstanceKey != k || a.Runtime != testRuntime || a.Version != "v1" || a.ExitCode != 0 ||
		!slices.Equal(a.Command, []string{apply, "--flag"}) || a.Stdout != "applying v1\n" || a.Stderr != "warning: slow\n" ||
		a.StartedAt.IsZero() || a.FinishedAt.Before(a.StartedAt) || a.Error != "" || a.Truncated {
		t.Errorf("apply run %+v", a)
	}
	f := rec.list(kindFetch)[0]
	if f.ExitCode != 2 || f.Stdout != "fetch out\n" || f.Stderr != "fetch err\n" || !slices.Equal(f.Command, []string{fetch}) {
		t.Errorf("fetch run %+v", f)
	}
}

func TestSecretsNotRecordedOrLogged(t *testing.T) {
	const secret = "hunter2-very-secret"
	dir := t.TempDir()
	got := filepath.Join(dir, "got")
	apply := script(t, dir, "apply.sh", `printf '%s' "$TOKEN" > "$GOT"; echo "token is $TOKEN"; echo "bad token $TOKEN" >&2; exit 1`)
	cr := &config.CustomRuntime{Apply: &config.ApplyCommand{
		TaskConfig: task(apply),
		Env:        map[string]config.EnvValue{"TOKEN": {RawSecret: secret}, "GOT": {Value: got}},
	}}
	var logBuf bytes.Buffer
	var logMu sync.Mutex
	logger := slog.New(slog.NewTextHandler(&lockedWriter{w: &logBuf, mu: &logMu}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	rec := &recorder{}
	r := newRuntime(t, runtimes.Options{DataDir: t.TempDir(), Runs: rec, Log: logger})
	_, err := r.Apply(t.Context(), target(key("web", "rc"), "v1", cr))
	if err == nil {
		t.Fatal("want an error")
	}
	if readFile(t, got) != secret {
		t.Fatal("the command did not receive the secret")
	}
	if strings.Contains(err.Error(), secret) || !strings.Contains(err.Error(), "bad token (redacted)") {
		t.Errorf("error %q", err)
	}
	runs := rec.list("")
	if len(runs) != 1 {
		t.Fatalf("runs %+v", runs)
	}
	if s := fmt.Sprintf("%#v", runs[0]); strings.Contains(s, secret) || !strings.Contains(runs[0].Stdout, "token is (redacted)") {
		t.Errorf("recorded run %s", s)
	}
	logMu.Lock()
	logs := logBuf.String()
	logMu.Unlock()
	if strings.Contains(logs, secret) || !strings.Contains(logs, "custom runtime command finished") {
		t.Errorf("logs %s", logs)
	}
}

type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func TestIdlePollerStops(t *testing.T) {
	dir := t.TempDir()
	fetch := script(t, dir, "fetch.sh", `exit 0`)
	cr := &config.CustomRuntime{
		Apply: &config.ApplyCommand{TaskConfig: task(script(t, dir, "apply.sh", "exit 0"))},
		Fetch: &config.FetchCommand{TaskConfig: task(fetch), PollInterval: dur("10ms"), SteadyStatePollInterval: dur("10ms")},
	}
	var now atomic.Int64
	now.Store(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()) }
	rec := &recorder{}
	r := newRuntime(t, runtimes.Options{DataDir: t.TempDir(), Runs: rec, Now: clock})
	tg := target(key("web", "rc"), "v1", cr)
	mustFetch(t, r, tg)
	eventually(t, "polling", func() bool { return len(rec.list(kindFetch)) >= 3 })
	now.Add(int64(2 * time.Hour)) // nobody fetched for longer than minIdleAfter
	r.mu.Lock()
	in := r.insts[tg.InstanceKey]
	r.mu.Unlock()
	eventually(t, "poller stopped", func() bool {
		in.mu.Lock()
		defer in.mu.Unlock()
		return !in.fetchPolling
	})
	n := len(rec.list(kindFetch))
	time.Sleep(50 * time.Millisecond) // no more runs: nothing to poll for
	if m := len(rec.list(kindFetch)); m != n {
		t.Errorf("%d fetches after the poller stopped", m-n)
	}
	// A new Fetch runs the command again and restarts polling.
	mustFetch(t, r, tg)
	if m := len(rec.list(kindFetch)); m != n+1 {
		t.Errorf("Fetch after idling ran %d fetches, want 1", m-n)
	}
	eventually(t, "polling again", func() bool { return len(rec.list(kindFetch)) >= n+3 })
}

func TestCloseStopsApply(t *testing.T) {
	dir := t.TempDir()
	cr := &config.CustomRuntime{Apply: &config.ApplyCommand{TaskConfig: task(script(t, dir, "apply.sh", "sleep 100"))}}
	r, err := New(&config.Runtime{Name: testRuntime, Custom: &config.CustomRuntime{}}, runtimes.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := r.Apply(context.Background(), target(key("a", "rc"), "v1", cr))
		done <- err
	}()
	eventually(t, "apply running", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		in := r.insts[key("a", "rc")]
		if in == nil {
			return false
		}
		in.mu.Lock()
		defer in.mu.Unlock()
		return in.applying > 0
	})
	time.Sleep(20 * time.Millisecond) // let the command start
	start := time.Now()
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Close took %v", d)
	}
	if err := <-done; err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("apply: %v", err)
	}
	if _, err := r.Fetch(t.Context(), target(key("a", "rc"), "v1", cr)); err == nil {
		t.Error("Fetch after Close succeeded")
	}
}

// TestAppliedMemoIsShared: an apply-only runtime's last apply travels as
// the apply's memo, which the engine keeps in its store and hands back in
// targets. Two runtimes with data directories of their own (two servers on
// one database, or an agent restarted with an empty --data) given the memo
// agree on what was applied, and neither applies it again (tour 3's B29,
// B30); without it the second one would.
func TestAppliedMemoIsShared(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "applies.log")
	apply := script(t, dir, "apply.sh", `echo "$PVN_SERVICE_VERSION" >> "$LOG"`)
	cr := &config.CustomRuntime{ApplyID: "x", Apply: &config.ApplyCommand{TaskConfig: task(apply), Env: plain("LOG", log)}}
	k := key("a", "staging")
	one := newRuntime(t, runtimes.Options{DataDir: t.TempDir()})
	two := newRuntime(t, runtimes.Options{DataDir: t.TempDir()})

	res, err := one.Apply(t.Context(), target(k, "v1", cr))
	if err != nil {
		t.Fatal(err)
	}
	var rec appliedRecord
	if err := json.Unmarshal(res.Memo, &rec); err != nil || rec.Version != "v1" || rec.ApplyID != "x" || rec.AppliedAt.IsZero() {
		t.Fatalf("memo %s: %v", res.Memo, err)
	}
	withMemo := func(tg runtimes.Target, memo json.RawMessage) runtimes.Target {
		tg.Memo = memo
		return tg
	}
	if st := mustFetch(t, two, withMemo(target(k, "v1", cr), res.Memo)); !st.Converged || st.Version != "v1" {
		t.Errorf("the other runtime, given the memo: %+v", st)
	}
	if a := mustApply(t, two, withMemo(target(k, "v1", cr), res.Memo)); a != runtimes.ActionUnchanged {
		t.Errorf("the other runtime's apply, given the memo: %s", a)
	}
	// The other one applies v2; the first, whose own record is of v1, is
	// given the newer memo and goes by it.
	res2, err := two.Apply(t.Context(), withMemo(target(k, "v2", cr), res.Memo))
	if err != nil {
		t.Fatal(err)
	}
	if st := mustFetch(t, one, withMemo(target(k, "v2", cr), res2.Memo)); !st.Converged || st.Version != "v2" {
		t.Errorf("the first runtime, given the newer memo: %+v", st)
	}
	if a := mustApply(t, one, withMemo(target(k, "v2", cr), res2.Memo)); a != runtimes.ActionUnchanged {
		t.Errorf("the first runtime's apply of v2, given its memo: %s", a)
	}
	// A memo that is no record is ignored (the process's own counts).
	if st := mustFetch(t, one, withMemo(target(k, "v1", cr), json.RawMessage(`{"nope":1}`))); !st.Converged || st.Version != "v1" {
		t.Errorf("an unreadable memo: %+v", st)
	}
	if got, want := lines(readFile(t, log)), []string{"v1", "v2"}; !slices.Equal(got, want) {
		t.Errorf("applies %q, want %q", got, want)
	}
	// Without the memo, a runtime that never applied does: what B29 was.
	three := newRuntime(t, runtimes.Options{DataDir: t.TempDir()})
	if st := mustFetch(t, three, target(k, "v2", cr)); st.Converged {
		t.Errorf("no memo, no record: %+v", st)
	}
}
