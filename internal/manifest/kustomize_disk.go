package manifest

import (
	"fmt"
	"path/filepath"
	"slices"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// RenderKustomizeDir renders a kustomize directory on disk, as `kubectl
// kustomize DIR` would; overlays may reference bases elsewhere on disk. It is
// used when configs are loaded, before they are sent anywhere. check, when
// not nil, is asked before kustomize reads each file (an absolute path) and,
// before kustomize runs, about each remote reference (an http(s) URL or a
// git repository, as the kustomization wrote it: never an absolute path)
// in the kustomization or what it uses locally; an error refuses it. The
// config package confines reads to the config tree with it, and allows
// remote references only as --allow-path says. With a nil check nothing is
// refused.
func RenderKustomizeDir(dir string, check func(path string) error) ([]byte, error) {
	if check != nil {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return nil, fmt.Errorf("render %s: %w", dir, err)
		}
		if err := walkRemote(diskTree{check: check}, abs, func(r remoteRef) error {
			if err := check(r.ref); err != nil {
				return fmt.Errorf("%s: %s: %w", r.file, r.field, err)
			}
			return nil
		}); err != nil {
			return nil, fmt.Errorf("render %s: %w", dir, err)
		}
	}
	fsys := filesys.MakeFsOnDisk()
	confined := &confinedFS{FileSystem: fsys, check: check}
	if check != nil {
		fsys = confined
	}
	opts := krusty.MakeDefaultOptions()
	opts.Reorder = krusty.ReorderOptionUnspecified // same order as RenderKustomize
	kustomizeMu.Lock()                             // kustomize's OpenAPI schema is process-global
	defer kustomizeMu.Unlock()
	resMap, err := krusty.MakeKustomizer(opts).Run(fsys, dir)
	if err != nil {
		if confined.refused != nil {
			// kustomize words a refused read as a missing file; say why.
			return nil, fmt.Errorf("render %s: %w", dir, confined.refused)
		}
		return nil, fmt.Errorf("render %s: %w", dir, err)
	}
	out, err := resMap.AsYaml()
	if err != nil {
		return nil, fmt.Errorf("render %s: %w", dir, err)
	}
	return out, nil
}

// confinedFS is a file system on disk whose files are read only when check
// allows them; refused keeps the first refusal.
type confinedFS struct {
	filesys.FileSystem
	check   func(path string) error
	refused error
}

func (c *confinedFS) allow(path string) error {
	err := c.check(path)
	if err != nil && c.refused == nil {
		c.refused = err
	}
	return err
}

func (c *confinedFS) ReadFile(path string) ([]byte, error) {
	if err := c.allow(path); err != nil {
		return nil, err
	}
	return c.FileSystem.ReadFile(path)
}

func (c *confinedFS) Open(path string) (filesys.File, error) {
	if err := c.allow(path); err != nil {
		return nil, err
	}
	return c.FileSystem.Open(path)
}

// KustomizeLocalRefs returns what the kustomizations in dirs (directories
// on disk), and the kustomizations they use locally (bases, components,
// resources that are directories), refer to on disk: each kustomization
// directory reached and each local file or directory a field of theirs
// names (resources, patches, generator files, ...), as cleaned absolute
// paths, sorted, each once. Nothing is checked or refused: remote
// references are left out (RenderKustomize refuses them), and paths that
// do not exist are kept (kustomize reports them if it uses them). check,
// when not nil, is asked before a kustomization is read, as
// RenderKustomizeDir's is.
//
// The config package reads these, with its own confinement, into the file
// tree of a subPath, so that an overlay's bases outside local.path render
// where the tree is compiled.
func KustomizeLocalRefs(dirs []string, check func(path string) error) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	add := func(p string) {
		p = filepath.Clean(p)
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	tree := diskTree{check: check}
	for _, dir := range dirs {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return nil, err
		}
		w := &remoteWalk{tree: tree, visit: func(remoteRef) error { return nil }, seen: map[string]bool{}, onLocal: add}
		if err := w.kustomization(abs, false); err != nil {
			return nil, fmt.Errorf("kustomize %s: %w", dir, err)
		}
	}
	slices.Sort(out)
	return out, nil
}
