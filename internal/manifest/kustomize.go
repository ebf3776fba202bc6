package manifest

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// kustomizationFileNames are the names kustomize recognises, in its order of
// preference.
var kustomizationFileNames = []string{"kustomization.yaml", "kustomization.yml", "Kustomization"}

// kustomizeMu serializes kustomize runs: krusty keeps the OpenAPI schema
// selected by a kustomization's `openapi:` field in process-global state
// (sigs.k8s.io/kustomize/kyaml/openapi), which concurrent runs would
// overwrite for each other.
var kustomizeMu sync.Mutex

// IsKustomizationDir reports whether dir in files holds kustomization.yaml,
// kustomization.yml or Kustomization. dir is slash-separated and relative;
// "" and "." mean the root of the tree.
func IsKustomizationDir(files map[string][]byte, dir string) bool {
	return kustomizationFile(files, dir) != ""
}

func kustomizationFile(files map[string][]byte, dir string) string {
	dir, err := cleanRelPath(dir)
	if err != nil {
		return ""
	}
	for _, name := range kustomizationFileNames {
		p := path.Join(dir, name)
		if _, ok := files[p]; ok {
			return p
		}
	}
	return ""
}

// cleanRelPath cleans a slash-separated relative path, mapping "" to ".".
// Absolute paths and paths leaving the tree are rejected.
func cleanRelPath(p string) (string, error) {
	if p == "" {
		return ".", nil
	}
	if strings.HasPrefix(p, "/") {
		return "", fmt.Errorf("path %q must be relative", p)
	}
	c := path.Clean(p)
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", fmt.Errorf("path %q leaves the file tree", p)
	}
	return c, nil
}

// RenderKustomize runs kustomize (sigs.k8s.io/kustomize/api/krusty) on dir
// inside the in-memory tree files (keys are slash-separated relative paths
// like "base/deployment.yaml", "overlays/prod/kustomization.yaml") and
// returns the rendered multi-document YAML.
//
// Nothing outside files is read: remote resources (git repositories,
// http(s) and file:// URLs) anywhere in the kustomization or what it uses
// locally (bases, components, and the plugin configs of generators,
// transformers and validators) are rejected before kustomize runs. Text such as
// {{.Params.image}} in quoted YAML strings passes through unchanged, so Go
// templates can be rendered on the output. Errors mention dir.
func RenderKustomize(files map[string][]byte, dir string) ([]byte, error) {
	fail := func(err error) ([]byte, error) {
		shown := dir
		if shown == "" {
			shown = "."
		}
		return nil, fmt.Errorf("kustomize %s: %w", shown, err)
	}
	root, err := cleanRelPath(dir)
	if err != nil {
		return fail(err)
	}
	// Normalize the tree's names ("./a//b.yaml" is "a/b.yaml").
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	slices.Sort(names) // deterministic errors
	tree := make(map[string][]byte, len(files))
	for _, name := range names {
		clean, err := cleanRelPath(name)
		if err != nil || clean == "." {
			return fail(fmt.Errorf("invalid file name %q in tree", name))
		}
		if _, dup := tree[clean]; dup {
			return fail(fmt.Errorf("file name %q names the same file as another entry", name))
		}
		tree[clean] = files[name]
	}
	if !IsKustomizationDir(tree, root) {
		return fail(fmt.Errorf("no kustomization.yaml, kustomization.yml or Kustomization in %s", displayDir(root)))
	}
	// The tree is rendered where it is compiled, the server included,
	// which fetches nothing.
	w := &remoteWalk{tree: memTree(tree), seen: map[string]bool{}, visit: func(r remoteRef) error {
		return fmt.Errorf("%s: %s: %q is remote: remote bases and files are not supported; add the files to the repository instead", r.file, r.field, r.ref)
	}, outside: func(file, field, ref string) error {
		// kustomize would look for it beside the temporary copy, and
		// name a path that means nothing to the user.
		return fmt.Errorf("%s: %s: %s is not in the tree: it was not found when the configs were read "+
			"(drover reads local.path and what its kustomizations use, inside the config tree)", file, field, ref)
	}}
	if err := w.kustomization(root, false); err != nil {
		return fail(err)
	}
	// The tree is written to a private temporary directory and built
	// there, as `kustomize build` builds a directory: kustomize's in-memory
	// file system refuses names a real one allows (such as
	// "components/high-availability-1.21+"), even in directories the
	// build never uses. Reads are confined to that directory.
	tmp, err := os.MkdirTemp("", "drover-kustomize-")
	if err != nil {
		return fail(err)
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	if resolved, err := filepath.EvalSymlinks(tmp); err == nil {
		tmp = resolved // kustomize resolves symbolic links; its messages name real paths
	}
	for _, name := range slices.Sorted(maps.Keys(tree)) {
		p := filepath.Join(tmp, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return fail(fmt.Errorf("file %q: %w", name, err))
		}
		if err := os.WriteFile(p, tree[name], 0o600); err != nil {
			return fail(fmt.Errorf("file %q: %w", name, err))
		}
	}
	fSys := &confinedFS{FileSystem: filesys.MakeFsOnDisk(), check: func(p string) error {
		if rel, err := filepath.Rel(tmp, p); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return fmt.Errorf("%s is outside the config's file tree", p)
		}
		return nil
	}}

	opts := krusty.MakeDefaultOptions()
	// Like `kustomize build`: honour sortOptions, else the legacy order
	// (namespaces and CRDs first).
	opts.Reorder = krusty.ReorderOptionUnspecified

	kustomizeMu.Lock()
	defer kustomizeMu.Unlock()
	resMap, err := krusty.MakeKustomizer(opts).Run(fSys, filepath.Join(tmp, filepath.FromSlash(root)))
	if err != nil {
		if fSys.refused != nil {
			err = fSys.refused
		}
		// Paths as the user wrote them: relative to the tree.
		msg := strings.ReplaceAll(err.Error(), tmp+string(filepath.Separator), "")
		return fail(errors.New(strings.ReplaceAll(msg, tmp, ".")))
	}
	out, err := resMap.AsYaml()
	if err != nil {
		return fail(err)
	}
	return out, nil
}

func displayDir(dir string) string {
	if dir == "." {
		return "the root directory"
	}
	return dir
}
