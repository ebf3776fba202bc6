package engine

import (
	"reflect"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/store"
)

// TestFingerprintCoversEveryField: changing any recorded field of an
// observation (its objects' and infos' included) changes its fingerprint,
// so a field added to the types but not to fingerprint fails here; the
// key and Since, which are not what was seen, do not count.
func TestFingerprintCoversEveryField(t *testing.T) {
	t.Parallel()
	base := store.Observation{Objects: []store.ObservedObject{{}}, Info: []store.ObservedInfo{{}}}
	want := fingerprint(base)
	vary := func(name string, v reflect.Value) {
		t.Helper()
		switch v.Kind() {
		case reflect.String:
			v.SetString("x")
		case reflect.Bool:
			v.SetBool(true)
		case reflect.Int, reflect.Int32, reflect.Int64:
			v.SetInt(7)
		case reflect.Struct: // a time: Since
			v.Set(reflect.ValueOf(time.Now()))
		default:
			t.Fatalf("field %s: kind %s not covered by this test", name, v.Kind())
		}
	}
	check := func(name string, counts bool, set func(o *store.Observation) reflect.Value) {
		t.Helper()
		o := base
		o.Objects = []store.ObservedObject{{}}
		o.Info = []store.ObservedInfo{{}}
		v := set(&o)
		vary(name, v)
		if changed := fingerprint(o) != want; changed != counts {
			t.Errorf("field %s: fingerprint changed = %v, want %v", name, changed, counts)
		}
	}
	for _, f := range reflect.VisibleFields(reflect.TypeFor[store.Observation]()) {
		if f.Type.Kind() == reflect.Slice {
			if f.Name != "Objects" && f.Name != "Info" {
				t.Errorf("field Observation.%s: a list this test does not vary", f.Name)
			}
			continue // their elements' fields are varied below
		}
		counts := f.Tag.Get("json") != "-" && f.Name != "Since"
		check("Observation."+f.Name, counts, func(o *store.Observation) reflect.Value { return reflect.ValueOf(o).Elem().FieldByIndex(f.Index) })
	}
	for _, f := range reflect.VisibleFields(reflect.TypeFor[store.ObservedObject]()) {
		check("ObservedObject."+f.Name, true, func(o *store.Observation) reflect.Value {
			return reflect.ValueOf(&o.Objects[0]).Elem().FieldByIndex(f.Index)
		})
	}
	for _, f := range reflect.VisibleFields(reflect.TypeFor[store.ObservedInfo]()) {
		check("ObservedInfo."+f.Name, true, func(o *store.Observation) reflect.Value {
			return reflect.ValueOf(&o.Info[0]).Elem().FieldByIndex(f.Index)
		})
	}
	// Text moved from one field to the next is a change.
	a := store.Observation{Version: "ab", Message: "c"}
	b := store.Observation{Version: "a", Message: "bc"}
	if fingerprint(a) == fingerprint(b) {
		t.Error("moving text between fields kept the fingerprint")
	}
}
