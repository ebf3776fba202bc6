package compiler

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"sort"
	"strings"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/ignore"
	kubefake "helm.sh/helm/v3/pkg/kube/fake"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage"
	"helm.sh/helm/v3/pkg/storage/driver"
	"sigs.k8s.io/yaml"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/desiredstate"
)

// helmSlot serializes chart rendering: in-process, the Helm SDK keeps some
// global state (its template function map and caches); in a child process
// (helm_process.go), one render at a time bounds the memory charts may take
// together to MaxChartMemory. It is a channel so that a compilation can give
// up waiting for it.
var helmSlot = make(chan struct{}, 1)

// Charts render in a child process with its own limits when the process
// called IsolateCharts (the drover executable does): see helm_process.go.
// A compilation waits for a chart until its context is done (its deadline,
// MaxCompileTime, or its caller giving up), and the child is then killed.
// Its manifests are charged to the compilation's output budget
// (MaxCompileOutput) once rendered.
//
// Without IsolateCharts, Helm's template engine runs in-process with no
// limits, and cannot be interrupted: a compilation stops waiting for it at
// its context's end, but the render finishes in the background, holding
// helmSlot, so that at most one such render runs at a time.

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
		text := vo.Inlined
		if !vo.Literal {
			var ok bool
			if text, ok = c.renderText(vf, vo.Inlined, data); !ok {
				return nil
			}
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
	caps, used, err := helmCapabilities(c.in.Runtimes[sel.Name], c.in.Clusters[sel.Name])
	if err != nil {
		c.fail(Error{Object: c.serviceObject(), Field: field, Msg: fmt.Sprintf("helm chart %s: runtime %s: %v", h.Chart.Root, sel.Name, err)})
		return nil
	}
	if used != "" {
		c.note(fmt.Sprintf("helm chart %s: rendered for %s, as runtime %s reported", h.Chart.Root, used, sel.Name))
	}
	r, err := renderChartContext(c.ctx, h.Chart, release, ns, values, caps, c.templates.budget.left())
	if err == nil && !c.templates.budget.take(len(r.manifest)) {
		err = errors.New(helmBudgetMsg())
	}
	if err != nil {
		c.fail(Error{Object: c.serviceObject(), Field: field, Msg: fmt.Sprintf("helm chart %s: %v", h.Chart.Root, err)})
		return nil
	}
	for _, s := range r.skipped {
		c.note(fmt.Sprintf("helm chart %s: %s", h.Chart.Root, s))
	}
	return c.decodeObjects(field, config.SourceMarker(h.Chart.Root)+r.manifest)
}

// helmCapabilities is what a chart sees of the cluster (.Capabilities):
// the Kubernetes version is the runtime config's kubernetes.kubeVersion
// when set, else the version the cluster reported (facts), else
// config.DefaultKubeVersion; the API versions are those the cluster
// reported, else those Kubernetes itself serves, plus the config's
// kubernetes.apiVersions. used says what of the facts it used ("" = none).
func helmCapabilities(rt *config.Runtime, facts ClusterFacts) (caps *chartutil.Capabilities, used string, err error) {
	version := config.DefaultKubeVersion
	var extra []string
	var k *config.KubernetesRuntime
	if rt != nil {
		k = rt.Kubernetes
	}
	var usedParts []string
	switch {
	case k != nil && k.KubeVersion != "":
		version = k.KubeVersion
	case facts.KubeVersion != "":
		if _, err := chartutil.ParseKubeVersion(facts.KubeVersion); err == nil {
			version = facts.KubeVersion
			usedParts = append(usedParts, "Kubernetes "+facts.KubeVersion)
		}
	}
	if k != nil {
		extra = k.APIVersions
	}
	kv, err := chartutil.ParseKubeVersion(version)
	if err != nil {
		return nil, "", fmt.Errorf("kubernetes.kubeVersion %q: %w", version, err)
	}
	base := chartutil.DefaultVersionSet
	if len(facts.APIVersions) > 0 {
		base = facts.APIVersions
		usedParts = append(usedParts, fmt.Sprintf("the %d API versions", len(facts.APIVersions)))
	}
	if version == facts.KubeVersion {
		kv.Version = version // as Helm reads a cluster: its GitVersion, build metadata and all
	}
	c := *chartutil.DefaultCapabilities
	c.KubeVersion = *kv
	c.APIVersions = append(slices.Clone(base), extra...)
	return &c, strings.Join(usedParts, " and "), nil
}

// helmBudgetMsg is the error of a chart whose manifests pass the
// compilation's output budget.
func helmBudgetMsg() string {
	return fmt.Sprintf("its manifests are larger than what the templates of a compilation may produce together (%s)", byteSize(MaxCompileOutput))
}

// rendered is a chart's output: its manifest (hooks placed by the rule of
// placeHooks) and what it left out, said in words.
type rendered struct {
	manifest string
	skipped  []string
}

// renderChartContext is renderChart until ctx is done, in a child process
// when the process called IsolateCharts. maxOutput is what the compilation
// may still produce.
func renderChartContext(ctx context.Context, tree *config.FileTree, release, namespace string, values map[string]any, caps *chartutil.Capabilities, maxOutput int) (rendered, error) {
	stopped := func() error {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return fmt.Errorf("rendering ran out of time (a compilation's templates share at most %s): %w", MaxCompileTime, ctx.Err())
		}
		return fmt.Errorf("rendering stopped: %w", ctx.Err())
	}
	select {
	case helmSlot <- struct{}{}:
	case <-ctx.Done():
		return rendered{}, stopped()
	}
	if chartRendererExe != "" {
		defer func() { <-helmSlot }()
		r, err := renderChartChild(ctx, tree, release, namespace, values, caps, maxOutput)
		if err != nil && ctx.Err() != nil {
			return rendered{}, stopped()
		}
		return r, err
	}
	type result struct {
		r   rendered
		err error
	}
	done := make(chan result, 1)
	go func() {
		defer func() { <-helmSlot }()
		r, err := renderChart(tree, release, namespace, values, caps)
		done <- result{r, err}
	}()
	select {
	case r := <-done:
		return r.r, r.err
	case <-ctx.Done():
		return rendered{}, stopped()
	}
}

// renderChart renders a chart; the caller holds helmSlot.
func renderChart(tree *config.FileTree, release, namespace string, values map[string]any, caps *chartutil.Capabilities) (rendered, error) {
	ch, err := loadChart(tree)
	if err != nil {
		return rendered{}, err
	}
	cfg := &action.Configuration{
		Releases:     storage.Init(driver.NewMemory()),
		KubeClient:   &kubefake.PrintingKubeClient{Out: io.Discard},
		Capabilities: caps,
		Log:          func(string, ...any) {},
	}
	install := action.NewInstall(cfg)
	install.DryRun = true
	// Not ClientOnly: that mode (helm template's) always adds Helm's
	// built-in API versions to the ones given, so a chart would see APIs a
	// cluster removed. Here the chart sees exactly caps; the fake client
	// answers what a dry run asks of a cluster, and nothing is contacted.
	install.ClientOnly = false
	install.Replace = true
	// The chart's crds/ come first, before any hook, as Helm installs
	// them (placeHooks puts them there).
	install.IncludeCRDs = false
	install.DisableHooks = true // hooks are placed by placeHooks
	install.ReleaseName = release
	install.Namespace = namespace
	rel, err := install.Run(ch, values)
	if err != nil {
		return rendered{}, err
	}
	var crds strings.Builder
	for _, crd := range ch.CRDObjects() {
		fmt.Fprintf(&crds, "---\n# Source: %s\n%s\n", crd.Filename, strings.TrimSpace(string(crd.File.Data)))
	}
	return placeHooks(crds.String(), strings.TrimSpace(rel.Manifest)+"\n", rel.Hooks), nil
}

// loadChart loads the chart of a file tree, as helm template loads a chart
// directory: its .helmignore honoured.
func loadChart(tree *config.FileTree) (*chart.Chart, error) {
	names := make([]string, 0, len(tree.Files))
	for n := range tree.Files {
		names = append(names, path.Clean(n))
	}
	sort.Strings(names)
	keep, err := helmIgnored(tree)
	if err != nil {
		return nil, err
	}
	files := make([]*loader.BufferedFile, 0, len(names))
	for _, n := range names {
		if keep(n) {
			files = append(files, &loader.BufferedFile{Name: n, Data: []byte(tree.Files[n])})
		}
	}
	ch, err := loader.LoadFiles(files)
	if err != nil {
		return nil, err
	}
	if err := ch.Validate(); err != nil {
		return nil, err
	}
	return ch, nil
}

// placeHooks is drover's rule for Helm hooks, which it does not run as Helm
// does (docs/kubernetes.md): the chart's CRDs (crds/) come first, as Helm
// installs them before anything else; hooks of pre-install or pre-upgrade
// are applied as objects after them and before the release's other
// objects, hooks of post-install or post-upgrade after those, each group in
// Helm's order (weight, then name); hooks only of test, delete or rollback
// events are left out, and said so. A hook of install events only keeps
// its helm.sh/hook annotation, by which the Kubernetes runtime applies it on
// the instance's first install only.
func placeHooks(crds, manifest string, hooks []*release.Hook) rendered {
	var pre, post []*release.Hook
	var skipped []string
	for _, h := range hooks {
		switch {
		case slices.ContainsFunc(h.Events, func(e release.HookEvent) bool {
			return e == release.HookPreInstall || e == release.HookPreUpgrade
		}):
			pre = append(pre, h)
		case slices.ContainsFunc(h.Events, func(e release.HookEvent) bool {
			return e == release.HookPostInstall || e == release.HookPostUpgrade
		}):
			post = append(post, h)
		default:
			events := make([]string, len(h.Events))
			for i, e := range h.Events {
				events[i] = string(e)
			}
			skipped = append(skipped, fmt.Sprintf("hook %s %s (%s, %s) left out: drover runs no Helm test, delete or rollback hooks",
				h.Kind, h.Name, h.Path, strings.Join(events, ", ")))
		}
	}
	order := func(a, b *release.Hook) int {
		if a.Weight != b.Weight {
			return a.Weight - b.Weight
		}
		return strings.Compare(a.Name, b.Name)
	}
	for _, h := range slices.Concat(pre, post) {
		if installOnly(h.Events) {
			skipped = append(skipped, fmt.Sprintf("hook %s %s (%s) is an install hook: it is applied on the instance's first install only, not with later versions",
				h.Kind, h.Name, h.Path))
		}
	}
	slices.SortStableFunc(pre, order)
	slices.SortStableFunc(post, order)
	var b strings.Builder
	b.WriteString(crds)
	for _, h := range pre {
		fmt.Fprintf(&b, "---\n# Source: %s\n%s\n", h.Path, strings.TrimSpace(h.Manifest))
	}
	b.WriteString(manifest)
	for _, h := range post {
		fmt.Fprintf(&b, "---\n# Source: %s\n%s\n", h.Path, strings.TrimSpace(h.Manifest))
	}
	return rendered{manifest: b.String(), skipped: skipped}
}

// installOnly reports whether a hook runs on install only (no upgrade).
func installOnly(events []release.HookEvent) bool {
	return !slices.ContainsFunc(events, func(e release.HookEvent) bool {
		return e == release.HookPreUpgrade || e == release.HookPostUpgrade
	})
}

// helmIgnored reads the chart's .helmignore (and Helm's defaults) and
// returns which of its files to keep, as helm template does for a chart
// directory.
func helmIgnored(tree *config.FileTree) (func(name string) bool, error) {
	rules := ignore.Empty()
	if text, ok := tree.Files[ignore.HelmIgnore]; ok {
		r, err := ignore.Parse(strings.NewReader(text))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", ignore.HelmIgnore, err)
		}
		rules = r
	}
	rules.AddDefaults()
	return func(name string) bool {
		// A directory rule ignores what is below it, as the walk of a
		// chart directory skips the directory.
		dir := ""
		for part := range strings.SplitSeq(path.Dir(name), "/") {
			if part == "." {
				break
			}
			dir = path.Join(dir, part)
			if rules.Ignore(dir, fileInfo{name: part, dir: true}) {
				return false
			}
		}
		return !rules.Ignore(name, fileInfo{name: path.Base(name)})
	}, nil
}

// fileInfo is the little of os.FileInfo .helmignore rules look at.
type fileInfo struct {
	name string
	dir  bool
}

func (f fileInfo) Name() string { return f.name }
func (f fileInfo) Size() int64  { return 0 }
func (f fileInfo) Mode() os.FileMode {
	if f.dir {
		return os.ModeDir
	}
	return 0
}
func (f fileInfo) ModTime() time.Time { return time.Time{} }
func (f fileInfo) IsDir() bool        { return f.dir }
func (f fileInfo) Sys() any           { return nil }
