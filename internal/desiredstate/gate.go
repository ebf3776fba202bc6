package desiredstate

import (
	"bytes"
	"encoding/json"
	"errors"
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
		if fieldNames(t).lower[strings.ToLower(kind)] {
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
	names := fieldNames(reflect.TypeOf(v).Elem())
	var g *Gate
	err := eachMember(data, func(name, raw []byte) error {
		if names.exact[string(name)] || string(raw) == "null" {
			return nil
		}
		kind := string(name)
		if bytes.IndexByte(name, '\\') >= 0 {
			if err := json.Unmarshal(append(append([]byte{'"'}, name...), '"'), &kind); err != nil {
				return err
			}
		}
		if names.lower[strings.ToLower(kind)] {
			return nil // encoding/json matched it to a field regardless of case
		}
		if g != nil {
			a, b := g.Kind, kind
			if b < a {
				a, b = b, a
			}
			return fmt.Errorf("two gates, %q and %q: a check has one", a, b)
		}
		g = &Gate{Kind: kind, Spec: append(json.RawMessage(nil), raw...)}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return g, nil
}

// eachMember calls f with the name (as written, without its quotes) and
// the value of each member of the JSON object data, which json.Unmarshal
// has already found valid. It reads the object once, allocating nothing,
// where decoding it into a map would copy every member.
func eachMember(data []byte, f func(name, value []byte) error) error {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return errors.New("not a JSON object")
	}
	i = skipSpace(data, i+1)
	for i < len(data) && data[i] != '}' {
		end := endOfString(data, i)
		name := data[i+1 : end-1]
		i = skipSpace(data, end)
		if i >= len(data) || data[i] != ':' {
			return errors.New("undecodable JSON object")
		}
		i = skipSpace(data, i+1)
		start := i
		i = endOfValue(data, i)
		if err := f(name, data[start:i]); err != nil {
			return err
		}
		i = skipSpace(data, i)
		if i < len(data) && data[i] == ',' {
			i = skipSpace(data, i+1)
		}
	}
	return nil
}

func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// endOfString is the index after the string that starts at data[i] (").
func endOfString(data []byte, i int) int {
	for j := i + 1; j < len(data); j++ {
		switch data[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return len(data)
}

// endOfValue is the index after the value that starts at data[i].
func endOfValue(data []byte, i int) int {
	if i >= len(data) {
		return i
	}
	switch data[i] {
	case '"':
		return endOfString(data, i)
	case '{', '[':
		depth := 0
		for i < len(data) {
			switch data[i] {
			case '"':
				i = endOfString(data, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return i
	}
	for i < len(data) && !strings.ContainsRune(",}] \t\r\n", rune(data[i])) {
		i++ // a number, true, false or null
	}
	return i
}

// memberNames are the JSON member names of a struct's fields: as written,
// and in lower case (encoding/json matches them regardless of case).
type memberNames struct{ exact, lower map[string]bool }

// fieldsByType caches fieldNames by type.
var fieldsByType sync.Map // reflect.Type -> memberNames

// fieldNames are the JSON member names of struct type t's fields, without
// embedded structs' promotion: the types read here embed none.
func fieldNames(t reflect.Type) memberNames {
	if m, ok := fieldsByType.Load(t); ok {
		return m.(memberNames)
	}
	m := memberNames{exact: map[string]bool{}, lower: map[string]bool{}}
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
		m.exact[name], m.lower[strings.ToLower(name)] = true, true
	}
	fieldsByType.Store(t, m)
	return m
}
