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

// TestHelmClusterFacts: a chart renders against what the runtime's cluster
// reported (version, API versions), says so in a note, and a version set
// in the runtime's config still wins; API versions in the config add to
// the cluster's.
func TestHelmClusterFacts(t *testing.T) {
	t.Parallel()
	h := &config.HelmConfig{Chart: &config.FileTree{Root: "chart", Files: map[string]string{
		"Chart.yaml": "apiVersion: v2\nname: c\nversion: 0.1.0\n",
		"templates/x.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\ndata:\n" +
			"  v: {{ .Capabilities.KubeVersion.Version | quote }}\n" +
			"  widget: {{ .Capabilities.APIVersions.Has \"example.com/v1/Widget\" | quote }}\n" +
			"  gizmo: {{ .Capabilities.APIVersions.Has \"example.com/v1/Gizmo\" | quote }}\n" +
			"  policy: {{ .Capabilities.APIVersions.Has \"policy/v1\" | quote }}\n",
	}}}
	facts := ClusterFacts{KubeVersion: "v1.31.2+k3s1", APIVersions: []string{"v1", "example.com/v1", "example.com/v1/Widget"}}
	render := func(rt *config.Runtime, facts ClusterFacts) (map[string]any, []string) {
		t.Helper()
		c := &rcCompiler{
			ctx: t.Context(),
			in: &Input{Application: &config.Application{Name: "a"}, Service: &config.Service{Name: "s", Application: "a"},
				Runtimes: map[string]*config.Runtime{"k": rt}, Clusters: map[string]ClusterFacts{"k": facts}},
			rc:        &ReleaseChannel{ReleaseChannel: config.ReleaseChannel{Name: "c"}},
			templates: &templateCache{},
		}
		objs := c.helm("service.helm", h, &Data{}, SelectedRuntime{Name: "k", Namespace: "ns"})
		if len(c.errs) > 0 || len(objs) != 1 {
			t.Fatalf("render: %v %v", objs, c.errs)
		}
		return objs[0].(map[string]any)["data"].(map[string]any), c.notes
	}
	k := &config.Runtime{Name: "k", Kubernetes: &config.KubernetesRuntime{}}
	data, notes := render(k, facts)
	if data["v"] != "v1.31.2+k3s1" || data["widget"] != "true" || data["gizmo"] != "false" || data["policy"] != "false" {
		t.Errorf("with the cluster's facts: %v", data)
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "rendered for Kubernetes v1.31.2+k3s1 and the 3 API versions, as runtime k reported") {
		t.Errorf("notes %q", notes)
	}
	k = &config.Runtime{Name: "k", Kubernetes: &config.KubernetesRuntime{KubeVersion: "v1.30.0", APIVersions: []string{"example.com/v1/Gizmo"}}}
	data, notes = render(k, facts)
	if data["v"] != "v1.30.0" || data["widget"] != "true" || data["gizmo"] != "true" {
		t.Errorf("config over the cluster's facts: %v", data)
	}
	if len(notes) != 1 || strings.Contains(notes[0], "Kubernetes v1.31") {
		t.Errorf("notes %q", notes)
	}
	// Without facts: the defaults, and no note.
	data, notes = render(&config.Runtime{Name: "k", Kubernetes: &config.KubernetesRuntime{}}, ClusterFacts{})
	if data["v"] != config.DefaultKubeVersion || data["policy"] != "true" || len(notes) != 0 {
		t.Errorf("without facts: %v %q", data, notes)
	}
}
