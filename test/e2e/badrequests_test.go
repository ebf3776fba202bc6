package e2e

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	apiv1 "github.com/drover-dev/drover/api/v1"
)

// TestBadRequestsChangeNothing: mistakes people make are refused with a
// message that says what is wrong, and leave the server as it was.
func TestBadRequestsChangeNothing(t *testing.T) {
	requireE2E(t)
	dir := twoChannelTree(t, "shop", "1s")
	s := newServer(t)
	s.ok("alice", "apply", dir+"/...")
	version, dsID := s.push("alice", "shop", "web", "image=1.0")
	s.waitStatus("shop", "web", 30*time.Second, "prod waiting for approval", func(st *apiv1.ServiceStatus) bool {
		return findChannel(st, "prod").Status == "WAITING_MANUAL_APPROVAL"
	})

	var configsBefore []byte
	if err := s.getJSON("/v1/configs", &configsBefore); err != nil {
		t.Fatal(err)
	}
	eventsBefore := s.events("shop", "web")
	statusBefore := s.status("shop", "web")
	unchanged := func(t *testing.T) {
		t.Helper()
		var configs []byte
		if err := s.getJSON("/v1/configs", &configs); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(configs, configsBefore) {
			t.Errorf("GET /v1/configs changed:\nbefore %s\nafter  %s", configsBefore, configs)
		}
		evs := s.events("shop", "web")
		if len(evs) != len(eventsBefore) {
			t.Errorf("events changed: %v -> %v", eventKeys(eventsBefore), eventKeys(evs))
		}
		st := s.status("shop", "web")
		if st.DesiredStateID != dsID || st.DesiredVersion != version {
			t.Errorf("desired state changed to %s (%s)", st.DesiredStateID, st.DesiredVersion)
		}
		for i, c := range st.ReleaseChannels {
			b := statusBefore.ReleaseChannels[i]
			if c.Status != b.Status || c.Version != b.Version || c.TargetVersion != b.TargetVersion || len(approvedBy(&c)) != len(approvedBy(&b)) {
				t.Errorf("channel %s changed:\nbefore %s\nafter  %s", c.Name, dump(b), dump(c))
			}
		}
	}
	// refused runs a command that must fail with exit code and stderr matching all of wants.
	refused := func(t *testing.T, code int, wants []string, args ...string) {
		t.Helper()
		r := s.as("mallory", args...)
		if r.code != code {
			t.Errorf("want exit %d, got %s", code, r)
		}
		for _, w := range wants {
			if !strings.Contains(r.stderr, w) {
				t.Errorf("stderr lacks %q: %s", w, r)
			}
		}
		if strings.Contains(r.stderr, "POST /v1") || strings.Contains(r.stderr, "500 Internal") {
			t.Errorf("the message is about HTTP, not the request: %s", r)
		}
	}

	t.Run("approve a channel without an approval", func(t *testing.T) {
		refused(t, 1, []string{"staging", "not waiting for an approval"},
			"approve", "web", "--app", "shop", "--release-channel", "staging")
		refused(t, 1, []string{"staging", "not waiting for an approval"},
			"reject", "web", "--app", "shop", "--release-channel", "staging")
		unchanged(t)
	})
	t.Run("approve an unknown channel", func(t *testing.T) {
		refused(t, 1, []string{`no release channel "canary"`, "staging", "prod"},
			"approve", "web", "--app", "shop", "--release-channel", "canary")
		unchanged(t)
	})
	t.Run("approve without a channel", func(t *testing.T) {
		refused(t, 64, []string{"--release-channel"}, "approve", "web", "--app", "shop")
		unchanged(t)
	})
	t.Run("push an unknown service", func(t *testing.T) {
		refused(t, 1, []string{`service "nope"`, `"shop"`, "not configured"},
			"push", "nope", "--app", "shop", "--param", "image=1.1")
		refused(t, 1, []string{`application "nowhere"`, "not configured"},
			"push", "web", "--app", "nowhere", "--param", "image=1.1")
		unchanged(t)
	})
	t.Run("push an unknown parameter", func(t *testing.T) {
		refused(t, 1, []string{`unknown parameter "imag"`, "image"},
			"push", "web", "--app", "shop", "--param", "imag=1.1")
		unchanged(t)
	})
	t.Run("push a docker tag with a space", func(t *testing.T) {
		refused(t, 1, []string{`"image"`, `"1.1 beta"`},
			"push", "web", "--app", "shop", "--param", "image=1.1 beta")
		unchanged(t)
	})
	t.Run("push without the required parameter", func(t *testing.T) {
		refused(t, 1, []string{"image", "--param image="}, "push", "web", "--app", "shop")
		unchanged(t)
	})
	t.Run("push a malformed parameter", func(t *testing.T) {
		refused(t, 64, []string{"NAME=VALUE"}, "push", "web", "--app", "shop", "--param", "image")
		unchanged(t)
	})

	// A tree with problems in several files: every one is listed with its
	// file, line and column, and nothing is sent.
	t.Run("apply a broken tree", func(t *testing.T) {
		bad := filepath.Join(t.TempDir(), "bad")
		files := webService("shop")
		files["runtimes/staging.pvn.yaml"] = "runtime:\n  name: staging\n  fake: {rolloutDuration: \"5s\"}\n" // a valid change
		files["runtimes/prod.pvn.yaml"] = "runtime:\n  name: prod\n  fake:\n    rolloutDuration: \"soon\"\n"
		files["app.pvn.yaml"] = "application:\n  name: shop\n  releaseChannelz:\n    - name: staging\n"
		files["services/web/web.pvn.yaml"] = strings.Replace(files["services/web/web.pvn.yaml"], "  application: shop\n", "  application: shop\n    oops: [\n", 1)
		writeTree(t, bad, files)
		r := s.as("mallory", "apply", bad+"/...")
		if r.code != 1 {
			t.Fatalf("apply of a broken tree: want exit 1, got %s", r)
		}
		wantLocated(t, r.stderr, filepath.Join(bad, "runtimes/prod.pvn.yaml"), 4, "rolloutDuration")
		wantLocated(t, r.stderr, filepath.Join(bad, "app.pvn.yaml"), 3, "releaseChannelz")
		wantLocated(t, r.stderr, filepath.Join(bad, "services/web/web.pvn.yaml"), 0, "YAML")
		unchanged(t)
	})
	// A tree each file of which is fine, but that is wrong as a whole: the
	// server refuses it, the CLI maps the problem back to the file, and the
	// valid change in the same apply is not stored either (all or nothing).
	t.Run("apply a tree the server refuses", func(t *testing.T) {
		bad := twoChannelTree(t, "shop", "1s")
		writeTree(t, bad, map[string]string{"runtimes/staging.pvn.yaml": fakeRuntime("staging", "7s", "")})
		app := filepath.Join(bad, "app.pvn.yaml")
		writeTree(t, bad, map[string]string{"app.pvn.yaml": strings.Replace(readFile(t, app), "runtime: prod", "runtime: prodd", 1)})
		r := s.as("mallory", "apply", bad+"/...")
		if r.code != 1 {
			t.Fatalf("want exit 1, got %s", r)
		}
		line := lineOf(t, readFile(t, app), "runtime: prodd")
		wantLocated(t, r.stderr, app, line, `unknown runtime "prodd"`)
		unchanged(t)
	})
	t.Run("apply --dry-run", func(t *testing.T) {
		changed := twoChannelTree(t, "shop", "1s")
		writeTree(t, changed, map[string]string{"runtimes/staging.pvn.yaml": fakeRuntime("staging", "9s", "")})
		r := s.ok("mallory", "apply", changed+"/...", "--dry-run")
		if !strings.Contains(r.stdout, "runtime/staging: configured (version 2) (dry run)") {
			t.Errorf("dry run output: %s", r)
		}
		unchanged(t)
	})
	t.Run("status of an unknown service", func(t *testing.T) {
		refused(t, 1, []string{`no service "nope"`}, "status", "nope", "--app", "shop")
	})
}

// wantLocated fails unless out has a line "FILE:LINE:COL: ...about..."; a
// zero line accepts any line.
func wantLocated(t *testing.T, out, file string, line int, about string) {
	t.Helper()
	lineRE := `\d+`
	if line > 0 {
		lineRE = fmt.Sprint(line)
	}
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(file) + `:` + lineRE + `:\d+: .*` + regexp.QuoteMeta(about))
	if !re.MatchString(out) {
		t.Errorf("no located error %s:%s:COL about %q in:\n%s", file, lineRE, about, out)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// lineOf returns the 1-based line of the first occurrence of needle.
func lineOf(t *testing.T, text, needle string) int {
	t.Helper()
	i := strings.Index(text, needle)
	if i < 0 {
		t.Fatalf("%q not in the text", needle)
	}
	return strings.Count(text[:i], "\n") + 1
}
