package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apiv1 "github.com/drover-dev/drover/api/v1"
)

// copyShellExample copies examples/shell into a new directory, with its
// state directory moved under the test's.
func copyShellExample(t *testing.T) (dir, state string) {
	t.Helper()
	tmp := t.TempDir()
	dir, state = filepath.Join(tmp, "shell"), filepath.Join(tmp, "state")
	src := filepath.Join(repoRoot, "examples", "shell")
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for _, e := range entries {
		data := readFile(t, filepath.Join(src, e.Name()))
		if e.Name() == "site.pvn.yaml" {
			if !strings.Contains(data, "/tmp/drover-shell-example/") {
				t.Fatalf("examples/shell/site.pvn.yaml no longer has its stateDir under /tmp/drover-shell-example/")
			}
			data = strings.ReplaceAll(data, "/tmp/drover-shell-example/", state+"/")
		}
		files[e.Name()] = data
	}
	writeTree(t, dir, files)
	return dir, state
}

// TestB27ShellExampleGetInfoEscapes: the shell example's getInfo turns the
// message into valid JSON whatever it holds: quotes, backslashes, a tab.
func TestB27ShellExampleGetInfoEscapes(t *testing.T) {
	requireE2E(t)
	dir, _ := copyShellExample(t)
	s := newServer(t)
	s.ok("alice", "apply", dir+"/...")
	const message = `say "hi" \ C:\path	tab`
	s.push("alice", "shell-app", "site", "message="+message)
	crWait(s, "shell-app", "site", 0)
	st := s.waitStatus("shell-app", "site", 30*time.Second, "getInfo shows the message", func(st *apiv1.ServiceStatus) bool {
		for _, c := range st.ReleaseChannels {
			if len(c.Info) != 1 || c.Info[0].Name != "message" || c.Info[0].Text != message {
				return false
			}
		}
		return len(st.ReleaseChannels) == 2
	})
	for _, c := range st.ReleaseChannels {
		if strings.Contains(c.Message, "getInfo") {
			t.Errorf("%s: %s", c.Name, c.Message)
		}
	}
}
