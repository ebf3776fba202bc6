// Package gitcheck answers whether a commit lies in a range of a
// repository's history, for commitDenylist protections with ranges: it
// keeps a bare, blobless mirror of each repository under a directory and
// asks git (git merge-base --is-ancestor).
package gitcheck

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Checker answers range questions from mirrors kept in Dir.
type Checker struct {
	// Dir holds the mirrors, one per repository.
	Dir string
	// Git is the git binary (default: git on PATH).
	Git string

	mu    sync.Mutex
	locks map[string]*sync.Mutex
}

// InRange reports whether commit lies after start (excluded) and up to end
// (included) in repository's history: start is an ancestor of commit, and
// commit of end. The repository is fetched first (cloned the first time).
// A repository "github.com/org/repo" is reached as https://github.com/org/repo;
// a URL or an absolute path is used as given.
func (c *Checker) InRange(ctx context.Context, repository, commit, start, end string) (bool, error) {
	dir, err := c.mirror(ctx, repository)
	if err != nil {
		return false, err
	}
	sha, err := c.resolve(ctx, dir, commit)
	if err != nil {
		return false, err
	}
	from, err := c.resolve(ctx, dir, start)
	if err != nil {
		return false, err
	}
	to, err := c.resolve(ctx, dir, end)
	if err != nil {
		return false, err
	}
	if sha == from {
		return false, nil // the start is excluded
	}
	after, err := c.isAncestor(ctx, dir, from, sha)
	if err != nil || !after {
		return false, err
	}
	return c.isAncestor(ctx, dir, sha, to)
}

// URL is where repository is fetched from.
func URL(repository string) string {
	switch {
	case strings.Contains(repository, "://"), filepath.IsAbs(repository), strings.HasPrefix(repository, "git@"):
		return repository
	}
	return "https://" + strings.TrimSuffix(repository, "/")
}

// mirror fetches (or first clones) repository's mirror and returns its
// directory. Calls for one repository are serialized.
func (c *Checker) mirror(ctx context.Context, repository string) (string, error) {
	sum := sha256.Sum256([]byte(repository))
	dir := filepath.Join(c.Dir, hex.EncodeToString(sum[:8]))
	lock := c.lock(dir)
	lock.Lock()
	defer lock.Unlock()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if _, err := os.Stat(filepath.Join(dir, "HEAD")); err == nil {
		if _, err := c.git(ctx, dir, "fetch", "--quiet", "--prune", "origin", "+refs/*:refs/*"); err != nil {
			return "", fmt.Errorf("fetch %s: %w", repository, err)
		}
		return dir, nil
	}
	if err := os.MkdirAll(c.Dir, 0o750); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(c.Dir, "clone-")
	if err != nil {
		return "", err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	if _, err := c.git(ctx, "", "clone", "--quiet", "--mirror", "--filter=blob:none", URL(repository), tmp); err != nil {
		return "", fmt.Errorf("clone %s: %w", repository, err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return "", err
	}
	return dir, nil
}

func (c *Checker) lock(dir string) *sync.Mutex {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.locks == nil {
		c.locks = map[string]*sync.Mutex{}
	}
	if c.locks[dir] == nil {
		c.locks[dir] = &sync.Mutex{}
	}
	return c.locks[dir]
}

// resolve returns the full SHA of a commit named by a (possibly short) SHA.
func (c *Checker) resolve(ctx context.Context, dir, commit string) (string, error) {
	out, err := c.git(ctx, dir, "rev-parse", "--verify", "--quiet", strings.TrimSpace(commit)+"^{commit}")
	if err != nil {
		return "", fmt.Errorf("commit %s is not in the repository", commit)
	}
	return strings.TrimSpace(out), nil
}

// isAncestor reports whether a is an ancestor of (or is) b.
func (c *Checker) isAncestor(ctx context.Context, dir, a, b string) (bool, error) {
	_, err := c.git(ctx, dir, "merge-base", "--is-ancestor", a, b)
	var ee *exec.ExitError
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &ee) && ee.ExitCode() == 1:
		return false, nil
	}
	return false, err
}

func (c *Checker) git(ctx context.Context, dir string, args ...string) (string, error) {
	bin := c.Git
	if bin == "" {
		bin = "git"
	}
	if dir != "" {
		args = append([]string{"-C", dir}, args...)
	}
	cmd := exec.CommandContext(ctx, bin, args...) //nolint:gosec // git, with drover's own arguments
	cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0", "GIT_ASKPASS=true")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		if msg := strings.TrimSpace(stderr.String()); msg != "" {
			return "", fmt.Errorf("git %s: %w", msg, err)
		}
		return "", err
	}
	return string(out), nil
}
