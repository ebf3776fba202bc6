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
	"sigs.k8s.io/yaml"
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
// http(s) and file:// URLs) anywhere in the kustomization or the local bases
// and components it uses are rejected before kustomize runs. Text such as
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
	if err := checkNoRemote(tree, root, map[string]bool{}); err != nil {
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

// isRemote reports whether a kustomization reference would make kustomize
// go beyond the file tree: it mirrors how kustomize recognises git
// repository URLs (scheme, SCP-style user@host: and github.com/ shorthand,
// optionally after "git::") and remote files (http, https).
func isRemote(ref string) bool {
	s := ref
	if len(s) >= 5 && strings.EqualFold(s[:5], "git::") {
		s = s[5:]
	}
	lower := strings.ToLower(s)
	for _, scheme := range []string{"ssh://", "https://", "http://", "file://"} {
		if strings.HasPrefix(lower, scheme) {
			return true
		}
	}
	if strings.HasPrefix(lower, "github.com/") || strings.HasPrefix(lower, "github.com:") {
		return true
	}
	// SCP style: user@host:path or user@host/path.
	if i := strings.IndexByte(s, '@'); i > 0 {
		user := s[:i]
		ok := user[0] >= 'a' && user[0] <= 'z' || user[0] >= 'A' && user[0] <= 'Z'
		for _, r := range user[1:] {
			ok = ok && (r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
		}
		if ok {
			return true
		}
	}
	return false
}

// checkNoRemote rejects remote references in the kustomization in dir and,
// recursively, in the local kustomization directories it refers to.
func checkNoRemote(files map[string][]byte, dir string, seen map[string]bool) error {
	if seen[dir] {
		return nil
	}
	seen[dir] = true
	file := kustomizationFile(files, dir)
	if file == "" {
		return nil
	}
	var k map[string]any
	if err := yaml.Unmarshal(files[file], &k); err != nil {
		// Leave it to kustomize to report malformed kustomizations.
		return nil //nolint:nilerr // deliberate: kustomize itself reports the malformed file with better context
	}
	// Fields that kustomize loads as directories (git URLs are cloned) or
	// files (http URLs are fetched).
	var dirs []string
	for _, f := range []string{"resources", "bases", "components", "crds", "configurations",
		"generators", "transformers", "validators"} {
		dirs = append(dirs, stringsIn(field(k, f))...)
	}
	refs := append([]string(nil), dirs...)
	refs = append(refs, stringsIn(field(k, "patchesStrategicMerge"))...)
	for _, f := range []string{"patches", "patchesJson6902", "replacements"} {
		for _, item := range listIn(field(k, f)) {
			refs = append(refs, stringsIn(field(mapIn(item), "path"))...)
		}
	}
	refs = append(refs, stringsIn(field(mapIn(field(k, "openapi")), "path"))...)
	for _, f := range []string{"configMapGenerator", "secretGenerator"} {
		for _, item := range listIn(field(k, f)) {
			g := mapIn(item)
			for _, src := range stringsIn(field(g, "files")) {
				if _, after, ok := strings.Cut(src, "="); ok {
					src = after
				}
				refs = append(refs, src)
			}
			refs = append(refs, stringsIn(field(g, "envs"))...)
			refs = append(refs, stringsIn(field(g, "env"))...)
		}
	}
	for _, ref := range refs {
		if isRemote(ref) {
			return fmt.Errorf("%s refers to %q: remote bases and files are not supported; add the files to the repository instead", file, ref)
		}
	}
	for _, ref := range dirs {
		if strings.Contains(ref, "\n") || path.IsAbs(ref) {
			continue // inline content, or an absolute path kustomize rejects
		}
		sub := path.Join(dir, ref)
		if sub == ".." || strings.HasPrefix(sub, "../") {
			continue // kustomize reports it
		}
		if err := checkNoRemote(files, sub, seen); err != nil {
			return err
		}
	}
	return nil
}

// field looks key up case-insensitively, as kustomize decodes
// kustomizations with encoding/json.
func field(m map[string]any, key string) any {
	if v, ok := m[key]; ok {
		return v
	}
	for k, v := range m {
		if strings.EqualFold(k, key) {
			return v
		}
	}
	return nil
}

func listIn(v any) []any {
	l, _ := v.([]any)
	return l
}

func mapIn(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

// stringsIn returns v if it is a string, or the strings in v if it is a
// list.
func stringsIn(v any) []string {
	switch x := v.(type) {
	case string:
		return []string{x}
	case []any:
		var out []string
		for _, e := range x {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}
