package schema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/drover-dev/drover/internal/config"
)

// ID is the schema's $id.
const ID = "https://drover.dev/schema/drover.schema.json"

// DurationPattern matches the strings config.ParseDuration accepts: a Go
// duration (time.ParseDuration), which covers Prodvana's seconds form ("30s",
// "1.5s"), not negative, with surrounding space trimmed. Negative zero ("-0s")
// is accepted like the decoder does; negative values that round to zero
// ("-0.5ns") and overflow are the only differences.
const DurationPattern = `^\s*(?:[+-]?0|\+?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)` + units + `)+|-(?:(?:0+\.?0*|\.0+)` + units + `)+)\s*$`

// units are time.ParseDuration's, with both micro signs (U+00B5 and U+03BC).
const units = `(?:ns|us|µs|μs|ms|s|m|h)`

// Int64Pattern matches the strings the decoder accepts for a config.Int64:
// strconv.ParseInt(strings.TrimSpace(s), 10, 64).
const Int64Pattern = `^\s*[+-]?[0-9]+\s*$`

const (
	unsupportedDesc = "Prodvana field not supported yet by drover"
	extensionPrefix = "drover extension: "
	envKeyVar       = "envKeyRE" // validate.go's pattern for environment variable names
)

// The config kinds, exactly one of which a file holds (decode.go's
// checkOneKind), and the metadata allowed only beside one of them.
var (
	kinds    = config.KindNames()
	metadata = map[string]string{"applicationMetadata": "application", "serviceMetadata": "service"}
)

var (
	durationType    = reflect.TypeFor[config.Duration]()
	int64Type       = reflect.TypeFor[config.Int64]()
	unsupportedType = reflect.TypeFor[config.Unsupported]()
	envValueType    = reflect.TypeFor[config.EnvValue]()
	configPkg       = reflect.TypeFor[config.File]().PkgPath()
)

// extensionNote drops the doc comments' own "drover extension" remarks,
// which the description's prefix says already.
var extensionNote = strings.NewReplacer(" (drover extension)", "", "; drover extension)", ")", "drover extension; ", "")

// object is one JSON Schema (sub)schema; encoding/json sorts its keys.
type object = map[string]any

// Generate returns the JSON Schema of a config file, indented, with a trailing
// newline. src supplies what reflection cannot see (see ReadSource).
func Generate(src *Source) ([]byte, error) {
	g := &generator{src: src, defs: object{}}
	root, spellings, err := g.structSchema(reflect.TypeFor[config.File]())
	if err != nil {
		return nil, err
	}
	if err := g.fileRules(root, spellings); err != nil {
		return nil, err
	}
	root["$schema"] = "http://json-schema.org/draft-07/schema#"
	root["$id"] = ID
	root["title"] = "drover config file (*.pvn.yaml)"
	root["definitions"] = g.defs

	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(root); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

type generator struct {
	src  *Source
	defs object
}

// fileRules adds to the File schema what checkOneKind enforces: exactly one
// kind, and metadata only beside its kind.
func (g *generator) fileRules(root object, spellings map[string][]string) error {
	known := map[string]bool{}
	for _, k := range kinds {
		known[k] = true
	}
	for k := range metadata {
		known[k] = true
	}
	t := reflect.TypeFor[config.File]()
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Type != unsupportedType && !known[name] {
			return fmt.Errorf("config.File.%s: unknown kind %q: update kinds in the schema generator (and decode.go's checkOneKind)", f.Name, name)
		}
	}
	present := func(key string) (object, error) {
		sp := spellings[key]
		if len(sp) == 0 {
			return nil, fmt.Errorf("config.File has no field %q", key)
		}
		if len(sp) == 1 {
			return object{"required": []any{sp[0]}}, nil
		}
		var alts []any
		for _, s := range sp {
			alts = append(alts, object{"required": []any{s}})
		}
		return object{"anyOf": alts}, nil
	}
	var one []any
	for _, k := range kinds {
		p, err := present(k)
		if err != nil {
			return err
		}
		p["title"] = k
		one = append(one, p)
	}
	root["oneOf"] = one
	deps, _ := root["dependencies"].(object)
	if deps == nil {
		deps = object{}
	}
	for meta, kind := range metadata {
		p, err := present(kind)
		if err != nil {
			return err
		}
		for _, s := range spellings[meta] {
			if prev, ok := deps[s]; ok {
				deps[s] = object{"allOf": []any{prev, p}}
			} else {
				deps[s] = p
			}
		}
	}
	root["dependencies"] = deps
	root["description"] = strings.TrimSpace(g.src.Docs["File"] + "\n\nA file holds exactly one of " + strings.Join(kinds, ", ") +
		"; applicationMetadata is allowed only beside application, serviceMetadata only beside service.")
	return nil
}

// ref returns a reference to the definition of the named type t, building it
// first if needed.
func (g *generator) ref(t reflect.Type, build func() (object, error)) (object, error) {
	name := t.Name()
	r := object{"$ref": "#/definitions/" + name}
	if _, ok := g.defs[name]; ok {
		return r, nil // built, or being built (a recursive type)
	}
	g.defs[name] = nil
	def, err := build()
	if err != nil {
		return nil, err
	}
	def["title"] = name
	if doc := g.src.Docs[name]; doc != "" {
		def["description"] = doc
	}
	g.defs[name] = def
	return r, nil
}

// valueSchema is the schema of a value of type t where a field of that type is.
func (g *generator) valueSchema(t reflect.Type) (object, error) {
	switch {
	case t == durationType:
		return g.ref(t, func() (object, error) {
			return object{"type": "string", "pattern": DurationPattern,
				"patternErrorMessage": `expected a duration: seconds such as "30s" or "1.5s", or a Go duration such as "5m" or "1h30m"`}, nil
		})
	case t == int64Type:
		return g.ref(t, func() (object, error) {
			return object{"oneOf": []any{
				object{"type": "integer"},
				object{"type": "string", "pattern": Int64Pattern, "patternErrorMessage": "expected an integer"},
			}}, nil
		})
	case t == unsupportedType:
		return nil, fmt.Errorf("config.Unsupported outside a struct field")
	case t.PkgPath() == configPkg && t.Name() != "" && g.src.Enums[t.Name()] != nil:
		if t.Kind() != reflect.String {
			return nil, fmt.Errorf("enum %s is not a string type", t)
		}
		return g.ref(t, func() (object, error) {
			values := g.src.Enums[t.Name()]
			var enum []any
			for _, v := range values {
				enum = append(enum, v)
			}
			for i := range values {
				enum = append(enum, i)
			}
			return object{"enum": enum}, nil
		})
	}
	switch t.Kind() {
	case reflect.Pointer:
		if e := t.Elem(); e.Kind() == reflect.Struct && e != durationType {
			// null is the empty message (`manualApproval:` with no value).
			return g.structRef(e)
		}
		s, err := g.valueSchema(t.Elem())
		if err != nil {
			return nil, err
		}
		return nullable(s), nil
	case reflect.Struct:
		// A struct that is not behind a pointer (a list item, a map value)
		// must be a mapping: the decoder rejects null there.
		s, err := g.structRef(t)
		if err != nil {
			return nil, err
		}
		if _, isRef := s["$ref"]; isRef {
			return object{"allOf": []any{s}, "type": "object"}, nil
		}
		s["type"] = "object"
		return s, nil
	case reflect.Slice:
		items, err := g.valueSchema(t.Elem())
		if err != nil {
			return nil, err
		}
		return object{"type": []any{"array", "null"}, "items": items}, nil
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return nil, fmt.Errorf("map key of %s is not a string", t)
		}
		elem, err := g.valueSchema(t.Elem())
		if err != nil {
			return nil, err
		}
		s := object{"type": []any{"object", "null"}, "additionalProperties": elem}
		if t.Elem() == envValueType {
			re := g.src.Patterns[envKeyVar]
			if re == "" {
				return nil, fmt.Errorf("no %s = regexp.MustCompile(...) in the config package", envKeyVar)
			}
			s["propertyNames"] = object{"pattern": re, "patternErrorMessage": "not a valid environment variable name"}
		}
		return s, nil
	case reflect.String:
		return object{"type": "string"}, nil
	case reflect.Bool:
		return object{"type": "boolean"}, nil
	case reflect.Int32, reflect.Int64, reflect.Int:
		maximum := int64(1)<<(t.Bits()-1) - 1 // wraps to MaxInt64 for 64 bits
		return object{"type": "integer", "minimum": -maximum - 1, "maximum": maximum}, nil
	default:
	}
	return nil, fmt.Errorf("cannot express %s (the decoder cannot decode it either)", t)
}

// structRef is the schema of a pointer to struct t, which may be null: a
// reference to its definition, or the schema itself for an anonymous struct.
func (g *generator) structRef(t reflect.Type) (object, error) {
	build := func() (object, error) {
		s, _, err := g.structSchema(t)
		if err != nil {
			return nil, err
		}
		s["type"] = []any{"object", "null"}
		return s, nil
	}
	if t.Name() == "" {
		return build()
	}
	return g.ref(t, build)
}

// nullable allows null besides s, as the decoder does for pointers.
func nullable(s object) object {
	if typ, ok := s["type"].(string); ok {
		out := object{}
		for k, v := range s {
			out[k] = v
		}
		out["type"] = []any{typ, "null"}
		return out
	}
	return object{"anyOf": []any{s, object{"type": "null"}}}
}

// field is one key of a struct as the decoder sees it.
type field struct {
	name   string // canonical json key
	alias  string
	goName string // "Type.Field" for its doc comment
	typ    reflect.Type
	tag    string // the drover tag
}

// fields mirrors decode.go's infoFor: embedded structs are flattened.
func fields(t reflect.Type) []field {
	var out []field
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			out = append(out, fields(f.Type)...)
			continue
		}
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		out = append(out, field{name: name, alias: f.Tag.Get("alias"), goName: t.Name() + "." + f.Name, typ: f.Type, tag: f.Tag.Get("drover")})
	}
	return out
}

// structSchema is the schema of a struct, and the accepted spellings of each
// canonical key.
func (g *generator) structSchema(t reflect.Type) (object, map[string][]string, error) {
	props := object{}
	deps := object{}
	spellings := map[string][]string{}
	owner := map[string]string{} // every accepted key -> canonical key
	for _, f := range fields(t) {
		switch f.tag {
		case "", "extension", "internal":
		default:
			return nil, nil, fmt.Errorf("%s: unknown drover tag %q", f.goName, f.tag)
		}
		if f.tag == "internal" {
			continue // rejected by the decoder: drover sets it
		}
		var s object
		if f.typ == unsupportedType {
			s = object{"not": object{}, "description": unsupportedDesc, "errorMessage": "not supported yet: " + f.name}
		} else {
			var err error
			if s, err = g.valueSchema(f.typ); err != nil {
				return nil, nil, fmt.Errorf("%s: %w", f.goName, err)
			}
			desc := g.src.Docs[f.goName]
			if goField := f.goName[strings.IndexByte(f.goName, '.')+1:]; strings.HasPrefix(desc, goField+" ") {
				desc = f.name + desc[len(goField):]
			}
			if f.tag == "extension" {
				if desc == "" {
					tn := namedType(f.typ).Name()
					if desc = g.src.Docs[tn]; strings.HasPrefix(desc, tn+" ") {
						desc = f.name + desc[len(tn):]
					}
				}
				desc = extensionPrefix + extensionNote.Replace(desc)
			}
			s = describe(s, desc)
		}
		spell := []string{f.name}
		add := func(key string, variant object) error {
			if slices.Contains(spellings[f.name], key) {
				return nil
			}
			if other, ok := owner[key]; ok {
				return fmt.Errorf("%s: key %q is also accepted for %q", f.goName, key, other)
			}
			owner[key] = f.name
			if key != f.name {
				spell = append(spell, key)
			}
			spellings[f.name] = spell
			props[key] = variant
			return nil
		}
		if err := add(f.name, s); err != nil {
			return nil, nil, err
		}
		if sn := snake(f.name); sn != f.name {
			if err := add(sn, variant(s, "same as "+f.name, false)); err != nil {
				return nil, nil, err
			}
		}
		if f.alias != "" {
			for _, a := range []string{f.alias, snake(f.alias)} {
				if err := add(a, variant(s, "deprecated: use "+f.name, true)); err != nil {
					return nil, nil, err
				}
			}
		}
		if f.typ != unsupportedType {
			// The decoder rejects a field given twice under different
			// spellings: each spelling excludes the ones before it.
			for i, key := range spell[1:] {
				before := spell[:i+1]
				var not object
				if len(before) == 1 {
					not = object{"required": []any{before[0]}}
				} else {
					var alts []any
					for _, o := range before {
						alts = append(alts, object{"required": []any{o}})
					}
					not = object{"anyOf": alts}
				}
				deps[key] = object{"not": not, "errorMessage": fmt.Sprintf("duplicate field: %s is %s, given twice", key, f.name)}
			}
		}
	}
	s := object{"type": "object", "additionalProperties": false}
	if len(props) > 0 {
		s["properties"] = props
	}
	if len(deps) > 0 {
		s["dependencies"] = deps
	}
	return s, spellings, nil
}

func namedType(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
		t = t.Elem()
	}
	return t
}

// describe attaches a description to s. In draft-07 a $ref's siblings are
// ignored, so a bare reference is wrapped in allOf.
func describe(s object, desc string) object {
	if desc == "" {
		return s
	}
	out := object{}
	if _, isRef := s["$ref"]; isRef {
		out["allOf"] = []any{s}
	} else {
		for k, v := range s {
			out[k] = v
		}
	}
	out["description"] = desc
	return out
}

// variant is the schema of another spelling of a key: the same value, with a
// description pointing at the canonical key.
func variant(s object, desc string, deprecated bool) object {
	out := object{}
	if _, isRef := s["$ref"]; isRef {
		out["allOf"] = []any{s}
	} else {
		for k, v := range s {
			out[k] = v
		}
	}
	if _, ok := s["not"]; ok {
		desc = unsupportedDesc + " (" + desc + ")"
	}
	out["description"] = desc
	out["doNotSuggest"] = true // offer only the canonical key
	if deprecated {
		out["deprecated"] = true
		out["deprecationMessage"] = desc
	}
	return out
}

// snake is the snake_case spelling of a lowerCamelCase key, which the
// decoder's camelCase turns back into the key.
func snake(key string) string {
	var b strings.Builder
	for _, r := range key {
		if r >= 'A' && r <= 'Z' {
			b.WriteByte('_')
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}
