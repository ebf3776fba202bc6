package gitcheck_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-dev/drover/internal/gitcheck"
)

// repo makes a repository with a linear history of n commits and returns
// its path and the commits, oldest first.
func repo(t *testing.T, n int) (string, []string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	dir := t.TempDir()
	run := func(args ...string) string {
		cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	run("init", "--quiet")
	var commits []string
	for i := range n {
		if err := os.WriteFile(filepath.Join(dir, "f"), []byte{byte('a' + i)}, 0o644); err != nil {
			t.Fatal(err)
		}
		run("add", "f")
		run("commit", "--quiet", "-m", "c")
		commits = append(commits, run("rev-parse", "HEAD"))
	}
	return dir, commits
}

func TestInRange(t *testing.T) {
	t.Parallel()
	dir, c := repo(t, 5)
	chk := &gitcheck.Checker{Dir: t.TempDir()}
	ctx := context.Background()
	for _, tt := range []struct {
		commit string
		want   bool
	}{
		{c[0], false}, // before the range
		{c[1], false}, // its start: excluded
		{c[2], true},
		{c[3][:7], true}, // its end, by a short SHA: included
		{c[4], false},    // after it
	} {
		got, err := chk.InRange(ctx, dir, tt.commit, c[1][:10], c[3])
		if err != nil || got != tt.want {
			t.Errorf("InRange(%s) = %v, %v; want %v", tt.commit[:7], got, err, tt.want)
		}
	}
	if _, err := chk.InRange(ctx, dir, "deadbeefdeadbeef", c[1], c[3]); err == nil || !strings.Contains(err.Error(), "commit deadbeefdeadbeef is not in the repository") {
		t.Errorf("an unknown commit: %v", err)
	}
	if _, err := chk.InRange(ctx, filepath.Join(t.TempDir(), "nosuch"), c[2], c[1], c[3]); err == nil || !strings.Contains(err.Error(), "clone ") {
		t.Errorf("no repository: %v", err)
	}
	if _, err := chk.InRange(ctx, "--upload-pack=touch /tmp/x", c[2], c[1], c[3]); err == nil || !strings.Contains(err.Error(), "is not a repository") {
		t.Errorf("an option for a repository: %v", err)
	}
	if _, err := chk.InRange(ctx, dir, "--all", c[1], c[3]); err == nil || !strings.Contains(err.Error(), "is not a commit SHA") {
		t.Errorf("an option for a commit: %v", err)
	}
	// A range of another repository holds none of this one's commits.
	if in, err := chk.InRange(ctx, dir, c[2], "abcdef1234", "abcdef5678"); err != nil || in {
		t.Errorf("a foreign range: %v, %v", in, err)
	}
	if got := gitcheck.URL("github.com/shop/api"); got != "https://github.com/shop/api" {
		t.Errorf("URL = %s", got)
	}
}
