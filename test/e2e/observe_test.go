package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	apiv1 "github.com/drover-dev/drover/api/v1"
)

// TestStatusWithRuntimesStopped: status and events of a converged service
// are what the engine recorded, answered by a server that runs no engine and
// no runtime (--api-only) while every command of the runtime would fail: no
// request a person makes reaches a runtime (issue 10, item 4).
func TestStatusWithRuntimesStopped(t *testing.T) {
	requireE2E(t)
	tmp := t.TempDir()
	const app, svc = "obsapp", "site"
	// Each command logs its call; once $STOPPED exists it fails instead.
	guard := `echo "$0 $PVN_RELEASE_CHANNEL" >> "$CALLS"
if [ -e "$STOPPED" ]; then echo "the backend is down" >&2; exit 1; fi
`
	env := map[string]string{"STATE_DIR": "{{.Params.stateDir}}", "CALLS": tmp + "/calls", "STOPPED": tmp + "/stopped"}
	fetch := guard + `running=$(cat "$STATE_DIR/version" 2>/dev/null || true)
status=SUCCEEDED; [ "$running" = "$PVN_SERVICE_VERSION" ] || status=PENDING
printf '{"objects":[{"name":"site","objectType":"Website","status":"%s","versions":[{"version":"%s","active":true,"replicas":2,"availableReplicas":2,"targetReplicas":2}]}]}\n' "$status" "${running:-none}"
`
	getInfo := guard + `printf '{"outputs":[{"name":"url","text":"https://%s.example"}]}\n' "$PVN_RELEASE_CHANNEL"
`
	program := func(name, script string) crObj {
		p := crProgram(script, env)
		p["taskConfig"].(crObj)["program"].(crObj)["cmd"] = []string{"sh", "-c", script, name}
		return p
	}
	dir := crWriteConfigs(t, filepath.Join(tmp, "config"), map[string]crObj{
		"runtime": crRuntime("site", []string{"stateDir"}, crObj{
			"apply":   program("apply", guard+crApplyScript),
			"fetch":   crWith(program("fetch", fetch), "fetchMode", "STRUCTURED_OUTPUT", "pollInterval", "1s", "steadyStatePollInterval", "1s"),
			"getInfo": program("getInfo", getInfo),
		}),
		"app":     crApp(app, crChannel("staging", "site"), crChannel("production", "site", "staging")),
		"service": crService(app, svc, "stateDir", tmp+"/state/{{.Builtins.ReleaseChannel.Name}}"),
	})
	s := newServer(t)
	s.ok("alice", "apply", dir+"/...")
	version, _ := s.push("alice", app, svc)
	crWait(s, app, svc, 0)
	observedAll := func(st *apiv1.ServiceStatus) bool {
		for _, rc := range []string{"staging", "production"} {
			c := findChannel(st, rc)
			if c == nil || len(c.Objects) != 1 || c.Objects[0].Version != version || len(c.Info) != 1 || c.ObservedAt.IsZero() {
				return false
			}
		}
		return true
	}
	before := s.waitStatus(app, svc, 30*time.Second, "objects and info observed in both channels", observedAll)
	evsBefore := s.events(app, svc)
	textBefore := s.ok("e2e", "status", svc, "--app", app).stdout

	// The backend goes down and the server comes back without the engine
	// and runtimes.
	if err := os.WriteFile(tmp+"/stopped", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	s.kill()
	s.flags = append(s.flags, "--api-only")
	s.start()
	calls := crReadFile(t, tmp+"/calls")

	after := s.status(app, svc)
	if !converged(version)(after) || !observedAll(after) {
		t.Fatalf("status with the runtimes stopped:\n%s", dump(after))
	}
	for _, rc := range []string{"staging", "production"} {
		b, a := channel(t, before, rc), channel(t, after, rc)
		if dump(a.Objects) != dump(b.Objects) || dump(a.Info) != dump(b.Info) || a.Version != version || a.ObserveError != "" {
			t.Errorf("%s: before the stop:\n%s\nafter:\n%s", rc, dump(b), dump(a))
		}
		if o := a.Objects[0]; o.Replicas != 2 || o.AvailableReplicas != 2 || o.Name != "site" {
			t.Errorf("%s object: %s", rc, dump(o))
		}
		if a.Info[0].Text != "https://"+rc+".example" {
			t.Errorf("%s info: %s", rc, dump(a.Info))
		}
	}
	if text := s.ok("e2e", "status", svc, "--app", app).stdout; text != textBefore {
		t.Errorf("drover status before the stop:\n%s\nafter:\n%s", textBefore, text)
	}
	evsAfter := s.events(app, svc)
	if !slices.EqualFunc(evsBefore, evsAfter, func(a, b apiv1.Event) bool { return a.Seq == b.Seq && a.Message == b.Message }) {
		t.Errorf("events before the stop:\n%s\nafter:\n%s", strings.Join(crEventLines(evsBefore), "\n"), strings.Join(crEventLines(evsAfter), "\n"))
	}
	s.ok("e2e", "runs", svc, "--app", app)
	if got := crReadFile(t, tmp+"/calls"); got != calls {
		t.Errorf("the runtime's commands ran while it was stopped:\n%s", strings.TrimPrefix(got, calls))
	}
	if !strings.Contains(s.logTail(50), "api only") {
		t.Errorf("the server did not say it runs no engine:\n%s", s.logTail(50))
	}
}
