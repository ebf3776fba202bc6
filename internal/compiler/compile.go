package compiler

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/desiredstate"
	"github.com/drover-dev/drover/internal/ecsspec"
	"github.com/drover-dev/drover/internal/labelquery"
	"github.com/drover-dev/drover/internal/manifest"
)

// Input is everything one compilation needs. The compiler is pure: it reads no
// files (local references were resolved when the configs were loaded) and
// calls no runtime.
type Input struct {
	Application        *config.Application
	Runtimes           map[string]*config.Runtime
	Protections        map[string]*config.Protection
	DeliveryExtensions map[string]*config.DeliveryExtension
	// Registries are the containerRegistry configs by name.
	Registries map[string]*config.ContainerRegistry
	// Clusters is what runtimes reported about their backends, by runtime
	// name: Helm charts render against a cluster's version and API
	// versions (.Capabilities) unless the runtime's config sets them.
	Clusters map[string]ClusterFacts
	Service  *config.Service
	Params   []ParamValue
	// ReleaseChannels limits the release channels in the result (all when
	// empty). The bundle version always covers every channel.
	ReleaseChannels []string
	// Placeholders fills required parameters that have no value with a
	// placeholder of their type (for validation without a push).
	Placeholders bool
}

// ClusterFacts is what a Kubernetes runtime reported about its cluster.
type ClusterFacts struct {
	// KubeVersion is the cluster's version ("v1.34.1").
	KubeVersion string
	// APIVersions are its "group/version" and "group/version/Kind"
	// entries.
	APIVersions []string
}

// Result is the compiled service: one config per release channel, the bundle
// version that identifies them together, and the desired state.
type Result struct {
	Application     string                     `json:"application"`
	Service         string                     `json:"service"`
	BundleVersion   string                     `json:"bundleVersion"`
	BundleName      string                     `json:"bundleName,omitempty"`
	ReleaseChannels []*CompiledReleaseChannel  `json:"releaseChannels"`
	DesiredState    *desiredstate.DesiredState `json:"desiredState"`

	// DisplayName names the version for people: the bundleName, else the
	// dockerImage parameters' tags (display_name.go); "" when neither.
	DisplayName string `json:"displayName,omitempty"`
}

// CompiledReleaseChannel is the self-contained config of a service in one
// release channel.
type CompiledReleaseChannel struct {
	Name  string `json:"name"`
	Group string `json:"group,omitempty"`
	// Labels are the release channel's own labels.
	Labels        map[string]string     `json:"labels,omitempty"`
	Runtimes      []string              `json:"runtimes"`
	Runtime       SelectedRuntime       `json:"runtime"`
	Preconditions []config.Precondition `json:"preconditions"`
	// DependsOn lists the release channels that must be stable first, with
	// selectors resolved.
	DependsOn []string `json:"dependsOn,omitempty"`
	// Backend is "kubernetes", "customRuntime" or "awsEcs".
	Backend string `json:"backend"`
	// Objects are the rendered objects: Kubernetes manifests, one
	// CustomRuntimeObject, or one ecsspec.Object.
	Objects               []any                         `json:"objects"`
	Parameters            map[string]any                `json:"parameters,omitempty"`
	Constants             map[string]string             `json:"constants,omitempty"`
	Env                   map[string]config.EnvValue    `json:"env,omitempty"`
	Protections           []CompiledProtection          `json:"protections,omitempty"`
	ConvergenceExtensions []config.ConvergenceExtension `json:"convergenceExtensions,omitempty"`
	// Extensions are ConvergenceExtensions as the engine runs them.
	Extensions           []CompiledExtension `json:"extensions,omitempty"`
	AutoRollbackDisabled bool                `json:"autoRollbackDisabled,omitempty"`
	ProgressDeadline     *config.Duration    `json:"progressDeadline,omitempty"`
	// Notes say what the compilation left out or decided by a rule of its
	// own (Helm hooks drover does not run, for one).
	Notes []string `json:"notes,omitempty"`
	// EnvInjectionDisabled is kubernetesConfig.envInjectionMode
	// ENV_INJECT_DISABLED: Env is not injected into the containers
	// (envinject.go).
	EnvInjectionDisabled bool `json:"envInjectionDisabled,omitempty"`
	// chart is set when the objects are a Helm chart's: Prodvana injects
	// no env into those (service env is "not for Helm"), so neither does
	// drover; the chart renders as helm template renders it.
	chart bool
}

// SelectedRuntime is the runtime connection the service uses in a channel.
type SelectedRuntime struct {
	Connection string `json:"connection"`
	Name       string `json:"name"`
	// Kind is fake, kubernetes, custom or terraformRunner.
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
}

// CompiledProtection is a protection attached to a service instance.
type CompiledProtection struct {
	Attachment string                       `json:"attachment"`
	Protection string                       `json:"protection"`
	Source     string                       `json:"source"`
	Lifecycle  []config.ProtectionLifecycle `json:"lifecycle"`
	// Builtin is the protection when drover evaluates it itself (nil: a
	// command, or commitDenylist).
	Builtin *desiredstate.Builtin `json:"builtin,omitempty"`
	// Command is a protection that runs a command (taskConfig or
	// kubernetesConfig), rendered with the attachment's parameters; the
	// release channel's runtime runs it, every PollInterval.
	Command      *ProtectionCommand `json:"command,omitempty"`
	PollInterval config.Duration    `json:"pollInterval,omitzero"`
	// Alert is a release channel's alertGate (drover's).
	Alert *desiredstate.AlertGate `json:"alert,omitempty"`
	// Commits is a commitDenylist with ranges, decided against the
	// repository when it runs.
	Commits *desiredstate.CommitRanges `json:"commits,omitempty"`
}

// ProtectionCommand is a protection's command as its runtime runs it: exit
// code 0 passes.
type ProtectionCommand struct {
	Protection       string                     `json:"protection"`
	TaskConfig       *config.TaskConfig         `json:"taskConfig,omitempty"`
	KubernetesConfig *config.KubernetesConfig   `json:"kubernetesConfig,omitempty"`
	Env              map[string]config.EnvValue `json:"env,omitempty"`
	Timeout          config.Duration            `json:"timeout,omitzero"`
}

// CustomRuntimeObject is what a custom runtime (or terraform runner) converges:
// its commands rendered with the service's parameter values.
type CustomRuntimeObject struct {
	Kind            string         `json:"kind"`
	Runtime         string         `json:"runtime"`
	ParameterValues map[string]any `json:"parameterValues"`
	// Secrets are the raw secret parameters of a custom runtime, by name.
	// They render as SecretMarker(name) in the commands; the runtime replaces
	// the marker with the value when it runs a command and redacts the value
	// from everything it records. Like raw secrets in env, they are kept in
	// the desired state and printed as (redacted) (see Result.Redacted).
	Secrets         map[string]config.EnvValue `json:"secrets,omitempty"`
	Custom          *config.CustomRuntime      `json:"custom,omitempty"`
	TerraformRunner *config.TerraformRunner    `json:"terraformRunner,omitempty"`
}

// Error is one compilation problem. Field is a path in the config of Object
// ("service/app/web", "application/app", "runtime/r"); File and Line are set
// when the problem is inside a referenced file.
type Error struct {
	Object         string `json:"object"`
	Field          string `json:"field,omitempty"`
	File           string `json:"file,omitempty"`
	Line           int    `json:"line,omitempty"`
	ReleaseChannel string `json:"releaseChannel,omitempty"`
	Msg            string `json:"message"`
}

func (e Error) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		if e.Line > 0 {
			fmt.Fprintf(&b, ":%d", e.Line)
		}
		b.WriteString(": ")
	}
	if e.ReleaseChannel != "" {
		fmt.Fprintf(&b, "release channel %s: ", e.ReleaseChannel)
	}
	if e.Field != "" && e.File == "" {
		b.WriteString(e.Field + ": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Errors is every problem found in one compilation.
type Errors []Error

func (l Errors) Error() string {
	lines := make([]string, len(l))
	for i, e := range l {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// MaxCompileTime bounds one compilation (every template of every release
// channel), and one validation of a config set (ValidateSetContext: every
// service together); each template also has its own limits (MaxTemplateTime).
var MaxCompileTime = time.Minute

// Compile compiles one service for every release channel of its application.
func Compile(in Input) (*Result, error) {
	return CompileContext(context.Background(), in)
}

// CompileContext is Compile bounded by ctx: templates stop rendering when ctx
// is done (a server passes its request's context).
func CompileContext(ctx context.Context, in Input) (*Result, error) {
	if in.Application == nil || in.Service == nil {
		return nil, fmt.Errorf("compile: application and service are required")
	}
	ctx, cancel := context.WithTimeout(ctx, MaxCompileTime)
	defer cancel()
	svcObj := "service/" + in.Service.Application + "/" + in.Service.Name
	// One template cache, output budget and deadline for the whole
	// compilation. Keep going after expansion errors so one run reports
	// every problem.
	cache := &templateCache{}
	rcs, expandErrs := expandReleaseChannels(ctx, cache, in.Application, in.Runtimes)
	all := Errors(expandErrs)
	byName := map[string]*ReleaseChannel{}
	for i := range rcs {
		byName[rcs[i].Name] = &rcs[i]
	}
	for i, prc := range in.Service.PerReleaseChannel {
		if byName[prc.ReleaseChannel] == nil {
			all = append(all, Error{Object: svcObj, Field: fmt.Sprintf("service.perReleaseChannel[%d].releaseChannel", i),
				Msg: fmt.Sprintf("application %q has no release channel %q%s", in.Application.Name, prc.ReleaseChannel, rcHint(prc.ReleaseChannel, rcs))})
		}
	}
	for _, pv := range in.Params {
		if pv.ReleaseChannel != "" && byName[pv.ReleaseChannel] == nil {
			all = append(all, Error{Object: svcObj, Msg: clipMessage(fmt.Sprintf("parameter %s given for unknown release channel %q%s", config.Clip(pv.Name), config.Clip(pv.ReleaseChannel), rcHint(pv.ReleaseChannel, rcs)))})
		}
	}
	for _, want := range in.ReleaseChannels {
		if byName[want] == nil {
			all = append(all, Error{Object: svcObj, Msg: clipMessage(fmt.Sprintf("application %q has no release channel %q%s", in.Application.Name, config.Clip(want), rcHint(want, rcs)))})
		}
	}
	res := &Result{Application: in.Application.Name, Service: in.Service.Name}
	// Channels compile independently, so they compile in parallel, on as
	// many goroutines as there are CPUs (this one among them) rather than
	// one per channel; results keep the channels' order.
	compilers := make([]*rcCompiler, len(rcs))
	outs := make([]*CompiledReleaseChannel, len(rcs))
	for i := range rcs {
		compilers[i] = &rcCompiler{ctx: ctx, in: &in, rc: &rcs[i], all: rcs, templates: cache}
	}
	var next atomic.Int64
	work := func() {
		for i := int(next.Add(1)) - 1; i < len(rcs); i = int(next.Add(1)) - 1 {
			outs[i] = compilers[i].compile()
		}
	}
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(rcs)) - 1 {
		wg.Go(work)
	}
	work()
	wg.Wait()
	bundleNames := map[string]bool{}
	for i, c := range compilers {
		all = append(all, c.errs...)
		if outs[i] != nil {
			res.ReleaseChannels = append(res.ReleaseChannels, outs[i])
			if c.bundleName != "" {
				bundleNames[c.bundleName] = true
			}
		}
	}
	if len(all) > 0 {
		return nil, all
	}
	if len(bundleNames) > 1 {
		return nil, Errors{{Object: svcObj, Field: "service.bundleName", Msg: fmt.Sprintf("bundleName must render the same in every release channel, got %s", strings.Join(sortedKeys(bundleNames), ", "))}}
	}
	for n := range bundleNames {
		res.BundleName = n
	}
	version, err := bundleVersion(res)
	if err != nil {
		return nil, err
	}
	res.BundleVersion = version
	if err := injectEnv(res); err != nil {
		return nil, fmt.Errorf("compile %s: %w", svcObj, err)
	}
	res.DesiredState = buildDesiredState(res)
	res.DisplayName = displayName(&in, res)
	if len(in.ReleaseChannels) > 0 {
		keep := map[string]bool{}
		for _, n := range in.ReleaseChannels {
			keep[n] = true
		}
		filtered := res.ReleaseChannels[:0]
		for _, rc := range res.ReleaseChannels {
			if keep[rc.Name] {
				filtered = append(filtered, rc)
			}
		}
		res.ReleaseChannels = filtered
	}
	return res, nil
}

// bundleVersion hashes every compiled per-channel config: the same inputs give
// the same version, and any change to what would be deployed gives a new one.
func bundleVersion(res *Result) (string, error) {
	h := sha256.New()
	enc := json.NewEncoder(h)
	if err := enc.Encode([]string{res.Application, res.Service, res.BundleName}); err != nil {
		return "", err
	}
	for _, rc := range res.ReleaseChannels {
		if err := enc.Encode(rc); err != nil {
			return "", fmt.Errorf("hash %s: %w", rc.Name, err)
		}
	}
	return "v-" + hex.EncodeToString(h.Sum(nil))[:16], nil
}

func rcHint(name string, rcs []ReleaseChannel) string {
	names := make([]string, len(rcs))
	for i, rc := range rcs {
		names[i] = rc.Name
	}
	return nameSuggestion(name, names)
}

// rcCompiler compiles the service for one release channel.
type rcCompiler struct {
	ctx        context.Context
	in         *Input
	rc         *ReleaseChannel
	all        []ReleaseChannel
	errs       Errors
	bundleName string
	templates  *templateCache
	// notes say what the compilation left out or decided on its own.
	notes []string
	// standIns ends every error of a channel rendered with stand-ins for
	// required parameters (validation without values): it names them.
	standIns string
}

// note records something the user should know about the channel's result.
func (c *rcCompiler) note(s string) { c.notes = append(c.notes, s) }

func (c *rcCompiler) serviceObject() string {
	return "service/" + c.in.Service.Application + "/" + c.in.Service.Name
}

func (c *rcCompiler) fail(e Error) {
	e.ReleaseChannel = c.rc.Name
	e.Msg = clipMessage(e.Msg) + c.standIns
	c.errs = append(c.errs, e)
}

func (c *rcCompiler) compile() *CompiledReleaseChannel {
	svc := c.in.Service
	merged, err := mergeService(svc, c.rc.Name)
	if err != nil {
		c.fail(Error{Object: c.serviceObject(), Field: "service.perReleaseChannel", Msg: err.Error()})
		return nil
	}
	sel, rt, ok := c.selectRuntime(merged)
	if !ok {
		return nil
	}
	defs, err := resolveRegistries(svc.Parameters, c.in.Registries)
	if err != nil {
		c.fail(Error{Object: c.serviceObject(), Field: "service.parameters", Msg: err.Error()})
		return nil
	}
	params, standIns, err := resolveParams(defs, c.in.Params, c.rc.Name, c.in.Placeholders)
	if err != nil {
		c.fail(Error{Object: c.serviceObject(), Field: "service.parameters", Msg: err.Error()})
		return nil
	}
	c.standIns = standInNote(params, standIns)
	data := &Data{
		Params:    params,
		Constants: map[string]string{},
		Builtins: Builtins{
			ReleaseChannel: NameOnly{c.rc.Name},
			Runtime:        RuntimeInfo{Name: rt.Name, Labels: map[string]string{}},
			Group:          c.rc.FromGroup,
			Service:        NameOnly{svc.Name},
			Application:    NameOnly{c.in.Application.Name},
		},
	}
	if data.Builtins.Group == "" {
		data.Builtins.Group = c.rc.Group
	}
	for _, l := range rt.Labels {
		data.Builtins.Runtime.Labels[l.Label] = l.Value
	}
	// Most specific wins: service per-channel > service > release channel.
	for _, k := range c.rc.Constants {
		data.Constants[k.Name] = constantValue(k)
	}
	for _, k := range merged.Constants {
		data.Constants[k.Name] = constantValue(k)
	}
	out := &CompiledReleaseChannel{
		Name:          c.rc.Name,
		Group:         c.rc.Group,
		Labels:        rcLabels(c.rc),
		Runtime:       sel,
		Preconditions: c.rc.Preconditions,
		Parameters:    params,
		Constants:     data.Constants,
		Env:           map[string]config.EnvValue{},
		Objects:       []any{},
	}
	if out.Preconditions == nil {
		out.Preconditions = []config.Precondition{}
	}
	for _, conn := range c.rc.Runtimes {
		out.Runtimes = append(out.Runtimes, conn.Runtime)
	}
	if c.rc.Policy != nil {
		for k, v := range c.rc.Policy.DefaultEnv {
			out.Env[k] = v
		}
	}
	for k, v := range merged.Env {
		out.Env[k] = v
	}
	if len(out.Env) == 0 {
		out.Env = nil
	}
	out.DependsOn = c.dependencies()
	c.protections(out, merged, defs, params, data)
	out.ConvergenceExtensions = merged.ConvergenceExtensions
	out.Extensions = c.extensions(merged.ConvergenceExtensions, data)
	if svc.AutoRollback != nil && svc.AutoRollback.Disabled || rt.AutoRollback != nil && rt.AutoRollback.Disabled {
		out.AutoRollbackDisabled = true
	}
	if !svc.ProgressDeadline.IsZero() {
		d := svc.ProgressDeadline
		out.ProgressDeadline = &d
	}
	if svc.BundleName != "" {
		if name, ok := c.renderField("service.bundleName", svc.BundleName, data); ok {
			c.bundleName = name
		}
	}
	field := "service"
	if merged.Field != "" {
		field = merged.Field
	}
	switch {
	case merged.Backend.KubernetesConfig != nil:
		out.Backend = "kubernetes"
		out.EnvInjectionDisabled = merged.Backend.KubernetesConfig.EnvInjectionMode == config.EnvInjectDisabled
		out.Objects = c.kubernetes(field+".kubernetesConfig", merged.Backend.KubernetesConfig, data)
	case merged.Backend.Helm != nil:
		out.Backend = "kubernetes"
		out.chart = true
		out.Objects = c.helm(field+".helm", merged.Backend.Helm, data, sel)
	case merged.Backend.CustomRuntime != nil:
		out.Backend = "customRuntime"
		if obj := c.customRuntime(field+".customRuntime", merged.Backend.CustomRuntime, rt, data); obj != nil {
			out.Objects = []any{obj}
		}
	case merged.Backend.AwsEcs != nil:
		out.Backend = ecsspec.Kind
		c.checkECSEnv(merged)
		if obj := c.awsEcs(field+".awsEcs", merged.Backend.AwsEcs, rt, data); obj != nil {
			out.Objects = []any{obj}
		}
	}
	if len(c.errs) > 0 {
		return nil
	}
	out.Notes = c.notes
	return out
}

func constantValue(k config.Constant) string {
	if k.String == nil {
		return ""
	}
	return k.String.Value
}

// RuntimeKind returns fake, kubernetes, custom or terraformRunner. A runtime
// with no type is a Kubernetes runtime, as in Prodvana.
func RuntimeKind(rt *config.Runtime) string {
	switch {
	case rt.Fake != nil:
		return "fake"
	case rt.Custom != nil:
		return "custom"
	case rt.TerraformRunner != nil:
		return "terraformRunner"
	case rt.AwsEcs != nil:
		return ecsspec.Kind
	}
	return "kubernetes"
}

// accepts reports whether a runtime kind can run a backend.
func accepts(kind, backend string) bool {
	switch kind {
	case "fake":
		return true
	case "kubernetes":
		return backend == "kubernetesConfig"
	case "custom", "terraformRunner":
		return backend == "customRuntime"
	case ecsspec.Kind:
		return backend == ecsspec.Kind
	}
	return false
}

// selectRuntime picks the runtime connection: the one named by
// runtimeConnection, else the only one whose runtime accepts the backend.
func (c *rcCompiler) selectRuntime(m *serviceForRC) (SelectedRuntime, *config.Runtime, bool) {
	backend := ""
	switch {
	case m.Backend.KubernetesConfig != nil:
		backend = "kubernetesConfig"
	case m.Backend.Helm != nil:
		backend = "kubernetesConfig" // rendered to Kubernetes objects
	case m.Backend.CustomRuntime != nil:
		backend = "customRuntime"
	case m.Backend.AwsEcs != nil:
		backend = ecsspec.Kind
	default:
		c.fail(Error{Object: c.serviceObject(), Field: "service", Msg: "no backend for this release channel: set kubernetesConfig, helm, customRuntime or awsEcs (at the top level or in perReleaseChannel)"})
		return SelectedRuntime{}, nil, false
	}
	var candidates []config.RuntimeConnection
	for _, conn := range c.rc.Runtimes {
		rt := c.in.Runtimes[conn.Runtime]
		if rt == nil {
			c.fail(Error{Object: "application/" + c.in.Application.Name, Field: c.rc.Field, Msg: fmt.Sprintf("unknown runtime %q", conn.Runtime)})
			return SelectedRuntime{}, nil, false
		}
		// Also for channels a release channel group made.
		if err := config.RuntimeAllows(rt, c.in.Application.Name); err != nil {
			c.fail(Error{Object: "application/" + c.in.Application.Name, Field: c.rc.Field, Msg: err.Error()})
			return SelectedRuntime{}, nil, false
		}
		if m.RuntimeConnection != "" {
			if conn.ConnectionName() == m.RuntimeConnection {
				candidates = append(candidates, conn)
			}
			continue
		}
		if accepts(RuntimeKind(rt), backend) {
			candidates = append(candidates, conn)
		}
	}
	switch {
	case len(candidates) == 0 && m.RuntimeConnection != "":
		c.fail(Error{Object: c.serviceObject(), Field: "service.runtimeConnection", Msg: fmt.Sprintf("release channel %s has no runtime connection named %q", c.rc.Name, m.RuntimeConnection)})
		return SelectedRuntime{}, nil, false
	case len(candidates) == 0:
		c.fail(Error{Object: c.serviceObject(), Field: "service." + backend, Msg: fmt.Sprintf("no runtime of release channel %s can run a %s service (runtimes: %s)", c.rc.Name, backend, strings.Join(c.runtimeNames(), ", "))})
		return SelectedRuntime{}, nil, false
	case len(candidates) > 1:
		names := make([]string, len(candidates))
		for i, cand := range candidates {
			names[i] = cand.ConnectionName()
		}
		c.fail(Error{Object: c.serviceObject(), Field: "service.runtimeConnection", Msg: fmt.Sprintf("several runtimes of release channel %s fit (%s): set runtimeConnection", c.rc.Name, strings.Join(names, ", "))})
		return SelectedRuntime{}, nil, false
	}
	conn := candidates[0]
	rt := c.in.Runtimes[conn.Runtime]
	if !accepts(RuntimeKind(rt), backend) {
		c.fail(Error{Object: c.serviceObject(), Field: "service.runtimeConnection", Msg: fmt.Sprintf("runtime %s (%s) cannot run a %s service", rt.Name, RuntimeKind(rt), backend)})
		return SelectedRuntime{}, nil, false
	}
	sel := SelectedRuntime{Connection: conn.ConnectionName(), Name: rt.Name, Kind: RuntimeKind(rt)}
	if co := conn.ContainerOrchestration; co != nil && co.K8s != nil {
		sel.Namespace = co.K8s.Namespace
	}
	return sel, rt, true
}

func (c *rcCompiler) runtimeNames() []string {
	var out []string
	for _, conn := range c.rc.Runtimes {
		kind := "unknown"
		if rt := c.in.Runtimes[conn.Runtime]; rt != nil {
			kind = RuntimeKind(rt)
		}
		out = append(out, conn.Runtime+" ("+kind+")")
	}
	return out
}

// dependencies resolves releaseChannelStable preconditions to channel names.
func (c *rcCompiler) dependencies() []string {
	var deps []string
	for i, pc := range c.rc.Preconditions {
		s := pc.ReleaseChannelStable
		if s == nil {
			continue
		}
		field := fmt.Sprintf("%s.preconditions[%d].releaseChannelStable", c.rc.Field, i)
		if c.rc.FromGroup != "" {
			field = fmt.Sprintf("%s.template.preconditions[%d].releaseChannelStable", c.rc.Field, i)
		}
		appObj := "application/" + c.in.Application.Name
		if s.ReleaseChannel != "" {
			found := false
			for _, other := range c.all {
				found = found || other.Name == s.ReleaseChannel
			}
			if !found {
				c.fail(Error{Object: appObj, Field: field + ".releaseChannel", Msg: fmt.Sprintf("unknown release channel %q%s", s.ReleaseChannel, rcHint(s.ReleaseChannel, c.all))})
				continue
			}
			deps = append(deps, s.ReleaseChannel)
			continue
		}
		q, err := labelquery.Parse(s.Selector)
		if err != nil {
			c.fail(Error{Object: appObj, Field: field + ".selector", Msg: err.Error()})
			continue
		}
		matched := 0
		for i := range c.all {
			other := &c.all[i]
			if other.Name == c.rc.Name || !q.Match(ReleaseChannelLabels(c.in.Application.Name, other)) {
				continue
			}
			matched++
			deps = append(deps, other.Name)
		}
		if matched == 0 && !s.AllowEmpty {
			c.fail(Error{Object: appObj, Field: field + ".selector", Msg: fmt.Sprintf("selector %q matches no release channel (set allowEmpty: true to allow this)", s.Selector)})
		}
	}
	return dedupe(deps)
}

// protections lists the channel's protection attachments, and its deploy
// windows (drover's, kept with disableAllProtections: they are no
// protection).
func (c *rcCompiler) protections(out *CompiledReleaseChannel, m *serviceForRC, defs []config.ParameterDefinition, params map[string]any, data *Data) {
	add := func(source string, atts []config.ProtectionAttachment) {
		if c.rc.DisableAllProtections {
			return
		}
		for _, a := range atts {
			name := a.Name
			if name == "" && a.Ref != nil {
				name = a.Ref.Name
			}
			ref := ""
			if a.Ref != nil {
				ref = a.Ref.Name
			}
			if c.in.Protections[ref] == nil {
				c.fail(Error{Object: c.serviceObject(), Msg: fmt.Sprintf("unknown protection %q", ref)})
				continue
			}
			prot := c.in.Protections[ref]
			cp := CompiledProtection{Attachment: name, Protection: ref, Source: source, Lifecycle: a.Lifecycle,
				Builtin: builtinCheck(prot.Builtin, defs, params), PollInterval: prot.PollInterval}
			if cp.Builtin == nil && prot.Builtin != nil && prot.Builtin.CommitDenylist != nil {
				cp.Commits = commitRanges(prot.Builtin.CommitDenylist, defs, params)
			}
			if prot.Builtin == nil {
				cp.Command = c.protectionCommand(prot, a.Ref.Parameters, data)
			}
			out.Protections = append(out.Protections, cp)
		}
	}
	add("releaseChannel", c.rc.Protections)
	add("serviceInstance", c.rc.ServiceInstanceProtections)
	add("serviceInstance", m.Protections)
	add("convergence", c.rc.ConvergenceProtections)
	add("convergence", m.ConvergenceProtections)
	if len(c.rc.DeployWindows) > 0 {
		// drover's deploy windows: an allowedTimes check when a deployment
		// starts (BLOCK).
		out.Protections = append(out.Protections, CompiledProtection{Attachment: DeployWindowsCheck, Protection: DeployWindowsCheck, Source: desiredstate.SourceDrover,
			Lifecycle: []config.ProtectionLifecycle{{Deployment: &config.DeploymentCheck{FailureBehavior: "BLOCK"}}},
			Builtin:   builtinCheck(&config.BuiltinProtection{AllowedTimes: &config.AllowedTimes{Windows: c.rc.DeployWindows}}, nil, nil)})
	}
	if g := c.rc.AlertGate; g != nil {
		// drover's alert gate: no alert may fire when a deployment starts
		// (BLOCK).
		out.Protections = append(out.Protections, CompiledProtection{Attachment: AlertGateCheck, Protection: AlertGateCheck, Source: desiredstate.SourceDrover,
			Lifecycle:    []config.ProtectionLifecycle{{Deployment: &config.DeploymentCheck{FailureBehavior: "BLOCK"}}},
			Alert:        &desiredstate.AlertGate{URL: g.Alertmanager, Matchers: g.Matchers},
			PollInterval: g.PollInterval})
	}
}

// DeployWindowsCheck names the check of a release channel's deployWindows,
// AlertGateCheck that of its alertGate.
const (
	DeployWindowsCheck = "deployWindows"
	AlertGateCheck     = "alertGate"
)

// builtinCheck is the engine's form of a builtin protection it evaluates
// itself (nil for none, and for a commitDenylist with ranges, which needs
// the repository's history). The config was validated: windows parse. A
// commitDenylist is decided here, against the service's commit parameters
// (defs, with their values params): the commits of a push do not change.
func builtinCheck(b *config.BuiltinProtection, defs []config.ParameterDefinition, params map[string]any) *desiredstate.Builtin {
	switch {
	case b == nil:
		return nil
	case b.CommitDenylist != nil:
		return commitDenylist(b.CommitDenylist, defs, params)
	case b.AlwaysPassing != nil:
		return &desiredstate.Builtin{AlwaysPassing: true}
	case b.AlwaysFailing != nil:
		return &desiredstate.Builtin{AlwaysFailing: true, Message: b.AlwaysFailing.Message}
	case b.AllowedTimes != nil:
		out := &desiredstate.Builtin{}
		for _, tw := range b.AllowedTimes.Windows {
			w, err := config.ParseTimeWindow(tw)
			if err != nil {
				continue
			}
			dw := desiredstate.Window{TZ: w.Location.String(), Text: windowText(tw, w.Location.String())}
			for d, ok := range w.Days {
				if ok {
					dw.Days = append(dw.Days, d)
				}
			}
			for h, ok := range w.Hours {
				if ok {
					dw.Hours = append(dw.Hours, h)
				}
			}
			out.AllowedTimes = append(out.AllowedTimes, dw)
		}
		return out
	}
	return nil
}

// commitDenylist decides a commitDenylist for a push [I]: it fails when a
// commit parameter of the service for the denylist's repository (any
// repository when the denylist names none) holds a denylisted commit (SHAs
// compared by their common prefix, at least 7 characters). Ranges need the
// repository's history: when no listed commit matched, a denylist with one
// is left to commitRanges (nil here).
func commitDenylist(d *config.CommitDenylist, defs []config.ParameterDefinition, params map[string]any) *desiredstate.Builtin {
	var denied []string
	ranges := false
	for _, cd := range d.Commits {
		ranges = ranges || cd.Range != nil
		if c := strings.ToLower(strings.TrimSpace(cd.Commit)); c != "" {
			denied = append(denied, c)
		}
	}
	pushed := pushedCommits(d, defs, params)
	var seen []string
	for _, pc := range pushed {
		seen = append(seen, fmt.Sprintf("%s=%s", pc.Param, pc.Commit))
		for _, c := range denied {
			if sameCommit(c, pc.Commit) {
				return &desiredstate.Builtin{AlwaysFailing: true, Message: fmt.Sprintf("commit %s (parameter %s) is on the denylist", pc.Commit, pc.Param)}
			}
		}
	}
	switch {
	case len(seen) == 0:
		return &desiredstate.Builtin{AlwaysPassing: true, Message: "no commit parameter of " + orDefault(d.Repository, "any repository") + " to check"}
	case ranges:
		return nil
	}
	return &desiredstate.Builtin{AlwaysPassing: true, Message: "no denylisted commit (" + strings.Join(seen, ", ") + ")"}
}

// commitRanges is the check of a commitDenylist's ranges, for the commits
// the push holds (decided when it runs, against the repository).
func commitRanges(d *config.CommitDenylist, defs []config.ParameterDefinition, params map[string]any) *desiredstate.CommitRanges {
	out := &desiredstate.CommitRanges{Repository: d.Repository, Pushed: pushedCommits(d, defs, params)}
	for _, cd := range d.Commits {
		if cd.Range != nil {
			out.Ranges = append(out.Ranges, desiredstate.CommitRange{Start: strings.TrimSpace(cd.Range.StartCommit), End: strings.TrimSpace(cd.Range.EndCommit)})
		}
	}
	return out
}

// pushedCommits are the values of the service's commit parameters for the
// denylist's repository (every one when it names none).
func pushedCommits(d *config.CommitDenylist, defs []config.ParameterDefinition, params map[string]any) []desiredstate.PushedCommit {
	var out []desiredstate.PushedCommit
	for _, def := range defs {
		if def.Commit == nil || d.Repository != "" && !strings.EqualFold(strings.TrimSuffix(def.Commit.Repository, ".git"), strings.TrimSuffix(d.Repository, ".git")) {
			continue
		}
		if v, _ := params[def.Name].(string); v != "" {
			out = append(out, desiredstate.PushedCommit{Param: def.Name, Commit: v, Repository: def.Commit.Repository})
		}
	}
	return out
}

// sameCommit compares SHAs by their common prefix, at least 7 characters.
func sameCommit(a, b string) bool {
	a, b = strings.ToLower(a), strings.ToLower(b)
	n := min(len(a), len(b))
	return n >= 7 && a[:n] == b[:n]
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func windowText(tw config.TimeWindow, tz string) string {
	days, hours := tw.Days, tw.Hours
	if days == "" {
		days = "every day"
	}
	if hours == "" {
		hours = "all day"
	} else {
		hours = "hours " + hours
	}
	return days + " " + hours + " " + tz
}

// kubernetes renders the Kubernetes config: templates over the raw text, then
// YAML decoding, then patches (whose values are templates too).
func (c *rcCompiler) kubernetes(field string, kc *config.KubernetesConfig, data *Data) []any {
	text := kc.Inlined
	if kc.Tree != nil {
		var ok bool
		if text, ok = c.treeText(field, kc, data); !ok {
			return nil
		}
	}
	rendered := text
	if !kc.Literal {
		var ok bool
		failed := len(c.errs)
		if rendered, ok = c.renderText(field+".inlined", text, data); !ok {
			if kc.Tree != nil && kc.Type == config.KubernetesTypeKustomize && len(c.errs) > failed {
				locateInTree(&c.errs[len(c.errs)-1], text, kc.Tree)
			}
			return nil
		}
	}
	objs, ok := c.decode(field, rendered)
	if !ok {
		return nil
	}
	var patches []manifest.Patch
	for i, p := range kc.Patches {
		pf := fmt.Sprintf("%s.patches[%d].replace", field, i)
		mp := manifest.Patch{Path: p.Replace.Path}
		if t := p.Target; t != nil {
			mp.Target = &manifest.Target{Group: t.Group, Version: t.Version, Kind: t.Kind, Name: t.Name, Namespace: t.Namespace}
		}
		switch {
		case p.Replace.String != nil:
			s, ok := c.renderField(pf+".string", *p.Replace.String, data)
			if !ok {
				continue
			}
			mp.Value = s
		case p.Replace.IntAsString != nil:
			s, ok := c.renderField(pf+".intAsString", *p.Replace.IntAsString, data)
			if !ok {
				continue
			}
			n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
			if err != nil {
				c.fail(Error{Object: c.serviceObject(), Field: pf + ".intAsString", Msg: fmt.Sprintf("%q is not an integer", s)})
				continue
			}
			mp.Value = n
		}
		patches = append(patches, mp)
	}
	if len(c.errs) > 0 {
		return nil
	}
	if err := manifest.ApplyPatches(objs, patches); err != nil {
		c.fail(Error{Object: c.serviceObject(), Field: field + ".patches", Msg: err.Error()})
		return nil
	}
	out := make([]any, len(objs))
	for i, o := range objs {
		out[i] = o
	}
	return out
}

// templateAction matches a Go template action.
var templateAction = regexp.MustCompile(`{{.*?}}`)

// locateInTree points e, a template error located in kustomize's output
// (text, after its one-line source marker), at the file of the tree the
// failing line came from: the one line of the tree's files holding the same
// template actions. Templates run on kustomize's output, as in Prodvana, but
// the user wrote the file. When no single line matches, e is left as it is.
func locateInTree(e *Error, text string, tree *config.FileTree) {
	lines := strings.Split(text, "\n")
	if e.Line < 1 || e.Line >= len(lines) {
		return
	}
	actions := templateAction.FindAllString(lines[e.Line], -1)
	if len(actions) == 0 {
		return
	}
	var file string
	var line, found int
	for _, name := range slices.Sorted(maps.Keys(tree.Files)) {
		for i, l := range strings.Split(tree.Files[name], "\n") {
			if !slices.ContainsFunc(actions, func(a string) bool { return !strings.Contains(l, a) }) {
				file, line = name, i+1
				found++
			}
		}
	}
	if found == 1 {
		e.File, e.Line = path.Join(tree.Root, file), line
	}
}

// decode splits rendered YAML into objects; errors name the source file.
func (c *rcCompiler) decode(field, rendered string) ([]manifest.Object, bool) {
	// Channels that render the same text share its decoding; each gets
	// its own copy of the objects, which it patches.
	v, ok := c.templates.decoded.Load(rendered)
	if !ok {
		v, _ = c.templates.decoded.LoadOrStore(rendered, &decodedText{})
	}
	d := v.(*decodedText)
	d.once.Do(func() { d.objs, d.err = manifest.DecodeApplicable([]byte(rendered)) })
	objs, err := d.objs, d.err
	if err == nil {
		objs = manifest.Clone(objs)
	}
	if err != nil {
		e := Error{Object: c.serviceObject(), Field: field, Msg: err.Error()}
		var me *manifest.Error
		if errors.As(err, &me) {
			e.File, e.Line = config.LocateSource(rendered, me.Line)
			e.Msg = "invalid Kubernetes YAML: " + me.Msg
			if me.Unappliable {
				e.Msg = "object cannot be applied: " + me.Msg
			}
		}
		c.fail(e)
		return nil, false
	}
	return objs, true
}

// decodeObjects is decode for results that need no patches.
func (c *rcCompiler) decodeObjects(field, rendered string) []any {
	objs, ok := c.decode(field, rendered)
	if !ok {
		return nil
	}
	out := make([]any, len(objs))
	for i, o := range objs {
		out[i] = o
	}
	return out
}

// treeText resolves the templated subPath inside a directory read with
// local.path+subPath: a file is taken as is; a directory contributes its YAML
// files (one level, without *.pvn.yaml), or is rendered with kustomize.
func (c *rcCompiler) treeText(field string, kc *config.KubernetesConfig, data *Data) (string, bool) {
	sub, ok := c.renderField(field+".local.subPath", kc.Tree.SubPath, data)
	if !ok {
		return "", false
	}
	sub = strings.Trim(path.Clean("/"+sub), "/")
	// sub lies in local.path, which is Tree.Dir in the tree (a kustomize
	// tree holds the bases beside it too).
	sub = strings.TrimPrefix(path.Join(kc.Tree.Dir, sub), "/")
	if sub == "." {
		sub = ""
	}
	display := path.Join(kc.Tree.Root, sub)
	if kc.Type == config.KubernetesTypeKustomize {
		files := map[string][]byte{}
		for k, v := range kc.Tree.Files {
			files[k] = []byte(v)
		}
		if !manifest.IsKustomizationDir(files, sub) {
			c.fail(Error{Object: c.serviceObject(), Field: field + ".local.subPath", Msg: fmt.Sprintf("%s has no kustomization.yaml", display)})
			return "", false
		}
		out, err := manifest.RenderKustomize(files, sub)
		if err != nil {
			msg := err.Error()
			if kc.Tree.Root != "" {
				// Paths in kustomize's message are the tree's: say where it is.
				msg += " (paths relative to " + kc.Tree.Root + ")"
			}
			c.fail(Error{Object: c.serviceObject(), Field: field + ".local.subPath", Msg: msg})
			return "", false
		}
		return config.SourceMarker(display) + string(out), true
	}
	if content, ok := kc.Tree.Files[sub]; ok {
		return config.SourceMarker(display) + content, true
	}
	var names []string
	for name := range kc.Tree.Files {
		dir, base := path.Split(name)
		if strings.TrimSuffix(dir, "/") != sub && (sub != "" || dir != "") {
			continue
		}
		if config.IsConfigFile(base) || (!strings.HasSuffix(base, ".yaml") && !strings.HasSuffix(base, ".yml")) {
			continue
		}
		names = append(names, name)
	}
	if len(names) == 0 {
		c.fail(Error{Object: c.serviceObject(), Field: field + ".local.subPath", Msg: fmt.Sprintf("no Kubernetes configs found at %s", display)})
		return "", false
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, n := range names {
		content := kc.Tree.Files[n]
		if !strings.HasSuffix(content, "\n") {
			content += "\n"
		}
		parts[i] = config.SourceMarker(path.Join(kc.Tree.Root, n)) + content
	}
	return strings.Join(parts, "---\n"), true
}

// terraformRunnerParams are the implied parameters of a terraformRunner runtime.
var terraformRunnerParams = []config.ParameterDefinition{
	{Name: "path", Required: true, String: &config.StringParameter{}},
	{Name: "image", String: &config.StringParameter{}},
	{Name: "extraInitArgs", String: &config.StringParameter{}},
}

// customRuntime renders the service's parameter values (templates over the
// service's data), resolves the runtime's parameters with them, and renders
// the runtime's commands with the runtime parameters as .Params.
func (c *rcCompiler) customRuntime(field string, cr *config.CustomRuntimeValues, rt *config.Runtime, data *Data) *CustomRuntimeObject {
	var defs []config.ParameterDefinition
	kind := RuntimeKind(rt)
	switch kind {
	case "custom":
		defs = rt.Custom.Parameters
	case "terraformRunner":
		defs = terraformRunnerParams
		if sa := rt.TerraformRunner.ServiceAccount; sa != "" && rt.TerraformRunner.ProxyRuntime == nil {
			c.note(fmt.Sprintf("runtime %s: terraformRunner.serviceAccount %q is not used: without proxyRuntime drover runs the runner's commands on its own host, not as Kubernetes Jobs", rt.Name, sa))
		}
	}
	obj := &CustomRuntimeObject{Kind: kind, Runtime: rt.Name, ParameterValues: map[string]any{}}
	byName := map[string]*config.ParameterDefinition{}
	for i := range defs {
		byName[defs[i].Name] = &defs[i]
	}
	given := map[string]any{}
	for i, pv := range cr.ParameterValues {
		pf := fmt.Sprintf("%s.parameterValues[%d]", field, i)
		if pv.String != nil {
			s, ok := c.renderField(pf+".string", *pv.String, data)
			if !ok {
				continue
			}
			pv.String = &s
		}
		if pv.Secret != nil && kind == "terraformRunner" {
			c.fail(Error{Object: c.serviceObject(), Field: pf + ".secret", Msg: terraformSecretMsg})
			continue
		}
		def := byName[pv.Name]
		if def == nil {
			if kind == "fake" {
				given[pv.Name] = plainValue(pv)
				continue
			}
			c.fail(Error{Object: c.serviceObject(), Field: pf + ".name", Msg: fmt.Sprintf("runtime %s has no parameter %q%s", rt.Name, pv.Name, nameHint(defs))})
			continue
		}
		v, err := valueFromConfig(def, pv)
		if err != nil {
			c.fail(Error{Object: c.serviceObject(), Field: pf, Msg: err.Error()})
			continue
		}
		given[pv.Name] = v
	}
	for i := range defs {
		def := &defs[i]
		if v, ok := given[def.Name]; ok {
			obj.ParameterValues[def.Name] = v
			continue
		}
		v, err := defaultValue(def)
		if err != nil {
			c.fail(Error{Object: "runtime/" + rt.Name, Field: "runtime.parameters", Msg: err.Error()})
			continue
		}
		if v == nil {
			if def.Required {
				c.fail(Error{Object: c.serviceObject(), Field: field + ".parameterValues", Msg: fmt.Sprintf("runtime %s requires parameter %q", rt.Name, def.Name)})
				continue
			}
			v = zeroValue(def)
		}
		obj.ParameterValues[def.Name] = v
	}
	if kind == "fake" {
		for k, v := range given {
			obj.ParameterValues[k] = v
		}
	}
	if len(c.errs) > 0 {
		return nil
	}
	switch kind {
	case "custom":
		obj.markSecrets()
	case "terraformRunner":
		// Only a custom runtime puts a raw secret parameter's value in place
		// of its marker (B5); elsewhere it would render as "(secret)".
		for name, v := range obj.ParameterValues {
			if sec, ok := v.(Secret); ok && sec.raw != "" {
				c.fail(Error{Object: c.serviceObject(), Field: field + ".parameterValues", Msg: fmt.Sprintf("parameter %s: %s", name, terraformSecretMsg)})
			}
		}
		if len(c.errs) > 0 {
			return nil
		}
	}
	rdata := &Data{Params: obj.ParameterValues, Constants: data.Constants, Builtins: data.Builtins}
	rdata.Params, rdata.secrets = withSecretSentinels(obj.ParameterValues)
	switch kind {
	case "custom":
		var rendered config.CustomRuntime
		if !c.renderConfig("runtime/"+rt.Name, "runtime.custom", withoutParameters(rt.Custom), &rendered, rdata) {
			return nil
		}
		for _, kc := range []**config.KubernetesConfig{cmdKC(rendered.Apply), cmdKC(rendered.Fetch), cmdKC(rendered.GetInfo)} {
			if kc != nil && *kc != nil {
				if _, err := manifest.Decode([]byte((*kc).Inlined)); err != nil {
					c.fail(Error{Object: "runtime/" + rt.Name, Field: "runtime.custom", Msg: "invalid Kubernetes YAML: " + err.Error()})
				}
			}
		}
		obj.Custom = &rendered
	case "terraformRunner":
		var rendered config.TerraformRunner
		if !c.renderConfig("runtime/"+rt.Name, "runtime.terraformRunner", rt.TerraformRunner, &rendered, rdata) {
			return nil
		}
		obj.TerraformRunner = &rendered
	}
	return obj
}

// terraformSecretMsg refuses a secret parameter for a terraform runner: its
// templates would get "(secret)", not the value (B5).
const terraformSecretMsg = "secret parameters cannot be used in terraformRunner templates; pass the secret through env: the service's env or terraformRunner.env, with rawSecret or secret"

// markSecrets makes the raw secret parameters render as markers and keeps
// their values in obj.Secrets for the runtime.
func (obj *CustomRuntimeObject) markSecrets() {
	for name, v := range obj.ParameterValues {
		sec, ok := v.(Secret)
		if !ok || sec.raw == "" {
			continue
		}
		sec.param = name
		obj.ParameterValues[name] = sec
		if obj.Secrets == nil {
			obj.Secrets = map[string]config.EnvValue{}
		}
		obj.Secrets[name] = config.EnvValue{RawSecret: sec.raw}
	}
}

func cmdKC(cmd any) **config.KubernetesConfig {
	switch x := cmd.(type) {
	case *config.ApplyCommand:
		if x != nil {
			return &x.KubernetesConfig
		}
	case *config.FetchCommand:
		if x != nil {
			return &x.KubernetesConfig
		}
	case *config.GetInfoCommand:
		if x != nil {
			return &x.KubernetesConfig
		}
	}
	return nil
}

func withoutParameters(c *config.CustomRuntime) *config.CustomRuntime {
	cp := *c
	cp.Parameters = nil
	return &cp
}

func plainValue(pv config.ParameterValue) any {
	switch {
	case pv.String != nil:
		return *pv.String
	case pv.Int != nil:
		return int64(*pv.Int)
	case pv.DockerImageTag != nil:
		return *pv.DockerImageTag
	case pv.Commit != nil:
		return *pv.Commit
	}
	return ""
}

// renderConfig renders every string of a config struct as a template.
func (c *rcCompiler) renderConfig(object, field string, in, out any, data *Data) bool {
	tree, err := toTree(in)
	if err == nil {
		var r any
		r, err = renderStrings(c.ctx, c.templates, tree, data)
		if err == nil {
			err = fromTree(r.(map[string]any), out)
		}
	}
	if err != nil {
		c.fail(Error{Object: object, Field: field, Msg: err.Error() + keysHint(err.Error(), data)})
		return false
	}
	return true
}

var validNameRE = regexp.MustCompile(`^[a-z]([a-z0-9-]*[a-z0-9])?$`)

func validName(s string) bool { return validNameRE.MatchString(s) }

func dedupe(s []string) []string {
	seen := map[string]bool{}
	out := s[:0]
	for _, x := range s {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func sortStrings(s []string) { sort.Strings(s) }

func nameSuggestion(name string, candidates []string) string {
	best, bestDist := "", 1<<30
	// A huge input is not a typo of a name, and its edit distance is costly.
	for _, c := range candidates {
		if len(name) > config.MaxEcho {
			break
		}
		if d := distance(name, c); d < bestDist {
			best, bestDist = c, d
		}
	}
	if best != "" && bestDist <= max(2, len(name)/3) {
		return fmt.Sprintf(" (did you mean %q?)", best)
	}
	if len(candidates) > 0 && len(candidates) <= 10 {
		return " (release channels: " + strings.Join(candidates, ", ") + ")"
	}
	return ""
}

func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// protectionCommand renders a command protection for one attachment: its
// taskConfig or kubernetesConfig and env, with the protection's parameters
// (the attachment's values, else the defaults) as .Params.
func (c *rcCompiler) protectionCommand(prot *config.Protection, values []config.ParameterValue, data *Data) *ProtectionCommand {
	return c.renderCommand("protection", prot.Name, prot.Parameters, values,
		&ProtectionCommand{Protection: prot.Name, TaskConfig: prot.TaskConfig, KubernetesConfig: prot.KubernetesConfig, Env: prot.Env, Timeout: prot.Timeout}, data)
}

// renderCommand renders the command of a protection or delivery extension
// (what, named name) with its parameters defs as .Params: the values given,
// else the defaults. Secret parameters are refused: pass secrets through
// env (rawSecret).
func (c *rcCompiler) renderCommand(what, name string, defs []config.ParameterDefinition, values []config.ParameterValue, in *ProtectionCommand, data *Data) *ProtectionCommand {
	params := map[string]any{}
	given := map[string]config.ParameterValue{}
	for _, pv := range values {
		given[pv.Name] = pv
		if !slices.ContainsFunc(defs, func(d config.ParameterDefinition) bool { return d.Name == pv.Name }) {
			c.fail(Error{Object: c.serviceObject(), Field: "ref.parameters", Msg: fmt.Sprintf("%s %s has no parameter %q%s", what, name, pv.Name, nameHint(defs))})
		}
	}
	for i := range defs {
		def := &defs[i]
		var v any
		var err error
		if pv, ok := given[def.Name]; ok {
			v, err = valueFromConfig(def, pv)
		} else if v, err = defaultValue(def); err == nil && v == nil {
			if def.Required {
				err = fmt.Errorf("%s %s requires parameter %q: set it in ref.parameters", what, name, def.Name)
			} else {
				v = zeroValue(def)
			}
		}
		if _, secret := v.(Secret); err == nil && secret {
			err = fmt.Errorf("parameter %q: secret parameters are not supported in a %s; pass the secret through its env (rawSecret)", def.Name, what)
		}
		if err != nil {
			c.fail(Error{Object: c.serviceObject(), Field: "ref.parameters", Msg: err.Error()})
			continue
		}
		params[def.Name] = v
	}
	if len(c.errs) > 0 {
		return nil
	}
	var out ProtectionCommand
	if !c.renderConfig(what+"/"+name, what, in, &out, &Data{Params: params, Constants: data.Constants, Builtins: data.Builtins}) {
		return nil
	}
	return &out
}

// CompiledExtension is a convergence extension of a release channel as the
// engine runs it: its command rendered with its parameters, the phase it
// runs in, its retry policy, and the key of the run it shares.
type CompiledExtension struct {
	Name      string `json:"name"`
	Lifecycle string `json:"lifecycle"`
	// Command is what runs (exit 0 succeeds); nil when the extension has
	// no command.
	Command     *ProtectionCommand  `json:"command,omitempty"`
	RetryPolicy *config.RetryPolicy `json:"retryPolicy,omitempty"`
	// SharedKey is the key of a run shared by every channel whose
	// extension has it (sharedInstanceKey; a convergenceExtensionInstance's
	// name); "" for a run of this channel alone.
	SharedKey    string   `json:"sharedKey,omitempty"`
	Dependencies []string `json:"dependencies,omitempty"`
}

// extensions resolves and renders the channel's convergence extensions:
// inlined, an instance of the service (convergenceExtensionInstances), or
// a ref to a deliveryExtension with parameters.
func (c *rcCompiler) extensions(exts []config.ConvergenceExtension, data *Data) []CompiledExtension {
	var out []CompiledExtension
	for i, e := range exts {
		name := extensionName(e.Instance, e.Ref, e.Inlined, i)
		ce := CompiledExtension{Name: name, Lifecycle: string(e.Lifecycle)}
		for _, d := range e.Dependencies {
			ce.Dependencies = append(ce.Dependencies, d.Name)
		}
		inlined, ref := e.Inlined, e.Ref
		if e.Instance != "" {
			var inst *config.ConvergenceExtensionInstance
			for j := range c.in.Service.ConvergenceExtensionInstances {
				if x := &c.in.Service.ConvergenceExtensionInstances[j]; x.Name == e.Instance {
					inst = x
				}
			}
			if inst == nil {
				c.fail(Error{Object: c.serviceObject(), Field: fmt.Sprintf("service.convergenceExtensions[%d].instance", i), Msg: fmt.Sprintf("no convergenceExtensionInstances entry named %q", e.Instance)})
				continue
			}
			inlined, ref = inst.Inlined, inst.Ref
			ce.SharedKey = "instance/" + inst.Name
			for _, d := range inst.Dependencies {
				if !slices.Contains(ce.Dependencies, d.Name) {
					ce.Dependencies = append(ce.Dependencies, d.Name)
				}
			}
		}
		def := inlined
		var values []config.ParameterValue
		if ref != nil {
			def = c.in.DeliveryExtensions[ref.Name]
			values = ref.Parameters
			if def == nil {
				c.fail(Error{Object: c.serviceObject(), Field: fmt.Sprintf("service.convergenceExtensions[%d].ref.name", i), Msg: fmt.Sprintf("unknown deliveryExtension %q", ref.Name)})
				continue
			}
		}
		if def == nil {
			c.fail(Error{Object: c.serviceObject(), Field: fmt.Sprintf("service.convergenceExtensions[%d]", i), Msg: "set one of inlined, instance, ref"})
			continue
		}
		if def.SharedInstanceKey != "" {
			ce.SharedKey = "key/" + def.SharedInstanceKey
		}
		ce.RetryPolicy = def.RetryPolicy
		if def.TaskConfig != nil || def.KubernetesConfig != nil {
			ce.Command = c.renderCommand("deliveryExtension", orDefault(def.Name, name), def.Parameters, values,
				&ProtectionCommand{Protection: orDefault(def.Name, name), TaskConfig: def.TaskConfig, KubernetesConfig: def.KubernetesConfig, Env: def.Env}, data)
		}
		out = append(out, ce)
	}
	c.checkExtensionOrder(out)
	return out
}

// extensionPhases orders the lifecycle phases of extensions.
var extensionPhases = []string{"PRE_APPROVAL", "APPROVAL", "POST_APPROVAL", "DEPLOYMENT", "POST_DEPLOYMENT"}

// checkExtensionOrder refuses extensions of a channel with the same name,
// dependencies on an extension the channel does not have or that runs in
// a later phase (it would hold the channel for ever), and cycles.
func (c *rcCompiler) checkExtensionOrder(exts []CompiledExtension) {
	byName := map[string]*CompiledExtension{}
	field := "service.convergenceExtensions"
	for i := range exts {
		e := &exts[i]
		if byName[e.Name] != nil {
			c.fail(Error{Object: c.serviceObject(), Field: field, Msg: fmt.Sprintf("two convergence extensions named %q in release channel %s: name them apart", e.Name, c.rc.Name)})
		}
		byName[e.Name] = e
	}
	for _, e := range exts {
		for _, dep := range e.Dependencies {
			d := byName[dep]
			switch {
			case d == nil:
				c.fail(Error{Object: c.serviceObject(), Field: field, Msg: fmt.Sprintf("extension %s depends on %q, which release channel %s has no extension named", e.Name, dep, c.rc.Name)})
			case slices.Index(extensionPhases, d.Lifecycle) > slices.Index(extensionPhases, e.Lifecycle):
				c.fail(Error{Object: c.serviceObject(), Field: field, Msg: fmt.Sprintf("extension %s (%s) depends on %s, which runs later (%s)", e.Name, e.Lifecycle, dep, d.Lifecycle)})
			}
		}
	}
	// A cycle: follow dependencies depth first.
	state := map[string]int{} // 1 visiting, 2 done
	var visit func(name string, path []string) bool
	visit = func(name string, path []string) bool {
		switch state[name] {
		case 1:
			c.fail(Error{Object: c.serviceObject(), Field: field, Msg: "convergence extensions depend on each other in a cycle: " + strings.Join(append(path, name), " -> ")})
			return false
		case 2:
			return true
		}
		state[name] = 1
		if e := byName[name]; e != nil {
			for _, dep := range e.Dependencies {
				if !visit(dep, append(path, name)) {
					return false
				}
			}
		}
		state[name] = 2
		return true
	}
	for _, e := range exts {
		if !visit(e.Name, nil) {
			return
		}
	}
}

// rcLabels are a release channel's own labels (nil for none).
func rcLabels(rc *ReleaseChannel) map[string]string {
	if len(rc.Labels) == 0 {
		return nil
	}
	out := make(map[string]string, len(rc.Labels))
	for _, l := range rc.Labels {
		out[l.Label] = l.Value
	}
	return out
}
