package config

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
)

// Limits on what a local reference may pull in, so a mistaken `path: /` fails
// fast instead of reading a whole disk into a config.
const (
	maxTreeFiles = 5000
	maxTreeBytes = 32 << 20
)

// Source is one config file: where it came from and what it holds.
type Source struct {
	// Path is the file as the user named it (relative paths stay relative).
	Path string
	*Decoded
}

// Kind is the config kind held by the file ("application", "service", ...).
func (s *Source) Kind() string {
	f := s.File
	switch {
	case f.Application != nil:
		return "application"
	case f.Service != nil:
		return "service"
	case f.Runtime != nil:
		return "runtime"
	case f.Protection != nil:
		return "protection"
	case f.DeliveryExtension != nil:
		return "deliveryExtension"
	case f.ReleaseChannel != nil:
		return "releaseChannel"
	case f.ContainerRegistry != nil:
		return "containerRegistry"
	case f.Webhook != nil:
		return "webhook"
	}
	return ""
}

// Name is the name of the object the file defines.
func (s *Source) Name() string {
	f := s.File
	switch {
	case f.Application != nil:
		return f.Application.Name
	case f.Service != nil:
		return f.Service.Name
	case f.Runtime != nil:
		return f.Runtime.Name
	case f.Protection != nil:
		return f.Protection.Name
	case f.DeliveryExtension != nil:
		return f.DeliveryExtension.Name
	case f.ReleaseChannel != nil:
		return f.ReleaseChannel.Name
	case f.ContainerRegistry != nil:
		return f.ContainerRegistry.Name
	case f.Webhook != nil:
		return f.Webhook.Name
	}
	return ""
}

// Errorf returns a located error for field path of this file.
func (s *Source) Errorf(path, format string, args ...any) *Error {
	pos := s.Locate(path)
	return &Error{File: s.Path, Line: pos.Line, Column: pos.Column, Field: path, Msg: fmt.Sprintf(format, clipArgs(args)...)}
}

// IsConfigFile reports whether name is a drover/Prodvana config file name.
func IsConfigFile(name string) bool {
	return strings.HasSuffix(name, ".pvn.yaml") || strings.HasSuffix(name, ".pvn.yml")
}

// Discover expands path arguments the way pvnctl does: a file is taken as is, a
// directory contributes its `*.pvn.yaml` files (one level), and `DIR/...` walks
// DIR recursively. The result is sorted within each argument and deduplicated.
func Discover(args []string) ([]string, error) {
	found, err := discover(args)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(found))
	for i, f := range found {
		out[i] = f.path
	}
	return out, nil
}

// discovered is a config file and the index of the argument that named it.
type discovered struct {
	path string
	arg  int
}

func discover(args []string) ([]discovered, error) {
	var out []discovered
	seen := map[string]bool{}
	add := func(p string, arg int) {
		// "./a.pvn.yaml" and "a.pvn.yaml" are the same file.
		if key := filepath.Clean(p); !seen[key] {
			seen[key] = true
			out = append(out, discovered{path: p, arg: arg})
		}
	}
	for i, arg := range args {
		if dir, ok := strings.CutSuffix(arg, "..."); ok {
			dir = filepath.Clean(strings.TrimSuffix(dir, string(filepath.Separator)))
			if dir == "" {
				dir = "."
			}
			var found []string
			err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
				if err != nil {
					return err
				}
				if d.IsDir() && p != dir && strings.HasPrefix(d.Name(), ".") {
					return filepath.SkipDir
				}
				if !d.IsDir() && IsConfigFile(d.Name()) {
					found = append(found, p)
				}
				return nil
			})
			if err != nil {
				return nil, fmt.Errorf("read %s: %w", arg, err)
			}
			sort.Strings(found)
			for _, p := range found {
				add(p, i)
			}
			continue
		}
		st, err := os.Stat(arg)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", arg, err)
		}
		if !st.IsDir() {
			add(arg, i)
			continue
		}
		entries, err := os.ReadDir(arg)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", arg, err)
		}
		for _, e := range entries {
			if !e.IsDir() && IsConfigFile(e.Name()) {
				add(filepath.Join(arg, e.Name()), i)
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w in %s", ErrNoConfigs, strings.Join(args, " "))
	}
	return out, nil
}

// Load discovers, decodes and resolves every config under args. It reads local
// file references relative to each config file, so the returned sources are
// self-contained. All problems are returned together as an ErrorList.
func Load(args []string) ([]*Source, error) {
	return LoadWith(args, LoadOptions{})
}

// LoadWith is Load with options.
func LoadWith(args []string, opts LoadOptions) ([]*Source, error) {
	sources, errs, err := LoadPartialWith(args, opts)
	if err != nil {
		return nil, err
	}
	if err := errs.Err(); err != nil {
		return nil, err
	}
	return sources, nil
}

// LoadPartial is Load for reporting: it returns the files that loaded
// (files with field errors partially, their bad fields unset) together with
// every located problem, so a caller can go on validating what it has. err is set only when nothing can be read at
// all (no configs found, unreadable path).
func LoadPartial(args []string) ([]*Source, ErrorList, error) {
	return LoadPartialWith(args, LoadOptions{})
}

// LoadPartialWith is LoadPartial with options.
func LoadPartialWith(args []string, opts LoadOptions) ([]*Source, ErrorList, error) {
	found, err := discover(args)
	if err != nil {
		return nil, nil, err
	}
	allowed, err := allowedRoots(opts.AllowPaths)
	if err != nil {
		return nil, nil, err
	}
	roots := map[int]*confinement{}
	var (
		sources []*Source
		errs    ErrorList
	)
	for _, f := range found {
		p := f.path
		c := roots[f.arg]
		if c == nil {
			root, err := treeRoot(args[f.arg])
			if err != nil {
				return nil, nil, err
			}
			c = &confinement{roots: append([]string{root}, allowed...)}
			roots[f.arg] = c
		}
		data, err := readConfigFile(p)
		if err != nil {
			errs = append(errs, &Error{File: p, Msg: err.Error()})
			continue
		}
		dec, err := DecodePartial(p, data)
		if err != nil {
			l, ok := AsErrorList(err)
			if !ok {
				return nil, nil, err
			}
			errs = append(errs, l...)
			if dec == nil {
				continue
			}
		}
		src := &Source{Path: p, Decoded: dec}
		if lerrs := c.resolveLocal(src, filepath.Dir(p)); len(lerrs) > 0 {
			errs = append(errs, lerrs...)
			continue
		}
		sources = append(sources, src)
	}
	return sources, errs, nil
}

// KubernetesConfigs calls fn for every Kubernetes config in the file, with its field path.
func KubernetesConfigs(f *File, fn func(path string, kc *KubernetesConfig)) {
	walkKubernetesConfigs(reflect.ValueOf(f).Elem(), "", fn)
}

var kubernetesConfigType = reflect.TypeFor[KubernetesConfig]()

func walkKubernetesConfigs(v reflect.Value, path string, fn func(string, *KubernetesConfig)) {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return
		}
		if v.Type().Elem() == kubernetesConfigType {
			fn(path, v.Interface().(*KubernetesConfig))
			return
		}
		walkKubernetesConfigs(v.Elem(), path, fn)
	case reflect.Struct:
		si := infoFor(v.Type())
		for _, key := range si.keys {
			fi := si.byKey[key]
			walkKubernetesConfigs(v.FieldByIndex(fi.index), joinPath(path, fi.name), fn)
		}
	case reflect.Slice:
		for i := range v.Len() {
			walkKubernetesConfigs(v.Index(i), fmt.Sprintf("%s[%d]", path, i), fn)
		}
	case reflect.Map:
		keys := v.MapKeys()
		sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
		for _, k := range keys {
			walkKubernetesConfigs(v.MapIndex(k), path+"."+k.String(), fn)
		}
	default:
		// Scalars and other kinds hold no Kubernetes config.
	}
}

// resolveLocal replaces every `local` reference with the content it points to:
// `inlined` text for path/paths (kustomize directories are rendered first), or a
// file tree for path+subPath, whose templated subPath is resolved per release
// channel by the compiler. Templates are not evaluated here.
func (c *confinement) resolveLocal(src *Source, baseDir string) ErrorList {
	var errs ErrorList
	// A perReleaseChannel kubernetesConfig may leave out type: it is merged over
	// the service's, so its files are read as the service's are (kustomize or not).
	var serviceType KubernetesConfigType
	if svc := src.File.Service; svc != nil && svc.KubernetesConfig != nil {
		serviceType = svc.KubernetesConfig.Type
	}
	KubernetesConfigs(src.File, func(path string, kc *KubernetesConfig) {
		if kc.Local == nil {
			return
		}
		typ := kc.Type
		if typ == "" && strings.HasPrefix(path, "service.perReleaseChannel[") {
			typ = serviceType
		}
		lpath := path + ".local"
		if err := c.resolveKubernetesLocal(kc, typ, baseDir); err != nil {
			errs = append(errs, src.Errorf(lpath, "%v", err))
		}
	})
	if svc := src.File.Service; svc != nil {
		errs = append(errs, c.resolveHelm(src, "service", svc.Helm, baseDir)...)
		errs = append(errs, c.resolveEcs(src, "service", svc.AwsEcs, baseDir)...)
		for i := range svc.PerReleaseChannel {
			path := fmt.Sprintf("service.perReleaseChannel[%d]", i)
			errs = append(errs, c.resolveHelm(src, path, svc.PerReleaseChannel[i].Helm, baseDir)...)
			errs = append(errs, c.resolveEcs(src, path, svc.PerReleaseChannel[i].AwsEcs, baseDir)...)
		}
		// Backends of registered kinds read their own local files.
		files := localFiles{c: c, baseDir: baseDir}
		for _, k := range RuntimeKinds() {
			if k.ResolveLocal == nil {
				continue
			}
			fail := func(field, msg string) { errs = append(errs, src.Errorf(field, "%s", msg)) }
			k.ResolveLocal(&svc.ServiceBackend, "service", files, fail)
			for i := range svc.PerReleaseChannel {
				k.ResolveLocal(&svc.PerReleaseChannel[i].ServiceBackend, fmt.Sprintf("service.perReleaseChannel[%d]", i), files, fail)
			}
		}
	}
	return errs
}

// resolveEcs reads the local files of an ECS service's task and service
// definitions: local.path (a file) becomes inlined text, local.path (a
// directory) with subPath a file tree whose templated subPath the compiler
// resolves per release channel.
func (c *confinement) resolveEcs(src *Source, path string, e *AwsEcsConfig, baseDir string) ErrorList {
	if e == nil {
		return nil
	}
	var errs ErrorList
	for _, spec := range []struct {
		field string
		s     *EcsSpec
	}{{"taskDefinition", e.TaskDefinition}, {"serviceDefinition", e.ServiceDefinition}} {
		if spec.s == nil || spec.s.Local == nil {
			continue
		}
		l, lpath := spec.s.Local, path+".awsEcs."+spec.field+".local"
		switch {
		case spec.s.Inlined != "":
			errs = append(errs, src.Errorf(lpath, "set only one of inlined and local"))
		case l.Path == "" || len(l.Paths) > 0:
			errs = append(errs, src.Errorf(lpath, "an ECS definition is local.path: one file, or a directory with subPath"))
		case l.SubPath != "":
			dir := join(baseDir, l.Path)
			files, err := c.readTree(l.Path, dir, l.IncludePatterns, l.ExcludePatterns)
			if err != nil {
				errs = append(errs, src.Errorf(lpath, "%v", err))
				continue
			}
			spec.s.Tree = &FileTree{Root: filepath.ToSlash(dir), SubPath: l.SubPath, Files: files}
			spec.s.Local = nil
		case len(l.IncludePatterns) > 0 || len(l.ExcludePatterns) > 0:
			errs = append(errs, src.Errorf(lpath, "includePatterns and excludePatterns apply only with subPath"))
		default:
			file := join(baseDir, l.Path)
			data, err := c.readFile(l.Path, file)
			if err != nil {
				errs = append(errs, src.Errorf(lpath, "%v", err))
				continue
			}
			spec.s.Inlined, spec.s.File = string(data), filepath.ToSlash(file)
			spec.s.Local = nil
		}
	}
	return errs
}

// resolveHelm reads a local chart directory into the config and turns local
// values files into inlined values, as pvnctl does before upload.
func (c *confinement) resolveHelm(src *Source, path string, h *HelmConfig, baseDir string) ErrorList {
	if h == nil {
		return nil
	}
	var errs ErrorList
	if l := h.Local; l != nil {
		switch {
		case l.Path == "" || len(l.Paths) > 0 || l.SubPath != "":
			errs = append(errs, src.Errorf(path+".helm.local", "a chart is local.path: one directory (paths and subPath are not supported for charts)"))
		default:
			dir := join(baseDir, l.Path)
			files, err := c.readTree(l.Path, dir, l.IncludePatterns, l.ExcludePatterns)
			if err != nil {
				errs = append(errs, src.Errorf(path+".helm.local", "%v", err))
				break
			}
			if _, ok := files["Chart.yaml"]; !ok {
				errs = append(errs, src.Errorf(path+".helm.local", "%s is not a Helm chart: it has no Chart.yaml", dir))
				break
			}
			h.Chart = &FileTree{Root: filepath.ToSlash(dir), Files: files}
			h.Local = nil
		}
	}
	for i := range h.ValuesOverrides {
		v := &h.ValuesOverrides[i]
		if v.Local == nil {
			continue
		}
		vpath := fmt.Sprintf("%s.helm.valuesOverrides[%d].local", path, i)
		if v.Local.Path == "" || len(v.Local.Paths) > 0 || v.Local.SubPath != "" || v.Inlined != "" {
			errs = append(errs, src.Errorf(vpath, "a values file is local.path: one file (and not inlined too)"))
			continue
		}
		file := join(baseDir, v.Local.Path)
		data, err := c.readFile(v.Local.Path, file)
		if err != nil {
			errs = append(errs, src.Errorf(vpath, "%v", err))
			continue
		}
		v.Inlined = SourceMarker(file) + string(data)
		v.Local = nil
	}
	return errs
}

// resolveKubernetesLocal resolves kc.Local; typ is kc's type, or the one it inherits.
func (c *confinement) resolveKubernetesLocal(kc *KubernetesConfig, typ KubernetesConfigType, baseDir string) error {
	l := kc.Local
	if kc.Inlined != "" {
		return fmt.Errorf("set only one of inlined and local")
	}
	if l.Path != "" && len(l.Paths) > 0 {
		return fmt.Errorf("set only one of path and paths")
	}
	if l.Path == "" && len(l.Paths) == 0 {
		return fmt.Errorf("path or paths is required")
	}
	if l.SubPath != "" {
		if l.Path == "" {
			return fmt.Errorf("subPath needs path (a directory), not paths")
		}
		dir := join(baseDir, l.Path)
		files, err := c.readTree(l.Path, dir, l.IncludePatterns, l.ExcludePatterns)
		if err != nil {
			return err
		}
		kc.Tree = &FileTree{Root: filepath.ToSlash(dir), SubPath: l.SubPath, Files: files}
		if typ == KubernetesTypeKustomize {
			if kc.Tree, err = c.kustomizeTree(l.Path, dir, l.SubPath, files); err != nil {
				return err
			}
		}
		kc.Local = nil
		return nil
	}
	if len(l.IncludePatterns) > 0 || len(l.ExcludePatterns) > 0 {
		return fmt.Errorf("includePatterns and excludePatterns apply only with subPath")
	}
	paths := l.Paths
	if l.Path != "" {
		paths = []string{l.Path}
	}
	var docs []string
	for _, p := range paths {
		full := join(baseDir, p)
		if typ == KubernetesTypeKustomize {
			// The directory, and every file kustomize reads for it (bases
			// included), must lie in the tree.
			if _, err := c.check(p, full); err != nil {
				return err
			}
			out, err := RenderKustomize(full, c.kustomizeRead)
			if err != nil {
				return fmt.Errorf("kustomize %s: %w", full, err)
			}
			docs = append(docs, SourceMarker(full)+withNewline(string(out)))
			continue
		}
		found, err := c.readYAMLFiles(p, full)
		if err != nil {
			return err
		}
		docs = append(docs, found...)
	}
	kc.Inlined = strings.Join(docs, "---\n")
	if typ == KubernetesTypeKustomize {
		kc.Type = KubernetesTypeKubernetes // rendered
	}
	kc.Local = nil
	return nil
}

// RenderKustomize renders a kustomize directory on disk, asking check before
// each file it reads. It is a variable so the config package does not depend
// on kustomize; package manifest installs it.
var RenderKustomize = func(_ string, _ func(path string) error) ([]byte, error) {
	return nil, fmt.Errorf("kustomize support is not linked into this binary")
}

// sourcePrefix starts the comment line that records which file a part of an
// inlined Kubernetes config came from, so later errors can name that file.
const sourcePrefix = "# Source: "

// SourceMarker is the first line of each file's part in resolved inlined text.
func SourceMarker(path string) string {
	return sourcePrefix + filepath.ToSlash(path) + "\n"
}

// LocateSource maps a 1-based line of resolved inlined text to the file it came
// from and the line within that file. It returns "", line when there is no marker.
func LocateSource(text string, line int) (string, int) {
	file, start := "", 0
	for i, l := range strings.SplitAfter(text, "\n") {
		n := i + 1
		if n > line {
			break
		}
		if p, ok := strings.CutPrefix(l, sourcePrefix); ok {
			file, start = strings.TrimSpace(p), n
		}
	}
	if file == "" {
		return "", line
	}
	return file, line - start
}

// readYAMLFiles reads a file, or a directory's YAML files (one level);
// written is the reference as the config wrote it.
func (c *confinement) readYAMLFiles(written, p string) ([]string, error) {
	if _, err := c.check(written, p); err != nil {
		return nil, err
	}
	st, err := os.Stat(p)
	if err != nil {
		return nil, err
	}
	files := []string{p}
	if st.IsDir() {
		files = nil
		entries, err := os.ReadDir(p)
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			n := e.Name()
			if e.IsDir() || IsConfigFile(n) || (!strings.HasSuffix(n, ".yaml") && !strings.HasSuffix(n, ".yml")) {
				continue
			}
			f := filepath.Join(p, n)
			if e.Type()&fs.ModeSymlink != 0 {
				if _, err := c.check(f, f); err != nil {
					return nil, err
				}
				if st, err := os.Stat(f); err == nil && st.IsDir() {
					continue // a directory, only its name looks like YAML
				}
			}
			files = append(files, f)
		}
		if len(files) == 0 {
			return nil, fmt.Errorf("no Kubernetes configs found at %s", p)
		}
	}
	var docs []string
	for _, f := range files {
		data, err := readRegular(f)
		if err != nil {
			return nil, err
		}
		docs = append(docs, SourceMarker(f)+withNewline(string(data)))
	}
	return docs, nil
}

// withNewline ends non-empty text with a newline, so the "---" joining the
// parts of inlined text starts a line of its own.
func withNewline(text string) string {
	if text != "" && !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	return text
}

// readTree reads dir recursively, keeping files that match includes (all when
// empty) and no excludes. Patterns are gitignore-style: without a slash they
// match a name at any depth, a leading slash anchors them, a trailing slash
// matches a directory and everything under it, and ** spans directories.
// Symlinked directories inside it are followed when they stay in the tree
// (loops back to a directory above are skipped); written is dir as the config
// wrote it.
func (c *confinement) readTree(written, dir string, includes, excludes []string) (map[string]string, error) {
	resolved, err := c.check(written, dir)
	if err != nil {
		return nil, err
	}
	st, err := os.Stat(dir)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("%s is not a directory (subPath needs a directory in path)", dir)
	}
	inc, err := compilePatterns(includes)
	if err != nil {
		return nil, fmt.Errorf("includePatterns: %w", err)
	}
	exc, err := compilePatterns(excludes)
	if err != nil {
		return nil, fmt.Errorf("excludePatterns: %w", err)
	}
	w := &treeWalk{c: c, dir: dir, inc: inc, exc: exc, files: map[string]string{}}
	if err := w.walk(dir, "", []string{resolved}); err != nil {
		return nil, err
	}
	return w.files, nil
}

func compilePatterns(patterns []string) ([]string, error) {
	out := make([]string, 0, len(patterns))
	for _, p := range patterns {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		switch {
		case strings.HasPrefix(p, "/"):
			p = strings.TrimPrefix(p, "/")
		case !strings.Contains(strings.TrimSuffix(p, "/"), "/"):
			p = "**/" + p
		}
		if strings.HasSuffix(p, "/") {
			p += "**"
		}
		if !doublestar.ValidatePattern(p) {
			return nil, fmt.Errorf("invalid pattern %q", p)
		}
		out = append(out, p)
	}
	return out, nil
}

func matchAny(patterns []string, rel string) bool {
	for _, p := range patterns {
		if ok, _ := doublestar.Match(p, rel); ok {
			return true
		}
		// A pattern naming a directory matches everything under it.
		if ok, _ := doublestar.Match(p+"/**", rel); ok {
			return true
		}
	}
	return false
}

// LinkedRuntimeSource is the config of a runtime linked with drover
// runtimes link that has no runtime: config of its own: a Kubernetes
// runtime (no type) with the link's labels, sorted by name.
func LinkedRuntimeSource(name string, labels map[string]string) (*Source, error) {
	rt := Runtime{Name: name}
	for k, v := range labels {
		rt.Labels = append(rt.Labels, Label{Label: k, Value: v})
	}
	sort.Slice(rt.Labels, func(i, j int) bool { return rt.Labels[i].Label < rt.Labels[j].Label })
	body, err := json.Marshal(File{Runtime: &rt})
	if err != nil {
		return nil, err
	}
	path := "linked runtime " + name
	dec, err := DecodeInternal(path, body)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &Source{Path: path, Decoded: dec}, nil
}
