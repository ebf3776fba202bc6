package manifest

import (
	"reflect"
	"testing"
)

func TestEncode(t *testing.T) {
	t.Parallel()
	objs := mustDecode(t, `kind: ConfigMap
apiVersion: v1
metadata: {name: cm, labels: {b: "2", a: "1"}}
data:
  "yes": "yes"
  version: "1.10"
  date: "2024-01-02"
  octal: "010"
  empty: ""
  multi: |
    line one
    line two
  template: "{{.Params.image}}"
num: [1, 2.5, -0.25, 1e21, 9223372036854775807, true, null]
---
apiVersion: v1
kind: Service
metadata: {name: svc}
`)
	out, err := Encode(objs)
	if err != nil {
		t.Fatal(err)
	}
	want := `apiVersion: v1
data:
  date: "2024-01-02"
  empty: ""
  multi: |
    line one
    line two
  octal: "010"
  template: '{{.Params.image}}'
  version: "1.10"
  "yes": "yes"
kind: ConfigMap
metadata:
  labels:
    a: "1"
    b: "2"
  name: cm
num:
- 1
- 2.5
- -0.25
- 1e+21
- 9223372036854775807
- true
- null
---
apiVersion: v1
kind: Service
metadata:
  name: svc
`
	if string(out) != want {
		t.Errorf("Encode =\n%s\nwant\n%s", out, want)
	}
	again, err := Encode(objs)
	if err != nil || string(again) != string(out) {
		t.Error("Encode is not deterministic")
	}
	back, err := Decode(out)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, objs) {
		t.Errorf("Decode(Encode(objs)) = %#v, want %#v", back, objs)
	}
}

func TestEncodeEmpty(t *testing.T) {
	t.Parallel()
	out, err := Encode(nil)
	if err != nil || len(out) != 0 {
		t.Fatalf("Encode(nil) = %q, %v", out, err)
	}
}
