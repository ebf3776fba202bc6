package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unique"

	"gopkg.in/yaml.v3"
)

// Decoding walks the yaml.v3 node tree by reflection instead of using yaml.Unmarshal
// so that every problem is reported with its line, column and field path, unknown
// keys get a "did you mean" hint, snake_case keys are accepted like Prodvana does,
// and a run reports all problems instead of stopping at the first.

// Decoded is one parsed config file with the position of every field.
type Decoded struct {
	File *File
	// Pos maps field paths ("service.parameters[0].name") to where their value is.
	Pos map[string]Position
}

// Locate returns the position of path, or of its nearest ancestor that has one.
func (d *Decoded) Locate(path string) Position {
	for p := path; p != ""; p = parentPath(p) {
		if pos, ok := d.Pos[p]; ok {
			return pos
		}
	}
	return Position{Line: 1, Column: 1}
}

func parentPath(p string) string {
	if i := strings.LastIndexAny(p, ".["); i >= 0 {
		return p[:i]
	}
	return ""
}

// Decode parses one config file. name is used in error messages only.
func Decode(name string, data []byte) (*Decoded, error) {
	dec, err := decodeFile(name, data, false)
	if err != nil {
		return nil, err
	}
	return dec, nil
}

// DecodeInternal decodes a config that drover itself produced (for example one
// sent by the CLI with local files already resolved): fields marked
// drover:"internal" are allowed.
func DecodeInternal(name string, data []byte) (*Decoded, error) {
	dec, err := decodeFile(name, data, true)
	if err != nil {
		return nil, err
	}
	return dec, nil
}

func decodeFile(name string, data []byte, internal bool) (*Decoded, error) {
	d := &decoder{file: name, pos: map[string]Position{}, internal: internal, budget: maxDecodeSteps(len(data))}
	root, err := parseYAML(name, data)
	if err != nil {
		return nil, err
	}
	if root == nil || len(root.Content) == 0 {
		return nil, ErrorList{{File: name, Line: 1, Column: 1, Msg: "empty file: expected one of " + strings.Join(KindNames(), ", ")}}
	}
	out := &Decoded{File: &File{}, Pos: d.pos}
	doc := root.Content[0]
	d.decode(doc, reflect.ValueOf(out.File).Elem(), "")
	if len(d.errs) > 0 {
		if checkOneKind(name, doc, out.File) == nil && !d.exhausted() {
			// The fields that decoded are usable for further checks (see
			// DecodePartial); the others were left unset.
			return out, d.errs.Err()
		}
		return nil, d.errs.Err()
	}
	if err := checkOneKind(name, doc, out.File); err != nil {
		return nil, err
	}
	return out, nil
}

// DecodePartial is Decode for reporting: when a file has field errors but a
// recognisable kind, it returns the partially decoded file (the bad fields
// left unset) with the errors, so validation can go on and report more.
func DecodePartial(name string, data []byte) (*Decoded, error) {
	return decodeFile(name, data, false)
}

// parseYAML parses the single YAML document of a config file. A second
// document (after "---") would otherwise be dropped silently, so it is an
// error; an empty trailing document is allowed.
func parseYAML(name string, data []byte) (root *yaml.Node, err error) {
	defer func() {
		// yaml.v3 panics with "internal error" on a few malformed inputs.
		if r := recover(); r != nil {
			root, err = nil, ErrorList{{File: name, Msg: fmt.Sprintf("invalid YAML: %v", r)}}
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var first yaml.Node
	if err := dec.Decode(&first); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, ErrorList{yamlError(name, err)}
	}
	for {
		var next yaml.Node
		if err := dec.Decode(&next); err != nil {
			if errors.Is(err, io.EOF) {
				return &first, nil
			}
			return nil, ErrorList{yamlError(name, err)}
		}
		if len(next.Content) > 0 && !isNull(next.Content[0]) {
			n := next.Content[0]
			return nil, ErrorList{{File: name, Line: n.Line, Column: n.Column, Msg: "more than one YAML document: put each config in its own file"}}
		}
	}
}

// KindNames are the config kinds, exactly one of which a file holds.
func KindNames() []string {
	return []string{"application", "service", "runtime", "protection", "deliveryExtension", "releaseChannel", "containerRegistry", "webhook"}
}

func checkOneKind(name string, doc *yaml.Node, f *File) error {
	var kinds []string
	if f.Application != nil {
		kinds = append(kinds, "application")
	}
	if f.Service != nil {
		kinds = append(kinds, "service")
	}
	if f.Runtime != nil {
		kinds = append(kinds, "runtime")
	}
	if f.Protection != nil {
		kinds = append(kinds, "protection")
	}
	if f.DeliveryExtension != nil {
		kinds = append(kinds, "deliveryExtension")
	}
	if f.ReleaseChannel != nil {
		kinds = append(kinds, "releaseChannel")
	}
	if f.ContainerRegistry != nil {
		kinds = append(kinds, "containerRegistry")
	}
	if f.Webhook != nil {
		kinds = append(kinds, "webhook")
	}
	pos := Position{Line: doc.Line, Column: doc.Column}
	switch {
	case len(kinds) == 0:
		return ErrorList{{File: name, Line: pos.Line, Column: pos.Column, Msg: "no config kind: expected exactly one of " + strings.Join(KindNames(), ", ")}}
	case len(kinds) > 1:
		return ErrorList{{File: name, Line: pos.Line, Column: pos.Column, Msg: "more than one config kind (" + strings.Join(kinds, ", ") + "): put each in its own file"}}
	}
	if f.ApplicationMetadata != nil && f.Application == nil {
		return ErrorList{{File: name, Line: pos.Line, Column: pos.Column, Field: "applicationMetadata", Msg: "allowed only beside application"}}
	}
	if f.ServiceMetadata != nil && f.Service == nil {
		return ErrorList{{File: name, Line: pos.Line, Column: pos.Column, Field: "serviceMetadata", Msg: "allowed only beside service"}}
	}
	return nil
}

func yamlError(name string, err error) *Error {
	msg := err.Error()
	msg = strings.TrimPrefix(msg, "yaml: ")
	line := 0
	// yaml.v3 reports "line N: message".
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if i := strings.Index(rest, ":"); i > 0 {
			if n, err := strconv.Atoi(rest[:i]); err == nil {
				line = n
				msg = strings.TrimSpace(rest[i+1:])
			}
		}
	}
	return &Error{File: name, Line: line, Column: 1, Msg: "invalid YAML: " + msg}
}

type decoder struct {
	file     string
	pos      map[string]Position
	errs     ErrorList
	internal bool
	// budget is how many more values decode may visit. YAML aliases can make
	// a small file expand exponentially ("billion laughs"); the budget stops
	// that long before it exhausts memory.
	budget int
}

// maxDecodeSteps is the decode budget for a file of size n: far more than a
// file without aliases can use (a value takes at least one byte), plus room
// for ordinary reuse of anchors.
func maxDecodeSteps(n int) int { return 100_000 + 10*n }

func (d *decoder) fail(n *yaml.Node, path, format string, args ...any) {
	d.errs = append(d.errs, &Error{File: d.file, Line: n.Line, Column: n.Column, Field: path, Msg: fmt.Sprintf(format, args...)})
}

var (
	durationType    = reflect.TypeFor[Duration]()
	int64Type       = reflect.TypeFor[Int64]()
	unsupportedType = reflect.TypeFor[Unsupported]()
	enumType        = reflect.TypeFor[enum]()
)

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!int":
			return "an integer"
		case "!!float":
			return "a number"
		case "!!bool":
			return "a boolean"
		case "!!null":
			return "null"
		case "!!str":
			return "a string"
		}
		return "a " + strings.TrimPrefix(n.ShortTag(), "!!")
	default:
		return "an unexpected node"
	}
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

func (d *decoder) decode(n *yaml.Node, v reflect.Value, path string) {
	if d.budget <= 0 {
		return
	}
	if d.budget--; d.budget == 0 {
		d.fail(n, path, "too many values: YAML anchors and aliases expand this file too much")
		return
	}
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	if path != "" {
		d.pos[posKey(path)] = Position{Line: n.Line, Column: n.Column}
	}
	t := v.Type()
	switch {
	case t == durationType:
		if s, ok := d.scalarString(n, path, "a duration such as \"30s\""); ok {
			dur, err := ParseDuration(s)
			if err != nil {
				d.fail(n, path, "%v", err)
				return
			}
			v.Set(reflect.ValueOf(dur))
		}
		return
	case t == int64Type:
		if n.Kind != yaml.ScalarNode || (n.ShortTag() != "!!int" && n.ShortTag() != "!!str") {
			d.fail(n, path, "expected an integer, got %s", describe(n))
			return
		}
		base := 10
		if n.ShortTag() == "!!int" {
			base = 0 // as YAML resolved it: 0x1f, 0o17, 1_000
		}
		i, err := strconv.ParseInt(strings.TrimSpace(n.Value), base, 64)
		if err != nil {
			d.fail(n, path, "expected an integer, got %q", n.Value)
			return
		}
		v.SetInt(i)
		return
	case t.Implements(enumType):
		d.decodeEnum(n, v, path)
		return
	}
	switch t.Kind() {
	case reflect.Pointer:
		if isNull(n) && t.Elem().Kind() != reflect.Struct {
			return
		}
		p := reflect.New(t.Elem())
		if isNull(n) {
			// `manualApproval:` with no value: the user means the empty message.
			v.Set(p)
			return
		}
		d.decode(n, p.Elem(), path)
		v.Set(p)
	case reflect.Struct:
		d.decodeStruct(n, v, path)
	case reflect.Slice:
		if isNull(n) {
			return
		}
		if n.Kind != yaml.SequenceNode {
			d.fail(n, path, "expected a list, got %s", describe(n))
			return
		}
		s := reflect.MakeSlice(t, len(n.Content), len(n.Content))
		for i, item := range n.Content {
			d.decode(item, s.Index(i), fmt.Sprintf("%s[%d]", path, i))
		}
		v.Set(s)
	case reflect.Map:
		if isNull(n) {
			return
		}
		if n.Kind != yaml.MappingNode {
			d.fail(n, path, "expected a mapping, got %s", describe(n))
			return
		}
		m := reflect.MakeMapWithSize(t, len(n.Content)/2)
		seen := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode {
				d.fail(k, path, "keys must be strings")
				continue
			}
			if seen[k.Value] {
				d.fail(k, path+"."+k.Value, "duplicate key %q", k.Value)
				continue
			}
			seen[k.Value] = true
			ev := reflect.New(t.Elem()).Elem()
			d.decode(val, ev, path+"."+k.Value)
			m.SetMapIndex(reflect.ValueOf(k.Value).Convert(t.Key()), ev)
		}
		v.Set(m)
	case reflect.String:
		if s, ok := d.scalarString(n, path, "a string"); ok {
			v.SetString(s)
		}
	case reflect.Bool:
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" {
			d.fail(n, path, "expected true or false, got %s", describe(n))
			return
		}
		b, err := strconv.ParseBool(strings.ToLower(n.Value))
		if err != nil {
			// Only an explicit !!bool tag gets here with another value.
			d.fail(n, path, "expected true or false, got %q", n.Value)
			return
		}
		v.SetBool(b)
	case reflect.Int32, reflect.Int64, reflect.Int:
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" {
			d.fail(n, path, "expected an integer, got %s", describe(n))
			return
		}
		i, err := strconv.ParseInt(n.Value, 0, t.Bits())
		if errors.Is(err, strconv.ErrRange) {
			d.fail(n, path, "integer %s out of range", n.Value)
			return
		} else if err != nil {
			d.fail(n, path, "expected an integer, got %q", n.Value)
			return
		}
		v.SetInt(i)
	default:
		d.fail(n, path, "internal error: cannot decode into %s", t)
	}
}

// scalarString accepts only YAML strings: a number where a string is expected is
// an error, since quoting changes its meaning (1.10 vs "1.10").
func (d *decoder) scalarString(n *yaml.Node, path, want string) (string, bool) {
	if n.Kind != yaml.ScalarNode || isNull(n) {
		d.fail(n, path, "expected %s, got %s", want, describe(n))
		return "", false
	}
	if n.ShortTag() != "!!str" {
		d.fail(n, path, "expected %s, got %s (quote it: %q)", want, describe(n), n.Value)
		return "", false
	}
	return n.Value, true
}

func (d *decoder) decodeEnum(n *yaml.Node, v reflect.Value, path string) {
	values := v.Interface().(enum).enumValues()
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!int" {
		i, err := strconv.Atoi(n.Value)
		if err == nil && i >= 0 && i < len(values) {
			v.SetString(values[i])
			return
		}
	}
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str" {
		if n.Value == "" {
			return // unset, as drover writes an enum nobody set; validation requires it where needed
		}
		for _, val := range values {
			if n.Value == val {
				v.SetString(val)
				return
			}
		}
		hint := ""
		if s := suggest(n.Value, values); s != "" {
			hint = fmt.Sprintf(" (did you mean %s?)", s)
		}
		d.fail(n, path, "invalid value %q: expected one of %s%s", n.Value, strings.Join(values, ", "), hint)
		return
	}
	d.fail(n, path, "expected one of %s, got %s", strings.Join(values, ", "), describe(n))
}

type fieldInfo struct {
	name     string // canonical key
	index    []int
	internal bool
}

type structInfo struct {
	byKey map[string]*fieldInfo // canonical keys and aliases
	keys  []string              // canonical keys, for suggestions
}

var structCache sync.Map // reflect.Type -> *structInfo

func infoFor(t reflect.Type) *structInfo {
	if si, ok := structCache.Load(t); ok {
		return si.(*structInfo)
	}
	si := &structInfo{byKey: map[string]*fieldInfo{}}
	var walk func(t reflect.Type, prefix []int)
	walk = func(t reflect.Type, prefix []int) {
		for i := range t.NumField() {
			f := t.Field(i)
			idx := append(append([]int(nil), prefix...), i)
			if f.Anonymous && f.Type.Kind() == reflect.Struct {
				walk(f.Type, idx)
				continue
			}
			if !f.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" || name == "-" {
				continue
			}
			fi := &fieldInfo{name: name, index: idx, internal: f.Tag.Get("drover") == "internal"}
			si.byKey[name] = fi
			si.keys = append(si.keys, name)
			if alias := f.Tag.Get("alias"); alias != "" {
				si.byKey[alias] = fi
			}
		}
	}
	walk(t, nil)
	sort.Strings(si.keys)
	actual, _ := structCache.LoadOrStore(t, si)
	return actual.(*structInfo)
}

// camelCase turns Prodvana's accepted snake_case spelling into the canonical key.
func camelCase(s string) string {
	if !strings.Contains(s, "_") {
		return s
	}
	parts := strings.Split(s, "_")
	var b strings.Builder
	b.WriteString(parts[0])
	for _, p := range parts[1:] {
		if p == "" {
			continue
		}
		b.WriteString(strings.ToUpper(p[:1]))
		b.WriteString(p[1:])
	}
	return b.String()
}

// posKey returns path as a key of Decoded.Pos. Configs of one kind share
// their field paths ("service.parameters[0].name"), and a server keeps the
// decoded form of every stored config: the paths are interned, so each is
// held once rather than once per config.
func posKey(path string) string {
	return unique.Make(path).Value()
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func (d *decoder) decodeStruct(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.fail(n, path, "expected a mapping, got %s", describe(n))
		return
	}
	si := infoFor(v.Type())
	seen := map[string]*yaml.Node{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			d.fail(k, path, "keys must be strings")
			continue
		}
		key := camelCase(k.Value)
		fi, ok := si.byKey[key]
		if !ok {
			msg := fmt.Sprintf("unknown field %q", k.Value)
			keys := si.keys
			if !d.internal {
				// drover's internal fields are not for configs to set.
				keys = slices.DeleteFunc(slices.Clone(keys), func(k string) bool { return si.byKey[k].internal })
			}
			if s := suggest(k.Value, keys); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			} else if len(keys) <= 12 && len(keys) > 0 {
				msg += " (expected one of " + strings.Join(keys, ", ") + ")"
			}
			d.fail(k, joinPath(path, k.Value), "%s", msg)
			continue
		}
		fpath := joinPath(path, fi.name)
		if prev, dup := seen[fi.name]; dup {
			d.fail(k, fpath, "duplicate field (first set on line %d)", prev.Line)
			continue
		}
		seen[fi.name] = k
		f := v.FieldByIndex(fi.index)
		if f.Type() == unsupportedType {
			d.pos[posKey(fpath)] = Position{Line: k.Line, Column: k.Column}
			d.fail(k, fpath, "not supported yet: %s", fi.name)
			continue
		}
		if fi.internal && !d.internal {
			d.fail(k, fpath, "%s is set by drover and cannot be written in a config file", fi.name)
			continue
		}
		d.decode(val, f, fpath)
	}
}

// suggest returns the candidate closest to s, if it is close enough to be a typo.
func suggest(s string, candidates []string) string {
	best, bestDist := "", 1<<30
	ls := strings.ToLower(camelCase(s))
	for _, c := range candidates {
		lc := strings.ToLower(c)
		if lc == ls {
			return c
		}
		if dist := levenshtein(ls, lc); dist < bestDist {
			best, bestDist = c, dist
		}
	}
	limit := max(2, len(s)/3)
	if bestDist <= limit {
		return best
	}
	return ""
}

func levenshtein(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// exhausted reports whether decoding stopped because the budget ran out.
func (d *decoder) exhausted() bool { return d.budget <= 0 }
