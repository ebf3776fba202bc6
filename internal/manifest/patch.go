package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"
)

// Target selects the objects a [Patch] applies to. An empty field matches
// anything; non-empty fields must match exactly (case-sensitive).
type Target struct {
	Group, Version, Kind, Name, Namespace string
}

// Patch mirrors Prodvana's kubernetesConfig.patches[] item after the compiler
// has templated it: an optional target and a JSON6902 "replace" of the value
// at Path (a JSON pointer such as /spec/replicas) with Value.
//
// Value may be any value encoding/json can marshal; numbers follow the
// package's numeric convention once applied (int64(5) and float64(5) both
// end up as int64(5)).
type Patch struct {
	Target *Target // nil matches all objects
	Path   string
	Value  any
}

// Matches reports whether obj is selected by t. A nil Target matches every
// object. Group and Version are compared with the parts of apiVersion
// ("apps/v1" is group "apps", version "v1"; "v1" is group "", version "v1").
func (t *Target) Matches(obj Object) bool {
	if t == nil {
		return true
	}
	group, version := splitAPIVersion(stringField(obj, "apiVersion"))
	meta, _ := obj["metadata"].(map[string]any)
	return (t.Group == "" || t.Group == group) &&
		(t.Version == "" || t.Version == version) &&
		(t.Kind == "" || t.Kind == stringField(obj, "kind")) &&
		(t.Name == "" || t.Name == stringField(meta, "name")) &&
		(t.Namespace == "" || t.Namespace == stringField(meta, "namespace"))
}

func (t *Target) String() string {
	if t == nil {
		return "all objects"
	}
	var parts []string
	for _, f := range []struct{ k, v string }{
		{"group", t.Group}, {"version", t.Version}, {"kind", t.Kind},
		{"name", t.Name}, {"namespace", t.Namespace},
	} {
		if f.v != "" {
			parts = append(parts, f.k+"="+strconv.Quote(f.v))
		}
	}
	if len(parts) == 0 {
		return "all objects"
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

func splitAPIVersion(apiVersion string) (group, version string) {
	if i := strings.LastIndex(apiVersion, "/"); i >= 0 {
		return apiVersion[:i], apiVersion[i+1:]
	}
	return "", apiVersion
}

func stringField(m map[string]any, key string) string {
	s, _ := m[key].(string)
	return s
}

// ObjectName describes obj as kind/name (kind/namespace/name when it has a
// namespace) for messages.
func ObjectName(obj Object) string {
	meta, _ := obj["metadata"].(map[string]any)
	kind, name := stringField(obj, "kind"), stringField(meta, "name")
	if kind == "" {
		kind = "<no kind>"
	}
	if name == "" {
		name = "<no name>"
	}
	if ns := stringField(meta, "namespace"); ns != "" {
		return kind + "/" + ns + "/" + name
	}
	return kind + "/" + name
}

// ApplyPatches applies every patch to every object it targets, in order (a
// patch sees the effect of the ones before it, including on target
// matching). It is all or nothing: on error objs are left unchanged.
//
// A replace whose path does not exist in a targeted object is an error
// naming the object and the path (JSON6902 replace semantics: the location
// must exist; array indexes must be in range; "-" and negative indexes are
// not accepted). A patch that targets no object at all is an error too.
//
// Patched objects are updated in place: the map in objs[i] keeps its
// identity and receives the new contents.
func ApplyPatches(objs []Object, patches []Patch) error {
	work := make([]Object, len(objs))
	copy(work, objs)
	changed := make([]bool, len(objs))
	opts := jsonpatch.NewApplyOptions()
	opts.SupportNegativeIndices = false

	for i, p := range patches {
		what := fmt.Sprintf("patches[%d] (replace %s)", i, p.Path)
		if !strings.HasPrefix(p.Path, "/") {
			return fmt.Errorf("%s: path must be a JSON pointer starting with \"/\"", what)
		}
		value, err := json.Marshal(p.Value)
		if err != nil {
			return fmt.Errorf("%s: value cannot be encoded as JSON: %w", what, err)
		}
		path, _ := json.Marshal(p.Path)
		ops, err := jsonpatch.DecodePatch([]byte(`[{"op":"replace","path":` + string(path) + `,"value":` + string(value) + `}]`))
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		matched := 0
		for j, obj := range work {
			if !p.Target.Matches(obj) {
				continue
			}
			matched++
			doc, err := json.Marshal(obj)
			if err != nil {
				return fmt.Errorf("%s: %s: cannot encode object as JSON: %w", what, ObjectName(obj), err)
			}
			out, err := ops.ApplyWithOptions(doc, opts)
			if err != nil {
				if errors.Is(err, jsonpatch.ErrMissing) || errors.Is(err, jsonpatch.ErrInvalidIndex) {
					return fmt.Errorf("%s: %s has no %s (a replace needs an existing location)", what, ObjectName(obj), p.Path)
				}
				return fmt.Errorf("%s: %s: %w", what, ObjectName(obj), err)
			}
			patched, err := decodeJSONObject(out)
			if err != nil {
				return fmt.Errorf("%s: %s: %w", what, ObjectName(obj), err)
			}
			work[j], changed[j] = patched, true
		}
		if matched == 0 {
			return fmt.Errorf("%s: target %s matches no object", what, p.Target)
		}
	}
	for i := range objs {
		if !changed[i] {
			continue
		}
		if objs[i] == nil {
			objs[i] = work[i]
			continue
		}
		clear(objs[i])
		maps.Copy(objs[i], work[i])
	}
	return nil
}

// decodeJSONObject decodes a JSON object applying the numeric convention.
func decodeJSONObject(data []byte) (Object, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	obj, ok := normalizeJSON(v).(map[string]any)
	if !ok {
		return nil, fmt.Errorf("result is %s, not an object", describe(normalizeJSON(v)))
	}
	return obj, nil
}

// normalizeJSON converts json.Number values (from a UseNumber decoder) to
// int64/float64 per the numeric convention, in place.
func normalizeJSON(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = normalizeJSON(e)
		}
	case []any:
		for i, e := range x {
			x[i] = normalizeJSON(e)
		}
	case json.Number:
		if i, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			return i
		}
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil {
			// Out of float64 range; cannot come from json.Marshal output.
			return string(x)
		}
		n, _ := normalizeFloat(f)
		return n
	}
	return v
}
