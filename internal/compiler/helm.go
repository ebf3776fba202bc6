package compiler

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	kubefake "helm.sh/helm/v3/pkg/kube/fake"
	"helm.sh/helm/v3/pkg/storage"
	"helm.sh/helm/v3/pkg/storage/driver"
	"sigs.k8s.io/yaml"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/desiredstate"
)

// helmSlot serializes chart rendering: the Helm SDK keeps some global state
// (its template function map and caches) and rendering is fast enough. It is
// a channel so that a compilation can give up waiting for it.
var helmSlot = make(chan struct{}, 1)

// Helm's template engine has no limits and cannot be interrupted: a chart
// template runs until it ends, however long and however much it renders. A
// compilation waits for it only until its context is done (its deadline,
// MaxCompileTime, or its caller giving up); the render then finishes in the
// background, holding helmSlot, so that at most one such render runs at a
// time. Its manifests are charged to the compilation's output budget
// (MaxCompileOutput) once rendered.

// helm renders a local chart with the service's values for one release
// channel, the way `helm template` would, and returns the manifests as
// objects applied like any Kubernetes config. Values files are templates over
// the release channel's data; later files win.
func (c *rcCompiler) helm(field string, h *config.HelmConfig, data *Data, sel SelectedRuntime) []any {
	if h.Chart == nil {
		c.fail(Error{Object: c.serviceObject(), Field: field + ".local", Msg: "a chart is required: local.path"})
		return nil
	}
	values := map[string]any{}
	for i, vo := range h.ValuesOverrides {
		vf := fmt.Sprintf("%s.valuesOverrides[%d].inlined", field, i)
		text, ok := c.renderText(vf, vo.Inlined, data)
		if !ok {
			return nil
		}
		var v map[string]any
		if err := yaml.Unmarshal([]byte(text), &v); err != nil {
			file, _ := config.LocateSource(vo.Inlined, 1)
			c.fail(Error{Object: c.serviceObject(), Field: vf, File: file, Msg: "invalid values YAML: " + err.Error()})
			return nil
		}
		values = deepMerge(values, v)
	}
	release := h.ReleaseName
	if release == "" {
		release = c.in.Service.Name
	}
	ns := sel.Namespace
	if ns == "" {
		ns = desiredstate.ManagedNamespace(c.in.Application.Name, c.rc.Name)
	}
	manifest, err := renderChartContext(c.ctx, h.Chart, release, ns, values)
	if err == nil && !c.templates.budget.take(len(manifest)) {
		err = errors.New(helmBudgetMsg())
	}
	if err != nil {
		c.fail(Error{Object: c.serviceObject(), Field: field, Msg: fmt.Sprintf("helm chart %s: %v", h.Chart.Root, err)})
		return nil
	}
	return c.decodeObjects(field, config.SourceMarker(h.Chart.Root)+manifest)
}

// helmBudgetMsg is the error of a chart whose manifests pass the
// compilation's output budget.
func helmBudgetMsg() string {
	return fmt.Sprintf("its manifests are larger than what the templates of a compilation may produce together (%s)", byteSize(MaxCompileOutput))
}

// renderChartContext is renderChart until ctx is done.
func renderChartContext(ctx context.Context, tree *config.FileTree, release, namespace string, values map[string]any) (string, error) {
	stopped := func() error {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return fmt.Errorf("rendering ran out of time (a compilation's templates share at most %s): %w", MaxCompileTime, ctx.Err())
		}
		return fmt.Errorf("rendering stopped: %w", ctx.Err())
	}
	select {
	case helmSlot <- struct{}{}:
	case <-ctx.Done():
		return "", stopped()
	}
	type result struct {
		manifest string
		err      error
	}
	done := make(chan result, 1)
	go func() {
		defer func() { <-helmSlot }()
		m, err := renderChart(tree, release, namespace, values)
		done <- result{m, err}
	}()
	select {
	case r := <-done:
		return r.manifest, r.err
	case <-ctx.Done():
		return "", stopped()
	}
}

// renderChart renders a chart; the caller holds helmSlot.
func renderChart(tree *config.FileTree, release, namespace string, values map[string]any) (string, error) {
	names := make([]string, 0, len(tree.Files))
	for n := range tree.Files {
		names = append(names, n)
	}
	sort.Strings(names)
	files := make([]*loader.BufferedFile, 0, len(names))
	for _, n := range names {
		files = append(files, &loader.BufferedFile{Name: path.Clean(n), Data: []byte(tree.Files[n])})
	}
	chart, err := loader.LoadFiles(files)
	if err != nil {
		return "", err
	}
	if err := chart.Validate(); err != nil {
		return "", err
	}
	cfg := &action.Configuration{
		Releases:     storage.Init(driver.NewMemory()),
		KubeClient:   &kubefake.PrintingKubeClient{Out: io.Discard},
		Capabilities: chartutil.DefaultCapabilities,
		Log:          func(string, ...any) {},
	}
	install := action.NewInstall(cfg)
	install.DryRun = true
	install.ClientOnly = true
	install.Replace = true
	install.IncludeCRDs = true
	install.DisableHooks = true
	install.ReleaseName = release
	install.Namespace = namespace
	rel, err := install.Run(chart, values)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(rel.Manifest) + "\n", nil
}
