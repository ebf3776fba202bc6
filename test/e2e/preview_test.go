package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apiv1 "github.com/drover-dev/drover/api/v1"
)

// TestPreview: drover preview shows, per release channel, the diff of each
// object against what was last applied there, the environment names that
// change (never a secret's value), and the gates in the way; it pushes
// nothing. A channel waiting for its approval shows the same preview in
// drover status -o json.
func TestPreview(t *testing.T) {
	requireE2E(t)
	s := newServer(t)
	const app = "previewed"
	dir := twoChannelTree(t, app, "1s")
	p := filepath.Join(dir, "services", "web", "web.pvn.yaml")
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	// A raw secret in the service's env: previews must not show it.
	withSecret := strings.Replace(string(data), "  parameters:\n", "  env:\n    API_TOKEN:\n      rawSecret: s3cr3t-token-value\n  parameters:\n", 1)
	if err := os.WriteFile(p, []byte(withSecret), 0o644); err != nil {
		t.Fatal(err)
	}
	s.ok("alice", "apply", dir+"/...")
	v1, ds1 := s.push("alice", app, "web", "image=1.0")
	s.waitStatus(app, "web", 30*time.Second, "staging converged, prod waiting for approval", func(st *apiv1.ServiceStatus) bool {
		return findChannel(st, "staging").Status == "CONVERGED" && findChannel(st, "prod").Status == "WAITING_MANUAL_APPROVAL"
	})

	// prod waits for its approval: its status previews what approving it rolls out.
	st := s.status(app, "web")
	pv := findChannel(st, "prod").Preview
	if pv == nil || pv.To != v1 || pv.From != "" || len(pv.Objects) == 0 || pv.Objects[0].Action != "created" ||
		len(pv.Params) != 1 || pv.Params[0] != (apiv1.ParamChange{Name: "image", To: "1.0"}) {
		t.Fatalf("prod's preview in its status: %s", dump(pv))
	}

	r := s.ok("alice", "preview", "web", "--app", app, "--param", "image=1.1", "-o", "json")
	if strings.Contains(r.stdout, "s3cr3t-token-value") {
		t.Fatalf("the preview shows a secret:\n%s", r.stdout)
	}
	var prev apiv1.PreviewResponse
	if err := json.Unmarshal([]byte(r.stdout), &prev); err != nil {
		t.Fatal(err)
	}
	if len(prev.Channels) != 2 || prev.BundleVersion == v1 {
		t.Fatalf("preview: %s", dump(prev))
	}
	sc, pc := prev.Channels[0], prev.Channels[1]
	if sc.Name != "staging" || sc.From != v1 || sc.To != prev.BundleVersion || sc.Unchanged {
		t.Errorf("staging's preview: %s", dump(sc))
	}
	var dep *apiv1.ObjectChange
	for i, o := range sc.Objects {
		if strings.HasPrefix(o.Object, "Deployment ") {
			dep = &sc.Objects[i]
		}
	}
	if dep == nil || dep.Action != "changed" || !strings.Contains(dep.Diff, "-        image: docker.io/library/nginx:1.0") || !strings.Contains(dep.Diff, "+        image: docker.io/library/nginx:1.1") {
		t.Errorf("staging's Deployment in the preview: %s", dump(dep))
	}
	if len(sc.Params) != 1 || sc.Params[0] != (apiv1.ParamChange{Name: "image", From: "1.0", To: "1.1"}) {
		t.Errorf("staging's parameters in the preview: %s", dump(sc.Params))
	}
	if pc.Name != "prod" || pc.From != "" || len(pc.Gates) < 2 || !strings.Contains(strings.Join(pc.Gates, "\n"), "release channels staging converged at "+prev.BundleVersion) ||
		!strings.Contains(strings.Join(pc.Gates, "\n"), "approval prod: 1 approver(s)") {
		t.Errorf("prod's preview: %s", dump(pc))
	}

	text := s.ok("alice", "preview", "web", "--app", app, "--param", "image=1.1").stdout
	t.Logf("drover preview:\n%s", text)
	if !strings.Contains(text, "a push would roll out "+prev.BundleVersion+" (nothing was pushed)") || !strings.Contains(text, "staging (") ||
		!strings.Contains(text, "changed Deployment web") || !strings.Contains(text, "parameter image: 1.0 -> 1.1") || !strings.Contains(text, "+        image: docker.io/library/nginx:1.1") ||
		!strings.Contains(text, "waits for approval prod: 1 approver(s)") || strings.Contains(text, "s3cr3t-token-value") {
		t.Errorf("drover preview:\n%s", text)
	}
	if st := s.status(app, "web"); st.DesiredStateID != ds1 {
		t.Errorf("a preview changed the desired state: %s, want %s", st.DesiredStateID, ds1)
	}
	if r := s.as("alice", "preview", "web", "--app", app, "--param", "nosuch=1"); r.code == 0 {
		t.Errorf("a preview with an unknown parameter: %s", r)
	}
}

// TestCompiledCLI: drover compiled prints what a push stored per release
// channel (the engine's form, secrets redacted), for the active desired
// state or an earlier one, and names what it cannot find.
func TestCompiledCLI(t *testing.T) {
	requireE2E(t)
	s := newServer(t)
	const app = "compiled"
	dir := twoChannelTree(t, app, "1s")
	p := filepath.Join(dir, "services", "web", "web.pvn.yaml")
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	withSecret := strings.Replace(string(data), "  parameters:\n", "  env:\n    API_TOKEN:\n      rawSecret: s3cr3t-token-value\n    MODE:\n      value: fast\n  parameters:\n", 1)
	if err := os.WriteFile(p, []byte(withSecret), 0o644); err != nil {
		t.Fatal(err)
	}
	s.ok("alice", "apply", dir+"/...")
	v1, ds1 := s.push("alice", app, "web", "image=1.0")
	text := s.ok("alice", "compiled", "web", "--app", app).stdout
	t.Logf("drover compiled:\n%s", text)
	for _, want := range []string{"# " + app + "/web " + v1 + " (desired state " + ds1 + ", active)", "# release channel staging: runtime staging (fake)",
		"# release channel prod: runtime prod (fake)", "#   after: staging", "#   approvals: 1 approver(s)", "#   env API_TOKEN: (redacted)",
		"#   env MODE: fast", "# Deployment web", "image: docker.io/library/nginx:1.0", "replicas: 3"} {
		if !strings.Contains(text, want) {
			t.Errorf("drover compiled lacks %q", want)
		}
	}
	v2, _ := s.push("alice", app, "web", "image=2.0")
	var out apiv1.CompiledService
	r := s.ok("alice", "compiled", "web", "--app", app, "--desired-state", ds1, "--release-channel", "prod", "-o", "json")
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatal(err)
	}
	if out.Active || out.Version != v1 || len(out.ReleaseChannels) != 1 || out.ReleaseChannels[0].Name != "prod" || v2 == v1 {
		t.Errorf("ds1's prod: %s", dump(out))
	}
	for _, args := range [][]string{{"-o", "yaml"}, {"-o", "json"}, {}} {
		if r := s.ok("alice", append([]string{"compiled", "web", "--app", app}, args...)...); strings.Contains(r.stdout, "s3cr3t-token-value") {
			t.Errorf("drover compiled %v shows the secret:\n%s", args, r.stdout)
		}
	}
	if r := s.as("alice", "compiled", "web", "--app", app, "--release-channel", "qa"); r.code == 0 || !strings.Contains(r.stderr, `no release channel "qa"`) {
		t.Errorf("an unknown release channel: %s", r)
	}
	if r := s.as("alice", "compiled", "nosuch", "--app", app); r.code == 0 || !strings.Contains(r.stderr, "has no desired state") {
		t.Errorf("an unknown service: %s", r)
	}
	if r := s.as("alice", "compiled", "web"); r.code != 64 {
		t.Errorf("without --app: %s", r)
	}
}
