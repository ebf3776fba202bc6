package compiler_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/drover-dev/drover/internal/compiler"
	"github.com/drover-dev/drover/internal/config"
)

// PVN_SERVICE_VERSION is the bundle version, which the injection leaves
// as the hash of what was compiled; turning injection off is a new
// version; a container of a channel with injection off gets nothing.
func TestEnvInjectionVersion(t *testing.T) {
	t.Parallel()
	res := compileECS(t, "testdata/env-inject", "shop", "web", "image=1.2.3")
	raw, err := json.Marshal(res.ReleaseChannels[0].Objects[0])
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"name":"PVN_SERVICE_VERSION","value":"` + res.BundleVersion + `"}`; !strings.Contains(string(raw), want) {
		t.Errorf("staging's Deployment lacks %s: %s", want, raw)
	}
	if prod, _ := json.Marshal(res.ReleaseChannels[1].Objects); strings.Contains(string(prod), `"name":"PVN_`) || !res.ReleaseChannels[1].EnvInjectionDisabled {
		t.Errorf("production has injection off, yet: %s", prod)
	}

	sources, err := config.Load([]string{"testdata/env-inject/..."})
	if err != nil {
		t.Fatal(err)
	}
	set, errs := config.NewSet(sources)
	if len(errs) > 0 {
		t.Fatal(errs.Err())
	}
	in, err := compiler.InputFor(set, config.ServiceKey{Application: "shop", Service: "web"})
	if err != nil {
		t.Fatal(err)
	}
	svc := *in.Service
	svc.PerReleaseChannel = nil // injection on in production too
	in.Service = &svc
	in.Params = []compiler.ParamValue{{Name: "image", Value: "1.2.3"}}
	on, err := compiler.Compile(in)
	if err != nil {
		t.Fatal(err)
	}
	if on.BundleVersion == res.BundleVersion {
		t.Errorf("turning injection on in production kept the version %s", on.BundleVersion)
	}
}

// TestEnvNotInjectedIntoCharts: as in Prodvana, where service env is "not
// for Helm", a chart's objects get no env: they stay as helm template
// renders them, even with channel and service env set.
func TestEnvNotInjectedIntoCharts(t *testing.T) {
	res := compileECS(t, "testdata/helm", "hp", "web", "image=2.0")
	for _, rc := range res.ReleaseChannels {
		b, err := json.Marshal(rc.Objects)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "PVN_") {
			t.Errorf("release channel %s: a chart's objects got injected env: %s", rc.Name, b)
		}
	}
}
