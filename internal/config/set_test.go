package config

import (
	"reflect"
	"strings"
	"testing"
)

func source(t *testing.T, path, src string) *Source {
	t.Helper()
	d, err := Decode(path, []byte(src))
	if err != nil {
		t.Fatalf("Decode(%s): %v", path, err)
	}
	return &Source{Path: path, Decoded: d}
}

func TestNewSet(t *testing.T) {
	t.Parallel()
	sources := []*Source{
		source(t, "app.pvn.yaml", "application:\n  name: shop\n  releaseChannels:\n    - name: staging\n"),
		source(t, "app2.pvn.yaml", "application:\n  name: shop\n"),
		source(t, "web.pvn.yaml", "service:\n  name: web\n  application: shop\n"),
		source(t, "web-other.pvn.yaml", "service:\n  name: web\n  application: other\n"),
		source(t, "web2.pvn.yaml", "service:\n  name: web\n  application: shop\n"),
		source(t, "api.pvn.yaml", "service:\n  name: api\n  application: shop\n"),
		source(t, "rt.pvn.yaml", "runtime:\n  name: k8s\n"),
		source(t, "rt2.pvn.yaml", "runtime:\n  name: k8s\n"),
		source(t, "p.pvn.yaml", "protection:\n  name: p\n"),
		source(t, "p2.pvn.yaml", "protection:\n  name: p\n"),
		source(t, "d.pvn.yaml", "deliveryExtension:\n  name: d\n"),
		source(t, "d2.pvn.yaml", "deliveryExtension:\n  name: d\n"),
		source(t, "rc.pvn.yaml", "releaseChannel:\n  application: shop\n  name: prod\n"),
		// A runtime and a protection may share a name: they are different kinds.
		source(t, "same.pvn.yaml", "protection:\n  name: k8s\n"),
	}
	set, errs := NewSet(sources)
	var got []string
	for _, e := range errs {
		got = append(got, e.Error())
	}
	want := []string{
		`app2.pvn.yaml:2:9: application.name: duplicate application "shop" (also defined in app.pvn.yaml)`,
		`web2.pvn.yaml:2:9: service.name: duplicate service "web" (also defined in web.pvn.yaml)`,
		`rt2.pvn.yaml:2:9: runtime.name: duplicate runtime "k8s" (also defined in rt.pvn.yaml)`,
		`p2.pvn.yaml:2:9: protection.name: duplicate protection "p" (also defined in p.pvn.yaml)`,
		`d2.pvn.yaml:2:9: deliveryExtension.name: duplicate deliveryExtension "d" (also defined in d.pvn.yaml)`,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if got, want := set.ServiceKeys(), []ServiceKey{{"other", "web"}, {"shop", "api"}, {"shop", "web"}}; !reflect.DeepEqual(got, want) {
		t.Errorf("ServiceKeys = %v, want %v", got, want)
	}
	if k := (ServiceKey{"shop", "web"}); k.String() != "shop/web" || set.Services[k].Path != "web.pvn.yaml" {
		t.Errorf("Services[%v] = %v", k, set.Services[k].Path)
	}
	if rt := set.RuntimeConfigs(); len(rt) != 1 || rt["k8s"] != sources[6].File.Runtime {
		t.Errorf("RuntimeConfigs = %v", rt)
	}
	if p := set.ProtectionConfigs(); len(p) != 2 || p["p"] != sources[8].File.Protection {
		t.Errorf("ProtectionConfigs = %v", p)
	}
	if d := set.DeliveryExtensionConfigs(); len(d) != 1 || d["d"] != sources[10].File.DeliveryExtension {
		t.Errorf("DeliveryExtensionConfigs = %v", d)
	}

	app := set.ApplicationConfig("shop")
	var names []string
	for _, rc := range app.ReleaseChannels {
		names = append(names, rc.Name)
	}
	if !reflect.DeepEqual(names, []string{"staging", "prod"}) {
		t.Errorf("ApplicationConfig release channels = %v, want staging, prod", names)
	}
	// The stored application is not modified.
	if n := len(sources[0].File.Application.ReleaseChannels); n != 1 {
		t.Errorf("ApplicationConfig appended to the source: %d release channels", n)
	}
	if set.ApplicationConfig("nope") != nil {
		t.Error("ApplicationConfig(unknown) != nil")
	}
}

func TestErrorList(t *testing.T) {
	t.Parallel()
	l := ErrorList{
		{File: "b.yaml", Line: 1, Column: 1, Msg: "b1"},
		{File: "a.yaml", Line: 10, Column: 2, Field: "x", Msg: "a10"},
		{File: "a.yaml", Line: 2, Column: 5, Msg: "a2:5"},
		{File: "a.yaml", Line: 2, Column: 1, Msg: "a2:1"},
		{File: "a.yaml", Line: 10, Column: 2, Field: "x", Msg: "a10"},
		{File: "c.yaml", Msg: "no position"},
	}
	err := l.Err()
	want := "a.yaml:2:1: a2:1\na.yaml:2:5: a2:5\na.yaml:10:2: x: a10\nb.yaml:1:1: b1\nc.yaml: no position"
	if err == nil || err.Error() != want {
		t.Errorf("Err() =\n%v\nwant\n%s", err, want)
	}
	got, ok := AsErrorList(err)
	if !ok || len(got) != 5 {
		t.Errorf("AsErrorList = %v, %v; want 5 errors", got, ok)
	}
	if ErrorList(nil).Err() != nil {
		t.Error("empty list Err() != nil")
	}
	single := &Error{File: "f", Line: 1, Column: 2, Msg: "m"}
	if got, ok := AsErrorList(single); !ok || len(got) != 1 || got[0] != single {
		t.Errorf("AsErrorList(*Error) = %v, %v", got, ok)
	}
	if _, ok := AsErrorList(ErrNoConfigs); ok {
		t.Error("AsErrorList(ErrNoConfigs) reported located errors")
	}
}
