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
