package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
)

// KustomizeLocalRefs lists what the kustomizations in dirs (and those they
// use) refer to on disk, as absolute paths; check is asked before each
// kustomization is read. It is a variable so the config package does not
// depend on kustomize; package manifest installs it
// (manifest.KustomizeLocalRefs). Left unset, a subPath tree holds only the
// files of local.path.
var KustomizeLocalRefs = func(_ []string, _ func(path string) error) ([]string, error) {
	return nil, nil
}

// kustomizationNames are the names kustomize takes for a kustomization.
var kustomizationNames = []string{"kustomization.yaml", "kustomization.yml", "Kustomization"}

// kustomizeTree is the file tree of a kustomize local.path (dir, already
// read into files) with subPath: the overlays under dir may use bases
// elsewhere in the config tree (`resources: [../../../upstream/base]`), and
// the tree is rendered where it is compiled, which reads no disk. So what
// the kustomizations under dir use outside it is read too, each path
// confined as every local reference is, and the tree's root is the closest
// directory holding it all; Dir is where dir lies in it.
func (c *confinement) kustomizeTree(written, dir, subPath string, files map[string]string) (*FileTree, error) {
	tree := &FileTree{Root: filepath.ToSlash(dir), SubPath: subPath, Files: files}
	var kdirs []string
	for name := range files {
		for _, k := range kustomizationNames {
			if path.Base(name) == k {
				kdirs = append(kdirs, filepath.Join(dir, filepath.FromSlash(path.Dir(name))))
			}
		}
	}
	if len(kdirs) == 0 {
		return tree, nil
	}
	absDir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	refs, err := KustomizeLocalRefs(kdirs, func(p string) error {
		_, err := c.check(p, p)
		return err
	})
	if err != nil {
		return nil, err
	}
	type part struct {
		abs   string
		files map[string]string // nil: a file
		data  string
	}
	var parts []part
	covered := []string{absDir}
	for _, ref := range refs {
		inside := false
		for _, d := range covered {
			inside = inside || within(d, ref)
		}
		if inside {
			continue
		}
		st, err := os.Stat(ref)
		if errors.Is(err, fs.ErrNotExist) {
			continue // kustomize says so if a channel's overlay uses it
		}
		if _, cerr := c.check(ref, ref); cerr != nil {
			return nil, fmt.Errorf("a kustomization under %s uses %s: %w", written, ref, cerr)
		}
		if err != nil {
			return nil, err
		}
		if st.IsDir() {
			sub, err := c.readTree(ref, ref, nil, nil)
			if err != nil {
				return nil, fmt.Errorf("a kustomization under %s uses %s: %w", written, ref, err)
			}
			parts = append(parts, part{abs: ref, files: sub})
			covered = append(covered, ref)
			continue
		}
		data, err := c.readFile(ref, ref)
		if err != nil {
			return nil, fmt.Errorf("a kustomization under %s uses %s: %w", written, ref, err)
		}
		parts = append(parts, part{abs: ref, data: string(data)})
	}
	if len(parts) == 0 {
		return tree, nil
	}
	root := absDir
	for _, p := range parts {
		d := p.abs
		if p.files == nil {
			d = filepath.Dir(d)
		}
		for !within(root, d) {
			root = filepath.Dir(root)
		}
	}
	rel := func(p string) string {
		r, _ := filepath.Rel(root, p) // both absolute, root above p
		return filepath.ToSlash(r)
	}
	out := make(map[string]string, len(files))
	total := 0
	put := func(name, data string) error {
		if _, dup := out[name]; !dup {
			total += len(data)
		}
		out[name] = data
		if len(out) > maxTreeFiles || total > maxTreeBytes {
			return fmt.Errorf("%s and the kustomize bases it uses hold more than %d files or %d MiB", written, maxTreeFiles, maxTreeBytes>>20)
		}
		return nil
	}
	tree.Dir = rel(absDir)
	for name, data := range files {
		if err := put(path.Join(tree.Dir, name), data); err != nil {
			return nil, err
		}
	}
	for _, p := range parts {
		if p.files == nil {
			if err := put(rel(p.abs), p.data); err != nil {
				return nil, err
			}
			continue
		}
		for name, data := range p.files {
			if err := put(path.Join(rel(p.abs), name), data); err != nil {
				return nil, err
			}
		}
	}
	tree.Files = out
	tree.Root = filepath.ToSlash(root)
	if !filepath.IsAbs(dir) {
		// As the config wrote it: relative to where drover runs.
		if wd, err := filepath.Abs("."); err == nil {
			if r, err := filepath.Rel(wd, root); err == nil {
				tree.Root = filepath.ToSlash(r)
			}
		}
	}
	return tree, nil
}
