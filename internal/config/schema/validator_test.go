package schema

import (
	"fmt"
	"math"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// validator checks an instance against the draft-07 subset the generator
// emits. The module has no JSON Schema validator and the tests add no
// dependency, so this is deliberately small; keywords it does not know make
// the structural test fail, so it cannot silently ignore one.
type validator struct {
	root map[string]any
	res  map[string]*regexp.Regexp
}

// assertions are the keywords the validator implements.
var assertions = map[string]bool{
	"$ref": true, "type": true, "enum": true, "pattern": true, "properties": true,
	"additionalProperties": true, "propertyNames": true, "dependencies": true,
	"required": true, "items": true, "minimum": true, "maximum": true,
	"oneOf": true, "anyOf": true, "allOf": true, "not": true,
}

// annotations are keywords that do not affect validation.
var annotations = map[string]bool{
	"$schema": true, "$id": true, "definitions": true, "title": true, "description": true,
	"deprecated": true, "deprecationMessage": true, "errorMessage": true,
	"patternErrorMessage": true, "doNotSuggest": true,
}

func newValidator(root map[string]any) *validator {
	return &validator{root: root, res: map[string]*regexp.Regexp{}}
}

// resolve follows a local JSON pointer such as "#/definitions/Service".
func (v *validator) resolve(ref string) (any, error) {
	p, ok := strings.CutPrefix(ref, "#")
	if !ok {
		return nil, fmt.Errorf("non-local $ref %q", ref)
	}
	var cur any = v.root
	for _, tok := range strings.Split(strings.TrimPrefix(p, "/"), "/") {
		if tok == "" {
			continue
		}
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("$ref %q: %q is not in an object", ref, tok)
		}
		if cur, ok = m[tok]; !ok {
			return nil, fmt.Errorf("$ref %q: no %q", ref, tok)
		}
	}
	return cur, nil
}

// validate returns the first reason x does not match schema s, or "".
func (v *validator) validate(s, x any, path string) string {
	switch s := s.(type) {
	case bool:
		if !s {
			return path + ": false schema"
		}
		return ""
	case map[string]any:
		return v.validateObject(s, x, path)
	}
	return fmt.Sprintf("%s: bad schema %T", path, s)
}

func (v *validator) validateObject(s map[string]any, x any, path string) string {
	if ref, ok := s["$ref"].(string); ok {
		target, err := v.resolve(ref)
		if err != nil {
			return err.Error()
		}
		return v.validate(target, x, path)
	}
	if t, ok := s["type"]; ok {
		var types []any
		if ts, ok := t.(string); ok {
			types = []any{ts}
		} else {
			types = t.([]any)
		}
		match := false
		for _, t := range types {
			match = match || hasType(x, t.(string))
		}
		if !match {
			return fmt.Sprintf("%s: %v is not of type %v", path, x, t)
		}
	}
	if enum, ok := s["enum"].([]any); ok {
		found := false
		for _, e := range enum {
			found = found || equal(e, x)
		}
		if !found {
			return fmt.Sprintf("%s: %v is not one of %v", path, x, enum)
		}
	}
	if str, ok := x.(string); ok {
		if p, ok := s["pattern"].(string); ok && !v.re(p).MatchString(str) {
			return fmt.Sprintf("%s: %q does not match %s", path, str, p)
		}
	}
	if n, ok := number(x); ok {
		if m, ok := s["minimum"].(float64); ok && n < m {
			return fmt.Sprintf("%s: %v < %v", path, n, m)
		}
		if m, ok := s["maximum"].(float64); ok && n > m {
			return fmt.Sprintf("%s: %v > %v", path, n, m)
		}
	}
	if obj, ok := x.(map[string]any); ok {
		if msg := v.validateProperties(s, obj, path); msg != "" {
			return msg
		}
	}
	if arr, ok := x.([]any); ok {
		if items, ok := s["items"]; ok {
			for i, e := range arr {
				if msg := v.validate(items, e, fmt.Sprintf("%s[%d]", path, i)); msg != "" {
					return msg
				}
			}
		}
	}
	if all, ok := s["allOf"].([]any); ok {
		for _, sub := range all {
			if msg := v.validate(sub, x, path); msg != "" {
				return msg
			}
		}
	}
	if anyOf, ok := s["anyOf"].([]any); ok {
		var msgs []string
		for _, sub := range anyOf {
			msg := v.validate(sub, x, path)
			if msg == "" {
				msgs = nil
				break
			}
			msgs = append(msgs, msg)
		}
		if msgs != nil {
			return fmt.Sprintf("%s: no anyOf matches (%s)", path, strings.Join(msgs, "; "))
		}
	}
	if oneOf, ok := s["oneOf"].([]any); ok {
		n := 0
		for _, sub := range oneOf {
			if v.validate(sub, x, path) == "" {
				n++
			}
		}
		if n != 1 {
			return fmt.Sprintf("%s: %d of oneOf match", path, n)
		}
	}
	if not, ok := s["not"]; ok && v.validate(not, x, path) == "" {
		return fmt.Sprintf("%s: matches a forbidden schema (%v)", path, s["errorMessage"])
	}
	return ""
}

func (v *validator) validateProperties(s, obj map[string]any, path string) string {
	props, _ := s["properties"].(map[string]any)
	for k, e := range obj {
		sub, ok := props[k]
		if !ok {
			ap, has := s["additionalProperties"]
			if !has {
				continue
			}
			sub = ap
		}
		if msg := v.validate(sub, e, path+"."+k); msg != "" {
			return msg
		}
		if pn, ok := s["propertyNames"]; ok {
			if msg := v.validate(pn, k, path+"."+k+" (name)"); msg != "" {
				return msg
			}
		}
	}
	if req, ok := s["required"].([]any); ok {
		for _, r := range req {
			if _, ok := obj[r.(string)]; !ok {
				return fmt.Sprintf("%s: %s is required", path, r)
			}
		}
	}
	if deps, ok := s["dependencies"].(map[string]any); ok {
		for k, dep := range deps {
			if _, ok := obj[k]; !ok {
				continue
			}
			if list, ok := dep.([]any); ok {
				dep = map[string]any{"required": list}
			}
			if msg := v.validate(dep, obj, path); msg != "" {
				return fmt.Sprintf("%s: dependency of %s: %s", path, k, msg)
			}
		}
	}
	return ""
}

func (v *validator) re(p string) *regexp.Regexp {
	if re, ok := v.res[p]; ok {
		return re
	}
	re := regexp.MustCompile(p)
	v.res[p] = re
	return re
}

func number(x any) (float64, bool) {
	switch n := x.(type) {
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	case uint64:
		return float64(n), true
	case float64:
		return n, true
	}
	return 0, false
}

func hasType(x any, t string) bool {
	switch t {
	case "null":
		return x == nil
	case "boolean":
		_, ok := x.(bool)
		return ok
	case "string":
		_, ok := x.(string)
		return ok
	case "array":
		_, ok := x.([]any)
		return ok
	case "object":
		_, ok := x.(map[string]any)
		return ok
	case "number":
		_, ok := number(x)
		return ok
	case "integer":
		n, ok := number(x)
		return ok && n == math.Trunc(n)
	}
	return false
}

func equal(a, b any) bool {
	if na, ok := number(a); ok {
		nb, ok := number(b)
		return ok && na == nb
	}
	return reflect.DeepEqual(a, b)
}

func TestValidatorSelfCheck(t *testing.T) {
	root := map[string]any{
		"type":                 "object",
		"additionalProperties": false,
		"properties": map[string]any{
			"a": map[string]any{"$ref": "#/definitions/A"},
			"n": map[string]any{"type": []any{"integer", "null"}, "minimum": 0.0},
		},
		"dependencies": map[string]any{"n": map[string]any{"not": map[string]any{"required": []any{"a"}}}},
		"definitions":  map[string]any{"A": map[string]any{"enum": []any{"X", 0.0}}},
	}
	v := newValidator(root)
	for _, c := range []struct {
		x    any
		want bool
	}{
		{map[string]any{}, true},
		{map[string]any{"a": "X"}, true},
		{map[string]any{"a": 0}, true},
		{map[string]any{"a": "Y"}, false},
		{map[string]any{"n": nil}, true},
		{map[string]any{"n": 1.5}, false},
		{map[string]any{"n": -1}, false},
		{map[string]any{"n": 1, "a": "X"}, false},
		{map[string]any{"b": 1}, false},
		{"x", false},
	} {
		if got := v.validate(root, c.x, "") == ""; got != c.want {
			t.Errorf("validate(%v) = %v, want %v", c.x, got, c.want)
		}
	}
}
