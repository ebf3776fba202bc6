package compiler

import (
	"errors"
	"fmt"
	"maps"
	"path"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/manifest"
)

// kubernetes renders the Kubernetes config: templates over the raw text, then
// YAML decoding, then patches (whose values are templates too).
func (c *rcCompiler) kubernetes(field string, kc *config.KubernetesConfig, data *Data) []any {
	text := kc.Inlined
	if kc.Tree != nil {
		var ok bool
		if text, ok = c.treeText(field, kc, data); !ok {
			return nil
		}
	}
	rendered := text
	if !kc.Literal {
		var ok bool
		failed := len(c.errs)
		if rendered, ok = c.renderText(field+".inlined", text, data); !ok {
			if kc.Tree != nil && kc.Type == config.KubernetesTypeKustomize && len(c.errs) > failed {
				locateInTree(&c.errs[len(c.errs)-1], text, kc.Tree)
			}
			return nil
		}
	}
	objs, ok := c.decode(field, rendered)
	if !ok {
		return nil
	}
	var patches []manifest.Patch
	for i, p := range kc.Patches {
		pf := fmt.Sprintf("%s.patches[%d].replace", field, i)
		mp := manifest.Patch{Path: p.Replace.Path}
		if t := p.Target; t != nil {
			mp.Target = &manifest.Target{Group: t.Group, Version: t.Version, Kind: t.Kind, Name: t.Name, Namespace: t.Namespace}
		}
		switch {
		case p.Replace.String != nil:
			s, ok := c.renderField(pf+".string", *p.Replace.String, data)
			if !ok {
				continue
			}
			mp.Value = s
		case p.Replace.IntAsString != nil:
			s, ok := c.renderField(pf+".intAsString", *p.Replace.IntAsString, data)
			if !ok {
				continue
			}
			n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
			if err != nil {
				c.fail(Error{Object: c.serviceObject(), Field: pf + ".intAsString", Msg: fmt.Sprintf("%q is not an integer", s)})
				continue
			}
			mp.Value = n
		}
		patches = append(patches, mp)
	}
	if len(c.errs) > 0 {
		return nil
	}
	if err := manifest.ApplyPatches(objs, patches); err != nil {
		c.fail(Error{Object: c.serviceObject(), Field: field + ".patches", Msg: err.Error()})
		return nil
	}
	out := make([]any, len(objs))
	for i, o := range objs {
		out[i] = o
	}
	return out
}

// templateAction matches a Go template action.
var templateAction = regexp.MustCompile(`{{.*?}}`)

// locateInTree points e, a template error located in kustomize's output
// (text, after its one-line source marker), at the file of the tree the
// failing line came from: the one line of the tree's files holding the same
// template actions. Templates run on kustomize's output, as in Prodvana, but
// the user wrote the file. When no single line matches, e is left as it is.
func locateInTree(e *Error, text string, tree *config.FileTree) {
	lines := strings.Split(text, "\n")
	if e.Line < 1 || e.Line >= len(lines) {
		return
	}
	actions := templateAction.FindAllString(lines[e.Line], -1)
	if len(actions) == 0 {
		return
	}
	var file string
	var line, found int
	for _, name := range slices.Sorted(maps.Keys(tree.Files)) {
		for i, l := range strings.Split(tree.Files[name], "\n") {
			if !slices.ContainsFunc(actions, func(a string) bool { return !strings.Contains(l, a) }) {
				file, line = name, i+1
				found++
			}
		}
	}
	if found == 1 {
		e.File, e.Line = path.Join(tree.Root, file), line
	}
}

// decode splits rendered YAML into objects; errors name the source file.
func (c *rcCompiler) decode(field, rendered string) ([]manifest.Object, bool) {
	// Channels that render the same text share its decoding; each gets
	// its own copy of the objects, which it patches.
	v, ok := c.templates.decoded.Load(rendered)
	if !ok {
		v, _ = c.templates.decoded.LoadOrStore(rendered, &decodedText{})
	}
	d := v.(*decodedText)
	d.once.Do(func() { d.objs, d.err = manifest.DecodeApplicable([]byte(rendered)) })
	objs, err := d.objs, d.err
	if err == nil {
		objs = manifest.Clone(objs)
	}
	if err != nil {
		e := Error{Object: c.serviceObject(), Field: field, Msg: err.Error()}
		var me *manifest.Error
		if errors.As(err, &me) {
			e.File, e.Line = config.LocateSource(rendered, me.Line)
			e.Msg = "invalid Kubernetes YAML: " + me.Msg
			if me.Unappliable {
				e.Msg = "object cannot be applied: " + me.Msg
			}
		}
		c.fail(e)
		return nil, false
	}
	return objs, true
}

// decodeObjects is decode for results that need no patches.
func (c *rcCompiler) decodeObjects(field, rendered string) []any {
	objs, ok := c.decode(field, rendered)
	if !ok {
		return nil
	}
	out := make([]any, len(objs))
	for i, o := range objs {
		out[i] = o
	}
	return out
}

// treeText resolves the templated subPath inside a directory read with
// local.path+subPath: a file is taken as is; a directory contributes its YAML
// files (one level, without *.pvn.yaml), or is rendered with kustomize.
func (c *rcCompiler) treeText(field string, kc *config.KubernetesConfig, data *Data) (string, bool) {
	sub, ok := c.renderField(field+".local.subPath", kc.Tree.SubPath, data)
	if !ok {
		return "", false
	}
	sub = strings.Trim(path.Clean("/"+sub), "/")
	// sub lies in local.path, which is Tree.Dir in the tree (a kustomize
	// tree holds the bases beside it too).
	sub = strings.TrimPrefix(path.Join(kc.Tree.Dir, sub), "/")
	if sub == "." {
		sub = ""
	}
	display := path.Join(kc.Tree.Root, sub)
	if kc.Type == config.KubernetesTypeKustomize {
		files := map[string][]byte{}
		for k, v := range kc.Tree.Files {
			files[k] = []byte(v)
		}
		if !manifest.IsKustomizationDir(files, sub) {
			c.fail(Error{Object: c.serviceObject(), Field: field + ".local.subPath", Msg: fmt.Sprintf("%s has no kustomization.yaml", display)})
			return "", false
		}
		out, err := manifest.RenderKustomize(files, sub)
		if err != nil {
			msg := err.Error()
			if kc.Tree.Root != "" {
				// Paths in kustomize's message are the tree's: say where it is.
				msg += " (paths relative to " + kc.Tree.Root + ")"
			}
			c.fail(Error{Object: c.serviceObject(), Field: field + ".local.subPath", Msg: msg})
			return "", false
		}
		return config.SourceMarker(display) + string(out), true
	}
	if content, ok := kc.Tree.Files[sub]; ok {
		return config.SourceMarker(display) + content, true
	}
	var names []string
	for name := range kc.Tree.Files {
		dir, base := path.Split(name)
		if strings.TrimSuffix(dir, "/") != sub && (sub != "" || dir != "") {
			continue
		}
		if config.IsConfigFile(base) || (!strings.HasSuffix(base, ".yaml") && !strings.HasSuffix(base, ".yml")) {
			continue
		}
		names = append(names, name)
	}
	if len(names) == 0 {
		c.fail(Error{Object: c.serviceObject(), Field: field + ".local.subPath", Msg: fmt.Sprintf("no Kubernetes configs found at %s", display)})
		return "", false
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, n := range names {
		content := kc.Tree.Files[n]
		if !strings.HasSuffix(content, "\n") {
			content += "\n"
		}
		parts[i] = config.SourceMarker(path.Join(kc.Tree.Root, n)) + content
	}
	return strings.Join(parts, "---\n"), true
}
