package compiler_test

import (
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	kubefake "helm.sh/helm/v3/pkg/kube/fake"
	"helm.sh/helm/v3/pkg/storage"
	"helm.sh/helm/v3/pkg/storage/driver"

	"github.com/drover-dev/drover/internal/compiler"
	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/manifest"
)

// loadCase loads a testdata tree as a config set.
func loadCase(t *testing.T, dir string) *config.Set {
	t.Helper()
	sources, err := config.Load([]string{dir + "/..."})
	if err != nil {
		t.Fatal(err)
	}
	set, errs := config.NewSet(sources)
	if len(errs) > 0 {
		t.Fatal(errs.Err())
	}
	return set
}

// TestValidateParamsChartChecksVersion: a chart that checks a required value
// (testdata/validate-standin) validates with the value given by --param, is
// refused with its own message for a value it does not support (without a
// word about stand-ins, none was used), and --param names no parameter of no
// service unnoticed.
func TestValidateParamsChartChecksVersion(t *testing.T) {
	t.Parallel()
	set := loadCase(t, "testdata/validate-standin")
	validate := func(params ...string) config.ErrorList {
		var given []compiler.ParamValue
		for _, p := range params {
			pv, err := compiler.ParseParam(p)
			if err != nil {
				t.Fatal(err)
			}
			given = append(given, pv)
		}
		return compiler.ValidateSetWith(t.Context(), set, compiler.ValidateOptions{Params: given})
	}
	if errs := validate("image=1.27.3"); len(errs) > 0 {
		t.Errorf("a supported version: %v", errs.Err())
	}
	errs := validate("image=1.19.0")
	if len(errs) != 1 {
		t.Fatalf("an unsupported version: want one error, got %v", errs)
	}
	if msg := errs[0].Msg; !strings.Contains(msg, `ERROR: version "1.19.0" is not supported: this chart needs 1.20 or later`) || strings.Contains(msg, "stand-in") {
		t.Errorf("an unsupported version: %s", msg)
	}
	errs = validate()
	if len(errs) != 1 || !strings.Contains(errs[0].Msg, "drover validate --param image=VALUE") || !strings.Contains(errs[0].Msg, `version "placeholder"`) {
		t.Errorf("no value: want the chart's refusal and the --param to give, got %v", errs)
	}
	if got := compiler.UnusedParams(set, []compiler.ParamValue{{Name: "image"}, {Name: "imgae"}}); !reflect.DeepEqual(got, []string{"imgae"}) {
		t.Errorf("UnusedParams = %v", got)
	}
	// A per-channel value of a channel the application does not have is not
	// the service's: it is left out, not an error of every service.
	rc := []compiler.ParamValue{{Name: "image", Value: "1.27.3"}, {Name: "image", Value: "1.0.0", ReleaseChannel: "nosuch"}}
	if errs := compiler.ValidateSetWith(t.Context(), set, compiler.ValidateOptions{Params: rc}); len(errs) > 0 {
		t.Errorf("a value for another application's channel: %v", errs.Err())
	}
}

// TestHelmMatchesHelmTemplate: what drover compiles from a chart is what
// Helm's own template path (action.Install, DryRun and ClientOnly, as `helm
// template` runs it) renders from the same chart, values and release.
func TestHelmMatchesHelmTemplate(t *testing.T) {
	t.Parallel()
	set := loadCase(t, "testdata/validate-standin")
	in, err := compiler.InputFor(set, config.ServiceKey{Application: "sv", Service: "web"})
	if err != nil {
		t.Fatal(err)
	}
	in.Params = []compiler.ParamValue{{Name: "image", Value: "1.27.3"}}
	res, err := compiler.Compile(in)
	if err != nil {
		t.Fatal(err)
	}
	got := res.ReleaseChannels[0].Objects

	ch, err := loader.LoadDir("testdata/validate-standin/svc/chart")
	if err != nil {
		t.Fatal(err)
	}
	install := action.NewInstall(&action.Configuration{
		Releases:     storage.Init(driver.NewMemory()),
		KubeClient:   &kubefake.PrintingKubeClient{Out: io.Discard},
		Capabilities: chartutil.DefaultCapabilities,
		Log:          func(string, ...any) {},
	})
	install.DryRun, install.ClientOnly, install.Replace, install.IncludeCRDs = true, true, true, true
	install.ReleaseName, install.Namespace = "web", "drover-sv-staging"
	rel, err := install.Run(ch, map[string]any{"image": map[string]any{"tag": "1.27.3"}, "replicas": 2})
	if err != nil {
		t.Fatal(err)
	}
	objs, err := manifest.Decode([]byte(rel.Manifest))
	if err != nil {
		t.Fatal(err)
	}
	want := make([]any, len(objs))
	for i, o := range objs {
		want[i] = o
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("drover rendered\n%v\nhelm template renders\n%v", got, want)
	}
}

// TestKustomizeBasesBeside: an overlay of a subPath tree whose bases lie
// beside local.path (testdata/kustomize-beside) renders what kustomize
// builds from the overlay directory on disk, as `kubectl kustomize
// deploy/overlays/production` does; the tree sent to the server holds
// local.path and the bases the overlays use, not the rest of the config tree.
func TestKustomizeBasesBeside(t *testing.T) {
	t.Parallel()
	set := loadCase(t, "testdata/kustomize-beside")
	in, err := compiler.InputFor(set, config.ServiceKey{Application: "kb", Service: "web"})
	if err != nil {
		t.Fatal(err)
	}
	tree := in.Service.KubernetesConfig.Tree
	if tree == nil || tree.Dir != "deploy" || tree.Root != "testdata/kustomize-beside/svc" {
		t.Fatalf("tree: %+v", tree)
	}
	for name := range tree.Files {
		if strings.HasPrefix(name, "unused/") || strings.HasSuffix(name, ".pvn.yaml") {
			t.Errorf("the tree holds %s, which no kustomization uses", name)
		}
	}
	// Without drover's env injection, which kustomize does not do (the
	// golden case shows it).
	in.Service.KubernetesConfig.EnvInjectionMode = config.EnvInjectDisabled
	res, err := compiler.Compile(in)
	if err != nil {
		t.Fatal(err)
	}
	for _, rc := range res.ReleaseChannels {
		out, err := manifest.RenderKustomizeDir("testdata/kustomize-beside/svc/deploy/overlays/"+rc.Name, nil)
		if err != nil {
			t.Fatal(err)
		}
		objs, err := manifest.Decode(out)
		if err != nil {
			t.Fatal(err)
		}
		want := make([]any, len(objs))
		for i, o := range objs {
			want[i] = o
		}
		if !reflect.DeepEqual(rc.Objects, want) {
			t.Errorf("%s: drover rendered\n%v\nkustomize builds\n%v", rc.Name, rc.Objects, want)
		}
	}
}

// TestKustomizeBaseOutsideTree: a base outside the config tree is refused
// when the configs load, naming the path and --allow-path; --allow-path
// lets it in, and the overlay then renders.
func TestKustomizeBaseOutsideTree(t *testing.T) {
	t.Parallel()
	outside := t.TempDir()
	tree := t.TempDir()
	write := func(dir, name, content string) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(outside, "base/kustomization.yaml", "resources: [cm.yaml]\n")
	write(outside, "base/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\n")
	rel, err := filepath.Rel(filepath.Join(tree, "deploy", "overlays", "staging"), filepath.Join(outside, "base"))
	if err != nil {
		t.Fatal(err)
	}
	write(tree, "deploy/overlays/staging/kustomization.yaml", "resources: ["+filepath.ToSlash(rel)+"]\n")
	write(tree, "runtimes.pvn.yaml", "runtime: {name: k, fake: {}}\n")
	write(tree, "app.pvn.yaml", "application: {name: kb, releaseChannels: [{name: staging, runtimes: [{runtime: k}]}]}\n")
	write(tree, "web.pvn.yaml", "service:\n  name: web\n  application: kb\n  kubernetesConfig:\n    type: KUSTOMIZE\n    local: {path: deploy, subPath: overlays/staging}\n")
	_, err = config.Load([]string{tree + "/..."})
	if err == nil || !strings.Contains(err.Error(), "outside the config tree") || !strings.Contains(err.Error(), "--allow-path") || !strings.Contains(err.Error(), filepath.Join(outside, "base")) {
		t.Fatalf("a base outside the tree: %v", err)
	}
	sources, err := config.LoadWith([]string{tree + "/..."}, config.LoadOptions{AllowPaths: []string{outside}})
	if err != nil {
		t.Fatal(err)
	}
	set, errs := config.NewSet(sources)
	if len(errs) > 0 {
		t.Fatal(errs.Err())
	}
	if errs := compiler.ValidateSet(set); len(errs) > 0 {
		t.Errorf("with --allow-path: %v", errs.Err())
	}
}
