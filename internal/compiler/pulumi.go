package compiler

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"time"

	"github.com/drover-dev/drover/internal/config"
)

// The Pulumi runner (docs/pulumi.md) takes a service in either of
// Prodvana's shapes: customRuntime.parameterValues (path, stack, image,
// and every other value a config value of the stack) or the pulumi
// backend {path, stack, image, pulumiCommandPrefix}. Both compile to one
// PulumiObject, in a channel of the customRuntime backend (so the
// server resolves its stored secrets as a custom runtime's).
func init() {
	registerRunner(config.KindPulumiRunner, func(c *rcCompiler, field string, cr *config.CustomRuntimeValues, rt *config.Runtime, data *Data) any {
		if obj := c.pulumiParams(field, cr, rt, data); obj != nil {
			return obj
		}
		return nil
	})
	registerBackend(serviceBackend{
		name: "pulumi", accepted: config.BackendPulumi, compiled: "customRuntime",
		set: func(b *config.ServiceBackend) bool { return b.Pulumi != nil },
		compile: func(c *rcCompiler, field string, m *serviceForRC, rt *config.Runtime, data *Data, out *CompiledReleaseChannel) {
			out.Backend = "customRuntime"
			if obj := c.pulumiBackend(field+".pulumi", m.Backend.Pulumi, rt, data); obj != nil {
				out.Objects = []any{obj}
			}
		},
	})
}

// PulumiObject is what a pulumiRunner converges: one stack of one Pulumi
// program.
type PulumiObject struct {
	Kind    string `json:"kind"`
	Runtime string `json:"runtime"`
	// Path is the program's directory; Stack the stack (default: the
	// release channel's name).
	Path  string `json:"path"`
	Stack string `json:"stack"`
	// Image runs the commands when they run as Kubernetes Jobs.
	Image string `json:"image,omitempty"`
	// CommandPrefix goes before every pulumi command ([poetry, run]).
	CommandPrefix []string `json:"commandPrefix,omitempty"`
	// Config are the stack's plain config values and SecretConfig its
	// secret ones (set as Pulumi secrets), by key.
	Config       map[string]string          `json:"config,omitempty"`
	SecretConfig map[string]config.EnvValue `json:"secretConfig,omitempty"`
	// PulumiRunner is the runtime's config, rendered for the channel.
	PulumiRunner *config.PulumiRunner `json:"pulumiRunner"`
}

// channelGates are the runner's.
func (o *PulumiObject) channelGates() (time.Duration, bool) {
	if o.PulumiRunner == nil {
		return 0, false
	}
	return o.PulumiRunner.ConvergenceGracePeriod.Duration, o.PulumiRunner.RequireApprovalBeforeApply
}

// pulumiReserved are the parameter values a pulumiRunner takes for
// itself; every other one is a config value of the stack.
var pulumiReserved = []string{"path", "stack", "image"}

var (
	// pulumiStackRE is a stack name, optionally org/project/stack.
	pulumiStackRE = regexp.MustCompile(`^[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+){0,2}$`)
	// pulumiKeyRE is a config key: name, or namespace:name.
	pulumiKeyRE = regexp.MustCompile(`^([A-Za-z0-9_.-]+:)?[A-Za-z0-9_.-]+$`)
)

// pulumiParams compiles a pulumiRunner service's parameter values.
func (c *rcCompiler) pulumiParams(field string, cr *config.CustomRuntimeValues, rt *config.Runtime, data *Data) *PulumiObject {
	obj := c.newPulumiObject(rt)
	params := map[string]any{}
	before := len(c.errs)
	for i, pv := range cr.ParameterValues {
		pf := c.valueField(field, i, pv.Name)
		fail := func(f, msg string) { c.fail(Error{Object: c.serviceObject(), Field: pf + f, Msg: msg}) }
		reserved := slices.Contains(pulumiReserved, pv.Name)
		if !reserved && !pulumiKeyRE.MatchString(pv.Name) {
			fail(".name", fmt.Sprintf("%q is not a Pulumi config key (name or namespace:name, of letters, digits, _, . and -)", pv.Name))
			continue
		}
		switch {
		case pv.String != nil:
			s, ok := c.renderField(pf+".string", *pv.String, data)
			if !ok {
				continue
			}
			params[pv.Name] = s
		case pv.Int != nil && !reserved:
			params[pv.Name] = strconv.FormatInt(int64(*pv.Int), 10)
		case pv.Secret != nil && !reserved:
			switch s := pv.Secret; {
			case s.SecretRef != nil:
				params[pv.Name] = Secret{Key: s.SecretRef.Key, Version: s.SecretRef.Version}
				obj.secret(pv.Name, config.EnvValue{Secret: &config.SecretRef{Key: s.SecretRef.Key, Version: s.SecretRef.Version}})
			default:
				params[pv.Name] = Secret{raw: s.RawSecret}
				obj.secret(pv.Name, config.EnvValue{RawSecret: s.RawSecret})
			}
		case reserved:
			fail("", fmt.Sprintf("parameter %s of a pulumiRunner is a string", pv.Name))
		default:
			fail("", fmt.Sprintf("config value %s: give a string, an int or a secret (Pulumi config values are strings)", pv.Name))
		}
	}
	for k, v := range params {
		if s, ok := v.(string); ok && !slices.Contains(pulumiReserved, k) {
			if obj.Config == nil {
				obj.Config = map[string]string{}
			}
			obj.Config[k] = s
		}
	}
	str := func(k string) string { s, _ := params[k].(string); return s }
	obj.Path, obj.Stack, obj.Image = str("path"), str("stack"), str("image")
	if obj.Path == "" {
		c.fail(Error{Object: c.serviceObject(), Field: field + ".parameterValues", Msg: fmt.Sprintf("runtime %s requires parameter \"path\": the directory of the Pulumi program (its Pulumi.yaml)", rt.Name)})
	}
	if len(c.errs) > before {
		return nil
	}
	return c.finishPulumi(field+".parameterValues", obj, rt, params, data)
}

// pulumiBackend compiles Prodvana's pulumi backend form.
func (c *rcCompiler) pulumiBackend(field string, pc *config.PulumiConfig, rt *config.Runtime, data *Data) *PulumiObject {
	obj := c.newPulumiObject(rt)
	before := len(c.errs)
	render := func(f, s string) string {
		if s == "" {
			return ""
		}
		out, _ := c.renderField(field+"."+f, s, data)
		return out
	}
	obj.Path, obj.Stack, obj.Image = render("path", pc.Path), render("stack", pc.Stack), render("image", pc.Image)
	for i, w := range pc.PulumiCommandPrefix {
		obj.CommandPrefix = append(obj.CommandPrefix, render(fmt.Sprintf("pulumiCommandPrefix[%d]", i), w))
	}
	if len(c.errs) > before {
		return nil
	}
	if obj.Path == "" {
		c.fail(Error{Object: c.serviceObject(), Field: field + ".path", Msg: "path is required: the directory of the Pulumi program (its Pulumi.yaml)"})
		return nil
	}
	if obj.Image != "" && rt.PulumiRunner.ProxyRuntime == nil {
		c.note(fmt.Sprintf("service %s: pulumi.image %q is not used: without proxyRuntime drover runs pulumi on its own host, not as Kubernetes Jobs", c.in.Service.Name, obj.Image))
	}
	if pc.PvnWrapperPath != "" || pc.ShellPath != "" {
		c.note(fmt.Sprintf("service %s: pulumi.pvnWrapperPath and pulumi.shellPath are not used: drover runs pulumi itself", c.in.Service.Name))
	}
	return c.finishPulumi(field, obj, rt, map[string]any{"path": obj.Path, "stack": obj.Stack, "image": obj.Image}, data)
}

func (c *rcCompiler) newPulumiObject(rt *config.Runtime) *PulumiObject {
	if sa := rt.PulumiRunner.ServiceAccount; sa != "" && rt.PulumiRunner.ProxyRuntime == nil {
		c.note(fmt.Sprintf("runtime %s: pulumiRunner.serviceAccount %q is not used: without proxyRuntime drover runs pulumi on its own host, not as Kubernetes Jobs", rt.Name, sa))
	}
	return &PulumiObject{Kind: config.KindPulumiRunner, Runtime: rt.Name}
}

func (o *PulumiObject) secret(key string, v config.EnvValue) {
	if o.SecretConfig == nil {
		o.SecretConfig = map[string]config.EnvValue{}
	}
	o.SecretConfig[key] = v
}

// finishPulumi defaults and checks the stack, then renders the runner's
// config with the values as .Params (secrets as markers, refused where
// they would be printed).
func (c *rcCompiler) finishPulumi(field string, obj *PulumiObject, rt *config.Runtime, params map[string]any, data *Data) *PulumiObject {
	if obj.Stack == "" {
		obj.Stack = c.rc.Name
		params["stack"] = obj.Stack
	}
	if !pulumiStackRE.MatchString(obj.Stack) {
		c.fail(Error{Object: c.serviceObject(), Field: field, Msg: fmt.Sprintf("stack %q is not a Pulumi stack name (letters, digits, _, . and -, optionally org/project/stack)", obj.Stack)})
		return nil
	}
	for _, k := range slices.Sorted(maps.Keys(obj.Config)) {
		if _, dup := obj.SecretConfig[k]; dup {
			c.fail(Error{Object: c.serviceObject(), Field: field, Msg: fmt.Sprintf("config value %s is given twice", k)})
			return nil
		}
	}
	rdata := &Data{Constants: data.Constants, Builtins: data.Builtins}
	rdata.Params, rdata.secrets = withSecretSentinels(params)
	var rendered config.PulumiRunner
	if !c.renderConfig("runtime/"+rt.Name, "runtime.pulumiRunner", rt.PulumiRunner, &rendered, rdata) {
		return nil
	}
	obj.PulumiRunner = &rendered
	return obj
}
