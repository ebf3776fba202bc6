package compiler

import (
	"strings"
	"testing"

	"github.com/drover-dev/drover/internal/config"
)

// TestB2HelmManifestsChargedToBudget: a chart's manifests count against the
// compilation's output budget (MaxCompileOutput), like template output.
func TestB2HelmManifestsChargedToBudget(t *testing.T) {
	t.Parallel()
	h := &config.HelmConfig{Chart: &config.FileTree{Root: "chart", Files: map[string]string{
		"Chart.yaml":       "apiVersion: v2\nname: c\nversion: 0.1.0\n",
		"templates/x.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\n",
	}}}
	compilerWith := func(cache *templateCache) *rcCompiler {
		return &rcCompiler{
			ctx:       t.Context(),
			in:        &Input{Application: &config.Application{Name: "a"}, Service: &config.Service{Name: "s", Application: "a"}},
			rc:        &ReleaseChannel{ReleaseChannel: config.ReleaseChannel{Name: "c"}},
			templates: cache,
		}
	}
	c := compilerWith(&templateCache{})
	if objs := c.helm("service.helm", h, &Data{}, SelectedRuntime{Namespace: "ns"}); len(objs) != 1 || len(c.errs) > 0 {
		t.Fatalf("the chart did not render: %v %v", objs, c.errs)
	}
	spent := &templateCache{}
	spent.budget.used.Store(int64(MaxCompileOutput - 10))
	c = compilerWith(spent)
	if objs := c.helm("service.helm", h, &Data{}, SelectedRuntime{Namespace: "ns"}); objs != nil {
		t.Errorf("the chart rendered past the budget: %v", objs)
	}
	if len(c.errs) != 1 || !strings.Contains(c.errs[0].Msg, helmBudgetMsg()) || c.errs[0].Field != "service.helm" {
		t.Errorf("want the budget error on service.helm, got %v", c.errs)
	}
}

// TestHelmKubeVersion: charts are rendered for drover's current default
// Kubernetes version (a chart requiring >=1.23 renders; Helm's own default,
// 1.20, would refuse it), and for the runtime's kubeVersion when set, whose
// constraint failures name the chart.
func TestHelmKubeVersion(t *testing.T) {
	t.Parallel()
	h := &config.HelmConfig{Chart: &config.FileTree{Root: "chart", Files: map[string]string{
		"Chart.yaml":       "apiVersion: v2\nname: c\nversion: 0.1.0\nkubeVersion: \">=1.23.0-0\"\n",
		"templates/x.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\ndata: {v: {{ .Capabilities.KubeVersion.Version | quote }}}\n",
	}}}
	render := func(rt *config.Runtime) ([]any, Errors) {
		c := &rcCompiler{
			ctx: t.Context(),
			in: &Input{Application: &config.Application{Name: "a"}, Service: &config.Service{Name: "s", Application: "a"},
				Runtimes: map[string]*config.Runtime{"k": rt}},
			rc:        &ReleaseChannel{ReleaseChannel: config.ReleaseChannel{Name: "c"}},
			templates: &templateCache{},
		}
		return c.helm("service.helm", h, &Data{}, SelectedRuntime{Name: "k", Namespace: "ns"}), c.errs
	}
	objs, errs := render(&config.Runtime{Name: "k", Fake: &config.FakeRuntime{}})
	if len(errs) > 0 || len(objs) != 1 {
		t.Fatalf("default version: %v %v", objs, errs)
	}
	if got := objs[0].(map[string]any)["data"].(map[string]any)["v"]; got != config.DefaultKubeVersion {
		t.Errorf("rendered for %v, want %s", got, config.DefaultKubeVersion)
	}
	_, errs = render(&config.Runtime{Name: "k", Kubernetes: &config.KubernetesRuntime{KubeVersion: "1.20"}})
	if len(errs) != 1 || !strings.Contains(errs[0].Msg, "helm chart chart") || !strings.Contains(errs[0].Msg, ">=1.23.0-0") {
		t.Errorf("a cluster older than the chart allows: %v", errs)
	}
}
