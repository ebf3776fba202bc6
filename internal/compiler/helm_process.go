package compiler

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"

	"github.com/drover-dev/drover/internal/config"
)

// Charts render in a child process (S14). Helm's template engine has none of
// the limits of drover's templates (template_limits.go) and offers no way to
// add them: its function map and its output buffers are its own, so
// {{ repeat 1500000000 "x" }} or two nested {{ range 100000 }} take the
// memory of whatever process runs it, and a goroutine's memory cannot be
// limited in Go. So a chart is rendered by a child process, the drover
// executable started again with chartRendererArg (IsolateCharts): it limits
// its own memory (MaxChartMemory, a hard limit where the system has one),
// renders the chart, checks its output against the same sizes as drover's
// templates and prints it. A chart that takes too much memory kills the
// child, not the server; one that takes too long is killed after
// MaxTemplateTime (or at the compilation's deadline).
//
// When a render fails for its memory or its time, a second child renders
// the chart's templates one at a time, saying which before each, so that the
// error can name the template that failed (locateChart).
//
// Processes that did not call IsolateCharts (the tests of other packages)
// render charts in-process, without these limits.

// MaxChartMemory is the most memory one chart render may use, beyond what
// the renderer process needs to start. On Linux it is a hard limit
// (RLIMIT_DATA of the child); elsewhere it is the child's soft memory limit.
var MaxChartMemory = 1 << 30

// chartRendererArg is the argument that makes the drover executable a chart
// renderer (ChartRenderer); it is not a command users type.
const chartRendererArg = "__drover-render-chart"

// chartRendererExe is the executable started to render a chart, "" to
// render in-process. It is set once, by IsolateCharts, before any render.
var chartRendererExe string

// IsolateCharts makes every chart render of this process run in a child
// process: the running executable, which must call ChartRenderer first
// thing in its main function.
func IsolateCharts() {
	if runtime.GOOS == "linux" {
		// The running executable even when its file was replaced since
		// (an upgrade in place): the child is always the same version.
		chartRendererExe = "/proc/self/exe"
		return
	}
	if exe, err := os.Executable(); err == nil {
		chartRendererExe = exe
	}
}

// ChartRenderer runs this process as a chart renderer when args are the
// ones IsolateCharts's children get: it renders the chart described on
// stdin, prints the result on stdout, and returns the exit code, true. For
// any other args it does nothing and returns false.
func ChartRenderer(args []string) (code int, ok bool) {
	if len(args) != 1 || args[0] != chartRendererArg {
		return 0, false
	}
	if err := serveChartRender(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "drover chart renderer:", err)
		return 1, true
	}
	return 0, true
}

// chartRequest is what a chart renderer is asked to render.
type chartRequest struct {
	Files     []chartFile             `json:"files"`
	Release   string                  `json:"release"`
	Namespace string                  `json:"namespace"`
	Values    map[string]any          `json:"values"`
	Caps      *chartutil.Capabilities `json:"capabilities"`
	// MaxOutput is what the compilation's output budget has left.
	MaxOutput int `json:"maxOutput"`
	// MaxTemplateOutput is the most one template may render.
	MaxTemplateOutput int `json:"maxTemplateOutput"`
	// MaxMemory is MaxChartMemory, and MaxTime the render's time limit
	// (its parent kills it then; its CPU time is limited to more, as a
	// last resort).
	MaxMemory int           `json:"maxMemory"`
	MaxTime   time.Duration `json:"maxTime"`
	// Locate asks for locateChart instead of a render.
	Locate bool `json:"locate,omitempty"`
}

// chartFile is one file of a chart: bytes, since a name or a file (a
// dependency's .tgz, an image) need not be UTF-8, which JSON strings are.
type chartFile struct {
	Name []byte `json:"name"`
	Data []byte `json:"data"`
}

// chartFiles and treeFiles convert a chart's files for a request and back.
func chartFiles(tree *config.FileTree) []chartFile {
	files := make([]chartFile, 0, len(tree.Files))
	for name, data := range tree.Files {
		files = append(files, chartFile{Name: []byte(name), Data: []byte(data)})
	}
	return files
}

func treeFiles(files []chartFile) *config.FileTree {
	tree := &config.FileTree{Files: make(map[string]string, len(files))}
	for _, f := range files {
		tree.Files[string(f.Name)] = string(f.Data)
	}
	return tree
}

// chartResponse is the first line of a renderer's answer; ManifestBytes
// bytes of manifest follow it.
type chartResponse struct {
	Error   string   `json:"error,omitempty"`
	Skipped []string `json:"skipped,omitempty"`
	// ManifestBytes is the size of the manifest after this line.
	ManifestBytes int `json:"manifestBytes"`
}

// maxResponseLine bounds the first line of a renderer's answer and each
// line of a locate pass.
const maxResponseLine = 1 << 20

// Words of a locate pass's answer: one line "template NAME" before each
// template, "done" at the end.
const (
	locateTemplate = "template "
	locateDone     = "done"
)

// serveChartRender is the chart renderer: it limits its memory and time,
// then answers the request on in.
func serveChartRender(in io.Reader, out io.Writer) error {
	var req chartRequest
	if err := json.NewDecoder(in).Decode(&req); err != nil {
		return fmt.Errorf("read the request: %w", err)
	}
	if err := limitRenderer(req.MaxMemory, req.MaxTime); err != nil {
		return fmt.Errorf("limit the renderer: %w", err)
	}
	tree := treeFiles(req.Files)
	req.Files = nil
	if req.Locate {
		return locateChart(tree, req, out)
	}
	var resp chartResponse
	r, err := renderChart(tree, req.Release, req.Namespace, req.Values, req.Caps)
	if err == nil {
		err = checkChartOutput(r, req)
	}
	if err != nil {
		resp.Error = err.Error()
		r = rendered{}
	}
	resp.Skipped, resp.ManifestBytes = r.skipped, len(r.manifest)
	line, err := json.Marshal(resp)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(out)
	// A bufio.Writer keeps its first error and returns it from Flush.
	_, _ = w.Write(line)
	_ = w.WriteByte('\n')
	_, _ = w.WriteString(r.manifest)
	return w.Flush()
}

// checkChartOutput refuses a chart one of whose templates rendered more
// than one of drover's templates may, or whose manifests pass what the
// compilation may still produce.
func checkChartOutput(r rendered, req chartRequest) error {
	sizes := map[string]int{}
	var order []string
	for doc := range strings.SplitSeq(r.manifest, "---\n# Source: ") {
		name, body, _ := strings.Cut(doc, "\n")
		if _, ok := sizes[name]; !ok {
			order = append(order, name)
		}
		sizes[name] += len(body)
	}
	for _, name := range order {
		if sizes[name] > req.MaxTemplateOutput {
			return fmt.Errorf("template %s: %w", name, &chartLimitError{what: fmt.Sprintf("it rendered more than %s, the most one template may render", byteSize(req.MaxTemplateOutput))})
		}
	}
	if len(r.manifest) > req.MaxOutput {
		return errors.New(helmBudgetMsg())
	}
	return nil
}

// locateChart renders each template of the chart alone (the others are
// still parsed, for their definitions), printing "template NAME" before
// each and "done" after the last: when the process dies, the last name it
// printed is the template that killed it. What the templates render is
// discarded.
func locateChart(tree *config.FileTree, req chartRequest, out io.Writer) error {
	ch, err := loadChart(tree)
	if err != nil {
		return err
	}
	values := req.Values
	if values == nil {
		values = map[string]any{}
	}
	if err := chartutil.ProcessDependenciesWithMerge(ch, values); err != nil {
		return err
	}
	opts := chartutil.ReleaseOptions{Name: req.Release, Namespace: req.Namespace, Revision: 1, IsInstall: true}
	top, err := chartutil.ToRenderValues(ch, values, opts, req.Caps)
	if err != nil {
		return err
	}
	type tpl struct {
		file *chart.File
		name string // as Helm names it: the chart's path, then the file's
	}
	var tpls []tpl
	var walk func(c *chart.Chart)
	walk = func(c *chart.Chart) {
		for _, f := range c.Templates {
			if !strings.HasPrefix(path.Base(f.Name), "_") {
				tpls = append(tpls, tpl{f, path.Join(c.ChartFullPath(), f.Name)})
			}
		}
		for _, d := range c.Dependencies() {
			walk(d)
		}
	}
	walk(ch)
	// Helm renders no template whose base name starts with "_" (a
	// partial): every template but one is renamed so.
	names := make([]string, len(tpls))
	for i, t := range tpls {
		names[i] = t.file.Name
	}
	hide := func(name string) string { return path.Join(path.Dir(name), "_drover-locate-"+path.Base(name)) }
	for i := range tpls {
		for j, t := range tpls {
			t.file.Name = names[j]
			if j != i {
				t.file.Name = hide(names[j])
			}
		}
		if _, err := fmt.Fprintf(out, "%s%s\n", locateTemplate, tpls[i].name); err != nil {
			return err
		}
		_, _ = engine.Engine{}.Render(ch, top) // only whether it ends matters
	}
	_, err = fmt.Fprintln(out, locateDone)
	return err
}

// chartLimitError is a chart stopped by one of the limits of a chart render.
type chartLimitError struct{ what string }

func (e *chartLimitError) Error() string { return "chart render stopped: " + e.what }

// Why a renderer ended without an answer.
type rendererFailure int

const (
	failedNot rendererFailure = iota
	failedMemory
	failedTime
	failedOther
)

// rendererRun is how one child ended.
type rendererRun struct {
	out     []byte
	failure rendererFailure
	detail  string // for failedOther: what the child said
}

// renderChartChild renders a chart in a child process; the caller holds
// helmSlot.
func renderChartChild(ctx context.Context, tree *config.FileTree, release, namespace string, values map[string]any, caps *chartutil.Capabilities, maxOutput int) (rendered, error) {
	req := chartRequest{
		Files: chartFiles(tree), Release: release, Namespace: namespace, Values: values, Caps: caps,
		MaxOutput: maxOutput, MaxTemplateOutput: MaxTemplateOutput, MaxMemory: MaxChartMemory, MaxTime: MaxTemplateTime,
	}
	body, err := json.Marshal(req)
	if err != nil {
		return rendered{}, fmt.Errorf("pass the chart and its values to the chart renderer: %w", err)
	}
	run, err := runRenderer(ctx, body, maxOutput+maxResponseLine)
	if err != nil {
		return rendered{}, err
	}
	if run.failure == failedNot {
		return readChartResponse(run.out, maxOutput)
	}
	if ctx.Err() != nil {
		return rendered{}, ctx.Err()
	}
	var limit error
	switch run.failure {
	case failedMemory:
		limit = &chartLimitError{what: fmt.Sprintf("it used more than %s of memory, the most a chart render may use", byteSize(MaxChartMemory))}
	case failedTime:
		limit = &chartLimitError{what: fmt.Sprintf("it ran longer than %s, the most a chart render may take", MaxTemplateTime)}
	default:
		return rendered{}, fmt.Errorf("the chart renderer failed: %s", run.detail)
	}
	if name := locateFailure(ctx, req, run.failure); name != "" {
		return rendered{}, fmt.Errorf("template %s: %w", name, limit)
	}
	return rendered{}, limit
}

// locateFailure runs a locate pass (locateChart) for a render that failed
// for its memory or time, and returns the template that failed the same
// way, "" when none did. After a render that ran out of time, the pass
// takes at most half a render's time: the templates before the culprit are
// quick, and the one running when the pass is killed is the culprit.
func locateFailure(ctx context.Context, req chartRequest, failure rendererFailure) string {
	req.Locate = true
	body, err := json.Marshal(req)
	if err != nil {
		return ""
	}
	if failure == failedTime {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, MaxTemplateTime/2)
		defer cancel()
	}
	run, err := runRenderer(ctx, body, maxResponseLine)
	if err != nil || run.failure != failure {
		return ""
	}
	last := ""
	for line := range strings.Lines(string(run.out)) {
		line = strings.TrimSuffix(line, "\n")
		if line == locateDone {
			return ""
		}
		if name, ok := strings.CutPrefix(line, locateTemplate); ok {
			last = name
		}
	}
	return last
}

// runRenderer starts a chart renderer with body on its stdin and waits
// until it ends, reading at most maxOut bytes of its stdout. The child is
// killed when ctx is done or after MaxTemplateTime.
func runRenderer(ctx context.Context, body []byte, maxOut int) (rendererRun, error) {
	runCtx, cancel := context.WithTimeout(ctx, MaxTemplateTime)
	defer cancel()
	cmd := exec.CommandContext(runCtx, chartRendererExe, chartRendererArg) //nolint:gosec // G204: this very drover executable, as a chart renderer
	cmd.Env = []string{}                                                   // nothing of the server's environment
	cmd.Stdin = bytes.NewReader(body)
	stdout := &cappedBuffer{max: maxOut}
	stderr := &cappedBuffer{max: 8 << 10}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.SysProcAttr = rendererProcAttr()
	cmd.WaitDelay = time.Second
	// On Linux the child is killed when the thread that started it ends
	// (rendererProcAttr): keep this goroutine on that thread until the
	// child is gone, so that no other goroutine's end kills it.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := cmd.Start(); err != nil {
		return rendererRun{}, fmt.Errorf("start the chart renderer: %w", err)
	}
	err := cmd.Wait()
	switch {
	case stdout.over:
		// The child checks the sizes itself; more than that is a bug.
		return rendererRun{failure: failedOther, detail: "it answered more than was asked"}, nil
	case err == nil:
		return rendererRun{out: stdout.buf.Bytes()}, nil
	case runCtx.Err() != nil:
		return rendererRun{out: stdout.buf.Bytes(), failure: failedTime}, nil
	}
	said := stderr.buf.String()
	if rendererOutOfMemory(said) {
		return rendererRun{out: stdout.buf.Bytes(), failure: failedMemory}, nil
	}
	if f := killedBy(err); f != failedNot {
		return rendererRun{out: stdout.buf.Bytes(), failure: f}, nil
	}
	first, _, _ := strings.Cut(strings.TrimSpace(said), "\n")
	if first == "" {
		first = err.Error()
	}
	return rendererRun{out: stdout.buf.Bytes(), failure: failedOther, detail: config.Clip(first)}, nil
}

// rendererOutOfMemory reports whether what a child said as it died is the
// Go runtime's end at its memory limit: an allocation that failed (also in
// the race detector's allocator), or a thread it could not create.
func rendererOutOfMemory(stderr string) bool {
	for _, s := range []string{"out of memory", "cannot allocate memory", "failed to allocate", "pthread_create failed", "failed to create new OS thread"} {
		if strings.Contains(stderr, s) {
			return true
		}
	}
	return false
}

// readChartResponse reads a renderer's answer.
func readChartResponse(out []byte, maxOutput int) (rendered, error) {
	line, manifest, ok := bytes.Cut(out, []byte("\n"))
	var resp chartResponse
	if !ok || json.Unmarshal(line, &resp) != nil {
		return rendered{}, errors.New("the chart renderer answered something else than a chart")
	}
	if resp.Error != "" {
		return rendered{}, errors.New(resp.Error)
	}
	if resp.ManifestBytes != len(manifest) || resp.ManifestBytes > maxOutput {
		return rendered{}, errors.New("the chart renderer's answer is incomplete")
	}
	return rendered{manifest: string(manifest), skipped: resp.Skipped}, nil
}

// cappedBuffer keeps at most max bytes and notes that more came.
type cappedBuffer struct {
	buf  bytes.Buffer
	max  int
	over bool
}

func (b *cappedBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.buf.Len(); len(p) > room {
		b.over = true
		b.buf.Write(p[:max(room, 0)])
		return len(p), nil
	}
	return b.buf.Write(p)
}

// setSoftMemoryLimit makes the renderer's garbage collector work to stay
// under its memory limit before the hard limit ends it.
func setSoftMemoryLimit(maxMemory int) {
	debug.SetMemoryLimit(int64(maxMemory))
}
