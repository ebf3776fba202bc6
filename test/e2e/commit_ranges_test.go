package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apiv1 "github.com/drover-dev/drover/api/v1"
)

// TestCommitDenylistRanges: a commitDenylist range is decided against the
// repository's history (a local repository here): a push whose commit lies
// in (start, end] is BLOCKED saying which range; one after it rolls out.
func TestCommitDenylistRanges(t *testing.T) {
	requireE2E(t)
	repoDir := t.TempDir()
	git := func(args ...string) string {
		cmd := exec.Command("git", append([]string{"-C", repoDir}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git("init", "--quiet")
	var c []string
	for i := range 4 {
		if err := os.WriteFile(filepath.Join(repoDir, "f"), []byte{byte('a' + i)}, 0o644); err != nil {
			t.Fatal(err)
		}
		git("add", "f")
		git("commit", "--quiet", "-m", fmt.Sprint(i))
		c = append(c, git("rev-parse", "HEAD"))
	}
	s := newServer(t)
	const app = "commits"
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"runtime.pvn.yaml": "runtime:\n  name: commits-rt\n  fake: {}\n",
		"app.pvn.yaml": fmt.Sprintf(`application:
  name: %s
  releaseChannels:
    - name: prod
      runtimes:
        - runtime: commits-rt
      protections:
        - ref: {name: bad-commits}
          lifecycle:
            - deployment: {}
`, app),
		"bad.pvn.yaml": fmt.Sprintf("protection:\n  name: bad-commits\n  pollInterval: 1s\n  builtin:\n    commitDenylist:\n      repository: %s\n      commits:\n        - range: {startCommit: %q, endCommit: %q}\n", repoDir, c[0][:8], c[2][:8]),
		"api.pvn.yaml": fmt.Sprintf(`service:
  name: api
  application: %s
  customRuntime: {}
  parameters:
    - name: commit
      commit: {repository: %s}
`, app, repoDir),
	})
	s.ok("alice", "apply", dir+"/...")
	s.push("alice", app, "api", "commit="+c[1])
	st := s.waitStatus(app, "api", 30*time.Second, "prod blocked by the denylisted range", func(st *apiv1.ServiceStatus) bool {
		return findChannel(st, "prod").Status == "BLOCKED"
	})
	want := fmt.Sprintf("commit %s (parameter commit) is in the denylisted range %s..%s of %s", c[1], c[0][:8], c[2][:8], repoDir)
	if msg := findChannel(st, "prod").Message; !strings.Contains(msg, want) {
		t.Errorf("prod's message: %q, want it to say %q", msg, want)
	}
	v2, _ := s.push("alice", app, "api", "commit="+c[3])
	s.waitStatus(app, "api", 30*time.Second, "prod converged with a commit after the range", converged(v2))
}
