package terraform

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/drover-dev/drover/internal/atomicfile"
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

// skipDir reports whether a directory of the module source is never copied
// at any depth: version control and terraform's own data.
func skipDir(name string) bool {
	return name == ".git" || name == ".terraform"
}

// moduleFile is one regular file of the module source.
type moduleFile struct {
	rel  string // slash-separated path below the module root
	mode fs.FileMode
}

// syncModule makes dst a copy of the module at src: files that differ are
// rewritten, files the source no longer has are deleted (except what
// terraform owns, see terraformOwned), and symbolic links are followed (a
// link to a directory is copied as a directory). It returns a hash of the
// module's content (paths, executable bits and bytes), which changes
// exactly when the module does.
func syncModule(src, dst string) (string, error) {
	info, err := os.Stat(src)
	if err != nil {
		return "", fmt.Errorf("module path: %w", err)
	}
	if !info.IsDir() {
		return "", fmt.Errorf("module path %s is not a directory", src)
	}
	files, err := listModule(src)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dst, 0o750); err != nil {
		return "", err
	}
	h := sha256.New()
	keep := map[string]bool{}
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(src, filepath.FromSlash(f.rel)))
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s\x00%d\x00%d\x00", f.rel, f.mode&0o111, len(data))
		h.Write(data)
		keep[f.rel] = true
		for d := f.rel; ; {
			d = pathDir(d)
			if d == "" || keep[d] {
				break
			}
			keep[d] = true
		}
		if err := writeIfChanged(filepath.Join(dst, filepath.FromSlash(f.rel)), data, f.mode); err != nil {
			return "", err
		}
	}
	if err := prune(dst, keep); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// pathDir is path.Dir for relative slash paths, "" at the top.
func pathDir(rel string) string {
	i := strings.LastIndexByte(rel, '/')
	if i < 0 {
		return ""
	}
	return rel[:i]
}

// listModule lists the regular files of the module at root, sorted, following
// symbolic links (up to a depth, so a link loop ends in an error).
func listModule(root string) ([]moduleFile, error) {
	var files []moduleFile
	var walk func(dir, rel string, depth int) error
	walk = func(dir, rel string, depth int) error {
		if depth > 64 {
			return fmt.Errorf("module path: %s: directories nested too deep (a symbolic link loop?)", dir)
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			return fmt.Errorf("module path: %w", err)
		}
		for _, e := range entries {
			name := e.Name()
			r := name
			if rel != "" {
				r = rel + "/" + name
			}
			if rel == "" && terraformOwned[name] {
				continue
			}
			p := filepath.Join(dir, name)
			info, err := os.Stat(p) // follows links
			if err != nil {
				return fmt.Errorf("module path: %w", err)
			}
			switch {
			case info.IsDir():
				if skipDir(name) {
					continue
				}
				if err := walk(p, r, depth+1); err != nil {
					return err
				}
			case info.Mode().IsRegular():
				files = append(files, moduleFile{rel: r, mode: info.Mode().Perm()})
			}
		}
		return nil
	}
	if err := walk(root, "", 0); err != nil {
		return nil, err
	}
	slices.SortFunc(files, func(a, b moduleFile) int { return strings.Compare(a.rel, b.rel) })
	return files, nil
}

// writeIfChanged writes data to path unless it holds exactly that already
// (with the same executable bits), replacing whatever is in the way.
func writeIfChanged(path string, data []byte, mode fs.FileMode) error {
	mode = 0o640 | mode&0o110 // readable by the group, executable if it was
	if info, err := os.Lstat(path); err == nil {
		if info.Mode().IsRegular() && info.Mode().Perm() == mode {
			if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) {
				return nil
			}
		}
		if info.IsDir() || !info.Mode().IsRegular() {
			if err := os.RemoveAll(path); err != nil {
				return err
			}
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
	return atomicfile.Write(path, data, mode)
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
