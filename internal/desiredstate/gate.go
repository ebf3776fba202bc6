package desiredstate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
)

// Gate is a check's own spec, for a gate kind that an evaluator registered
// with the engine decides (internal/gates): an alert gate, commitDenylist
// ranges. Its stored form is one member of the check's JSON object, named
// by the kind, beside the check's common fields:
//
//	{"kind": "protection", "name": "alertGate", ..., "alert": {"url": ...}}
//
// so a check stored before gates were kinds reads the same.
type Gate struct {
	// Kind names the gate kind ("alert", "commits").
	Kind string
	// Spec is the kind's own JSON, which its evaluator reads.
	Spec json.RawMessage
}

// NewGate is the gate of kind with spec (encoded as JSON).
func NewGate(kind string, spec any) (*Gate, error) {
	b, err := json.Marshal(spec)
	if err != nil {
		return nil, fmt.Errorf("encode %s gate: %w", kind, err)
	}
	return &Gate{Kind: kind, Spec: b}, nil
}

// ValidGateKind says whether kind can name a gate: a JSON member name that
// none of a check's (or a compiled protection attachment's) fields takes.
func ValidGateKind(kind string) error {
	if kind == "" || strings.ContainsAny(kind, "\"\\ ") {
		return fmt.Errorf("gate kind %q: want a plain name", kind)
	}
	for _, t := range []reflect.Type{reflect.TypeFor[checkFields](), reflect.TypeFor[attachmentFields]()} {
		if fieldNames(t)[strings.ToLower(kind)] {
			return fmt.Errorf("gate kind %q: a check field of that name exists", kind)
		}
	}
	return nil
}

// MarshalGated returns the JSON object of v (a struct, or a pointer to
// one) with g, when set, as its last member.
func MarshalGated(v any, g *Gate) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil || g == nil {
		return b, err
	}
	if len(b) < 2 || b[len(b)-1] != '}' {
		return nil, fmt.Errorf("encode %s gate: not beside an object", g.Kind)
	}
	spec := g.Spec
	if len(spec) == 0 {
		spec = json.RawMessage("null")
	}
	var buf bytes.Buffer
	buf.Grow(len(b) + len(g.Kind) + len(spec) + 4)
	buf.Write(b[:len(b)-1])
	if len(b) > 2 {
		buf.WriteByte(',')
	}
	name, err := json.Marshal(g.Kind)
	if err != nil {
		return nil, err
	}
	buf.Write(name)
	buf.WriteByte(':')
	if err := json.Compact(&buf, spec); err != nil {
		return nil, fmt.Errorf("encode %s gate: %w", g.Kind, err)
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// UnmarshalGated decodes data into v (a pointer to a struct) and returns
// the gate beside its fields: the one member of data that no field of v
// names (nil when there is none, or it is null). Two such members are an
// error: a check has one gate.
func UnmarshalGated(data []byte, v any) (*Gate, error) {
	if err := json.Unmarshal(data, v); err != nil {
		return nil, err
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(data, &members); err != nil {
		return nil, err
	}
	known := fieldNames(reflect.TypeOf(v).Elem())
	var g *Gate
	for name, raw := range members {
		if known[strings.ToLower(name)] || string(raw) == "null" {
			continue
		}
		if g != nil {
			a, b := g.Kind, name
			if b < a {
				a, b = b, a
			}
			return nil, fmt.Errorf("two gates, %q and %q: a check has one", a, b)
		}
		g = &Gate{Kind: name, Spec: raw}
	}
	return g, nil
}

// fieldsByType caches fieldNames by type.
var fieldsByType sync.Map // reflect.Type -> map[string]bool

// fieldNames are the JSON member names of struct type t's fields, in
// lower case (encoding/json matches them regardless of case), without
// embedded structs' promotion: the types read here embed none.
func fieldNames(t reflect.Type) map[string]bool {
	if m, ok := fieldsByType.Load(t); ok {
		return m.(map[string]bool)
	}
	m := map[string]bool{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if name == "" {
			name = f.Name
		}
		m[strings.ToLower(name)] = true
	}
	fieldsByType.Store(t, m)
	return m
}
