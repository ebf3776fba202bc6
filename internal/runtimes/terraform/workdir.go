package terraform

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Names in the module copy that belong to terraform, not to the module:
// syncModule never copies them from the source and never deletes them from
// the copy. The local backend's state therefore lives in the copy and
// survives every sync.
var terraformOwned = map[string]bool{
	".terraform":                   true, // providers, modules, backend config
	"terraform.tfstate":            true,
	"terraform.tfstate.backup":     true,
	".terraform.tfstate.lock.info": true,
	"terraform.tfstate.d":          true, // workspaces of the local backend
}

// lockFile is the dependency lock file: copied when the module has one, left
// to terraform init otherwise.
const lockFile = ".terraform.lock.hcl"

// skipDir reports whether an entry of the module source is never copied, at
// any depth (a directory, a file or a link of that name): version control
// and terraform's own data.
func skipDir(name string) bool {
	return name == ".git" || name == ".terraform"
}

// Limits of what syncModule copies from one module directory. The module is
// read on the host that runs terraform, from a directory the service config
// names, so whoever may configure a service chooses it: these keep a module
// from filling the data directory and from holding the sync for long.
const (
	// MaxModuleBytes caps the total size of a module's files.
	MaxModuleBytes = 256 << 20
	// MaxModuleEntries caps the files and directories of a module.
	MaxModuleEntries = 10000
	// maxModuleDepth caps how deep directories nest (a symbolic link loop
	// ends here).
	maxModuleDepth = 64
)

// ModuleRootFlag is the flag of drover server and drover agent that allows a
// directory for module paths; errors name it.
const ModuleRootFlag = "--program-root"

// moduleLimits says where a module, and every file copied from it, may lie
// (real paths, symbolic links resolved) and how much may be copied.
type moduleLimits struct {
	roots      []string // the allowed module roots; none: no module is allowed
	exclude    []string // nothing is copied from these (the data directory)
	maxBytes   int64
	maxEntries int
}

// moduleFile is one regular file of the module source.
type moduleFile struct {
	rel  string // slash-separated path below the module root
	path string // its resolved path on disk (symbolic links resolved when listed)
	mode fs.FileMode
	size int64
}

// syncModule makes dst a copy of the module at src: files that differ are
// rewritten, files the source no longer has are deleted (except what
// terraform owns, see terraformOwned), and symbolic links are followed (a
// link to a directory is copied as a directory) when they lead to a place
// inside lim's roots. src itself must lie in one of them, and nothing may
// come from lim.exclude. Files are streamed, so memory use does not grow
// with a file's size; a module beyond lim's size or entry caps, or holding
// a FIFO, socket or device, is refused before anything is copied. It
// returns a hash of the module's content (paths, executable bits and
// bytes), which changes exactly when the module does.
func syncModule(src, dst string, lim moduleLimits) (string, error) {
	resolved, err := lim.resolve(src)
	if err != nil {
		return "", err
	}
	files, err := listModule(src, resolved, lim)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dst, 0o750); err != nil {
		return "", err
	}
	h := sha256.New()
	keep := map[string]bool{}
	budget := lim.maxBytes
	for _, f := range files {
		if err := copyModuleFile(h, f, filepath.Join(dst, filepath.FromSlash(f.rel)), &budget, src, lim); err != nil {
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
	if err := prune(dst, keep); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// pathError is an error about the service's path parameter, the module
// directory src.
func pathError(src, format string, args ...any) error {
	return fmt.Errorf("parameter path: module directory %s: %s", src, fmt.Sprintf(format, args...))
}

// resolve checks the module directory src and returns its real path: a
// directory inside one of the roots, neither inside nor holding an
// excluded directory.
func (lim moduleLimits) resolve(src string) (string, error) {
	resolved, err := filepath.EvalSymlinks(src)
	if err != nil {
		return "", fmt.Errorf("parameter path: module directory: %w", err)
	}
	info, err := os.Stat(resolved)
	if err != nil {
		return "", fmt.Errorf("parameter path: module directory: %w", err)
	}
	if !info.IsDir() {
		return "", pathError(src, "not a directory")
	}
	if err := lim.allowed(resolved); err != nil {
		shown := ""
		if resolved != filepath.Clean(src) {
			shown = " (" + resolved + " after symbolic links)"
		}
		return "", fmt.Errorf("parameter path: module directory %s%s %w", src, shown, err)
	}
	for _, x := range lim.exclude {
		if within(resolved, x) {
			return "", pathError(src, "holds the data directory %s: give the directory of the module alone", x)
		}
	}
	return resolved, nil
}

// allowed checks that resolved (a real path) lies in a root and not in an
// excluded directory; the error completes a sentence naming the path.
func (lim moduleLimits) allowed(resolved string) error {
	for _, x := range lim.exclude {
		if within(x, resolved) {
			return fmt.Errorf("lies in the data directory %s", x)
		}
	}
	for _, r := range lim.roots {
		if within(r, resolved) {
			return nil
		}
	}
	if len(lim.roots) == 0 {
		return fmt.Errorf("is not allowed: no module directory is (allow one with %s DIR on the drover server, or agent, that runs the runtime)", ModuleRootFlag)
	}
	return fmt.Errorf("is outside the allowed module directories (%s): allow it with %s DIR on the drover server, or agent, that runs the runtime", strings.Join(lim.roots, ", "), ModuleRootFlag)
}

// within reports whether p is root or lies under it (both clean and
// absolute).
func within(root, p string) bool {
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

// listModule lists the regular files of the module at src (resolved is its real
// path), sorted, following symbolic links that stay in lim's roots; it
// refuses special files and a module beyond lim's caps, so nothing is
// copied from it.
func listModule(src, resolved string, lim moduleLimits) ([]moduleFile, error) {
	var (
		files   []moduleFile
		entries int
		total   int64
	)
	tooMany := func() error {
		return pathError(src, "holds more than %d files and directories, the most drover copies of a module: keep only the module in it", lim.maxEntries)
	}
	// walk reads the directory dir (a real path; rel below the module).
	// Every path it looks at is dir and a name: only that name can be a
	// symbolic link.
	var walk func(dir, rel string, depth int) error
	walk = func(dir, rel string, depth int) error {
		if depth > maxModuleDepth {
			return pathError(src, "%s: directories nested too deep (a symbolic link loop?)", rel)
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
			if rel == "" && terraformOwned[name] || skipDir(name) {
				// .git and .terraform are skipped by name at any depth,
				// also as links or files.
				continue
			}
			if entries++; entries > lim.maxEntries {
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
				if err := lim.allowed(p); err != nil {
					return pathError(src, "%s is a symbolic link to %s, which %v", r, p, err)
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
				if total += info.Size(); total > lim.maxBytes {
					return tooBig(src, lim)
				}
				files = append(files, moduleFile{rel: r, path: p, mode: info.Mode().Perm(), size: info.Size()})
			default:
				return pathError(src, "%s is %s: only regular files, directories and symbolic links to them can be copied", r, describeMode(info.Mode()))
			}
		}
		return nil
	}
	if err := walk(resolved, "", 0); err != nil {
		return nil, err
	}
	slices.SortFunc(files, func(a, b moduleFile) int { return strings.Compare(a.rel, b.rel) })
	return files, nil
}

// tooBig is the error for a module whose files are larger than lim allows.
func tooBig(src string, lim moduleLimits) error {
	return pathError(src, "its files add up to more than %d MiB, the most drover copies of a module: keep only the module in it", lim.maxBytes>>20)
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

// copyModuleFile adds f to the module hash h and makes dst hold the same
// bytes, unless it does already (with the same executable bits). It reads
// at most *budget bytes, which it then lowers by what it read. The file is
// streamed; it is read twice when it changed.
func copyModuleFile(h io.Writer, f moduleFile, dst string, budget *int64, src string, lim moduleLimits) error {
	in, err := openRegular(f.path)
	if err != nil {
		return pathError(src, "%s: %v", f.rel, err)
	}
	defer func() { _ = in.Close() }()
	info, err := in.Stat()
	if err != nil {
		return fmt.Errorf("parameter path: %w", err)
	}
	if !info.Mode().IsRegular() {
		return pathError(src, "%s is %s: only regular files, directories and symbolic links to them can be copied", f.rel, describeMode(info.Mode()))
	}
	size := info.Size()
	if size > *budget {
		return tooBig(src, lim)
	}
	*budget -= size
	changed := func() error {
		return pathError(src, "%s changed while it was copied (the next sync copies it again)", f.rel)
	}
	// The module hash is the one of paths, executable bits, sizes and the
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
// file is deleted by the next sync, as a file the module does not have).
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

// openRegular opens path for reading without blocking on a FIFO (one
// swapped in after the listing); the caller checks what it opened.
func openRegular(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|openNonblock, 0)
}

// prune deletes what dst has beyond keep (slash paths of files and their
// directories), sparing terraform's own files at the top.
func prune(dst string, keep map[string]bool) error {
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
			if rel == "" && (terraformOwned[name] || name == lockFile && !keep[lockFile]) {
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

// hashStrings hashes a list of strings unambiguously.
func hashStrings(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%d:%s\x00", len(p), p)
	}
	return hex.EncodeToString(h.Sum(nil))
}
