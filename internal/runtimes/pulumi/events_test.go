package pulumi

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/runtimes"
	"github.com/drover-dev/drover/internal/runtimes/iacrun"
	"github.com/drover-dev/drover/internal/runtimes/redact"
)

func TestURNObject(t *testing.T) {
	t.Parallel()
	cases := [][2]string{
		{"urn:pulumi:staging::web::drovertest:index:File::site", "drovertest:index:File/site"},
		{"urn:pulumi:staging::web::my:module:Comp$drovertest:index:File::site-a::b", "drovertest:index:File/site-a::b"},
		{"not a urn", "not a urn"},
	}
	for _, c := range cases {
		if got := urnObject(c[0]); got != c[1] {
			t.Errorf("urnObject(%q) = %q, want %q", c[0], got, c[1])
		}
	}
}

// TestPreviewSummary: the summary counts resource steps only; changed
// follows changeSummary.
func TestPreviewSummary(t *testing.T) {
	t.Parallel()
	res, err := parsePreview(`{"steps": [
		{"op": "create", "urn": "urn:pulumi:s::p::pulumi:pulumi:Stack::p-s"},
		{"op": "create", "urn": "urn:pulumi:s::p::drovertest:index:File::a"},
		{"op": "update", "urn": "urn:pulumi:s::p::drovertest:index:File::b"},
		{"op": "replace", "urn": "urn:pulumi:s::p::drovertest:index:File::c"},
		{"op": "same", "urn": "urn:pulumi:s::p::drovertest:index:File::d"}],
		"changeSummary": {"create": 2, "update": 1, "replace": 1, "same": 1},
		"diagnostics": [{"severity": "warning", "message": "w"}]}`)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.summary(); got != "Preview: 1 to create, 1 to update, 0 to delete, 1 to replace." {
		t.Errorf("summary %q", got)
	}
	if !res.changed() || res.errors() != "" {
		t.Errorf("changed %v, errors %q", res.changed(), res.errors())
	}
	ch := res.changes(redact.New(nil))
	if len(ch) != 4 || ch[0] != (runtimes.Change{Object: "drovertest:index:File/a", Action: runtimes.ActionCreated}) || ch[2].Action != runtimes.ActionConfigured || ch[3].Action != runtimes.ActionUnchanged {
		t.Errorf("changes %+v", ch)
	}
	if same, _ := parsePreview(`{"changeSummary": {"same": 3}}`); same.changed() {
		t.Error("a preview of same steps only changes something")
	}
}

// TestEvents: up's events give the changes per resource (a replacement is
// configured) and its failure with the diagnostics; a lock is retryable.
func TestEvents(t *testing.T) {
	t.Parallel()
	out := strings.Join([]string{
		`{"sequence":0,"diagnosticEvent":{"message":"using a plugin from $PATH\n","severity":"warning"}}`,
		`not json`,
		`{"resOutputsEvent":{"metadata":{"op":"create","urn":"urn:pulumi:s::p::drovertest:index:File::a"}}}`,
		`{"resOutputsEvent":{"metadata":{"op":"delete-replaced","urn":"urn:pulumi:s::p::drovertest:index:File::b"}}}`,
		`{"resOutputsEvent":{"metadata":{"op":"create-replacement","urn":"urn:pulumi:s::p::drovertest:index:File::b"}}}`,
		`{"resOutputsEvent":{"metadata":{"op":"same","urn":"urn:pulumi:s::p::pulumi:pulumi:Stack::p-s"}}}`,
		`{"diagnosticEvent":{"urn":"urn:pulumi:s::p::drovertest:index:File::c","message":"disk on fire\n","severity":"error"}}`,
		`{"diagnosticEvent":{"message":"update failed\n","severity":"error"}}`,
		`{"summaryEvent":{"result":"failed"}}`,
	}, "\n")
	ev := parseEvents(out, redact.New(nil))
	if !ev.failed || len(ev.changes) != 2 || ev.changes[0].Action != runtimes.ActionCreated || ev.changes[1] != (runtimes.Change{Object: "drovertest:index:File/b", Action: runtimes.ActionConfigured}) {
		t.Fatalf("%+v", ev)
	}
	err := upError(context.Background(), iacrun.Outcome{ExitCode: 255}, ev)
	if err == nil || err.Error() != "pulumi up failed (exit code 255): drovertest:index:File/c: disk on fire" {
		t.Errorf("%v", err)
	}
	err = upError(context.Background(), iacrun.Outcome{ExitCode: 255, Stderr: "error: the stack is currently locked by 1 lock(s).\n  file:///x"}, events{})
	if err == nil || !strings.Contains(err.Error(), "retrying previews again") {
		t.Errorf("locked: %v", err)
	}
}

// TestJobScript: the Job's script selects the stack, sets the config (the
// secrets from variables, never in the script) and runs the command.
func TestJobScript(t *testing.T) {
	t.Parallel()
	sp := &spec{path: "programs/web", Stack: "staging", CommandPrefix: []string{"poetry", "run"},
		Config: map[string]string{"web:replicas": "3"}, secrets: map[string]string{"dbPassword": "s3cr3t-value"},
		runner: &config.PulumiRunner{PreRun: []config.RunnerCommand{{Cmd: "make deps"}}}}
	up := jobScript(sp, kindUp)
	for _, want := range []string{
		"cd 'programs/web' || fail",
		"sh -c 'make deps' || fail 'preRun[0] (make deps)'",
		`'poetry' 'run' "$P" stack select --create --stack 'staging' --non-interactive`,
		`config set-all --stack 'staging' --plaintext 'web:replicas=3'`,
		`printf '%s' "$DROVER_PULUMI_SECRET_0" | 'poetry' 'run' "$P" config set --secret --stack 'staging' -- 'dbPassword'`,
		`exec 'poetry' 'run' "$P" up --yes --stack 'staging' --non-interactive --refresh --color never`,
	} {
		if !strings.Contains(up, want) {
			t.Errorf("script lacks %q:\n%s", want, up)
		}
	}
	if strings.Contains(up, "s3cr3t-value") {
		t.Error("the script holds the secret")
	}
	if pv := jobScript(sp, kindPreview); !strings.Contains(pv, "preview --stack 'staging' --refresh --expect-no-changes") {
		t.Errorf("preview script:\n%s", pv)
	}
}

// TestStalePlan: an up whose saved plan the stack no longer matches (its
// config changed behind drover's back) fails retryably; the next Apply
// previews again and succeeds.
func TestStalePlan(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	k := ikey("stale", "staging")
	v1 := f.target(k, "v1")
	f.fetch(v1) // saves the plan
	cmd := exec.CommandContext(t.Context(), f.rt.Binary(), "config", "set", "--stack", "stale-staging", "greeting", "behind drover's back")
	cmd.Dir = filepath.Join(f.rt.Root, "web", "stale", "staging", programDirName)
	cmd.Env = append(os.Environ(), iacrun.EnvList(v1.Env)...)
	cmd.Env = append(cmd.Env, "PULUMI_BACKEND_URL=file://"+filepath.Join(f.rt.Root, backendDirName, "web", "stale"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	_, err := f.rt.Apply(t.Context(), v1)
	if err == nil || !strings.Contains(err.Error(), "violates plan") || !strings.Contains(err.Error(), "retrying") || runtimes.IsPermanent(err) {
		t.Fatalf("Apply with a stale plan: %v, want a retryable error", err)
	}
	f.apply(v1)
	if got := f.file(k); got != "behind drover's back v1" {
		t.Fatalf("file %q", got)
	}
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

func jsonMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestTextSteps: a Job's text output gives the steps per resource.
func TestTextSteps(t *testing.T) {
	t.Parallel()
	preview := "Previewing update (staging):\n\n +  drovertest:index:File f create \n ~  drovertest:index:File g update [diff: ~content]\n +  pulumi:pulumi:Stack demo-staging create 2 warnings\nResources:\n    + 2 to create\n"
	if got := textSteps(preview, previewStep).summary(); got != "Preview: 1 to create, 1 to update, 0 to delete." {
		t.Errorf("summary %q", got)
	}
	up := " ~  drovertest:index:File f refreshing (0s) \n ~  drovertest:index:File f updating (0s) [diff: ~content]\n +  drovertest:index:File g created (0.01s) \n ~  drovertest:index:File f updated (0.01s) [diff: ~content]\n"
	ch := textSteps(up, upStep).changes(redact.New(nil))
	if len(ch) != 2 || ch[0] != (runtimes.Change{Object: "drovertest:index:File/g", Action: runtimes.ActionCreated}) || ch[1] != (runtimes.Change{Object: "drovertest:index:File/f", Action: runtimes.ActionConfigured}) {
		t.Errorf("changes %+v", ch)
	}
}
