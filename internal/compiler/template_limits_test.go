package compiler_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/compiler"
	"github.com/drover-dev/drover/internal/config"
)

// writeTree writes files (path -> content) under a new temporary directory
// and loads them as a config set.
func writeTree(t *testing.T, files map[string]string) *config.Set {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
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

const limitsRuntime = `runtime:
  name: r
  fake: {}
`

const limitsApp = `application:
  name: a
  releaseChannels:
    - {name: staging, runtimes: [{runtime: r}]}
    - {name: prod, runtimes: [{runtime: r}]}
`

const limitsSvc = `service:
  name: s
  application: a
  kubernetesConfig:
    type: KUBERNETES
    local: {path: .}
`

// heavyTree is an application whose service references cm.yaml holding body.
func heavyTree(t *testing.T, body string) *config.Set {
	t.Helper()
	return writeTree(t, map[string]string{
		"runtime.pvn.yaml": limitsRuntime,
		"app.pvn.yaml":     limitsApp,
		"svc/s.pvn.yaml":   limitsSvc,
		"svc/cm.yaml":      "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\ndata:\n  a: '" + body + "'\n",
	})
}

// heapAfter returns the heap in use after a collection.
func heapAfter() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// TestB2RunawayTemplatesStop: templates that would render gigabytes, or loop
// for hours without output, or recurse exponentially, end quickly with an
// error naming the referenced file, in validate (ValidateSet) and compile.
func TestB2RunawayTemplatesStop(t *testing.T) {
	t.Parallel()
	for name, body := range map[string]string{
		"output":     `{{range 2000000000}}xxxxxxxxxxxxxxxxxxxx{{end}}`,
		"cpu":        `{{range 100000000000}}{{end}}`,
		"nested":     `{{range 100000}}{{range 100000}}{{range 100000}}{{end}}{{end}}{{end}}`,
		"doubling":   `{{$x := "ab"}}{{range 200}}{{$x = printf "%s%s" $x $x}}{{end}}{{len $x}}`,
		"recursion":  `{{define "t"}}{{template "t" .}}{{template "t" .}}{{end}}{{template "t" .}}`,
		"wide-print": `{{range 100000}}{{printf "%999999d" 1}}{{end}}`,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			set := heavyTree(t, body)
			start := time.Now()
			errs := compiler.ValidateSet(set)
			if took := time.Since(start); took > compiler.MaxTemplateTime+5*time.Second {
				t.Errorf("validate took %s", took)
			}
			if len(errs) == 0 {
				t.Fatal("validate accepted a runaway template")
			}
			msg := errs.Err().Error()
			t.Log(msg)
			stopped := strings.Contains(msg, "template stopped") || strings.Contains(msg, "exceeded maximum template depth")
			if !stopped || !strings.Contains(msg, "cm.yaml") {
				t.Errorf("error does not say the template stopped in cm.yaml:\n%s", msg)
			}
			if len(msg) > 4096 {
				t.Errorf("error is %d bytes long", len(msg))
			}
		})
	}
	// Memory stays bounded: well below what the output loop would take
	// (2e9 x 20 bytes) even with both channels rendering at once.
	if h := heapAfter(); h > 1<<30 {
		t.Errorf("heap in use after the runaway renders: %d bytes", h)
	}
}

// TestB2CompileContextCancels: a cancelled context (the server's request
// context once its client left) stops a CPU-only loop at once.
func TestB2CompileContextCancels(t *testing.T) {
	t.Parallel()
	set := heavyTree(t, `{{range 100000000000}}{{end}}`)
	in, err := compiler.InputFor(set, config.ServiceKey{Application: "a", Service: "s"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	_, err = compiler.CompileContext(ctx, in)
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("compile went on for %s after its context was cancelled", took)
	}
	var le *compiler.LimitError
	if !errors.As(err, &le) && !strings.Contains(errString(err), "request was cancelled") {
		t.Fatalf("want a cancelled template, got %v", err)
	}

	errs := compiler.ValidateSetContext(ctx, set)
	if len(errs) == 0 {
		t.Fatal("validate with a cancelled context accepted the set")
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestB2OrdinaryTemplatesUnaffected: the rewritten parse tree renders as
// before (ranges with variables, else branches, break, define/template, the
// replaced printf).
func TestB2OrdinaryTemplatesUnaffected(t *testing.T) {
	t.Parallel()
	body := `{{range $i := 3}}{{$i}}{{end}}|{{range 0}}x{{else}}empty{{end}}|` +
		`{{range $i := 10}}{{if eq $i 2}}{{break}}{{end}}{{$i}}{{end}}|` +
		`{{define "t"}}<{{.}}>{{end}}{{template "t" "in"}}|{{printf "%03d" 7}}|{{print 1 2}}|{{html "<"}}|{{with $x := 5}}{{$x}}{{end}}`
	set := heavyTree(t, body)
	in, err := compiler.InputFor(set, config.ServiceKey{Application: "a", Service: "s"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := compiler.Compile(in)
	if err != nil {
		t.Fatal(err)
	}
	obj := res.ReleaseChannels[0].Objects[0]
	got := obj.(map[string]any)["data"].(map[string]any)["a"]
	want := "012|empty|01|<in>|007|1 2|&lt;|5"
	if got != want {
		t.Errorf("rendered %q, want %q", got, want)
	}
}

// totalAlloc is the bytes the process allocated so far.
func totalAlloc() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.TotalAlloc
}

// TestB2PrintfBombRefused: one printf call that would build gigabytes (16 MB
// values concatenated, or a format full of huge widths) is refused before fmt
// allocates its result, with an error naming the file.
//
// Not parallel: it measures the process's allocations, and parallel tests
// only start once the sequential ones have finished.
func TestB2PrintfBombRefused(t *testing.T) {
	big := `{{$x := printf "%01000000d" 0}}{{$y := printf "` + strings.Repeat("%s", 16) + `"` + strings.Repeat(" $x", 16) + `}}`
	for name, body := range map[string]string{
		"doubling":    big + `{{printf "` + strings.Repeat("%s", 40) + `"` + strings.Repeat(" $y", 40) + `}}`,
		"wide-format": `{{printf "` + strings.Repeat("%01000000d", 400) + `"` + strings.Repeat(" 0", 400) + `}}`,
		"star-width":  `{{printf "` + strings.Repeat("%*d", 400) + `"` + strings.Repeat(" 1000000 0", 400) + `}}`,
		"print":       big + `{{print` + strings.Repeat(" $y", 40) + `}}`,
		"html":        big + `{{html` + strings.Repeat(" $y", 40) + `}}`,
	} {
		t.Run(name, func(t *testing.T) {
			set := heavyTree(t, body)
			before := totalAlloc()
			errs := compiler.ValidateSet(set)
			allocated := totalAlloc() - before
			if len(errs) == 0 {
				t.Fatal("validate accepted the template")
			}
			msg := errs.Err().Error()
			if !strings.Contains(msg, "template stopped: a value would be larger than 16 MiB") || !strings.Contains(msg, "cm.yaml") {
				t.Errorf("error does not refuse the value in cm.yaml:\n%s", msg)
			}
			// Two release channels build $y (16 MB) each; the refused call
			// would have added 400 MB or more.
			if allocated > 200<<20 {
				t.Errorf("validate allocated %d MiB", allocated>>20)
			}
		})
	}
}

// budgetTree is an application with n release channels whose service renders
// body in cm.yaml.
func budgetTree(t *testing.T, n int, body string) *config.Set {
	t.Helper()
	app := "application:\n  name: a\n  releaseChannels:\n"
	for i := range n {
		app += fmt.Sprintf("    - {name: c%d, runtimes: [{runtime: r}]}\n", i)
	}
	return writeTree(t, map[string]string{
		"runtime.pvn.yaml": limitsRuntime,
		"app.pvn.yaml":     app,
		"svc/s.pvn.yaml":   limitsSvc,
		"svc/cm.yaml":      "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\ndata:\n  a: '" + body + "'\n",
	})
}

// TestB2CompileOutputBudget: every template of a compilation shares one
// output budget: renders that each stay under the per-template limit cannot
// add up past MaxCompileOutput across release channels.
func TestB2CompileOutputBudget(t *testing.T) {
	t.Parallel()
	// 6 MB built per channel (and not written, so that the YAML stays
	// small), 16 channels: 96 MB together.
	body := `{{$v := printf "` + strings.Repeat("%01000000d", 6) + `"` + strings.Repeat(" 0", 6) + `}}{{len $v}}`
	set := budgetTree(t, 16, body)
	in, err := compiler.InputFor(set, config.ServiceKey{Application: "a", Service: "s"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = compiler.Compile(in)
	if err == nil {
		t.Fatal("compile kept more than MaxCompileOutput of template output")
	}
	if msg := err.Error(); !strings.Contains(msg, "template stopped: the templates of this compilation produced more than 64 MiB together") || !strings.Contains(msg, "cm.yaml") {
		t.Errorf("error does not name the budget and the file:\n%s", msg)
	}
	// One channel is well within the budget.
	set = budgetTree(t, 1, body)
	if errs := compiler.ValidateSet(set); len(errs) > 0 {
		t.Errorf("one channel of 6 MB refused: %v", errs.Err())
	}
}

// slowTemplate runs for minutes within the step and output limits: each of
// its steps compares two distinct 4 MB strings.
const slowTemplate = `{{$x := printf "%0999999d%0999999d%0999999d%0999999d" 0 0 0 0}}` +
	`{{$y := printf "%0999999d%0999999d%0999999d%0999999d" 0 0 0 0}}` +
	`{{range 1000000}}{{if eq $x $y}}{{end}}{{end}}`

// TestB2ValidateSetSharesOneDeadline: a config set's validation gets one
// MaxCompileTime for all its services, not one each, and stops at the first
// service that runs out of it.
//
// Not parallel: it lowers MaxCompileTime, which parallel tests read; they
// only start once the sequential tests have finished.
func TestB2ValidateSetSharesOneDeadline(t *testing.T) {
	saved := compiler.MaxCompileTime
	compiler.MaxCompileTime = 2 * time.Second
	t.Cleanup(func() { compiler.MaxCompileTime = saved })
	files := map[string]string{
		"runtime.pvn.yaml": limitsRuntime,
		"app.pvn.yaml":     limitsApp,
	}
	for _, s := range []string{"s1", "s2", "s3", "s4"} {
		files[s+"/s.pvn.yaml"] = strings.Replace(limitsSvc, "name: s\n", "name: "+s+"\n", 1)
		files[s+"/cm.yaml"] = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\ndata:\n  a: '" + slowTemplate + "'\n"
	}
	set := writeTree(t, files)
	start := time.Now()
	errs := compiler.ValidateSetContext(t.Context(), set)
	took := time.Since(start)
	// One service per deadline would take 4 x 2 s.
	if took > 5*time.Second {
		t.Errorf("validation took %s with MaxCompileTime %s", took, compiler.MaxCompileTime)
	}
	msg := errs.Err().Error()
	if !strings.Contains(msg, "template stopped: the compilation ran out of time (its templates share at most 2s)") ||
		!strings.Contains(msg, "not validated: the validation ran out of time (all services share at most 2s)") {
		t.Errorf("errors do not say the validation ran out of time:\n%s", msg)
	}
}

// TestB2GroupTemplatesUseCallerContext: release channel group templates stop
// when the caller's context is done, in ExpandReleaseChannels and within a
// compilation.
func TestB2GroupTemplatesUseCallerContext(t *testing.T) {
	t.Parallel()
	set := writeTree(t, map[string]string{
		"runtime.pvn.yaml": "runtime:\n  name: r\n  fake: {}\n  labels: [{label: env, value: stg}]\n",
		"app.pvn.yaml": "application:\n  name: a\n  releaseChannelGroups:\n    - name: g\n      runtimeSelector: env=stg\n" +
			"      template:\n        constants: [{name: c, string: {value: '" + slowTemplate + "'}}]\n",
		"svc/s.pvn.yaml": limitsSvc,
		"svc/cm.yaml":    "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\n",
	})
	app := set.ApplicationConfig("a")
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(200*time.Millisecond, cancel)
	start := time.Now()
	_, errs := compiler.ExpandReleaseChannels(ctx, app, set.RuntimeConfigs())
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("expansion went on for %s after its context was cancelled", took)
	}
	if len(errs) == 0 || !strings.Contains(errs[0].Msg, "template stopped: the request was cancelled") {
		t.Errorf("want a cancelled group template, got %v", errs)
	}

	in, err := compiler.InputFor(set, config.ServiceKey{Application: "a", Service: "s"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel = context.WithCancel(t.Context())
	time.AfterFunc(200*time.Millisecond, cancel)
	start = time.Now()
	_, err = compiler.CompileContext(ctx, in)
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("compile went on for %s after its context was cancelled", took)
	}
	if !strings.Contains(errString(err), "template stopped: the request was cancelled") {
		t.Errorf("want a cancelled group template, got %v", err)
	}
}

// helmTree is an application with n release channels whose service is a
// local chart with one template, body.
func helmTree(t *testing.T, n int, body string) *config.Set {
	t.Helper()
	app := "application:\n  name: a\n  releaseChannels:\n"
	for i := range n {
		app += fmt.Sprintf("    - {name: c%d, runtimes: [{runtime: r}]}\n", i)
	}
	return writeTree(t, map[string]string{
		"runtime.pvn.yaml":           limitsRuntime,
		"app.pvn.yaml":               app,
		"svc/s.pvn.yaml":             "service:\n  name: s\n  application: a\n  helm:\n    local: {path: chart}\n",
		"svc/chart/Chart.yaml":       "apiVersion: v2\nname: c\nversion: 0.1.0\n",
		"svc/chart/templates/x.yaml": body,
	})
}

// TestB2HelmChartStopsWithContext: Helm's engine cannot be interrupted, but
// a compilation stops waiting for a chart when its context is done.
func TestB2HelmChartStopsWithContext(t *testing.T) {
	t.Parallel()
	// About 800 MB hashed: seconds of work that Helm cannot stop.
	set := helmTree(t, 1, "{{ range until 8000 }}{{ $_ := repeat 100000 \"x\" | sha256sum }}{{ end }}apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\n")
	in, err := compiler.InputFor(set, config.ServiceKey{Application: "a", Service: "s"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	_, err = compiler.CompileContext(ctx, in)
	if took := time.Since(start); took > 800*time.Millisecond {
		t.Errorf("compile waited %s for a chart after its context was cancelled", took)
	}
	if msg := errString(err); !strings.Contains(msg, "helm chart") || !strings.Contains(msg, "rendering stopped: context canceled") {
		t.Errorf("want a stopped chart, got %s", config.Clip(msg))
	}
}
