package iacrun

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Limits of what Sync copies from one directory by default. The directory is
// read on the host that runs the tool, from a directory the service config
// names, so whoever may configure a service chooses it: these keep it from
// filling the data directory and from holding the sync for long.
const (
	// MaxBytes caps the total size of a directory's files.
	MaxBytes = 256 << 20
	// MaxEntries caps the files and directories of a directory.
	MaxEntries = 10000
	// maxDepth caps how deep directories nest (a symbolic link loop ends
	// here).
	maxDepth = 64
)

// Limits say where a source directory (a Terraform module, a Pulumi
// program), and every file copied from it, may lie (real paths, symbolic
// links resolved), how much may be copied, and which names belong to the
// tool rather than to the source.
type Limits struct {
	// Roots are the allowed roots; none: no directory is allowed.
	Roots []string
	// Exclude are directories nothing is copied from (the data directory).
	Exclude []string
	// MaxBytes and MaxEntries cap what is copied (0: the package's
	// MaxBytes and MaxEntries).
	MaxBytes   int64
	MaxEntries int
	// Owned are names at the top of the copy that belong to the tool: Sync
	// never copies them from the source and never deletes them from the
	// copy (a local backend's state, what the tool installed).
	Owned map[string]bool
	// OwnedUnlessCopied are names at the top that are copied when the
	// source has them, and else left to the tool (a dependency lock file).
	OwnedUnlessCopied map[string]bool
	// Skip are names never copied, at any depth (a directory, a file or a
	// link of that name: version control, the tool's own data).
	Skip map[string]bool
	// Noun names the directory in errors: "module", "program".
	Noun string
	// RootFlag is the flag of drover server and drover agent that allows a
	// root; errors name it.
	RootFlag string
}

// noun is what errors call the directory.
func (lim Limits) noun() string {
	if lim.Noun == "" {
		return "source"
	}
	return lim.Noun
}

// file is one regular file of the source.
type file struct {
	rel  string // slash-separated path below the source root
	path string // its resolved path on disk (symbolic links resolved when listed)
	mode fs.FileMode
	size int64
}

// Sync makes dst a copy of the directory at src: files that differ are
// rewritten, files the source no longer has are deleted (except what the
// tool owns, see Limits.Owned), and symbolic links are followed (a
// link to a directory is copied as a directory) when they lead to a place
// inside lim's roots. src itself must lie in one of them, and nothing may
// come from lim.Exclude. Files are streamed, so memory use does not grow
// with a file's size; a source beyond lim's size or entry caps, or holding
// a FIFO, socket or device, is refused before anything is copied. It
// returns a hash of the source's content (paths, executable bits and
// bytes), which changes exactly when the source does.
func Sync(src, dst string, lim Limits) (string, error) {
	if lim.MaxBytes <= 0 {
		lim.MaxBytes = MaxBytes
	}
	if lim.MaxEntries <= 0 {
		lim.MaxEntries = MaxEntries
	}
	resolved, err := lim.resolve(src)
	if err != nil {
		return "", err
	}
	files, err := list(src, resolved, lim)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dst, 0o750); err != nil {
		return "", err
	}
	h := sha256.New()
	keep := map[string]bool{}
	budget := lim.MaxBytes
	for _, f := range files {
		if err := copyFile(h, f, filepath.Join(dst, filepath.FromSlash(f.rel)), &budget, src, lim); err != nil {
			return "", err
		}
		keep[f.rel] = true
		for d := f.rel; ; {
			d = pathDir(d)
			if d == "" || keep[d] {
				break
			}
			keep[d] = true
		}
	}
	if err := prune(dst, keep, lim); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// pathError is an error about the service's path parameter, the directory
// src.
func (lim Limits) pathError(src, format string, args ...any) error {
	return fmt.Errorf("parameter path: %s directory %s: %s", lim.noun(), src, fmt.Sprintf(format, args...))
}

// resolve checks the directory src and returns its real path: a
// directory inside one of the roots, neither inside nor holding an
// excluded directory.
func (lim Limits) resolve(src string) (string, error) {
	resolved, err := filepath.EvalSymlinks(src)
	if err != nil {
		return "", fmt.Errorf("parameter path: %s directory: %w", lim.noun(), err)
	}
	info, err := os.Stat(resolved)
	if err != nil {
		return "", fmt.Errorf("parameter path: %s directory: %w", lim.noun(), err)
	}
	if !info.IsDir() {
		return "", lim.pathError(src, "not a directory")
	}
	if err := lim.Allowed(resolved); err != nil {
		shown := ""
		if resolved != filepath.Clean(src) {
			shown = " (" + resolved + " after symbolic links)"
		}
		return "", fmt.Errorf("parameter path: %s directory %s%s %w", lim.noun(), src, shown, err)
	}
	for _, x := range lim.Exclude {
		if Within(resolved, x) {
			return "", lim.pathError(src, "holds the data directory %s: give the directory of the %s alone", x, lim.noun())
		}
	}
	return resolved, nil
}

// Allowed checks that resolved (a real path) lies in a root and not in an
// excluded directory; the error completes a sentence naming the path.
func (lim Limits) Allowed(resolved string) error {
	for _, x := range lim.Exclude {
		if Within(x, resolved) {
			return fmt.Errorf("lies in the data directory %s", x)
		}
	}
	for _, r := range lim.Roots {
		if Within(r, resolved) {
			return nil
		}
	}
	if len(lim.Roots) == 0 {
		return fmt.Errorf("is not allowed: no %s directory is (allow one with %s DIR on the drover server, or agent, that runs the runtime)", lim.noun(), lim.RootFlag)
	}
	return fmt.Errorf("is outside the allowed %s directories (%s): allow it with %s DIR on the drover server, or agent, that runs the runtime", lim.noun(), strings.Join(lim.Roots, ", "), lim.RootFlag)
}

// Within reports whether p is root or lies under it (both clean and
// absolute).
func Within(root, p string) bool {
	rel, err := filepath.Rel(root, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

// pathDir is path.Dir for relative slash paths, "" at the top.
func pathDir(rel string) string {
	i := strings.LastIndexByte(rel, '/')
	if i < 0 {
		return ""
	}
	return rel[:i]
}

// list lists the regular files of the directory at src (resolved is its
// real path), sorted, following symbolic links that stay in lim's roots;
// it refuses special files and a directory beyond lim's caps, so nothing
// is copied from it.
func list(src, resolved string, lim Limits) ([]file, error) {
	var (
		files   []file
		entries int
		total   int64
	)
	tooMany := func() error {
		return lim.pathError(src, "holds more than %d files and directories, the most drover copies of a %s: keep only the %s in it", lim.MaxEntries, lim.noun(), lim.noun())
	}
	// walk reads the directory dir (a real path; rel below the source).
	// Every path it looks at is dir and a name: only that name can be a
	// symbolic link.
	var walk func(dir, rel string, depth int) error
	walk = func(dir, rel string, depth int) error {
		if depth > maxDepth {
			return lim.pathError(src, "%s: directories nested too deep (a symbolic link loop?)", rel)
		}
		list, err := os.ReadDir(dir)
		if err != nil {
			return fmt.Errorf("parameter path: %w", err)
		}
		for _, e := range list {
			name := e.Name()
			r := name
			if rel != "" {
				r = rel + "/" + name
			}
			if rel == "" && lim.Owned[name] || lim.Skip[name] {
				// Skipped by name at any depth, also as links or files.
				continue
			}
			if entries++; entries > lim.MaxEntries {
				return tooMany()
			}
			p := filepath.Join(dir, name)
			info, err := os.Lstat(p)
			if err != nil {
				return fmt.Errorf("parameter path: %w", err)
			}
			if info.Mode()&fs.ModeSymlink != 0 {
				if p, err = filepath.EvalSymlinks(p); err != nil {
					return fmt.Errorf("parameter path: %w", err)
				}
				if err := lim.Allowed(p); err != nil {
					return lim.pathError(src, "%s is a symbolic link to %s, which %v", r, p, err)
				}
				if info, err = os.Stat(p); err != nil {
					return fmt.Errorf("parameter path: %w", err)
				}
			}
			switch {
			case info.IsDir():
				if err := walk(p, r, depth+1); err != nil {
					return err
				}
			case info.Mode().IsRegular():
				if total += info.Size(); total > lim.MaxBytes {
					return tooBig(src, lim)
				}
				files = append(files, file{rel: r, path: p, mode: info.Mode().Perm(), size: info.Size()})
			default:
				return lim.pathError(src, "%s is %s: only regular files, directories and symbolic links to them can be copied", r, describeMode(info.Mode()))
			}
		}
		return nil
	}
	if err := walk(resolved, "", 0); err != nil {
		return nil, err
	}
	slices.SortFunc(files, func(a, b file) int { return strings.Compare(a.rel, b.rel) })
	return files, nil
}

// tooBig is the error for a source whose files are larger than lim allows.
func tooBig(src string, lim Limits) error {
	return lim.pathError(src, "its files add up to more than %d MiB, the most drover copies of a %s: keep only the %s in it", lim.MaxBytes>>20, lim.noun(), lim.noun())
}

// describeMode names a file type that is not copied.
func describeMode(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "not a regular file"
}

// copyFile adds f to the content hash h and makes dst hold the same
// bytes, unless it does already (with the same executable bits). It reads
// at most *budget bytes, which it then lowers by what it read. The file is
// streamed; it is read twice when it changed.
func copyFile(h io.Writer, f file, dst string, budget *int64, src string, lim Limits) error {
	in, err := openRegular(f.path)
	if err != nil {
		return lim.pathError(src, "%s: %v", f.rel, err)
	}
	defer func() { _ = in.Close() }()
	info, err := in.Stat()
	if err != nil {
		return fmt.Errorf("parameter path: %w", err)
	}
	if !info.Mode().IsRegular() {
		return lim.pathError(src, "%s is %s: only regular files, directories and symbolic links to them can be copied", f.rel, describeMode(info.Mode()))
	}
	size := info.Size()
	if size > *budget {
		return tooBig(src, lim)
	}
	*budget -= size
	changed := func() error {
		return lim.pathError(src, "%s changed while it was copied (the next sync copies it again)", f.rel)
	}
	// The content hash is the one of paths, executable bits, sizes and the
	// bytes themselves, as when files were read whole.
	fmt.Fprintf(h, "%s\x00%d\x00%d\x00", f.rel, info.Mode().Perm()&0o111, size)
	fh := sha256.New()
	if n, err := io.Copy(io.MultiWriter(h, fh), io.LimitReader(in, size+1)); err != nil {
		return fmt.Errorf("parameter path: %w", err)
	} else if n != size {
		return changed()
	}
	sum := fh.Sum(nil)
	mode := 0o640 | info.Mode().Perm()&0o110 // readable by the group, executable if it was
	if same, err := holds(dst, mode, size, sum); err != nil || same {
		return err
	}
	if _, err := in.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("parameter path: %w", err)
	}
	return writeStream(dst, mode, size, sum, in, changed)
}

// holds reports whether path is a regular file of mode with size bytes
// whose hash is sum.
func holds(path string, mode fs.FileMode, size int64, sum []byte) (bool, error) {
	info, err := os.Lstat(path)
	if err != nil || !info.Mode().IsRegular() || info.Mode().Perm() != mode || info.Size() != size {
		return false, nil //nolint:nilerr // a missing or different file is rewritten
	}
	f, err := os.Open(path)
	if err != nil {
		return false, nil //nolint:nilerr // rewritten
	}
	defer func() { _ = f.Close() }()
	h := sha256.New()
	if _, err := io.Copy(h, io.LimitReader(f, size+1)); err != nil {
		return false, nil //nolint:nilerr // rewritten
	}
	return bytes.Equal(h.Sum(nil), sum), nil
}

// writeStream replaces path with the size bytes of r, whose hash must be
// sum (else changed's error), and mode, replacing whatever is in the way:
// it writes a temporary file beside path and renames it over path, so a
// sync stopped at any instant leaves a whole file (an unfinished temporary
// file is deleted by the next sync, as a file the source does not have).
func writeStream(path string, mode fs.FileMode, size int64, sum []byte, r io.Reader, changed func() error) (err error) {
	if info, err := os.Lstat(path); err == nil && (info.IsDir() || !info.Mode().IsRegular()) {
		if err := os.RemoveAll(path); err != nil {
			return err
		}
	}
	dir := filepath.Dir(path)
	if info, err := os.Lstat(dir); err == nil && !info.IsDir() {
		if err := os.Remove(dir); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(f.Name())
		}
	}()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), io.LimitReader(r, size+1))
	if err != nil {
		return err
	}
	if n != size || !bytes.Equal(h.Sum(nil), sum) {
		return changed()
	}
	if err = f.Chmod(mode); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// ReadOwned reads the file name at the top of the source directory src
// that Sync leaves to the tool (a Limits.Owned name), under the checks
// every copied file gets: after symbolic links it lies in a root and not
// in an excluded directory, it is a regular file (a FIFO does not block),
// and it holds at most limit bytes. A missing file is nil, nil.
func (lim Limits) ReadOwned(src, name string, limit int64) ([]byte, error) {
	path := filepath.Join(src, name)
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	resolved, err := filepath.EvalSymlinks(path)
	if err != nil {
		return nil, lim.pathError(src, "%s: %v", name, err)
	}
	if err := lim.Allowed(resolved); err != nil {
		return nil, lim.pathError(src, "%s (%s after symbolic links) %v", name, resolved, err)
	}
	f, err := openRegular(resolved)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	info, err := f.Stat()
	switch {
	case err != nil:
		return nil, err
	case !info.Mode().IsRegular():
		return nil, lim.pathError(src, "%s is %s", name, describeMode(info.Mode()))
	case info.Size() > limit:
		return nil, lim.pathError(src, "%s is larger than %d bytes", name, limit)
	}
	return io.ReadAll(io.LimitReader(f, limit+1))
}

// openRegular opens path for reading without blocking on a FIFO (one
// swapped in after the listing); the caller checks what it opened.
func openRegular(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|openNonblock, 0)
}

// prune deletes what dst has beyond keep (slash paths of files and their
// directories), sparing the tool's own files at the top (lim.Owned, and
// lim.OwnedUnlessCopied when not copied).
func prune(dst string, keep map[string]bool, lim Limits) error {
	var walk func(dir, rel string) error
	walk = func(dir, rel string) error {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		for _, e := range entries {
			name := e.Name()
			r := name
			if rel != "" {
				r = rel + "/" + name
			}
			if rel == "" && (lim.Owned[name] || lim.OwnedUnlessCopied[name] && !keep[name]) {
				continue
			}
			p := filepath.Join(dir, name)
			if !keep[r] {
				if err := os.RemoveAll(p); err != nil {
					return err
				}
				continue
			}
			if e.IsDir() {
				if err := walk(p, r); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return walk(dst, "")
}

// HashStrings hashes a list of strings unambiguously.
func HashStrings(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%d:%s\x00", len(p), p)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// DefaultRoots are the roots when none is configured: the working directory
// of the process, so that a relative path parameter works as documented;
// none when that is the file system's root (a service manager's default),
// which would allow every directory. flag names the roots' flag in errors.
func DefaultRoots(flag string) ([]string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	roots, err := ResolveRoots([]string{wd}, flag)
	if err != nil {
		return nil, err
	}
	if filepath.Dir(roots[0]) == roots[0] {
		return nil, nil
	}
	return roots, nil
}

// ResolveRoots makes dirs (the values of flag) absolute with their symbolic
// links resolved, and checks that each is a directory.
func ResolveRoots(dirs []string, flag string) ([]string, error) {
	out := make([]string, 0, len(dirs))
	for _, d := range dirs {
		abs, err := filepath.Abs(d)
		if err == nil {
			abs, err = filepath.EvalSymlinks(abs)
		}
		var info os.FileInfo
		if err == nil {
			info, err = os.Stat(abs)
		}
		if err == nil && !info.IsDir() {
			err = errors.New("not a directory")
		}
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", flag, d, err)
		}
		out = append(out, abs)
	}
	return out, nil
}

// ExcludeDirs returns dirs ("" skipped) absolute with their symbolic links
// resolved: the data directories no source may lie in or hold.
func ExcludeDirs(dirs ...string) ([]string, error) {
	var out []string
	for _, d := range dirs {
		if d == "" {
			continue
		}
		resolved, err := filepath.Abs(d)
		if err == nil {
			resolved, err = filepath.EvalSymlinks(resolved)
		}
		if err != nil {
			return nil, fmt.Errorf("data directory: %w", err)
		}
		out = append(out, resolved)
	}
	return out, nil
}
