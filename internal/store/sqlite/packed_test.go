package sqlite

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/store"
)

// filled sets every field of the struct v points to (and of the structs in
// its slices) to a value of its own, so that a field packRow forgets, or
// unpacks into another's place, fails the round trip.
func filled(t *testing.T, v reflect.Value, seed int) {
	t.Helper()
	for i := range v.NumField() {
		f, n := v.Field(i), seed*100+i+1
		switch {
		case f.Type() == reflect.TypeFor[time.Time]():
			f.Set(reflect.ValueOf(time.Unix(int64(1_700_000_000+n), int64(n)).UTC()))
		case f.Kind() == reflect.String:
			f.SetString(fmt.Sprintf("%s-%d\u2028\xff", v.Type().Field(i).Name, n))
		case f.Kind() == reflect.Bool:
			f.SetBool(true)
		case f.Kind() == reflect.Int || f.Kind() == reflect.Int64:
			f.SetInt(int64(n) * -7)
		case f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.String:
			f.Set(reflect.ValueOf([]string{fmt.Sprint("a", n), "", fmt.Sprint("c", n)}))
		case f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.Struct:
			s := reflect.MakeSlice(f.Type(), 2, 2)
			for j := range 2 {
				filled(t, s.Index(j), n*10+j)
			}
			f.Set(s)
		default:
			t.Fatalf("%s.%s: a field of kind %s the test does not fill: teach it (and packRow)", v.Type(), v.Type().Field(i).Name, f.Kind())
		}
	}
}

func TestPackedRowRoundTrip(t *testing.T) {
	var full store.Instance
	filled(t, reflect.ValueOf(&full).Elem(), 1)
	empty := store.Instance{ReleaseChannel: "prod", Satisfied: []string{}, Checks: []store.CheckResult{}}
	far := store.Instance{ReleaseChannel: "prod", LastApplyAt: time.Date(9999, 12, 31, 23, 59, 59, 999_999_999, time.UTC),
		ConvergedAt: time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC), Revision: 1 << 62}
	for name, in := range map[string]store.Instance{"every field": full, "zero": {}, "empty lists": empty, "far times": far} {
		t.Run(name, func(t *testing.T) {
			r := packRow(&in)
			if r.rc != in.ReleaseChannel || r.rev != in.Revision {
				t.Errorf("row keyed %q at %d, want %q at %d", r.rc, r.rev, in.ReleaseChannel, in.Revision)
			}
			got, err := r.unpack()
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, in) {
				t.Errorf("unpacked\n%+v\nwant\n%+v", got, in)
			}
			if len(in.Satisfied) > 0 {
				got.Satisfied[0] = "changed"
				if again, _ := r.unpack(); again.Satisfied[0] == "changed" {
					t.Error("an unpacked list shares its backing array with the cache")
				}
			}
		})
	}
}

func TestPackedRowRejectsWhatItDidNotWrite(t *testing.T) {
	var in store.Instance
	filled(t, reflect.ValueOf(&in).Elem(), 2)
	packed := packRow(&in).packed
	for n := range len(packed) {
		if _, err := (packedRow{rc: "x", packed: packed[:n]}).unpack(); err == nil {
			t.Fatalf("a row cut to %d of its %d bytes unpacked", n, len(packed))
		}
	}
	if _, err := (packedRow{rc: "x", packed: packed + "\x00"}).unpack(); err == nil || !strings.Contains(err.Error(), "left over") {
		t.Errorf("a row with a byte more unpacked: %v", err)
	}
	if _, err := (packedRow{rc: "x", packed: strings.Repeat("\xff", 20)}).unpack(); err == nil {
		t.Error("an overlong varint unpacked")
	}
}

// The cache drops a service whose row does not unpack and reads the file.
func TestCacheReadsTheFileWhenARowDoesNotUnpack(t *testing.T) {
	var c instanceCache
	in := store.Instance{Application: "a", Service: "s", ReleaseChannel: "prod", Revision: 3}
	_, gen, _ := c.list("a", "s")
	c.fill("a", "s", gen, []store.Instance{in})
	if got, ok := c.at("a", "s", "prod", 3); !ok || !reflect.DeepEqual(got, in) {
		t.Fatalf("at = %+v, %v; want the filled row", got, ok)
	}
	c.svcs[svcKey{"a", "s"}].list[0].packed += "junk"
	if _, _, ok := c.list("a", "s"); ok {
		t.Fatal("a row that does not unpack was read from the cache")
	}
	if _, found, known := c.get("a", "s", "prod"); found || known {
		t.Error("the service is still cached after a row did not unpack")
	}
}
