package compiler

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/labelquery"
)

// ReleaseChannel is an application's release channel after group expansion.
type ReleaseChannel struct {
	config.ReleaseChannel
	// FromGroup is the release channel group that generated it, or "".
	FromGroup string
	// Field is where it is defined in the application config.
	Field string
}

// groupData is what release channel group templates see.
type groupData struct {
	Builtins struct {
		Group   string
		Runtime RuntimeInfo
	}
}

// RuntimeLabels returns a runtime's labels plus the automatic @type and @name.
func RuntimeLabels(rt *config.Runtime) labelquery.Labels {
	l := labelquery.Labels{"@type": "runtime", "@name": rt.Name, "@id": rt.Name}
	for _, lb := range rt.Labels {
		l[lb.Label] = lb.Value
	}
	return l
}

// ReleaseChannelLabels returns a release channel's labels plus the automatic
// @type, @name, @group and @application.
func ReleaseChannelLabels(app string, rc *ReleaseChannel) labelquery.Labels {
	l := labelquery.Labels{"@type": "release-channel", "@name": rc.Name, "@id": rc.Name, "@application": app}
	if rc.Group != "" {
		l["@group"] = rc.Group
	}
	for _, lb := range rc.Labels {
		l[lb.Label] = lb.Value
	}
	return l
}

// ExpandReleaseChannels returns the application's release channels: the ones it
// lists, then one per runtime matched by each release channel group, in group
// order and by runtime name. A generated channel is the defaults
// (name <group>-<runtime>, group <group>, runtimes [<runtime>]) overlaid by the
// group's template, whose strings are templates over .Builtins.Group and
// .Builtins.Runtime. Template runtimes replace the default runtime entry.
// The templates stop when ctx is done and are bounded like those of a
// compilation (MaxCompileOutput).
func ExpandReleaseChannels(ctx context.Context, app *config.Application, runtimes map[string]*config.Runtime) ([]ReleaseChannel, []Error) {
	return expandReleaseChannels(ctx, &templateCache{}, app, runtimes)
}

// expandReleaseChannels is ExpandReleaseChannels rendering with the
// compilation's templates (and their budget).
func expandReleaseChannels(ctx context.Context, templates *templateCache, app *config.Application, runtimes map[string]*config.Runtime) ([]ReleaseChannel, []Error) {
	var (
		out  []ReleaseChannel
		errs []Error
	)
	obj := "application/" + app.Name
	for i, rc := range app.ReleaseChannels {
		out = append(out, ReleaseChannel{ReleaseChannel: rc, Field: fmt.Sprintf("application.releaseChannels[%d]", i)})
	}
	names := make([]string, 0, len(runtimes))
	for n := range runtimes {
		names = append(names, n)
	}
	sort.Strings(names)
	for gi, g := range app.ReleaseChannelGroups {
		field := fmt.Sprintf("application.releaseChannelGroups[%d]", gi)
		q := (*labelquery.Query)(nil)
		if g.RuntimeSelector != "" {
			var err error
			if q, err = labelquery.Parse(g.RuntimeSelector); err != nil {
				errs = append(errs, Error{Object: obj, Field: field + ".runtimeSelector", Msg: err.Error()})
				continue
			}
		}
		matched := 0
		for _, rn := range names {
			rt := runtimes[rn]
			labels := RuntimeLabels(rt)
			if q != nil && !q.Match(labels) {
				continue
			}
			matched++
			if err := ctx.Err(); err != nil {
				errs = append(errs, Error{Object: obj, Field: field + ".template", Msg: fmt.Sprintf("runtime %s: not expanded: %v", rt.Name, err)})
				return out, errs
			}
			rc, err := expandGroup(ctx, templates, g, rt)
			if err != nil {
				errs = append(errs, Error{Object: obj, Field: field + ".template", Msg: fmt.Sprintf("runtime %s: %v", rt.Name, err)})
				continue
			}
			out = append(out, ReleaseChannel{ReleaseChannel: *rc, FromGroup: g.Name, Field: field})
		}
		if matched == 0 && !g.AllowEmpty {
			errs = append(errs, Error{Object: obj, Field: field + ".runtimeSelector", Msg: fmt.Sprintf("release channel group %q matches no runtime (set allowEmpty: true to allow this)", g.Name)})
		}
	}
	seen := map[string]string{}
	for _, rc := range out {
		if prev, ok := seen[rc.Name]; ok {
			errs = append(errs, Error{Object: obj, Field: rc.Field, Msg: fmt.Sprintf("release channel %q is defined twice (also by %s)", rc.Name, prev)})
		}
		seen[rc.Name] = rc.Field
	}
	return out, errs
}

func expandGroup(ctx context.Context, templates *templateCache, g config.ReleaseChannelGroup, rt *config.Runtime) (*config.ReleaseChannel, error) {
	var data groupData
	data.Builtins.Group = g.Name
	data.Builtins.Runtime = RuntimeInfo{Name: rt.Name, Labels: map[string]string{}}
	for _, l := range rt.Labels {
		data.Builtins.Runtime.Labels[l.Label] = l.Value
	}
	rc := config.ReleaseChannel{}
	if g.Template != nil {
		// Render every string of the template by round-tripping it through JSON.
		raw, err := json.Marshal(g.Template)
		if err != nil {
			return nil, err
		}
		var tree any
		if err := json.Unmarshal(raw, &tree); err != nil {
			return nil, err
		}
		tree, err = renderStrings(ctx, templates, tree, &data)
		if err != nil {
			return nil, err
		}
		if raw, err = json.Marshal(tree); err != nil {
			return nil, err
		}
		if err := json.Unmarshal(raw, &rc); err != nil {
			return nil, err
		}
	}
	if rc.Name == "" {
		rc.Name = g.Name + "-" + rt.Name
	}
	if rc.Group == "" {
		rc.Group = g.Name
	}
	if len(rc.Runtimes) == 0 {
		rc.Runtimes = []config.RuntimeConnection{{Runtime: rt.Name}}
	}
	if len(rc.Name) > 63 || !validName(rc.Name) {
		return nil, fmt.Errorf("generated release channel name %q is not a valid name (1-63 lower-case letters, digits and '-')", rc.Name)
	}
	return &rc, nil
}

// renderStrings renders every string of a JSON tree as a template.
func renderStrings(ctx context.Context, templates *templateCache, v any, data any) (any, error) {
	switch x := v.(type) {
	case string:
		out, err := templates.render(ctx, "template", x, data)
		if err != nil {
			_, msg := templateError(err)
			return nil, fmt.Errorf("%s", msg)
		}
		return out, nil
	case map[string]any:
		for k, e := range x {
			r, err := renderStrings(ctx, templates, e, data)
			if err != nil {
				return nil, err
			}
			x[k] = r
		}
	case []any:
		for i, e := range x {
			r, err := renderStrings(ctx, templates, e, data)
			if err != nil {
				return nil, err
			}
			x[i] = r
		}
	}
	return v, nil
}
