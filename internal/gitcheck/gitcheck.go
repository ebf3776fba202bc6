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
	"regexp"
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

	mu      sync.Mutex
	locks   map[string]*sync.Mutex
	fetched map[string]time.Time
}

// refetchAfter is how long a fetched mirror answers without fetching
// again: a check asks about several commits and ranges at once.
const refetchAfter = 10 * time.Second

// shaRE is what a commit may be named by: a full or abbreviated SHA.
var shaRE = regexp.MustCompile(`^[0-9a-fA-F]{4,64}$`)

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
	// A range of another repository (a denylist that names none applies to
	// every commit parameter) holds none of this one's commits.
	from, known := c.known(ctx, dir, start)
	if !known {
		return false, nil
	}
	to, known := c.known(ctx, dir, end)
	if !known {
		return false, nil
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
	if repository == "" || strings.HasPrefix(repository, "-") {
		return "", fmt.Errorf("%q is not a repository", repository)
	}
	sum := sha256.Sum256([]byte(repository))
	dir := filepath.Join(c.Dir, hex.EncodeToString(sum[:8]))
	lock := c.lock(dir)
	lock.Lock()
	defer lock.Unlock()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if _, err := os.Stat(filepath.Join(dir, "HEAD")); err == nil {
		c.mu.Lock()
		fresh := time.Since(c.fetched[dir]) < refetchAfter
		c.mu.Unlock()
		if fresh {
			return dir, nil
		}
		if _, err := c.git(ctx, dir, "fetch", "--quiet", "--prune", "origin", "+refs/*:refs/*"); err != nil {
			return "", fmt.Errorf("fetch %s: %w", repository, err)
		}
		c.markFetched(dir)
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
	if _, err := c.git(ctx, "", "clone", "--quiet", "--mirror", "--filter=blob:none", "--", URL(repository), tmp); err != nil {
		return "", fmt.Errorf("clone %s: %w", repository, err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return "", err
	}
	c.markFetched(dir)
	return dir, nil
}

func (c *Checker) markFetched(dir string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fetched == nil {
		c.fetched = map[string]time.Time{}
	}
	c.fetched[dir] = time.Now()
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
	commit = strings.TrimSpace(commit)
	if !shaRE.MatchString(commit) {
		return "", fmt.Errorf("%q is not a commit SHA", commit)
	}
	out, err := c.git(ctx, dir, "rev-parse", "--verify", "--quiet", commit+"^{commit}")
	if err != nil {
		return "", fmt.Errorf("commit %s is not in the repository", commit)
	}
	return strings.TrimSpace(out), nil
}

// known returns the full SHA of commit and whether the repository has it.
func (c *Checker) known(ctx context.Context, dir, commit string) (string, bool) {
	sha, err := c.resolve(ctx, dir, commit)
	return sha, err == nil
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
	// No prompt for credentials, only plain transports (no ext:: helper
	// URLs), and a child of git holding its output cannot outlive ctx.
	cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0", "GIT_ASKPASS=true", "GIT_ALLOW_PROTOCOL=https:ssh:git:file")
	cmd.WaitDelay = 5 * time.Second
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
