package compiler

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/customspec"
	"github.com/drover-dev/drover/internal/desiredstate"
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
	// ServiceDependsOn lists the services of the application that must run
	// converged first (service.dependsOn, drover's own), each with the
	// release channel it must run in.
	ServiceDependsOn []config.ServiceDependency `json:"serviceDependsOn,omitempty"`
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
	// Gate is a check a registered evaluator decides when it runs (a
	// release channel's alertGate, a commitDenylist's ranges), written as
	// a member named by its kind (desiredstate.Gate).
	Gate *desiredstate.Gate `json:"-"`
}

// protectionFields are a CompiledProtection's fields, encoded as
// encoding/json does.
type protectionFields CompiledProtection

// MarshalJSON writes the protection's fields and, last, its gate.
func (p CompiledProtection) MarshalJSON() ([]byte, error) {
	return desiredstate.MarshalGated(protectionFields(p), p.Gate)
}

// UnmarshalJSON reads what MarshalJSON writes.
func (p *CompiledProtection) UnmarshalJSON(b []byte) error {
	var f protectionFields
	g, err := desiredstate.UnmarshalGated(b, &f)
	if err != nil {
		return fmt.Errorf("protection: %w", err)
	}
	*p = CompiledProtection(f)
	p.Gate = g
	return nil
}

// ProtectionCommand is a protection's command as its runtime runs it
// (customspec.ProtectionCommand, which the runtimes read).
type ProtectionCommand = customspec.ProtectionCommand

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
	out.ServiceDependsOn = svc.ChannelDependencies(c.rc.Name)
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
	if sb, ok := backendOf(&merged.Backend); ok {
		sb.compile(c, field, merged, rt, data, out)
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
