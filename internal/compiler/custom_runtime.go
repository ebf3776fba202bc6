package compiler

import (
	"fmt"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/manifest"
)

// terraformRunnerParams are the implied parameters of a terraformRunner runtime.
var terraformRunnerParams = []config.ParameterDefinition{
	{Name: "path", Required: true, String: &config.StringParameter{}},
	{Name: "image", String: &config.StringParameter{}},
	{Name: "extraInitArgs", String: &config.StringParameter{}},
}

func init() {
	registerBackend(serviceBackend{
		name: "customRuntime", accepted: config.BackendCustomRuntime, compiled: "customRuntime",
		set: func(b *config.ServiceBackend) bool { return b.CustomRuntime != nil },
		compile: func(c *rcCompiler, field string, m *serviceForRC, rt *config.Runtime, data *Data, out *CompiledReleaseChannel) {
			out.Backend = "customRuntime"
			if runner, ok := runnerKinds[rt.Kind()]; ok {
				if obj := runner(c, field+".customRuntime", m.Backend.CustomRuntime, rt, data); obj != nil {
					out.Objects = []any{obj}
				}
				return
			}
			if obj := c.customRuntime(field+".customRuntime", m.Backend.CustomRuntime, rt, data); obj != nil {
				out.Objects = []any{obj}
			}
		},
	})
}

// runnerCompiler compiles a service's customRuntime.parameterValues into
// the object of a runner kind that brings its own (nil on failure, the
// problems given to c.fail).
type runnerCompiler func(c *rcCompiler, field string, cr *config.CustomRuntimeValues, rt *config.Runtime, data *Data) any

// runnerKinds are the runtime kinds, by name, whose customRuntime
// backend a kind's own compiler turns into its object (custom runtimes
// and terraform runners are compiled here).
var runnerKinds = map[string]runnerCompiler{}

// registerRunner adds a runner kind's compiler; called from init of the
// file compiling it.
func registerRunner(kind string, compile runnerCompiler) {
	if _, dup := runnerKinds[kind]; dup {
		panic("compiler: runner kind " + kind + " registered twice")
	}
	runnerKinds[kind] = compile
}

// customRuntime renders the service's parameter values (templates over the
// service's data), resolves the runtime's parameters with them, and renders
// the runtime's commands with the runtime parameters as .Params.
func (c *rcCompiler) customRuntime(field string, cr *config.CustomRuntimeValues, rt *config.Runtime, data *Data) *CustomRuntimeObject {
	var defs []config.ParameterDefinition
	kind := rt.Kind()
	switch kind {
	case config.KindCustom:
		defs = rt.Custom.Parameters
	case config.KindTerraformRunner:
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
		pf := c.valueField(field, i, pv.Name)
		if pv.String != nil {
			s, ok := c.renderField(pf+".string", *pv.String, data)
			if !ok {
				continue
			}
			pv.String = &s
		}
		if pv.Secret != nil && kind == config.KindTerraformRunner {
			c.fail(Error{Object: c.serviceObject(), Field: pf + ".secret", Msg: terraformSecretMsg})
			continue
		}
		def := byName[pv.Name]
		if def == nil {
			if kind == config.KindFake {
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
	if kind == config.KindFake {
		for k, v := range given {
			obj.ParameterValues[k] = v
		}
	}
	if len(c.errs) > 0 {
		return nil
	}
	switch kind {
	case config.KindCustom:
		obj.markSecrets()
	case config.KindTerraformRunner:
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
	case config.KindCustom:
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
	case config.KindTerraformRunner:
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

// valueField is the config path of a channel's merged parameter value
// (index i of the values compiled under field): the perReleaseChannel
// entry's value when the channel's entry sets it, else the service's, so
// that errors point at the line that wrote it.
func (c *rcCompiler) valueField(field string, i int, name string) string {
	svc := c.in.Service
	for k, p := range svc.PerReleaseChannel {
		if p.ReleaseChannel != c.rc.Name || p.CustomRuntime == nil {
			continue
		}
		for j, pv := range p.CustomRuntime.ParameterValues {
			if pv.Name == name {
				return fmt.Sprintf("service.perReleaseChannel[%d].customRuntime.parameterValues[%d]", k, j)
			}
		}
	}
	if svc.CustomRuntime != nil {
		for j, pv := range svc.CustomRuntime.ParameterValues {
			if pv.Name == name {
				return fmt.Sprintf("service.customRuntime.parameterValues[%d]", j)
			}
		}
	}
	return fmt.Sprintf("%s.parameterValues[%d]", field, i)
}
