package server

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/pmezard/go-difflib/difflib"
	"sigs.k8s.io/yaml"

	apiv1 "github.com/drover-dev/drover/api/v1"
	"github.com/drover-dev/drover/internal/config"
	ds "github.com/drover-dev/drover/internal/desiredstate"
	"github.com/drover-dev/drover/internal/engine"
	"github.com/drover-dev/drover/internal/store"
)

// preview compiles a push as push does and says, per release channel,
// what would change against what was last applied there and what stands
// in the way; nothing is stored or applied.
func (s *Server) preview(ctx context.Context, app, svc string, req apiv1.PushRequest) (*apiv1.PreviewResponse, error) {
	in, _, res, form, err := s.compilePush(ctx, app, svc, req)
	if err != nil {
		return nil, err
	}
	list, err := s.store.ListInstances(ctx, app, svc)
	if err != nil {
		return nil, err
	}
	insts := map[string]store.Instance{}
	for _, i := range list {
		insts[i.ReleaseChannel] = i
	}
	freezes, err := s.loadFreezes(ctx)
	if err != nil {
		return nil, err
	}
	obs, err := s.store.ListObservations(ctx, app, svc)
	if err != nil {
		return nil, err
	}
	observed := make(map[string]store.Observation, len(obs))
	for _, o := range obs {
		observed[o.ReleaseChannel] = o
	}
	out := &apiv1.PreviewResponse{BundleVersion: res.BundleVersion, BundleName: res.BundleName, Channels: []apiv1.ChannelPreview{}}
	was := s.paramsOf(ctx)
	for _, ch := range form.Channels {
		ech := engine.Channel{Channel: ch, Version: form.Version}
		p := s.channelPreview(ctx, app, ech, insts[ch.Name], observed[ch.Name], redactParams(in, req.Params), was)
		p.Gates = s.gates(app, ech, freezes)
		out.Channels = append(out.Channels, p)
	}
	return out, nil
}

// channelPreview compares channel ch (the version it would get) with what
// was last applied to it (inst's target).
// The last plan of the version by a runtime of a kind that plans (a
// Terraform runner), where it made one, is read from the engine's
// observation o.
// params are the push's parameter values (secrets redacted); paramsWas reads
// those of the desired state last applied (paramsOf).
func (s *Server) channelPreview(ctx context.Context, app string, ch engine.Channel, inst store.Instance, o store.Observation, params []apiv1.Param, paramsWas func(id string) []apiv1.Param) apiv1.ChannelPreview {
	p := apiv1.ChannelPreview{Name: ch.Name, Runtime: ch.Runtime, From: inst.TargetVersion, To: ch.Version}
	p.Params = paramChanges(paramsWas(inst.TargetStateID), params, ch.Name)
	if kind, _ := config.LookupRuntimeKind(ch.RuntimeKind); kind.Plans && o.TargetVersion == ch.Version && o.Error == "" {
		p.Plan = o.Message
		if o.Message == "" && o.Converged {
			p.Plan = "No changes."
		}
	}
	var before *ds.Channel
	if inst.TargetStateID != "" {
		d, err := s.states.Decode(ctx, store.DesiredState{ID: inst.TargetStateID, Application: app, Service: inst.Service})
		switch {
		case err != nil:
			p.Note = fmt.Sprintf("what was last applied (%s) cannot be read (%v): every object is shown as new", inst.TargetVersion, err)
		default:
			for i := range d.Channels {
				if d.Channels[i].Name == ch.Name {
					before = &d.Channels[i].Channel
				}
			}
		}
	}
	secrets := ch.Secrets()
	if before != nil {
		secrets = append(secrets, before.Secrets()...)
	}
	now := renderObjects(ch.Backend, ch.Objects, &secrets)
	var was map[string]string
	if before != nil {
		was = renderObjects(before.Backend, before.Objects, &secrets)
	}
	names := slices.Sorted(maps.Keys(now))
	for name := range was {
		if _, ok := now[name]; !ok {
			names = append(names, name)
		}
	}
	unchanged := true
	for _, name := range names {
		a, b := redact(was[name], secrets), redact(now[name], secrets)
		oc := apiv1.ObjectChange{Object: name}
		_, existed := was[name]
		_, exists := now[name]
		switch {
		case !existed:
			oc.Action = "created"
		case !exists:
			oc.Action = "deleted"
		case a == b:
			oc.Action = "unchanged"
		default:
			oc.Action = "changed"
		}
		if oc.Action != "unchanged" {
			unchanged = false
			oc.Diff, _ = difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
				A: diffLines(a), B: diffLines(b),
				FromFile: name + "@" + orNone(p.From), ToFile: name + "@" + p.To, Context: 3,
			})
		}
		p.Objects = append(p.Objects, oc)
	}
	var beforeEnv map[string]string
	if before != nil {
		beforeEnv = before.Env
	}
	for _, k := range slices.Sorted(maps.Keys(ch.Env)) {
		old, ok := beforeEnv[k]
		switch {
		case !ok:
			p.Env = append(p.Env, "+"+k)
		case old != ch.Env[k]:
			p.Env = append(p.Env, "~"+k)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(beforeEnv)) {
		if _, ok := ch.Env[k]; !ok {
			p.Env = append(p.Env, "-"+k)
		}
	}
	p.Unchanged = unchanged && len(p.Env) == 0 && before != nil
	return p
}

// paramsOf returns a reader of desired states' recorded parameter values,
// by id ("" or an unreadable one: none), that reads each state once: the
// channels of a service mostly share the state they last got.
func (s *Server) paramsOf(ctx context.Context) func(id string) []apiv1.Param {
	read := map[string][]apiv1.Param{}
	return func(id string) []apiv1.Param {
		if id == "" {
			return nil
		}
		if ps, ok := read[id]; ok {
			return ps
		}
		var ps []apiv1.Param
		if rec, err := s.store.GetDesiredState(ctx, id); err == nil {
			ps = decodeParams(rec.Params)
		}
		read[id] = ps
		return ps
	}
}

// decodeParams reads a desired state's recorded parameter values (none
// when it has none, or they cannot be read).
func decodeParams(raw []byte) []apiv1.Param {
	var out []apiv1.Param
	if len(raw) > 0 {
		_ = json.Unmarshal(raw, &out)
	}
	return out
}

// paramChanges lists the parameters whose value for release channel rc
// differs between two pushes (a channel's own value overrides the
// push's). A value not given is the config's default ("" here). Secret
// values are recorded redacted: they are never compared.
func paramChanges(before, after []apiv1.Param, rc string) []apiv1.ParamChange {
	values := func(ps []apiv1.Param) map[string]string {
		out, own := map[string]string{}, map[string]bool{}
		for _, p := range ps {
			switch {
			case p.ReleaseChannel == rc:
				out[p.Name], own[p.Name] = p.Value, true
			case p.ReleaseChannel == "" && !own[p.Name]:
				out[p.Name] = p.Value
			}
		}
		return out
	}
	a, b := values(before), values(after)
	names := map[string]bool{}
	for k := range a {
		names[k] = true
	}
	for k := range b {
		names[k] = true
	}
	var out []apiv1.ParamChange
	for _, name := range slices.Sorted(maps.Keys(names)) {
		if a[name] == b[name] || a[name] == redactedValue || b[name] == redactedValue {
			continue
		}
		out = append(out, apiv1.ParamChange{Name: name, From: a[name], To: b[name]})
	}
	return out
}

// gates says what stands between a push and channel ch's rollout.
func (s *Server) gates(app string, ch engine.Channel, freezes []ds.Freeze) []string {
	var out []string
	if len(ch.DependsOn) > 0 {
		out = append(out, fmt.Sprintf("release channels %s converged at %s", strings.Join(ch.DependsOn, ", "), ch.Version))
	}
	for _, r := range engine.CheckReports(ch, store.Instance{}, nil, nil, s.now()) {
		line := fmt.Sprintf("%s: %s", r.Check, r.State)
		switch {
		case r.State == engine.CheckPending && len(r.Check.Command) > 0:
			line = fmt.Sprintf("%s: runs its command then", r.Check)
		case r.State == engine.CheckPending && r.Check.Gate != nil:
			line = fmt.Sprintf("%s: %s then", r.Check, s.gateKind.Describe(*r.Check.Gate))
		case r.Message != "":
			line += " now: " + r.Message
		}
		out = append(out, line)
	}
	for _, g := range ch.Approvals {
		out = append(out, fmt.Sprintf("approval %s: %d approver(s)", g.Topic, g.MinApprovers))
	}
	for i := range freezes {
		if f := &freezes[i]; f.Active(s.now()) && f.Covers(app, &ch.Channel) {
			out = append(out, f.Describe())
		}
	}
	return out
}

// renderObjects names a channel's objects and renders each as YAML for a
// diff: Kubernetes manifests by kind, namespace and name; a runtime's one
// object by its kind and runtime ("custom/vm"), without its secrets (their
// values are added to secrets, to be redacted wherever they appear).
func renderObjects(backend string, objs []json.RawMessage, secrets *[]string) map[string]string {
	out := map[string]string{}
	for _, o := range renderObjectList(backend, objs, secrets) {
		out[o.name] = o.yaml
	}
	return out
}

// renderedObject is one object of a channel, named and rendered as YAML.
type renderedObject struct{ name, yaml string }

// renderObjectList is renderObjects in the objects' order.
func renderObjectList(backend string, objs []json.RawMessage, secrets *[]string) []renderedObject {
	out := make([]renderedObject, 0, len(objs))
	for i, raw := range objs {
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			out = append(out, renderedObject{fmt.Sprintf("object %d", i), string(raw)})
			continue
		}
		var name string
		if backend == "kubernetes" {
			meta, _ := m["metadata"].(map[string]any)
			n, _ := meta["name"].(string)
			ns, _ := meta["namespace"].(string)
			kind, _ := m["kind"].(string)
			name = kind + " " + n
			if ns != "" {
				name = kind + " " + ns + "/" + n
			}
		} else {
			kind, _ := m["kind"].(string)
			rt, _ := m["runtime"].(string)
			name = kind + "/" + rt
			if sec, ok := m["secrets"].(map[string]any); ok {
				collectStrings(sec, secrets)
				delete(m, "secrets")
			}
		}
		if kind, _ := m["kind"].(string); backend == "kubernetes" && kind == "Secret" {
			// A Secret's data is all secret: keep its keys only.
			for _, field := range []string{"data", "stringData"} {
				if d, ok := m[field].(map[string]any); ok {
					collectStrings(d, secrets)
					for k := range d {
						d[k] = "(redacted)"
					}
				}
			}
		}
		// Raw secret values anywhere in the object (a command's env
		// rawSecret) are secrets too: hidden here and wherever they appear.
		hideRawSecrets(m, secrets)
		b, err := yaml.Marshal(redactTree(m, *secrets))
		if err != nil {
			b = raw
		}
		out = append(out, renderedObject{name, string(b)})
	}
	return out
}

func collectStrings(v any, into *[]string) {
	switch x := v.(type) {
	case string:
		if x != "" {
			*into = append(*into, x)
		}
	case map[string]any:
		for _, e := range x {
			collectStrings(e, into)
		}
	case []any:
		for _, e := range x {
			collectStrings(e, into)
		}
	}
}

// hideRawSecrets replaces the value of every "rawSecret" key in v with
// "(redacted)", adding the values to secrets.
func hideRawSecrets(v any, secrets *[]string) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if str, ok := e.(string); ok && k == "rawSecret" {
				if str != "" {
					*secrets = append(*secrets, str)
				}
				x[k] = "(redacted)"
				continue
			}
			hideRawSecrets(e, secrets)
		}
	case []any:
		for _, e := range x {
			hideRawSecrets(e, secrets)
		}
	}
}

// redactTree replaces the secret values in every string of a decoded
// object, before it is written out (so that quoting or folding a value
// cannot hide it from redaction).
func redactTree(v any, secrets []string) any {
	switch x := v.(type) {
	case string:
		return redact(x, secrets)
	case map[string]any:
		for k, e := range x {
			x[k] = redactTree(e, secrets)
		}
	case []any:
		for i, e := range x {
			x[i] = redactTree(e, secrets)
		}
	}
	return v
}

// redact replaces every secret value in s, longest first (values shorter
// than three characters are not replaced: they would blank out ordinary
// text, and say little).
func redact(s string, secrets []string) string {
	sorted := slices.Clone(secrets)
	sort.Slice(sorted, func(i, j int) bool { return len(sorted[i]) > len(sorted[j]) })
	for _, v := range sorted {
		if len(v) >= 3 {
			s = strings.ReplaceAll(s, v, "(redacted)")
		}
	}
	return s
}

// diffLines splits s into lines for a diff, each with its newline (none
// for "").
func diffLines(s string) []string {
	if s == "" {
		return nil
	}
	lines := strings.SplitAfter(s, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

func orNone(v string) string {
	if v == "" {
		return "none"
	}
	return v
}
