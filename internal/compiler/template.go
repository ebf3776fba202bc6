package compiler

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"text/template"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/manifest"
)

// Data is what templates see: {{.Params.x}}, {{.Constants.y}}, {{.Builtins.z}}.
type Data struct {
	Params    map[string]any
	Constants map[string]string
	Builtins  Builtins
	// secrets are the raw secret parameters in Params that print as
	// sentinels (template_secrets.go), nil when there are none.
	secrets *renderSecrets
}

// Builtins are the values drover provides to every template.
type Builtins struct {
	ReleaseChannel NameOnly
	Runtime        RuntimeInfo
	// Group is the release channel group the channel was generated from, or "".
	Group       string
	Service     NameOnly
	Application NameOnly
}

// NameOnly is an object templates know by name.
type NameOnly struct{ Name string }

// RuntimeInfo is the runtime of the release channel's selected connection.
type RuntimeInfo struct {
	Name   string
	Labels map[string]string
}

// render executes s as a Go template with missingkey=error. Text without "{{"
// is returned as is, which keeps large static manifests cheap.
func render(ctx context.Context, name, s string, data any) (string, error) {
	return (*templateCache)(nil).render(ctx, name, s, data)
}

// templateCache parses each distinct template text once per compilation: the
// same files are rendered for every release channel. It also holds the
// compilation's output budget (MaxCompileOutput). It is safe for concurrent
// use; a nil cache parses every time and gives each render its own budget.
type templateCache struct {
	m      sync.Map // name+text -> *template.Template or error
	budget outputBudget
	// decoded are the manifests decoded so far, by rendered text: release
	// channels often render a service's manifests alike (see
	// rcCompiler.decode).
	decoded sync.Map // rendered text -> *decodedText
}

// decodedText is rendered YAML decoded once for every channel that
// rendered it.
type decodedText struct {
	once sync.Once
	objs []manifest.Object
	err  error
}

type parsed struct {
	t   *template.Template
	err error
}

func (c *templateCache) render(ctx context.Context, name, s string, data any) (string, error) {
	out, err := c.renderText(ctx, name, s, data)
	if err != nil {
		return "", err
	}
	if d, ok := data.(*Data); ok {
		return d.secrets.finish(out)
	}
	return out, nil
}

func (c *templateCache) renderText(ctx context.Context, name, s string, data any) (string, error) {
	if !strings.Contains(s, "{{") {
		return s, nil
	}
	var p parsed
	key := name + "\x00" + s
	if c != nil {
		if v, ok := c.m.Load(key); ok {
			p = v.(parsed)
		}
	}
	if p.t == nil && p.err == nil {
		p.t, p.err = template.New(name).Option("missingkey=error").Parse(s)
		if p.err == nil {
			p.err = checkFormats(p.t)
		}
		if p.err == nil {
			instrument(p.t)
		} else {
			p.t = nil
		}
		if c != nil {
			c.m.Store(key, p)
		}
	}
	if p.err != nil {
		return "", p.err
	}
	var budget *outputBudget
	if c != nil {
		budget = &c.budget
	}
	return execute(ctx, p.t, data, budget)
}

// templateErrRE matches text/template errors: "template: NAME:LINE:COL: rest" or
// "template: NAME:LINE: rest".
var templateErrRE = regexp.MustCompile(`^template: (.*?):(\d+)(?::\d+)?: (.*)$`)

// executingRE matches the execution prefix: `executing "NAME" at <.Params.x>: `.
var executingRE = regexp.MustCompile(`^executing ".*?" at <(.*?)>: (.*)$`)

var missingKeyRE = regexp.MustCompile(`map has no entry for key "(.*)"`)

// templateError turns a text/template error into a readable message and the
// line (1-based within the template text) it happened on.
func templateError(err error) (line int, msg string) {
	if le, ok := errors.AsType[*LimitError](err); ok {
		return le.Line, le.Error()
	}
	if se, ok := errors.AsType[*SecretError](err); ok {
		return se.Line, "template: " + se.Error()
	}
	m := templateErrRE.FindStringSubmatch(err.Error())
	if m == nil {
		return 0, err.Error()
	}
	line, _ = strconv.Atoi(m[2])
	msg = m[3]
	if e := executingRE.FindStringSubmatch(msg); e != nil {
		expr, rest := e[1], e[2]
		if k := missingKeyRE.FindStringSubmatch(rest); k != nil {
			return line, fmt.Sprintf("template %s: missing key %q", expr, k[1])
		}
		return line, fmt.Sprintf("template %s: %s", expr, rest)
	}
	return line, "template: " + msg
}

// renderField renders a templated config field; errors name the field.
func (c *rcCompiler) renderField(field, s string, data any) (string, bool) {
	out, err := c.templates.render(c.ctx, field, s, data)
	if err != nil {
		_, msg := templateError(err)
		c.fail(Error{Object: c.serviceObject(), Field: field, Msg: msg + keysHint(msg, data)})
		return "", false
	}
	return out, true
}

// renderText renders referenced file content (inlined Kubernetes YAML); errors
// name the referenced file and the line within it.
func (c *rcCompiler) renderText(field, text string, data any) (string, bool) {
	out, err := c.templates.render(c.ctx, field, text, data)
	if err != nil {
		line, msg := templateError(err)
		file, fline := config.LocateSource(text, line)
		c.fail(Error{Object: c.serviceObject(), Field: field, File: file, Line: fline, Msg: msg + keysHint(msg, data)})
		return "", false
	}
	return out, true
}

// keysHint lists the available keys when a template referenced a missing one.
func keysHint(msg string, data any) string {
	d, ok := data.(*Data)
	if !ok || !strings.Contains(msg, "missing key") {
		return ""
	}
	var avail []string
	switch {
	case strings.Contains(msg, ".Params."):
		for k := range d.Params {
			avail = append(avail, k)
		}
	case strings.Contains(msg, ".Constants."):
		for k := range d.Constants {
			avail = append(avail, k)
		}
	case strings.Contains(msg, ".Labels."):
		for k := range d.Builtins.Runtime.Labels {
			avail = append(avail, k)
		}
	default:
		return ""
	}
	if len(avail) == 0 {
		return " (none are defined)"
	}
	sortStrings(avail)
	return " (defined: " + strings.Join(avail, ", ") + ")"
}
