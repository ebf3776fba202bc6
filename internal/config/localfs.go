package config

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// Local references (kubernetesConfig.local, helm charts and values files) are
// read on the machine that runs the CLI, from configs that may come from
// someone else (a pull request). They are therefore confined:
//   - to the config tree: the directory given on the command line (`DIR`,
//     `DIR/...`, or a single file's directory), or the root of the git
//     repository holding it (the directory with `.git`), so that configs may
//     reference manifests elsewhere in their own repository;
//   - plus any directory given with --allow-path.
//
// What kustomize reads for a KUSTOMIZE local.path follows the same rules, and
// its remote references (http(s) URLs kustomize would fetch, git
// repositories it would clone) are refused unless an --allow-path entry that
// is a URL begins them (allowsRemote); the files of an allowed git
// repository are read from the clone kustomize makes of it.
//
// Containment is checked after following symlinks, for the referenced path and
// for every file read under it. Only regular files are read, each at most
// maxFileBytes; devices, FIFOs and sockets are refused without being opened
// for reading in a way that could block.

const (
	// maxFileBytes caps one referenced file, as maxTreeBytes caps a subPath tree.
	maxFileBytes = maxTreeBytes
	// maxPathBytes is PATH_MAX: a longer reference is refused without being
	// echoed back.
	maxPathBytes = 4096
)

var (
	// ErrOutsideTree is returned for a local reference that resolves outside
	// the config tree and every --allow-path directory.
	ErrOutsideTree = errors.New("resolves outside the config tree")
	// ErrNotRegular is returned for a local reference to a device, FIFO,
	// socket or other file that is not a regular file.
	ErrNotRegular = errors.New("not a regular file")
)

// LoadOptions tune how configs are loaded.
type LoadOptions struct {
	// AllowPaths are directories outside the config tree that local references
	// may read, and remote references (a URL, git::URL or user@host:path)
	// that kustomize may fetch: each allows those it begins (the CLI's
	// --allow-path).
	AllowPaths []string
}

// confinement is the set of directories local references of one config file
// may read: its config tree first, then the allowed paths. Every directory is
// absolute and free of symlinks; the allowed remote references kustomize may
// fetch (remoteEntry) are among them as written.
type confinement struct {
	roots []string
}

// allowedRoots resolves the --allow-path directories, and checks the
// remote references among them.
func allowedRoots(paths []string) ([]string, error) {
	out := make([]string, 0, len(paths))
	for _, p := range paths {
		if remoteEntry(p) {
			if remoteHost(p) == "" {
				return nil, fmt.Errorf("--allow-path %s: a remote reference must name its host, e.g. https://HOST/PATH", p)
			}
			out = append(out, p)
			continue
		}
		resolved, err := filepath.Abs(p)
		if err == nil {
			resolved, err = filepath.EvalSymlinks(resolved)
		}
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && strings.HasPrefix(strings.ToLower(p), "github.com/") {
				return nil, fmt.Errorf("--allow-path %s: %w (to allow a remote reference, give its URL: https://%s)", p, err, p)
			}
			return nil, fmt.Errorf("--allow-path %s: %w", p, err)
		}
		out = append(out, resolved)
	}
	return out, nil
}

// remoteEntry reports whether an --allow-path entry is a remote reference
// rather than a directory: a URL (SCHEME://...), git::URL, or SCP-style
// user@host:path.
func remoteEntry(s string) bool {
	if strings.Contains(s, "://") || len(s) >= 5 && strings.EqualFold(s[:5], "git::") {
		return true
	}
	at := strings.IndexByte(s, '@')
	return at > 0 && !strings.ContainsAny(s[:at], `/\:`) && strings.IndexByte(s[at:], ':') > 1
}

// normRemote is a remote reference as allowsRemote compares it: without
// kustomize's git:: prefix, github.com/ shorthand as its https:// URL, and
// the scheme in lower case.
func normRemote(s string) string {
	if len(s) >= 5 && strings.EqualFold(s[:5], "git::") {
		s = s[5:]
	}
	if len(s) > len("github.com/") && strings.EqualFold(s[:len("github.com")], "github.com") && (s[len("github.com")] == '/' || s[len("github.com")] == ':') {
		s = "https://github.com/" + s[len("github.com/"):]
	}
	if i := strings.Index(s, "://"); i > 0 {
		s = strings.ToLower(s[:i]) + s[i:]
	}
	return s
}

// remoteHost is the host (with user and port) a remote reference names,
// "" when it names none.
func remoteHost(s string) string {
	s = normRemote(s)
	if i := strings.Index(s, "://"); i >= 0 {
		rest := s[i+3:]
		if j := strings.IndexAny(rest, "/?#"); j >= 0 {
			rest = rest[:j]
		}
		return rest
	}
	if at := strings.IndexByte(s, '@'); at > 0 {
		if colon := strings.IndexByte(s[at:], ':'); colon > 1 {
			return s[at+1 : at+colon]
		}
	}
	return ""
}

// allowsRemote reports whether the --allow-path entry allows the remote
// reference ref: ref is the entry, or continues it after a "/", "?" or "#"
// (or the entry ends with "/", or with the ":" of git@host:), so https://host/org allows
// https://host/org/repo//base?ref=v1 but neither https://host/org-evil nor
// https://host/org.evil.example. A reference with "." or ".." segments, or
// a backslash, is never allowed: where it leads is for the remote end to
// resolve.
func allowsRemote(entry, ref string) bool {
	e, r := normRemote(entry), normRemote(ref)
	if e == "" || strings.ContainsRune(r, '\\') || hasDotSegment(r) || !strings.HasPrefix(r, e) {
		return false
	}
	// A ":" ends the host of an SCP-style entry (git@host:), but in a URL it
	// could start a port or end a user name (https://host:@evil.example).
	if r == e || strings.HasSuffix(e, "/") || strings.HasSuffix(e, ":") && !strings.Contains(e, "://") {
		return true
	}
	switch r[len(e)] {
	case '/', '?', '#':
		return true
	}
	return false
}

// hasDotSegment reports whether the path of a remote reference (before its
// query) has a "." or ".." segment, also percent-encoded.
func hasDotSegment(r string) bool {
	if i := strings.IndexAny(r, "?#"); i >= 0 {
		r = r[:i]
	}
	if i := strings.Index(r, "://"); i >= 0 {
		r = r[i+3:]
	}
	for _, seg := range strings.FieldsFunc(r, func(c rune) bool { return c == '/' || c == ':' }) {
		u, err := url.PathUnescape(seg)
		if err != nil || u == "." || u == ".." {
			return true
		}
	}
	return false
}

// treeRoot is the config tree of a command-line argument: the directory it
// names (DIR or DIR/...) or a file's directory, widened to the root of the git
// repository holding it.
func treeRoot(arg string) (string, error) {
	dir, recursive := strings.CutSuffix(arg, "...")
	if recursive {
		dir = strings.TrimSuffix(dir, string(filepath.Separator))
		if dir == "" {
			dir = "."
		}
	} else if st, err := os.Stat(arg); err != nil || !st.IsDir() {
		dir = filepath.Dir(arg)
	}
	resolved, err := realPath(dir)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", arg, err)
	}
	if repo := gitRoot(resolved); repo != "" {
		return repo, nil
	}
	return resolved, nil
}

// gitRoot returns the nearest directory at or above dir that holds `.git`
// (a directory, or a file in a worktree), or "".
func gitRoot(dir string) string {
	for d := dir; ; {
		if _, err := os.Lstat(filepath.Join(d, ".git")); err == nil {
			return d
		}
		parent := filepath.Dir(d)
		if parent == d {
			return ""
		}
		d = parent
	}
}

// realPath makes p absolute and resolves its symlinks; the part of p that does
// not exist (yet) is appended as written, so a missing file can still be
// placed inside or outside a tree.
func realPath(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	resolved, err := filepath.EvalSymlinks(abs)
	if err == nil {
		return resolved, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	parent := filepath.Dir(abs)
	if parent == abs {
		return abs, nil
	}
	resolved, err = realPath(parent)
	if err != nil {
		return "", err
	}
	return filepath.Join(resolved, filepath.Base(abs)), nil
}

// within reports whether p is root or lies under it (both clean and absolute).
func within(root, p string) bool {
	rel, err := filepath.Rel(root, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

// check returns p's real path, or an error when it lies outside every root.
// written is the reference as the config wrote it, for the message.
func (c *confinement) check(written, p string) (string, error) {
	if len(written) > maxPathBytes {
		return "", fmt.Errorf("path is %d bytes long: at most %d are allowed", len(written), maxPathBytes)
	}
	resolved, err := realPath(p)
	if err != nil {
		return "", err
	}
	for _, r := range c.roots {
		if !remoteEntry(r) && within(r, resolved) {
			return resolved, nil
		}
	}
	what := "path " + written
	if filepath.IsAbs(written) {
		what = "absolute path " + written
	}
	if abs, err := filepath.Abs(p); err == nil && abs != resolved {
		what += " (" + resolved + ")"
	}
	return "", fmt.Errorf("%s %w %s (pass --allow-path to allow it)", what, ErrOutsideTree, c.roots[0])
}

// join places a reference written in a config file in baseDir (the file's
// directory). An absolute reference is kept as it is, never rebased; check
// then decides whether it may be read.
func join(baseDir, p string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(baseDir, p)
}

// describeMode names a non-regular file type for messages.
func describeMode(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "not a regular file"
}

// readRegular reads one referenced file: a regular file (after symlinks) of
// at most maxFileBytes. It stats before opening and opens without blocking, so
// a FIFO (even one swapped in after the stat) cannot hang the CLI.
func readRegular(p string) ([]byte, error) {
	st, err := os.Stat(p)
	if err != nil {
		return nil, err
	}
	if err := regularFile(p, st); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(p, os.O_RDONLY|openNonblock, 0)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	if st, err = f.Stat(); err != nil {
		return nil, err
	}
	if err := regularFile(p, st); err != nil {
		return nil, err
	}
	return readCapped(p, f, maxFileBytes)
}

func regularFile(p string, st fs.FileInfo) error {
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s is %s, %w: only regular files can be referenced", p, describeMode(st.Mode()), ErrNotRegular)
	}
	if st.Size() > maxFileBytes {
		return fmt.Errorf("%s is larger than %d MiB", p, maxFileBytes>>20)
	}
	return nil
}

// readCapped reads r to the end, refusing more than limit bytes.
func readCapped(name string, r io.Reader, limit int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s is larger than %d MiB", name, limit>>20)
	}
	return data, nil
}

// readFile reads a referenced file after checking it lies in the tree.
func (c *confinement) readFile(written, p string) ([]byte, error) {
	if _, err := c.check(written, p); err != nil {
		return nil, err
	}
	return readRegular(p)
}

// treeWalk reads a subPath or chart directory.
type treeWalk struct {
	c          *confinement
	dir        string
	inc, exc   []string
	files      map[string]string
	total      int
	dirsWalked int
}

// walk reads the directory p (rel to the tree's top; real is its real path,
// stack the real paths of the directories above it). A symlink to a directory
// is followed when its target lies in the tree; one that leads back to a
// directory being walked (a loop such as `up -> ..`) is skipped.
func (w *treeWalk) walk(p, rel string, stack []string) error {
	w.dirsWalked++
	if w.dirsWalked > maxTreeFiles {
		return w.tooLarge()
	}
	entries, err := os.ReadDir(p)
	if err != nil {
		return err
	}
	resolved := stack[len(stack)-1]
	for _, e := range entries {
		name := e.Name()
		ep, erel, ereal := filepath.Join(p, name), path.Join(rel, name), filepath.Join(resolved, name)
		isDir := e.IsDir()
		if e.Type()&fs.ModeSymlink != 0 {
			st, err := os.Stat(ep)
			if err != nil {
				if w.filtered(erel) {
					continue
				}
				return err
			}
			isDir = st.IsDir()
			if !isDir && w.filtered(erel) {
				continue // an excluded link need not lead anywhere allowed
			}
			if ereal, err = w.c.check(ep, ep); err != nil {
				return err
			}
			if isDir && loops(stack, ereal) {
				continue
			}
		}
		if isDir {
			if name == ".git" {
				continue
			}
			if err := w.walk(ep, erel, append(stack[:len(stack):len(stack)], ereal)); err != nil {
				return err
			}
			continue
		}
		if w.filtered(erel) {
			continue
		}
		data, err := readRegular(ep)
		if err != nil {
			return err
		}
		w.total += len(data)
		if len(w.files) >= maxTreeFiles || w.total > maxTreeBytes {
			return w.tooLarge()
		}
		w.files[erel] = string(data)
	}
	return nil
}

// filtered reports whether the file rel is left out by the patterns.
func (w *treeWalk) filtered(rel string) bool {
	return (len(w.inc) > 0 && !matchAny(w.inc, rel)) || matchAny(w.exc, rel)
}

func (w *treeWalk) tooLarge() error {
	return fmt.Errorf("%s holds more than %d files or %d MiB; narrow it with includePatterns/excludePatterns", w.dir, maxTreeFiles, maxTreeBytes>>20)
}

// loops reports whether following a link to target would walk a directory
// that is already being walked (target is it or one of its parents).
func loops(stack []string, target string) bool {
	for _, s := range stack {
		if within(target, s) {
			return true
		}
	}
	return false
}

// maxConfigBytes caps a config file named on the command line, like the
// server's request body limit (a larger config could not be applied anyway).
const maxConfigBytes = 64 << 20

// readConfigFile reads a config file the user named (a pipe is fine there),
// at most maxConfigBytes, so `drover validate /dev/zero` fails fast.
func readConfigFile(p string) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	return readCapped(p, f, maxConfigBytes)
}

// kustomizeRead is asked before kustomize reads a file for a kustomization
// (an absolute path): the same rules as for a file named in local.path,
// widened to the clones of allowed git repositories. It is also asked about
// each remote reference (a URL or git repository, as written), which an
// --allow-path entry must allow.
func (c *confinement) kustomizeRead(p string) error {
	if !filepath.IsAbs(p) {
		return c.allowRemote(p)
	}
	if _, err := c.check(p, p); err != nil && !c.inClone(p) {
		return err
	}
	st, err := os.Stat(p)
	if err != nil {
		return nil //nolint:nilerr // a file that cannot be stat-ed is kustomize's to report, with its own context
	}
	return regularFile(p, st)
}

// allowRemote refuses the remote reference ref unless an --allow-path entry
// allows it.
func (c *confinement) allowRemote(ref string) error {
	for _, r := range c.roots {
		if remoteEntry(r) && allowsRemote(r, ref) {
			return nil
		}
	}
	if len(ref) > maxPathBytes {
		return fmt.Errorf("remote resource of %d bytes is refused", len(ref))
	}
	return fmt.Errorf("remote resource %q is refused: kustomize would fetch it from the network (pass --allow-path %s, or a prefix of it, to allow it; or add its files to the config tree)", ref, shellWord(ref))
}

// inClone reports whether p lies, after symlinks, in a clone kustomize made
// of a git repository (a kustomize-* directory in the temporary directory),
// when --allow-path allows some remote reference: the files of an allowed
// git base. A link in the clone that leads out of it is refused like any
// other.
func (c *confinement) inClone(p string) bool {
	allowed := false
	for _, r := range c.roots {
		allowed = allowed || remoteEntry(r)
	}
	if !allowed {
		return false
	}
	resolved, err := realPath(p)
	if err != nil {
		return false
	}
	tmp, err := realPath(os.TempDir())
	if err != nil {
		return false
	}
	rel, err := filepath.Rel(tmp, resolved)
	if err != nil || !within(tmp, resolved) {
		return false
	}
	clone, rest, ok := strings.Cut(rel, string(filepath.Separator))
	return ok && rest != "" && strings.HasPrefix(clone, "kustomize-")
}

// shellWord quotes s for a shell when it needs it.
func shellWord(s string) string {
	safe := s != ""
	for _, r := range s {
		safe = safe && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("@%+=:,./_~-", r))
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
