package manifest

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func FuzzDecode(f *testing.F) {
	for _, seed := range []string{
		patchFixture,
		"apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: A}\n",
		"apiVersion: v1\nkind: ConfigMapList\nitems:\n- metadata: {name: x}\n",
		"apiVersion: v1\nkind: A\na: &a {x: 1}\nb: {<<: *a, y: [1.5, yes, '010', 010, 0x1f, ~]}\n",
		"apiVersion: v1\nkind: A\ndata: {t: 2024-01-02, f: 1e3, s: !!str 1, i: !!int '2'}\n",
		"---\n# c\n---\napiVersion: v1\nkind: A\n...\n",
		"apiVersion: v1\nkind: A\nmetadata: {name: a: b}\n",
		"apiVersion: v1\nkind: \"A\n",
		"a: &a [*a]\n",
		"{\"apiVersion\":\"v1\",\"kind\":\"A\",\"n\":[1,2.5,-0,1e400]}",
		"- a\n",
		"apiVersion: v1\nkind: A\nb: |\n  {{.Params.x}}\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		objs, err := Decode(data)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %T is not *Error: %v", err, err)
			}
			if e.Line < 1 || e.Column < 1 {
				t.Fatalf("error position %d:%d not 1-based: %v", e.Line, e.Column, err)
			}
			return
		}
		// Decoded objects are JSON data in canonical form: a JSON round-trip
		// changes nothing.
		for _, obj := range objs {
			j, err := json.Marshal(obj)
			if err != nil {
				t.Fatalf("decoded object does not marshal: %v", err)
			}
			back, err := decodeJSONObject(j)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(back, obj) {
				t.Fatalf("JSON round-trip changed %#v into %#v", obj, back)
			}
		}
		// Encode output decodes back to the same objects.
		out, err := Encode(objs)
		if err != nil {
			t.Fatalf("Encode: %v", err)
		}
		again, err := Decode(out)
		if err != nil {
			t.Fatalf("Decode(Encode(objs)): %v\n%s", err, out)
		}
		if len(objs) == 0 {
			objs = nil
		}
		if !reflect.DeepEqual(again, objs) {
			t.Fatalf("Decode(Encode(objs)) = %#v, want %#v\n%s", again, objs, out)
		}
	})
}

// FuzzRenderKustomize builds a kustomization whose one resource has an odd
// file name: it never panics, and whatever it renders is that resource.
func FuzzRenderKustomize(f *testing.F) {
	for _, name := range []string{"cm.yaml", "a+b.yaml", "dir (1)/x.yaml", "ha-1.21+/cm.yaml", "ü/ñ.yaml", "a:b@c=d.yaml", "../x.yaml", "/abs.yaml", ".yaml"} {
		f.Add(name)
	}
	f.Fuzz(func(t *testing.T, name string) {
		quoted, err := json.Marshal(name) // a JSON string is a YAML string
		if err != nil {
			return
		}
		files := map[string][]byte{
			"kustomization.yaml": []byte("resources:\n- " + string(quoted) + "\n"),
			name:                 []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\n"),
		}
		out, err := RenderKustomize(files, "")
		if err == nil && !strings.Contains(string(out), "name: cm") {
			t.Errorf("%q rendered %q", name, out)
		}
	})
}
