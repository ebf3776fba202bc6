package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestS17AllowsRemote: an --allow-path URL allows the remote references it
// begins, at a boundary, and nothing that could lead elsewhere.
func TestS17AllowsRemote(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		entry, ref string
		want       bool
	}{
		{"https://host/org", "https://host/org", true},
		{"https://host/org", "https://host/org/repo//base?ref=v1", true},
		{"https://host/org", "https://host/org?x", true},
		{"https://host/org/", "https://host/org/repo", true},
		{"https://host", "https://host/x", true},
		{"HTTPS://host", "https://host/x", true},
		{"https://host/org", "git::https://host/org/repo", true},
		{"git::https://host/org", "https://host/org/repo", true},
		{"https://github.com/org", "github.com/org/repo//base", true},
		{"https://github.com/org", "GitHub.com:org/repo", true},
		{"git@host:org/", "git@host:org/repo.git", true},
		{"git@host:", "git@host:org/repo.git", true},
		{"https://host/org", "https://host/org-evil/x", false},
		{"https://host", "https://host.evil.example/x", false},
		{"https://host", "https://host@evil.example/x", false},
		{"https://host", "https://host:8443/x", false},
		{"https://host", "http://host/x", false},
		{"https://host/org", "https://host/org/../secret", false},
		{"https://host/org", "https://host/org/%2e%2e/secret", false},
		{"https://host/org", "https://host/org/./x", false},
		{"https://host/org", `https://host/org\..\x`, false},
		{"git@host:org/", "git@host:org/../x", false},
		{"https://host/org", "https://other/org", false},
		{"https://host:", "https://host:@evil.example/x", false},
	} {
		if got := allowsRemote(c.entry, c.ref); got != c.want {
			t.Errorf("allowsRemote(%q, %q) = %v, want %v", c.entry, c.ref, got, c.want)
		}
	}
}

// TestS17AllowPathRemoteEntries: --allow-path entries that are remote
// references are kept as written and must name a host; the others are
// directories.
func TestS17AllowPathRemoteEntries(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	resolved, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	roots, err := allowedRoots([]string{dir, "https://host/org", "git::https://h/r", "git@host:org/"})
	if err != nil || len(roots) != 4 || roots[0] != resolved || roots[1] != "https://host/org" || roots[3] != "git@host:org/" {
		t.Fatalf("roots %q, %v", roots, err)
	}
	for _, bad := range []string{"https://", "https:///path", "git::"} {
		if _, err := allowedRoots([]string{bad}); err == nil || !strings.Contains(err.Error(), "must name its host") {
			t.Errorf("%q: %v", bad, err)
		}
	}
	if _, err := allowedRoots([]string{"github.com/org/repo"}); err == nil || !strings.Contains(err.Error(), "give its URL: https://github.com/org/repo") {
		t.Errorf("github.com shorthand: %v", err)
	}
	// A remote entry allows no local file.
	c := &confinement{roots: []string{resolved, "https://host/org"}}
	if _, err := c.check("https://host/org/x", "https://host/org/x"); err == nil {
		t.Error("a file named like the entry passes the tree check")
	}
}

// TestS17KustomizeRemoteRead: kustomizeRead refuses a remote reference no
// entry allows, naming it and the flag; and allows reads in kustomize's
// clones of git repositories only when some remote reference is allowed,
// never through a link out of the clone.
func TestS17KustomizeRemoteRead(t *testing.T) {
	t.Parallel()
	tree := t.TempDir()
	c := &confinement{roots: []string{tree}}
	err := c.kustomizeRead("https://host/org/repo?ref=v1&x=y")
	if err == nil || !strings.Contains(err.Error(), `remote resource "https://host/org/repo?ref=v1&x=y" is refused`) ||
		!strings.Contains(err.Error(), "--allow-path 'https://host/org/repo?ref=v1&x=y'") {
		t.Fatalf("refused reference: %v", err)
	}
	clone, err := os.MkdirTemp("", "kustomize-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(clone) })
	file := filepath.Join(clone, "base", "cm.yaml")
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte("kind: ConfigMap\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(outside, []byte("SECRET"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(clone, "base", "link.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := c.kustomizeRead(file); err == nil {
		t.Error("a clone is readable with no remote reference allowed")
	}
	c.roots = append(c.roots, "https://host/org")
	if err := c.kustomizeRead("https://host/org/repo?ref=v1"); err != nil {
		t.Errorf("allowed reference: %v", err)
	}
	if err := c.kustomizeRead(file); err != nil {
		t.Errorf("file of an allowed clone: %v", err)
	}
	if err := c.kustomizeRead(filepath.Join(clone, "base", "link.yaml")); err == nil {
		t.Error("a link out of the clone is followed")
	}
	if err := c.kustomizeRead(outside); err == nil {
		t.Error("a temporary file outside any clone is readable")
	}
}
