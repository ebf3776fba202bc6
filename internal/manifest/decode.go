package manifest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"

	"github.com/drover-dev/drover/internal/kubeobj"
)

// Object is one Kubernetes manifest as generic JSON-compatible data. See the
// package documentation for the value types it may hold and the numeric
// convention.
type Object = map[string]any

// Error is a problem located in the YAML text given to [Decode]. Line and
// Column are 1-based; Column counts characters (runes), not bytes. Callers
// prefix the file name.
type Error struct {
	Line, Column int
	Msg          string
	// Unappliable marks a well-formed object that breaks a rule of package
	// kubeobj (DecodeApplicable), rather than invalid YAML.
	Unappliable bool
}

func (e *Error) Error() string {
	return fmt.Sprintf("%d:%d: %s", e.Line, e.Column, e.Msg)
}

func errorAt(n *yaml.Node, format string, args ...any) *Error {
	line, col := 1, 1
	if n != nil && n.Line > 0 {
		line, col = n.Line, max(n.Column, 1)
	}
	return &Error{Line: line, Column: col, Msg: fmt.Sprintf(format, args...)}
}

// Decode splits a multi-document YAML stream ("---" separated) into objects.
//
// Empty documents, documents that are only comments and documents that are
// null are skipped. A document that is not a mapping, or lacks a non-empty
// string apiVersion or kind, is an error. A `kind: List` document, or any
// `kind: *List` document with an `items` field, is replaced by its items
// (recursively); items of a typed list such as ConfigMapList that lack
// apiVersion/kind inherit the list's apiVersion and the kind without the
// "List" suffix, as the Kubernetes API serves them that way.
//
// Errors are *Error carrying the 1-based Line and Column within data.
func Decode(data []byte) (objs []Object, err error) {
	return decode(data, false)
}

// DecodeApplicable is Decode, and also refuses, at the line of the field at
// fault, an object drover's Kubernetes runtime would refuse to apply (the
// rules of package kubeobj: a name, not generateName; no list kinds) and an
// object given twice. The compiler decodes manifests with it, so that
// validate and push refuse what every apply would.
func DecodeApplicable(data []byte) ([]Object, error) {
	return decode(data, true)
}

func decode(data []byte, applicable bool) (objs []Object, err error) {
	defer func() {
		// yaml.v3 reports ordinary errors by value; this only guards against a
		// parser bug taking the caller down with it.
		if r := recover(); r != nil {
			objs, err = nil, &Error{Line: 1, Column: 1, Msg: fmt.Sprintf("YAML parser failure: %v", r)}
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	c := &converter{budget: 10000 + 64*len(data), applicable: applicable}
	for {
		var doc yaml.Node
		if err := dec.Decode(&doc); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, syntaxError(data, err)
		}
		if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
			continue
		}
		root := doc.Content[0]
		v, err := c.value(root, 0)
		if err != nil {
			return nil, err
		}
		if v == nil {
			continue // empty, comment-only or explicit null document
		}
		objs, err = c.appendObjects(objs, v, root, "", "")
		if err != nil {
			return nil, err
		}
	}
}

// appendObjects validates v (converted from node n) as an object and appends
// it, flattening lists. listAPIVersion/listKind are set for items of a typed
// list and are used to default missing type information.
func (c *converter) appendObjects(objs []Object, v any, n *yaml.Node, listAPIVersion, itemKind string) ([]Object, error) {
	n = resolveAlias(n)
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, errorAt(n, "expected a mapping (a Kubernetes object), found %s", describe(v))
	}
	if itemKind != "" {
		if _, ok := obj["kind"]; !ok {
			obj["kind"] = itemKind
			if _, ok := obj["apiVersion"]; !ok {
				obj["apiVersion"] = listAPIVersion
			}
		}
	}
	apiVersion, err := typeField(obj, n, "apiVersion")
	if err != nil {
		return nil, err
	}
	kind, err := typeField(obj, n, "kind")
	if err != nil {
		return nil, err
	}
	items, hasItems := obj["items"]
	if kind != "List" && (!strings.HasSuffix(kind, "List") || !hasItems) {
		if err := c.check(obj, n); err != nil {
			return nil, err
		}
		return append(objs, obj), nil
	}
	if items == nil {
		return objs, nil
	}
	itemsNode := resolveAlias(mappingValue(n, "items"))
	list, ok := items.([]any)
	if !ok {
		at := itemsNode
		if at == nil {
			at = n
		}
		return nil, errorAt(at, "%s: items must be a sequence, found %s", kind, describe(items))
	}
	defaultKind := ""
	if kind != "List" {
		defaultKind = strings.TrimSuffix(kind, "List")
	}
	for i, item := range list {
		at := n
		if itemsNode != nil && itemsNode.Kind == yaml.SequenceNode && i < len(itemsNode.Content) {
			at = itemsNode.Content[i]
		}
		objs, err = c.appendObjects(objs, item, at, apiVersion, defaultKind)
		if err != nil {
			return nil, err
		}
	}
	return objs, nil
}

func typeField(obj map[string]any, n *yaml.Node, field string) (string, error) {
	v, ok := obj[field]
	if !ok {
		return "", errorAt(n, "object has no %s", field)
	}
	s, ok := v.(string)
	if !ok || s == "" {
		at := mappingValue(n, field)
		if at == nil {
			at = n
		}
		return "", errorAt(at, "%s must be a non-empty string, found %s", field, describe(v))
	}
	return s, nil
}

// mappingValue returns the value node of key in mapping node n (following
// aliases), or nil. It is used for error positions only.
func mappingValue(n *yaml.Node, key string) *yaml.Node {
	n = resolveAlias(n)
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := resolveAlias(n.Content[i]); k != nil && k.Kind == yaml.ScalarNode && k.Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

func resolveAlias(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 100; i++ {
		n = n.Alias
	}
	return n
}

func describe(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "a mapping"
	case []any:
		return "a sequence"
	case string:
		if v == "" {
			return "an empty string"
		}
		return fmt.Sprintf("the string %q", truncate(v, 40))
	case bool:
		return fmt.Sprintf("the boolean %v", v)
	case int64, float64:
		return fmt.Sprintf("the number %v", v)
	}
	return fmt.Sprintf("%T", v)
}

func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n]) + "…"
}

// maxDepth bounds nesting (including nesting created by aliases) so that
// conversion recursion stays shallow.
const maxDepth = 1000

// converter turns yaml.v3 nodes into generic values.
type converter struct {
	budget int                 // nodes that may still be produced (bounds alias expansion)
	active map[*yaml.Node]bool // anchors being expanded, to detect cycles
	// applicable: check the kubeobj rules (DecodeApplicable).
	applicable bool
	seen       map[string]int // the line of each object decoded so far, by kubeobj.Key
}

// check applies the rules of kubeobj (what the Kubernetes runtime refuses to
// apply) to obj, decoded from node n, and refuses an object given twice.
func (c *converter) check(obj Object, n *yaml.Node) error {
	if !c.applicable {
		return nil
	}
	if field, msg := kubeobj.Problem(obj); msg != "" {
		at := n
		if fn := fieldNode(n, field); fn != nil {
			at = fn
		}
		e := errorAt(at, "%s", msg)
		e.Unappliable = true
		return e
	}
	key := kubeobj.Key(obj)
	if first, dup := c.seen[key]; dup {
		meta, _ := obj["metadata"].(map[string]any)
		e := errorAt(n, "%s %v appears twice (first at line %d): each object may be given once", obj["kind"], meta["name"], first)
		e.Unappliable = true
		return e
	}
	if c.seen == nil {
		c.seen = map[string]int{}
	}
	c.seen[key] = max(n.Line, 1)
	return nil
}

// fieldNode returns the value node of a dotted field path in mapping node n,
// or nil.
func fieldNode(n *yaml.Node, field string) *yaml.Node {
	if field == "" {
		return nil
	}
	for part := range strings.SplitSeq(field, ".") {
		if n = mappingValue(resolveAlias(n), part); n == nil {
			return nil
		}
	}
	return n
}

func (c *converter) value(n *yaml.Node, depth int) (any, error) {
	c.budget--
	if c.budget < 0 {
		return nil, errorAt(n, "document is too large after expanding aliases")
	}
	if depth > maxDepth {
		return nil, errorAt(n, "document is nested more than %d levels deep", maxDepth)
	}
	switch n.Kind {
	case yaml.ScalarNode:
		return scalarValue(n)
	case yaml.AliasNode:
		target := n.Alias
		if target == nil {
			return nil, errorAt(n, "unknown anchor %q", n.Value)
		}
		if c.active[target] {
			return nil, errorAt(n, "alias *%s refers to a node that contains it", n.Value)
		}
		if c.active == nil {
			c.active = map[*yaml.Node]bool{}
		}
		c.active[target] = true
		v, err := c.value(target, depth+1)
		delete(c.active, target)
		return v, err
	case yaml.SequenceNode:
		out := make([]any, 0, len(n.Content))
		for _, item := range n.Content {
			v, err := c.value(item, depth+1)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	case yaml.MappingNode:
		return c.mapping(n, depth)
	case yaml.DocumentNode:
		return nil, errorAt(n, "unexpected nested document")
	}
	return nil, errorAt(n, "unsupported YAML node")
}

func (c *converter) mapping(n *yaml.Node, depth int) (map[string]any, error) {
	out := make(map[string]any, len(n.Content)/2)
	keyNodes := make(map[string]*yaml.Node, len(n.Content)/2)
	var merges []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		kn, vn := n.Content[i], n.Content[i+1]
		if isMergeKey(kn) {
			merges = append(merges, vn)
			continue
		}
		key, err := mappingKey(kn)
		if err != nil {
			return nil, err
		}
		if prev, dup := keyNodes[key]; dup {
			return nil, errorAt(kn, "duplicate key %q (first defined at line %d)", truncate(key, 60), prev.Line)
		}
		keyNodes[key] = kn
		v, err := c.value(vn, depth+1)
		if err != nil {
			return nil, err
		}
		out[key] = v
	}
	// Merge keys: explicit keys win, then earlier merge sources win over later
	// ones (YAML merge key semantics).
	for _, mn := range merges {
		target := resolveAlias(mn)
		var sources []*yaml.Node
		switch {
		case target != nil && target.Kind == yaml.MappingNode:
			sources = []*yaml.Node{mn}
		case target != nil && target.Kind == yaml.SequenceNode:
			sources = target.Content
		default:
			return nil, errorAt(mn, "merge key << needs a mapping or a sequence of mappings")
		}
		for _, src := range sources {
			v, err := c.value(src, depth+1)
			if err != nil {
				return nil, err
			}
			m, ok := v.(map[string]any)
			if !ok {
				return nil, errorAt(src, "merge key << needs a mapping or a sequence of mappings, found %s", describe(v))
			}
			for k, v := range m {
				if _, exists := out[k]; !exists {
					out[k] = v
				}
			}
		}
	}
	return out, nil
}

func isMergeKey(n *yaml.Node) bool {
	n = resolveAlias(n)
	if n == nil || n.Kind != yaml.ScalarNode || n.Value != "<<" {
		return false
	}
	if n.Style&yaml.TaggedStyle != 0 {
		return n.Tag == "!!merge"
	}
	return n.Style == 0
}

func mappingKey(kn *yaml.Node) (string, error) {
	n := resolveAlias(kn)
	if n == nil || n.Kind != yaml.ScalarNode {
		what := "a complex value"
		if n != nil && n.Kind == yaml.MappingNode {
			what = "a mapping"
		} else if n != nil && n.Kind == yaml.SequenceNode {
			what = "a sequence"
		}
		return "", errorAt(kn, "mapping key is %s; keys must be strings", what)
	}
	v, err := scalarValue(n)
	if err != nil {
		return "", err
	}
	s, ok := v.(string)
	if !ok {
		return "", errorAt(kn, "mapping key %q is %s, not a string; quote it if a string is meant", truncate(n.Value, 60), describe(v))
	}
	return s, nil
}

// scalarValue resolves a scalar node the way go-yaml v2 (used by
// sigs.k8s.io/yaml) does, then applies the package's numeric convention.
func scalarValue(n *yaml.Node) (any, error) {
	const quoted = yaml.DoubleQuotedStyle | yaml.SingleQuotedStyle | yaml.LiteralStyle | yaml.FoldedStyle
	if n.Style&yaml.TaggedStyle == 0 {
		if n.Style&quoted != 0 {
			return n.Value, nil
		}
		return checkNumber(n, resolve11(n.Value))
	}
	tag := n.Tag
	switch tag {
	case "!!str":
		return n.Value, nil
	case "!!binary":
		return nil, errorAt(n, "!!binary is not supported; write the base64 text as a plain string")
	case "!!map", "!!seq":
		return nil, errorAt(n, "a scalar cannot be tagged %s", tag)
	case "!!null", "!!bool", "!!int", "!!float", "!!timestamp":
	default:
		return n.Value, nil // unknown or application tags leave the scalar a string
	}
	v := resolve11(n.Value)
	ok := false
	switch tag {
	case "!!null":
		ok = v == nil
	case "!!bool":
		_, ok = v.(bool)
	case "!!int":
		switch v.(type) {
		case int64, uint64:
			ok = true
		}
	case "!!float":
		switch x := v.(type) {
		case float64:
			ok = true
		case int64:
			v, ok = float64(x), true
		case uint64:
			v, ok = float64(x), true
		}
	case "!!timestamp":
		_, ok = parseTimestamp(n.Value)
		v = n.Value
	}
	if !ok {
		return nil, errorAt(n, "cannot decode %q as %s", truncate(n.Value, 60), tag)
	}
	return checkNumber(n, v)
}

func checkNumber(n *yaml.Node, v any) (any, error) {
	switch x := v.(type) {
	case float64:
		out, ok := normalizeFloat(x)
		if !ok {
			return nil, errorAt(n, "%s is not a finite number and cannot be represented in JSON", n.Value)
		}
		return out, nil
	case uint64:
		out, _ := normalizeFloat(float64(x))
		return out, nil
	}
	return v, nil
}

// Clone returns a deep copy of objects as Decode returns them (maps, lists
// and scalars), for a caller that changes them while another holds them.
func Clone(objs []Object) []Object {
	out := make([]Object, len(objs))
	for i, o := range objs {
		out[i] = cloneValue(o).(map[string]any)
	}
	return out
}

func cloneValue(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = cloneValue(e)
		}
		return m
	case []any:
		l := make([]any, len(x))
		for i, e := range x {
			l[i] = cloneValue(e)
		}
		return l
	}
	return v // a scalar: strings, numbers, booleans and nil are values
}
