package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	apiv1 "github.com/drover-dev/drover/api/v1"
	"github.com/drover-dev/drover/internal/compiler"
	"github.com/drover-dev/drover/internal/config"
	ds "github.com/drover-dev/drover/internal/desiredstate"
	"github.com/drover-dev/drover/internal/store"
)

// References to stored secrets, secret{key, version}, are resolved at push,
// once the service is compiled and before its engine form is stored: each
// becomes a raw secret ({"rawSecret": VALUE}), so that every runtime's
// handling of raw secrets applies unchanged. The stored form is sealed at
// rest like any raw secret, and every answer, run and event shows it
// "(redacted)". Resolved are the release channel's env (policy.defaultEnv
// and the service's env), every EnvValue of a custom runtime's or terraform
// runner's object (its commands' and program's env, terraformRunner.env),
// the env of protections' and extensions' commands, and the secretRef of a
// custom runtime's secret parameters (which render as secret://KEY@VERSION
// and become the parameter's marker, as a rawSecret parameter does).
// Kubernetes manifests and ECS task definitions are the user's own objects
// and are left as they are. An unknown key or version refuses the push,
// naming the field and the key.

// secretResolver resolves the references of one push.
type secretResolver struct {
	ctx   context.Context
	store store.Secrets
	// runtimes are the push's runtime configs, whose definitions say
	// which parameters are secrets.
	runtimes map[string]*config.Runtime
	// values are the versions read, by "key\x00version".
	values map[string]string
	errs   []string
}

// resolveSecrets replaces the secret references of form (and those of
// res's release channels' env, which the engine form leaves out) with the
// secrets' values.
func (s *Server) resolveSecrets(ctx context.Context, in compiler.Input, res *compiler.Result, form *ds.Compiled) error {
	r := &secretResolver{ctx: ctx, store: s.store, runtimes: in.Runtimes, values: map[string]string{}}
	byName := map[string]*ds.Channel{}
	for i := range form.Channels {
		byName[form.Channels[i].Name] = &form.Channels[i]
	}
	for _, rc := range res.ReleaseChannels {
		ch := byName[rc.Name]
		if ch == nil {
			continue
		}
		added := false
		for _, k := range slices.Sorted(maps.Keys(rc.Env)) {
			v := rc.Env[k]
			if v.Secret == nil {
				continue
			}
			value, ok := r.value("release channel "+rc.Name+": env."+k, *v.Secret)
			if ok {
				ch.AddEnv(k, "", value, false)
				added = true
			}
		}
		if added {
			sort.Strings(ch.SecretEnv)
			ch.SecretEnv = slices.Compact(ch.SecretEnv)
		}
	}
	for i := range form.Channels {
		ch := &form.Channels[i]
		where := "release channel " + ch.Name
		if ch.Backend == "customRuntime" {
			for j, obj := range ch.Objects {
				if out, ok := r.rewriteJSON(where+": "+objectField(obj), obj, true); ok {
					ch.Objects[j] = out
				}
			}
		}
		for j := range ch.Checks {
			c := &ch.Checks[j]
			if len(c.Command) == 0 {
				continue
			}
			if out, ok := r.rewriteJSON(fmt.Sprintf("%s: %s %s", where, c.Kind, c.Name), c.Command, false); ok {
				c.Command = out
			}
		}
	}
	if len(r.errs) > 0 {
		return errorf(apiv1.CodeInvalidArgument, "%s", strings.Join(r.errs, "; "))
	}
	return nil
}

// objectField names a custom runtime or runner object in errors: its
// kind's field ("custom", "terraformRunner", "pulumiRunner").
func objectField(raw json.RawMessage) string {
	var o struct {
		Kind string `json:"kind"`
	}
	if json.Unmarshal(raw, &o) == nil && o.Kind != "" && o.Kind != config.KindFake {
		return o.Kind
	}
	return "custom"
}

// value is the value of ref, or false (the problem noted, naming field).
func (r *secretResolver) value(field string, ref config.SecretRef) (string, bool) {
	switch {
	case ref.Key == "":
		r.errs = append(r.errs, field+".secret: key is required")
		return "", false
	case ref.Version == "":
		r.errs = append(r.errs, fmt.Sprintf("%s.secret: secret %s needs a version, like %s (drover secrets list shows them)", field, ref.Key, store.SecretVersionName(ref.Key, 0)))
		return "", false
	}
	id := ref.Key + "\x00" + ref.Version
	if v, ok := r.values[id]; ok {
		return v, true
	}
	n, ok := store.ParseSecretVersion(ref.Key, ref.Version)
	if !ok {
		r.errs = append(r.errs, fmt.Sprintf("%s.secret: version %q is not a version of secret %s: versions are named %s-N (drover secrets list shows them)", field, ref.Version, ref.Key, ref.Key))
		return "", false
	}
	sec, err := r.store.GetSecret(r.ctx, ref.Key, n)
	switch {
	case errors.Is(err, store.ErrNotFound):
		r.errs = append(r.errs, fmt.Sprintf("%s.secret: secret %s has no version %s (drover secrets list shows them; drover secrets set %s makes one)", field, ref.Key, ref.Version, ref.Key))
		return "", false
	case err != nil:
		r.errs = append(r.errs, fmt.Sprintf("%s.secret: read secret %s: %v", field, ref.Version, err))
		return "", false
	}
	r.values[id] = string(sec.Value)
	return string(sec.Value), true
}

// rewriteJSON resolves the references in a JSON object; it reports false
// when there were none (raw is then kept byte for byte). params also
// resolves a custom runtime object's secret parameters.
func (r *secretResolver) rewriteJSON(field string, raw json.RawMessage, params bool) (json.RawMessage, bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return raw, false
	}
	changed := false
	if params {
		changed = r.secretParams(field, v)
	}
	v, c := r.rewrite(field, v)
	if !changed && !c {
		return raw, false
	}
	out, err := json.Marshal(v)
	if err != nil {
		r.errs = append(r.errs, fmt.Sprintf("%s: encode: %v", field, err))
		return raw, false
	}
	return out, true
}

// rewrite replaces every EnvValue that references a stored secret in v
// with its raw secret; field is v's path, for errors.
func (r *secretResolver) rewrite(field string, v any) (any, bool) {
	switch x := v.(type) {
	case map[string]any:
		if ref, ok := envSecretRef(x); ok {
			value, ok := r.value(field, ref)
			if !ok {
				return v, false
			}
			return map[string]any{"rawSecret": value}, true
		}
		changed := false
		for _, k := range slices.Sorted(maps.Keys(x)) {
			if e, c := r.rewrite(field+"."+k, x[k]); c {
				x[k], changed = e, true
			}
		}
		return x, changed
	case []any:
		changed := false
		for i := range x {
			if e, c := r.rewrite(field+"["+strconv.Itoa(i)+"]", x[i]); c {
				x[i], changed = e, true
			}
		}
		return x, changed
	}
	return v, false
}

// envSecretRef reads an EnvValue that references a stored secret:
// {"secret": {"key": K, "version": V}} and nothing else.
func envSecretRef(m map[string]any) (config.SecretRef, bool) {
	if len(m) != 1 {
		return config.SecretRef{}, false
	}
	inner, ok := m["secret"].(map[string]any)
	if !ok {
		return config.SecretRef{}, false
	}
	var ref config.SecretRef
	for k, e := range inner {
		s, ok := e.(string)
		switch {
		case !ok:
			return config.SecretRef{}, false
		case k == "key":
			ref.Key = s
		case k == "version":
			ref.Version = s
		default:
			return config.SecretRef{}, false
		}
	}
	return ref, ref.Key != ""
}

// secretRefText is how the compiler renders a secret parameter given by
// reference (compiler.Secret's String): secret://KEY@VERSION.
var secretRefText = regexp.MustCompile(`^secret://([^@]+)@(.*)$`)

// secretParams resolves the secret parameters given by reference of a
// custom runtime object v: each renders as secret://KEY@VERSION in the
// commands, which becomes the parameter's marker, and its value goes into
// the object's secrets, as for a rawSecret parameter.
func (r *secretResolver) secretParams(field string, v any) bool {
	obj, ok := v.(map[string]any)
	if !ok {
		return false
	}
	values, _ := obj["parameterValues"].(map[string]any)
	custom, _ := obj["custom"].(map[string]any)
	if len(values) == 0 || custom == nil {
		return false
	}
	secretDef := map[string]bool{}
	name, _ := obj["runtime"].(string)
	if rt := r.runtimes[name]; rt != nil && rt.Custom != nil {
		for _, def := range rt.Custom.Parameters {
			secretDef[def.Name] = def.Secret != nil
		}
	}
	var pairs []string
	secrets, _ := obj["secrets"].(map[string]any)
	for _, name := range slices.Sorted(maps.Keys(values)) {
		text, _ := values[name].(string)
		m := secretRefText.FindStringSubmatch(text)
		if m == nil || !secretDef[name] {
			continue
		}
		value, ok := r.value(field+".parameterValues."+name, config.SecretRef{Key: m[1], Version: m[2]})
		if !ok {
			continue
		}
		if secrets == nil {
			secrets = map[string]any{}
			obj["secrets"] = secrets
		}
		secrets[name] = map[string]any{"rawSecret": value}
		marker := compiler.SecretMarker(name)
		values[name] = marker
		pairs = append(pairs, text, marker)
	}
	if len(pairs) == 0 {
		return false
	}
	obj["custom"] = replaceIn(custom, strings.NewReplacer(pairs...))
	return true
}

// replaceIn applies rep to every string in v (decoded JSON, in place).
func replaceIn(v any, rep *strings.Replacer) any {
	switch x := v.(type) {
	case string:
		return rep.Replace(x)
	case []any:
		for i := range x {
			x[i] = replaceIn(x[i], rep)
		}
	case map[string]any:
		for k, e := range x {
			x[k] = replaceIn(e, rep)
		}
	}
	return v
}

// checkRuntimeSecrets refuses an apply whose runtime configs reference a
// stored secret that does not exist (any kind's SecretRefs: an ECS or
// Lambda runtime's accessKey.awsSecretAccessKey.secret, a Cloud Run
// runtime's serviceAccountJson.secret), naming the file and field, rather
// than storing a runtime that cannot be built. The value is read again
// when the runtime is built (runtimehost), never stored with the config.
func (s *Server) checkRuntimeSecrets(ctx context.Context, incoming []*config.Source) error {
	r := &secretResolver{ctx: ctx, store: s.store, values: map[string]string{}}
	var details []apiv1.ConfigError
	for _, src := range incoming {
		rt := src.File.Runtime
		if rt == nil {
			continue
		}
		k := rt.KindFacts()
		if k.SecretRefs == nil {
			continue
		}
		refs := k.SecretRefs(rt)
		for _, field := range slices.Sorted(maps.Keys(refs)) {
			before := len(r.errs)
			r.value(field, refs[field])
			for _, msg := range r.errs[before:] {
				details = append(details, apiv1.ConfigError{Kind: src.Kind(), Name: rt.Name, File: src.Path, Field: field + ".secret", Message: msg})
			}
		}
	}
	if len(details) > 0 {
		return &validationError{details: details}
	}
	return nil
}
