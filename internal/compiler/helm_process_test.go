package compiler

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/config"
)

// TestMain makes the test binary a chart renderer, as the drover executable
// is (cmd/drover): the tests of this package render charts in child
// processes, with their limits.
func TestMain(m *testing.M) {
	if code, ok := ChartRenderer(os.Args[1:]); ok {
		os.Exit(code)
	}
	IsolateCharts()
	os.Exit(m.Run())
}

// bombChart is a chart with a helper, an ordinary template and
// templates/bomb.yaml holding body.
func bombChart(body string) *config.HelmConfig {
	return &config.HelmConfig{Chart: &config.FileTree{Root: "chart", Files: map[string]string{
		"Chart.yaml":             "apiVersion: v2\nname: c\nversion: 0.1.0\n",
		"templates/_helpers.tpl": "{{ define \"c.name\" }}cm{{ end }}\n",
		"templates/ok.yaml":      "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: {{ include \"c.name\" . }}}\n",
		"templates/bomb.yaml":    "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\ndata:\n  b: " + body + "\n",
	}}}
}

// renderBomb renders bombChart(body) for one release channel.
func renderBomb(t *testing.T, body string) ([]any, Errors) {
	t.Helper()
	c := &rcCompiler{
		ctx:       t.Context(),
		in:        &Input{Application: &config.Application{Name: "a"}, Service: &config.Service{Name: "s", Application: "a"}},
		rc:        &ReleaseChannel{ReleaseChannel: config.ReleaseChannel{Name: "c"}},
		templates: &templateCache{},
	}
	objs := c.helm("service.helm", bombChart(body), &Data{}, SelectedRuntime{Namespace: "ns"})
	return objs, c.errs
}

// TestS14ChartBombsStopped: a chart template that would take the memory of
// the process (the tour's repeat 1500000000, and others that allocate in
// proportion to a number or build a value by doubling), or its time, or
// render more than a template may, fails its compilation with an error that
// names the chart, the template and the limit; the test process (the
// server) lives on.
//
// Not parallel: it lowers MaxChartMemory and MaxTemplateTime, which the
// parallel tests read; they only start once the sequential tests have
// finished.
func TestS14ChartBombsStopped(t *testing.T) {
	savedMemory, savedTime, savedOutput := MaxChartMemory, MaxTemplateTime, MaxTemplateOutput
	t.Cleanup(func() { MaxChartMemory, MaxTemplateTime, MaxTemplateOutput = savedMemory, savedTime, savedOutput })
	MaxChartMemory = 256 << 20
	MaxTemplateOutput = 1 << 20 // a template over it stays far from the memory limit, even with -race
	const (
		memory = "chart render stopped: it used more than 256 MiB of memory, the most a chart render may use"
		output = "chart render stopped: it rendered more than 1 MiB, the most one template may render"
		slow   = "chart render stopped: it ran longer than 4s, the most a chart render may take"
	)
	for _, tc := range []struct{ name, body, want string }{
		{"repeat", `{{ repeat 1500000000 "x" | quote }}`, memory},
		{"until", `{{ range until 1000000000 }}x{{ end }}`, memory},
		{"doubling", `{{ $s := "x" }}{{ range until 40 }}{{ $s = print $s $s }}{{ end }}{{ $s | quote }}`, memory},
		{"nested range", `{{ range until 100000 }}{{ range until 100000 }}xxxxxxxxxx{{ end }}{{ end }}`, memory},
		{"printf width", `{{ range until 3000 }}{{ printf "%999999d" 1 }}{{ end }}`, memory},
		{"indent", `{{ indent 1000000000 "x" | quote }}`, memory},
		{"toJson", `{{ $l := list (repeat 1000000 "x") }}{{ range until 12 }}{{ $l = list $l $l }}{{ end }}{{ toJson $l | quote }}`, memory},
		{"output", `{{ repeat 1100000 "x" | quote }}`, output},
		{"time", `{{ range until 1000000 }}{{ range until 1000000 }}{{ end }}{{ end }}x`, slow},
	} {
		t.Run(tc.name, func(t *testing.T) {
			MaxTemplateTime = savedTime
			if tc.want == slow {
				MaxTemplateTime = 4 * time.Second
			}
			objs, errs := renderBomb(t, tc.body)
			if objs != nil || len(errs) != 1 {
				t.Fatalf("want one error, got %d objects and %v", len(objs), errs)
			}
			want := "helm chart chart: template c/templates/bomb.yaml: " + tc.want
			if errs[0].Msg != want || errs[0].Field != "service.helm" {
				t.Errorf("got  %q\nwant %q", errs[0].Msg, want)
			}
		})
	}
	// fmt caps a width at 1e6 and reads a larger one as the end of the
	// format, so this one is no bomb: it renders fmt's complaint.
	MaxTemplateTime = savedTime
	objs, errs := renderBomb(t, `{{ printf "%1000000000d" 1 | quote }}`)
	if len(errs) != 0 || len(objs) != 2 {
		t.Errorf("printf %%1000000000d: %d objects, %v", len(objs), errs)
	}
}

// TestS14ChartRenderedInChildAsInProcess: a chart with hooks, a subchart, a
// helper and notes renders in a child process exactly as in-process, and
// the chart's own errors come back unchanged.
func TestS14ChartRenderedInChildAsInProcess(t *testing.T) {
	t.Parallel()
	tree := &config.FileTree{Root: "chart", Files: map[string]string{
		"Chart.yaml":                    "apiVersion: v2\nname: c\nversion: 0.1.0\n",
		"values.yaml":                   "n: 2\nsub: {enabled: true}\n",
		"templates/_helpers.tpl":        "{{ define \"c.name\" }}{{ .Release.Name }}-{{ .Chart.Name }}{{ end }}\n",
		"templates/NOTES.txt":           "installed {{ .Release.Name }}\n",
		"templates/cm.yaml":             "{{ range until (int .Values.n) }}---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: {{ include \"c.name\" $ }}-{{ . }}}\ndata: {v: {{ $.Values.v | quote }}, ns: {{ $.Release.Namespace }}}\n{{ end }}",
		"templates/hook.yaml":           "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: pre\n  annotations: {helm.sh/hook: pre-install}\n",
		"templates/test.yaml":           "apiVersion: v1\nkind: Pod\nmetadata:\n  name: t\n  annotations: {helm.sh/hook: test}\n",
		"charts/sub/Chart.yaml":         "apiVersion: v2\nname: sub\nversion: 0.1.0\n",
		"charts/sub/templates/sub.yaml": "apiVersion: v1\nkind: Secret\nmetadata: {name: sub}\nstringData: {k: {{ .Values.k | default \"d\" }}}\n",
		"charts/sub/templates/_sub.tpl": "{{ define \"sub.x\" }}x{{ end }}\n",
		"files/blob.bin":                "\xff\x00\xfe binary",
		"templates/blob.yaml":           "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: blob}\nbinaryData: {b: {{ .Files.Get \"files/blob.bin\" | b64enc }}}\n",
		"crds/widget.yaml":              "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: widgets.example.com}\n",
	}}
	caps, _, err := helmCapabilities(nil, ClusterFacts{})
	if err != nil {
		t.Fatal(err)
	}
	values := map[string]any{"v": "é<&>\x01", "n": float64(3), "sub": map[string]any{"k": "given"}}
	helmSlot <- struct{}{}
	want, wantErr := renderChart(tree, "rel", "ns", values, caps)
	<-helmSlot
	got, err := renderChartContext(t.Context(), tree, "rel", "ns", values, caps, MaxCompileOutput)
	if wantErr != nil || err != nil {
		t.Fatalf("in-process: %v; in a child: %v", wantErr, err)
	}
	if got.manifest != want.manifest || strings.Join(got.skipped, "\n") != strings.Join(want.skipped, "\n") {
		t.Errorf("in a child:\n%s%q\nin-process:\n%s%q", got.manifest, got.skipped, want.manifest, want.skipped)
	}
	// skipped: the test hook left out, and the pre-install hook said to be
	// applied on the first install only.
	if !strings.Contains(got.manifest, "name: rel-c-2") || !strings.Contains(got.manifest, "b: /wD+IGJpbmFyeQ==") || !strings.Contains(got.manifest, "k: given") || len(got.skipped) != 2 {
		t.Errorf("unexpected render:\n%s%q", got.manifest, got.skipped)
	}
	if crd, hook := strings.Index(got.manifest, "kind: CustomResourceDefinition"), strings.Index(got.manifest, "helm.sh/hook: pre-install"); crd < 0 || hook < 0 || crd > hook {
		t.Errorf("the chart's CRDs do not come before its pre-install hook:\n%s", got.manifest)
	}

	tree.Files["templates/cm.yaml"] = "{{ fail \"no cluster for you\" }}"
	_, err = renderChartContext(t.Context(), tree, "rel", "ns", values, caps, MaxCompileOutput)
	if err == nil || err.Error() != "execution error at (c/templates/cm.yaml:1:3): no cluster for you" {
		t.Errorf("the chart's own error: %v", err)
	}
	_, err = renderChartContext(t.Context(), tree, "rel", "ns", values, caps, 10)
	if err == nil || !strings.Contains(err.Error(), "no cluster for you") {
		t.Errorf("the chart's own error, with little budget left: %v", err)
	}
	delete(tree.Files, "templates/cm.yaml")
	_, err = renderChartContext(t.Context(), tree, "rel", "ns", values, caps, 10)
	if err == nil || err.Error() != helmBudgetMsg() {
		t.Errorf("over the budget: %v", err)
	}
}
