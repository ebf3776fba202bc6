package manifest

import (
	"fmt"
	"io"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"
)

// Remote references. kustomize fetches an http(s) URL wherever it loads a
// file (resources, patches, generator files, plugin configs' paths...) and
// clones a git repository wherever it loads a directory, with nothing of
// its own to stop it. So before kustomize runs, the kustomization and
// everything it uses locally (bases, components, generator, transformer and
// validator configs) are read for references kustomize would go out for,
// and each is refused or, on disk, put to the caller's check.

// maxRemoteWalk caps the kustomizations and plugin config files read for
// remote references (more is refused: a tree that large is a mistake).
const maxRemoteWalk = 10000

// maxWalkFileBytes caps one file read for remote references, as config
// caps a referenced file.
const maxWalkFileBytes = 32 << 20

// remoteRef is a reference to something outside the file tree that
// kustomize would fetch.
type remoteRef struct {
	file  string // the kustomization or plugin config file holding it
	field string // where in it, e.g. "resources" or "patches[0].path"
	ref   string // as written
}

// kustTree is where the remote check reads kustomizations from: the
// in-memory tree of RenderKustomize or the disk of RenderKustomizeDir.
type kustTree interface {
	// kustomization returns the name and content of dir's kustomization
	// file; "" when dir has none, or it may not be read.
	kustomization(dir string) (string, []byte)
	// file returns the content of the file p; false when there is none,
	// or it may not be read (kustomize reports that).
	file(p string) ([]byte, bool)
	// join places ref, written in the kustomization of dir, in the tree;
	// false when kustomize would not read it there (an absolute path or
	// one leaving an in-memory tree, which kustomize refuses).
	join(dir, ref string) (string, bool)
	// key identifies dir, so that each is read once (links resolved).
	key(dir string) string
}

// remoteWalk finds the remote references of a kustomization and of what it
// uses locally, and hands each to visit.
type remoteWalk struct {
	tree  kustTree
	visit func(remoteRef) error
	seen  map[string]bool
	// local, when set, is told each kustomization directory reached and
	// each local path a kustomization names (KustomizeLocalRefs).
	onLocal func(p string)
	// outside, when set, is told each local reference of a kustomization
	// that leads out of the tree (RenderKustomize: it names nothing).
	outside func(file, field, ref string) error
}

func walkRemote(tree kustTree, dir string, visit func(remoteRef) error) error {
	w := &remoteWalk{tree: tree, visit: visit, seen: map[string]bool{}}
	return w.kustomization(dir, false)
}

// mark records one more thing read, refusing too many.
func (w *remoteWalk) mark(key string) (bool, error) {
	if w.seen[key] {
		return false, nil
	}
	if len(w.seen) >= maxRemoteWalk {
		return false, fmt.Errorf("uses more than %d kustomizations and plugin configs", maxRemoteWalk)
	}
	w.seen[key] = true
	return true, nil
}

// pluginOnlyLists are the fields a kustomization used as generators,
// transformers or validators may not have: they would change the plugin
// configs it lists after they were read here (a patch could make a
// transformer's path a URL).
var pluginOnlyLists = []string{"patches", "patchesStrategicMerge", "patchesJson6902", "replacements", "vars", "transformers"}

// kustomization checks the kustomization in dir; with plugin (dir is used
// as generators, transformers or validators) what it lists are plugin
// configs, checked too.
func (w *remoteWalk) kustomization(dir string, plugin bool) error {
	mode := "r\x00"
	if plugin {
		mode = "p\x00"
	}
	if first, err := w.mark(mode + w.tree.key(dir)); !first || err != nil {
		return err
	}
	file, data := w.tree.kustomization(dir)
	if file == "" {
		return nil
	}
	if w.onLocal != nil {
		w.onLocal(dir)
	}
	var k map[string]any
	if err := yaml.Unmarshal(data, &k); err != nil {
		// Left to kustomize, which reports a malformed kustomization
		// with better context.
		return nil //nolint:nilerr // deliberate, see above
	}
	if plugin {
		for _, f := range pluginOnlyLists {
			if field(k, f) != nil {
				return fmt.Errorf("%s: %s: a kustomization used as generators, transformers or validators cannot change the plugin configs it lists (what they would read cannot be checked); list the configs as they are", file, f)
			}
		}
	}
	if err := w.refs(file, "", k); err != nil {
		return err
	}
	if w.onLocal != nil || w.outside != nil {
		for _, r := range fileRefs(k) {
			if isRemote(r.ref) || strings.Contains(r.ref, "\n") {
				continue
			}
			p, ok := w.tree.join(dir, r.ref)
			switch {
			case ok && w.onLocal != nil:
				w.onLocal(p)
			case !ok && w.outside != nil:
				if err := w.outside(file, r.field, r.ref); err != nil {
					return err
				}
			}
		}
	}
	for _, f := range []string{"resources", "bases", "components"} {
		for i, ref := range stringsIn(field(k, f)) {
			if err := w.local(dir, ref, plugin, file, fmt.Sprintf("%s[%d]", f, i)); err != nil {
				return err
			}
		}
	}
	for _, f := range []string{"generators", "transformers", "validators"} {
		for i, ref := range stringsIn(field(k, f)) {
			name := fmt.Sprintf("%s[%d]", f, i)
			// kustomize takes an entry that parses as YAML objects for an
			// inline plugin config, and anything else for a path.
			if docs := yamlObjects([]byte(ref)); len(docs) > 0 {
				for _, doc := range docs {
					if err := w.refs(file, name+".", doc); err != nil {
						return err
					}
				}
				continue
			}
			if err := w.local(dir, ref, true, file, name); err != nil {
				return err
			}
		}
	}
	return nil
}

// local follows ref, a local entry of a list in file (the kustomization of
// dir): a kustomization directory is checked; with plugin, a file is a
// plugin config, checked too.
func (w *remoteWalk) local(dir, ref string, plugin bool, file, name string) error {
	if isRemote(ref) || strings.Contains(ref, "\n") {
		return nil // refs visited it; or inline content
	}
	sub, ok := w.tree.join(dir, ref)
	if !ok {
		return nil
	}
	if f, _ := w.tree.kustomization(sub); f != "" {
		if err := w.kustomization(sub, plugin); err != nil {
			return err
		}
		return nil
	}
	if !plugin {
		return nil
	}
	if first, err := w.mark("f\x00" + w.tree.key(sub)); !first || err != nil {
		if err != nil {
			return fmt.Errorf("%s: %s: %w", file, name, err)
		}
		return nil
	}
	data, ok := w.tree.file(sub)
	if !ok {
		return nil
	}
	for _, doc := range yamlObjects(data) {
		if err := w.refs(sub, "", doc); err != nil {
			return err
		}
	}
	return nil
}

// refs visits the remote references in the fields of doc, a kustomization
// or a plugin config of file; prefix names where doc is in file.
func (w *remoteWalk) refs(file, prefix string, doc map[string]any) error {
	for _, r := range fileRefs(doc) {
		if !isRemote(r.ref) {
			continue
		}
		r.file, r.field = file, prefix+r.field
		if err := w.visit(r); err != nil {
			return err
		}
	}
	return nil
}

// fileRefs lists the references to files and directories that kustomize
// may load from a kustomization or a builtin plugin config (the fields of
// both: a field one does not have is simply absent).
func fileRefs(k map[string]any) []remoteRef {
	var out []remoteRef
	// add lists v, a string or a list of strings, as field name (with
	// each item's index).
	add := func(name string, v any) {
		if l, ok := v.([]any); ok {
			for i, e := range l {
				if s, ok := e.(string); ok {
					out = append(out, remoteRef{field: fmt.Sprintf("%s[%d]", name, i), ref: s})
				}
			}
			return
		}
		if s, ok := v.(string); ok {
			out = append(out, remoteRef{field: name, ref: s})
		}
	}
	// Kustomization fields loaded as directories (git URLs are cloned) or
	// files (http URLs are fetched).
	for _, f := range []string{"resources", "bases", "components", "crds", "configurations",
		"generators", "transformers", "validators", "patchesStrategicMerge",
		// Builtin plugin configs' files: PatchTransformer and
		// PatchJson6902Transformer (path), PatchStrategicMergeTransformer
		// (paths), ValueAddTransformer (targetFilePath), HelmChart-
		// InflationGenerator (valuesFile, additionalValuesFiles) and an
		// exec plugin's argsFromFile.
		"path", "paths", "targetFilePath", "valuesFile", "additionalValuesFiles", "argsFromFile"} {
		add(f, field(k, f))
	}
	for _, f := range []string{"patches", "patchesJson6902", "replacements"} {
		for i, item := range listIn(field(k, f)) {
			add(fmt.Sprintf("%s[%d].path", f, i), field(mapIn(item), "path"))
		}
	}
	add("openapi.path", field(mapIn(field(k, "openapi")), "path"))
	for i, item := range listIn(field(k, "helmCharts")) {
		h := mapIn(item)
		add(fmt.Sprintf("helmCharts[%d].valuesFile", i), field(h, "valuesFile"))
		add(fmt.Sprintf("helmCharts[%d].additionalValuesFiles", i), field(h, "additionalValuesFiles"))
	}
	// Generators' sources: in a kustomization's lists, and at the top of a
	// ConfigMapGenerator or SecretGenerator plugin config.
	sources := func(name string, g map[string]any) {
		n := len(out)
		add(name+"files", field(g, "files"))
		for i := n; i < len(out); i++ {
			if _, after, ok := strings.Cut(out[i].ref, "="); ok {
				out[i].ref = after // key=path
			}
		}
		add(name+"envs", field(g, "envs"))
		add(name+"env", field(g, "env"))
	}
	sources("", k)
	for _, f := range []string{"configMapGenerator", "secretGenerator"} {
		for i, item := range listIn(field(k, f)) {
			sources(fmt.Sprintf("%s[%d].", f, i), mapIn(item))
		}
	}
	return out
}

// yamlObjects decodes the YAML objects of data (a stream of documents); it
// returns none when data is not such a stream.
func yamlObjects(data []byte) []map[string]any {
	var out []map[string]any
	for _, doc := range splitDocuments(data) {
		var m map[string]any
		if err := yaml.Unmarshal(doc, &m); err != nil {
			return nil
		}
		if m != nil {
			out = append(out, m)
		}
	}
	return out
}

// splitDocuments splits a YAML stream at its "---" lines.
func splitDocuments(data []byte) [][]byte {
	var docs [][]byte
	start := 0
	for i := 0; i <= len(data); {
		end := len(data)
		if j := strings.IndexByte(string(data[i:]), '\n'); j >= 0 {
			end = i + j
		}
		line := strings.TrimRight(string(data[i:end]), "\r")
		if line == "---" || strings.HasPrefix(line, "--- ") {
			docs = append(docs, data[start:i])
			start = end + 1
		}
		i = end + 1
	}
	if start < len(data) {
		docs = append(docs, data[start:])
	}
	return docs
}

// isRemote reports whether a kustomization reference would make kustomize
// go beyond the file tree: it mirrors how kustomize recognises git
// repository URLs (scheme, SCP-style user@host: and github.com/ shorthand,
// optionally after "git::") and remote files (a URL whose scheme is http
// or https).
func isRemote(ref string) bool {
	if u, err := url.Parse(ref); err == nil && (u.Scheme == "http" || u.Scheme == "https") {
		return true // kustomize's loader.IsRemoteFile
	}
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

// memTree is RenderKustomize's in-memory tree (slash-separated relative
// paths).
type memTree map[string][]byte

func (m memTree) kustomization(dir string) (string, []byte) {
	f := kustomizationFile(m, dir)
	if f == "" {
		return "", nil
	}
	return f, m[f]
}

func (m memTree) file(p string) ([]byte, bool) {
	data, ok := m[p]
	return data, ok
}

func (m memTree) join(dir, ref string) (string, bool) {
	if path.IsAbs(ref) {
		return "", false
	}
	sub := path.Join(dir, ref)
	if sub == ".." || strings.HasPrefix(sub, "../") {
		return "", false
	}
	return sub, true
}

func (m memTree) key(dir string) string { return dir }

// diskTree is RenderKustomizeDir's disk; check (nil: none) is asked
// before a file is read, as kustomize's reads are.
type diskTree struct {
	check func(path string) error
}

func (d diskTree) kustomization(dir string) (string, []byte) {
	for _, name := range kustomizationFileNames {
		p := filepath.Join(dir, name)
		if data, ok := d.file(p); ok {
			return p, data
		}
	}
	return "", nil
}

func (d diskTree) file(p string) ([]byte, bool) {
	if d.check != nil && d.check(p) != nil {
		return nil, false
	}
	st, err := os.Stat(p)
	if err != nil || !st.Mode().IsRegular() || st.Size() > maxWalkFileBytes {
		return nil, false
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, false
	}
	defer func() { _ = f.Close() }()
	data, err := io.ReadAll(io.LimitReader(f, maxWalkFileBytes))
	if err != nil {
		return nil, false
	}
	return data, true
}

func (d diskTree) join(dir, ref string) (string, bool) {
	if filepath.IsAbs(ref) {
		return filepath.Clean(ref), true
	}
	return filepath.Join(dir, filepath.FromSlash(ref)), true
}

func (d diskTree) key(dir string) string {
	if resolved, err := filepath.EvalSymlinks(dir); err == nil {
		return resolved
	}
	return dir
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
