package manifest

import (
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	sigsyaml "sigs.k8s.io/yaml"
)

func mustDecode(t *testing.T, data string) []Object {
	t.Helper()
	objs, err := Decode([]byte(data))
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	return objs
}

func names(objs []Object) []string {
	var out []string
	for _, o := range objs {
		out = append(out, ObjectName(o))
	}
	return out
}

func TestDecodeMultiDocument(t *testing.T) {
	t.Parallel()
	data := `---
# leading comment-only document
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: a
---
---

# nothing here either
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: b
  namespace: ns
spec:
  replicas: 3
...
---
null
---
~
---
apiVersion: v1
kind: Service
metadata: {name: c}
---
`
	objs := mustDecode(t, data)
	want := []string{"ConfigMap/a", "Deployment/ns/b", "Service/c"}
	if got := names(objs); !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	spec := objs[1]["spec"].(map[string]any)
	if spec["replicas"] != int64(3) {
		t.Errorf("replicas = %#v, want int64(3)", spec["replicas"])
	}
	j, err := json.Marshal(objs[1])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(j), `"replicas":3`) {
		t.Errorf("JSON %s lacks \"replicas\":3", j)
	}
}

func TestDecodeEmpty(t *testing.T) {
	t.Parallel()
	for _, data := range []string{"", "\n", "# just a comment\n", "---\n---\n", "--- # c\n...\n"} {
		objs, err := Decode([]byte(data))
		if err != nil || len(objs) != 0 {
			t.Errorf("Decode(%q) = %v, %v; want nothing", data, objs, err)
		}
	}
}

func TestDecodeLists(t *testing.T) {
	t.Parallel()
	data := `apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: one}
- apiVersion: v1
  kind: List
  items:
  - apiVersion: v1
    kind: Secret
    metadata: {name: nested}
---
apiVersion: v1
kind: ConfigMapList
items:
- metadata: {name: typed}
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: explicit}
---
apiVersion: v1
kind: List
items: []
---
apiVersion: v1
kind: List
---
apiVersion: example.com/v1
kind: AllowList
metadata: {name: not-a-list}
spec: {}
`
	objs := mustDecode(t, data)
	want := []string{"ConfigMap/one", "Secret/nested", "ConfigMap/typed", "ConfigMap/explicit", "AllowList/not-a-list"}
	if got := names(objs); !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if objs[2]["apiVersion"] != "v1" {
		t.Errorf("typed list item apiVersion = %v, want v1", objs[2]["apiVersion"])
	}
}

func TestDecodeErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		data       string
		line, col  int
		msgContain string
	}{
		{"mapping in plain value", "apiVersion: v1\nkind: A\nmetadata:\n  name: a: b\n", 4, 10, "mapping values are not allowed"},
		{"error in second document", "apiVersion: v1\nkind: A\n---\napiVersion: v1\nkind: B\n  name: x\n", 6, 7, "mapping values are not allowed"},
		{"bad indentation", "apiVersion: v1\nkind: A\nspec:\n  a: 1\n b: 2\n", 5, 2, "did not find expected key"},
		{"unclosed quote", "apiVersion: v1\nkind: \"A\nspec: {}\n", 2, 7, "unexpected end of stream"},
		{"unclosed flow mapping", "apiVersion: v1\nkind: A\nmetadata: {name: x\n", 3, 12, "did not find expected ',' or '}'"},
		{"tab indentation", "apiVersion: v1\nkind: A\nspec:\n\treplicas: 1\n", 4, 1, "cannot start any token"},
		{"invalid token", "apiVersion: v1\nkind: A\nspec: @x\n", 3, 7, "cannot start any token"},
		{"unknown alias", "apiVersion: v1\nkind: A\nspec: *nope\n", 3, 11, "unknown anchor"},
		{"multibyte column", "apiVersion: v1\nkind: A\nmetadata:\n  name: é: x\n", 4, 10, "mapping values are not allowed"},
		{"JSON on one line", `{"apiVersion":"v1","kind":"A","data":["a","b" "c"]}`, 1, 49, "did not find expected ',' or ']'"},
		{"JSON over lines", "{\"apiVersion\": \"v1\",\n \"kind\": \"A\",\n \"data\": [\"a\",\n  \"b\"\n  \"c\"]}\n", 5, 5, "did not find expected ',' or ']'"},
		{"unclosed flow sequence at end", "apiVersion: v1\nkind: A\ndata: [a, b\n", 3, 11, "did not find expected ',' or ']'"},
		{"missing colon", "apiVersion: v1\nkind: A\nspec:\n  a: 1\n  b\n  c: 2\n", 5, 3, "could not find expected ':'"},
		{"sequence document", "apiVersion: v1\nkind: A\n---\n- a\n- b\n", 4, 1, "expected a mapping"},
		{"scalar document", "apiVersion: v1\nkind: A\n---\n  hello\n", 4, 3, "expected a mapping"},
		{"missing kind", "apiVersion: v1\nmetadata:\n  name: x\n", 1, 1, "no kind"},
		{"missing apiVersion", "---\nkind: ConfigMap\n", 2, 1, "no apiVersion"},
		{"non-string kind", "apiVersion: v1\nkind: 12\n", 2, 7, "kind must be a non-empty string"},
		{"empty kind", "apiVersion: v1\nkind: ''\n", 2, 7, "kind must be a non-empty string"},
		{"list item not a mapping", "apiVersion: v1\nkind: List\nitems:\n- 1\n", 4, 3, "expected a mapping"},
		{"list items not a sequence", "apiVersion: v1\nkind: List\nitems: {a: b}\n", 3, 8, "items must be a sequence"},
		{"list item missing kind", "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  metadata: {}\n", 4, 3, "no kind"},
		{"int key", "apiVersion: v1\nkind: A\ndata:\n  1: x\n", 4, 3, "not a string"},
		{"bool key", "apiVersion: v1\nkind: A\ndata:\n  yes: x\n", 4, 3, "not a string"},
		{"null key", "apiVersion: v1\nkind: A\ndata:\n  ~: x\n", 4, 3, "not a string"},
		{"mapping key", "apiVersion: v1\nkind: A\ndata:\n  ? {a: b}\n  : x\n", 4, 5, "keys must be strings"},
		{"duplicate key", "apiVersion: v1\nkind: A\nkind: B\n", 3, 1, "duplicate key \"kind\" (first defined at line 2)"},
		{"nan", "apiVersion: v1\nkind: A\nspec:\n  x: .nan\n", 4, 6, "not a finite number"},
		{"infinity", "apiVersion: v1\nkind: A\nspec:\n  x: -.inf\n", 4, 6, "not a finite number"},
		{"binary", "apiVersion: v1\nkind: A\ndata: !!binary aGk=\n", 3, 7, "!!binary"},
		{"bad int tag", "apiVersion: v1\nkind: A\nspec: !!int abc\n", 3, 7, "cannot decode"},
		{"alias cycle", "apiVersion: v1\nkind: A\nspec: &a {x: *a}\n", 3, 14, "contains it"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			objs, err := Decode([]byte(tt.data))
			if err == nil {
				t.Fatalf("Decode succeeded with %v; want error", objs)
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %T %v is not *Error", err, err)
			}
			if e.Line != tt.line || e.Column != tt.col || !strings.Contains(e.Msg, tt.msgContain) {
				t.Errorf("got %d:%d %q; want %d:%d containing %q", e.Line, e.Column, e.Msg, tt.line, tt.col, tt.msgContain)
			}
			if objs != nil {
				t.Errorf("objects returned with error: %v", objs)
			}
		})
	}
}

func TestDecodeBillionLaughs(t *testing.T) {
	t.Parallel()
	data := `apiVersion: v1
kind: A
a: &a ["x","x","x","x","x","x","x","x","x","x"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g,*g]
`
	_, err := Decode([]byte(data))
	if err == nil || !strings.Contains(err.Error(), "too large") {
		t.Fatalf("got %v, want a 'too large' error", err)
	}
}

func TestDecodeAnchorsAndMerge(t *testing.T) {
	t.Parallel()
	data := `apiVersion: v1
kind: ConfigMap
metadata:
  name: m
  labels: &labels
    app: web
    tier: front
  annotations:
    <<: *labels
    tier: back
data:
  copy: &v "shared"
  again: *v
  seq:
    <<: [{a: "1"}, {a: "2", b: "3"}]
`
	obj := mustDecode(t, data)[0]
	meta := obj["metadata"].(map[string]any)
	want := map[string]any{"app": "web", "tier": "back"}
	if !reflect.DeepEqual(meta["annotations"], want) {
		t.Errorf("annotations = %v, want %v", meta["annotations"], want)
	}
	wantData := map[string]any{"copy": "shared", "again": "shared", "seq": map[string]any{"a": "1", "b": "3"}}
	if !reflect.DeepEqual(obj["data"], wantData) {
		t.Errorf("data = %v, want %v", obj["data"], wantData)
	}
	// Aliased values are copies, not shared maps.
	meta["labels"].(map[string]any)["app"] = "changed"
	if meta["annotations"].(map[string]any)["app"] != "web" {
		t.Error("alias expansion shares maps")
	}
}

var scalarTests = []struct {
	yaml string
	want any
}{
	{`3`, int64(3)},
	{`-3`, int64(-3)},
	{`+3`, int64(3)},
	{`"3"`, "3"},
	{`'3'`, "3"},
	{`3.0`, int64(3)},
	{`1.10`, 1.1},
	{`"1.10"`, "1.10"},
	{`v1.10`, "v1.10"},
	{`1.2.3`, "1.2.3"},
	{`.5`, 0.5},
	{`1e3`, int64(1000)},
	{`1.5e-3`, 0.0015},
	{`1e400`, "1e400"},
	{`010`, int64(8)},
	{`0o17`, int64(15)},
	{`0x1F`, int64(31)},
	{`0b101`, int64(5)},
	{`1_000`, int64(1000)},
	{`_1`, "_1"},
	{`9223372036854775807`, int64(math.MaxInt64)},
	{`-9223372036854775808`, int64(math.MinInt64)},
	{`18446744073709551615`, float64(18446744073709551615)},
	{`true`, true},
	{`False`, false},
	{`yes`, true},
	{`y`, true},
	{`on`, true},
	{`OFF`, false},
	{`n`, false},
	{`"yes"`, "yes"},
	{`yEs`, "yEs"},
	{`~`, nil},
	{`null`, nil},
	{``, nil},
	{`"null"`, "null"},
	{`2024-01-02`, "2024-01-02"},
	{`2001-12-14t21:59:43.10-05:00`, "2001-12-14t21:59:43.10-05:00"},
	{`12:30`, "12:30"},
	{`1:20:30`, "1:20:30"},
	{`<<`, "<<"},
	{`!!str 10`, "10"},
	{`!!int "10"`, int64(10)},
	{`!!float 2`, int64(2)},
	{`!!bool "yes"`, true},
	{`!!null ""`, nil},
	{`!custom 10`, "10"},
	{`!!timestamp 2024-01-02`, "2024-01-02"},
	{"|\n  {{.Params.x}}\n", "{{.Params.x}}\n"},
	{`"{{.Params.image}}"`, "{{.Params.image}}"},
	{`.inf_`, ".inf_"},
	{`0x`, "0x"},
	{`-x`, "-x"},
	{`+.5`, 0.5},
	{`1_0.5`, 10.5},
}

func TestDecodeScalars(t *testing.T) {
	t.Parallel()
	for _, tt := range scalarTests {
		obj := mustDecode(t, "apiVersion: v1\nkind: A\nv: "+tt.yaml+"\n")[0]
		if got := obj["v"]; !reflect.DeepEqual(got, tt.want) {
			t.Errorf("v: %s decoded to %#v, want %#v", tt.yaml, got, tt.want)
		}
	}
}

// TestDecodeMatchesSigsYAML checks that scalars resolve exactly as they do
// for Kubernetes tooling (sigs.k8s.io/yaml), comparing the JSON both produce.
func TestDecodeMatchesSigsYAML(t *testing.T) {
	t.Parallel()
	for _, tt := range scalarTests {
		if strings.HasPrefix(tt.yaml, "!!timestamp") {
			continue // go-yaml v2 turns this into a time value
		}
		doc := "apiVersion: v1\nkind: A\nv: " + tt.yaml + "\n"
		objs, err := Decode([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		ours, err := json.Marshal(objs[0])
		if err != nil {
			t.Fatal(err)
		}
		theirs, err := sigsyaml.YAMLToJSON([]byte(doc))
		if err != nil {
			t.Errorf("sigs.k8s.io/yaml rejects %q: %v", tt.yaml, err)
			continue
		}
		// Compare through the same decoder so that float formatting agrees.
		a, _ := decodeJSONObject(ours)
		b, _ := decodeJSONObject(theirs)
		if !reflect.DeepEqual(a, b) {
			t.Errorf("v: %s: ours %s, sigs.k8s.io/yaml %s", tt.yaml, ours, theirs)
		}
	}
}

func TestDecodeJSONInput(t *testing.T) {
	t.Parallel()
	objs := mustDecode(t, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"j"},"data":{"a":"1"},"n":[1,2.5,null,true]}`)
	want := Object{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "j"},
		"data":     map[string]any{"a": "1"},
		"n":        []any{int64(1), 2.5, nil, true},
	}
	if !reflect.DeepEqual(objs[0], want) {
		t.Fatalf("got %#v", objs[0])
	}
}

// TestDecodeApplicable: what the Kubernetes runtime refuses to apply is
// refused at the line of the field at fault; Decode itself accepts it.
func TestDecodeApplicable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, yaml string
		line       int
		want       string
	}{
		{"generateName twice", "apiVersion: batch/v1\nkind: Job\nmetadata:\n  generateName: migrate-\n---\napiVersion: batch/v1\nkind: Job\nmetadata:\n  generateName: migrate-\n", 6, "appears twice (first at line 1)"},
		{"no name", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  labels: {a: b}\n", 1, "metadata.name is required"},
		{"list kind without items", "apiVersion: example.com/v1\nkind: AllowList\nmetadata:\n  name: x\n", 2, "lists are not supported"},
		{"twice", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n", 6, "appears twice (first at line 1)"},
		{"twice in a list", "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Secret, metadata: {name: s}}\n- {apiVersion: v1, kind: Secret, metadata: {name: s}}\n", 5, "appears twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if _, err := Decode([]byte(tc.yaml)); err != nil {
				t.Fatalf("Decode refused it: %v", err)
			}
			_, err := DecodeApplicable([]byte(tc.yaml))
			var me *Error
			if !errors.As(err, &me) || me.Line != tc.line || !strings.Contains(me.Msg, tc.want) {
				t.Errorf("got %v; want line %d containing %q", err, tc.line, tc.want)
			}
		})
	}
	ok := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: other}\n---\napiVersion: apps/v1\nkind: ConfigMap\nmetadata: {name: a}\n"
	if objs, err := DecodeApplicable([]byte(ok)); err != nil || len(objs) != 3 {
		t.Errorf("same names in other namespaces or groups: %d objects, %v", len(objs), err)
	}
}
