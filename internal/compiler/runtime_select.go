package compiler

import (
	"fmt"
	"strings"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/labelquery"
)

// serviceBackend is the compiler's hook for one backend a service sets for
// a release channel (kubernetesConfig, helm, customRuntime, awsEcs): the
// file that compiles the backend registers it (registerBackend), and the
// compiler looks it up instead of switching on the backend.
type serviceBackend struct {
	// name is the backend's field in the service config.
	name string
	// accepted is the backend as runtime kinds accept it
	// (config.RuntimeKind.Backends: helm is rendered to Kubernetes
	// objects, so it is kubernetesConfig).
	accepted string
	// compiled is the compiled channel's Backend the hook gives
	// ("kubernetes", "customRuntime", "awsEcs").
	compiled string
	// set reports whether b sets the backend (validation allows one).
	set func(b *config.ServiceBackend) bool
	// compile sets out.Backend and out.Objects for the channel, rendering
	// m's backend for runtime rt; problems go to c.fail.
	compile func(c *rcCompiler, field string, m *serviceForRC, rt *config.Runtime, data *Data, out *CompiledReleaseChannel)
	// inject, if set, adds the channel's env to the objects of a channel
	// compiled to this backend, once res has its bundle version (injectEnv).
	inject func(res *Result, rc *CompiledReleaseChannel, meta map[string]string) error
}

// sbKubernetes is the compiled Backend of channels of Kubernetes objects.
const sbKubernetes = "kubernetes"

// serviceBackends are the registered backends, by name.
var serviceBackends = map[string]serviceBackend{}

// registerBackend adds a backend; called from init of the file compiling it.
func registerBackend(b serviceBackend) {
	if _, dup := serviceBackends[b.name]; dup {
		panic("compiler: backend " + b.name + " registered twice")
	}
	serviceBackends[b.name] = b
}

// backendOf returns the backend b sets.
func backendOf(b *config.ServiceBackend) (serviceBackend, bool) {
	for _, sb := range serviceBackends {
		if sb.set(b) {
			return sb, true
		}
	}
	return serviceBackend{}, false
}

func init() {
	registerBackend(serviceBackend{
		name: "kubernetesConfig", accepted: config.BackendKubernetesConfig, compiled: sbKubernetes,
		set: func(b *config.ServiceBackend) bool { return b.KubernetesConfig != nil },
		compile: func(c *rcCompiler, field string, m *serviceForRC, _ *config.Runtime, data *Data, out *CompiledReleaseChannel) {
			out.Backend = sbKubernetes
			out.EnvInjectionDisabled = m.Backend.KubernetesConfig.EnvInjectionMode == config.EnvInjectDisabled
			out.Objects = c.kubernetes(field+".kubernetesConfig", m.Backend.KubernetesConfig, data)
		},
		inject: injectKubernetes,
	})
	registerBackend(serviceBackend{
		name: "helm", accepted: config.BackendKubernetesConfig, compiled: sbKubernetes,
		set: func(b *config.ServiceBackend) bool { return b.Helm != nil },
		compile: func(c *rcCompiler, field string, m *serviceForRC, _ *config.Runtime, data *Data, out *CompiledReleaseChannel) {
			out.Backend = sbKubernetes
			out.chart = true
			out.Objects = c.helm(field+".helm", m.Backend.Helm, data, out.Runtime)
		},
	})
}

// selectRuntime picks the runtime connection: the one named by
// runtimeConnection, else the only one whose runtime accepts the backend.
func (c *rcCompiler) selectRuntime(m *serviceForRC) (SelectedRuntime, *config.Runtime, bool) {
	sb, ok := backendOf(&m.Backend)
	if !ok {
		c.fail(Error{Object: c.serviceObject(), Field: "service", Msg: "no backend for this release channel: set kubernetesConfig, helm, customRuntime or awsEcs (at the top level or in perReleaseChannel)"})
		return SelectedRuntime{}, nil, false
	}
	backend := sb.accepted
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
		if rt.KindFacts().Accepts(backend) {
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
	if !rt.KindFacts().Accepts(backend) {
		c.fail(Error{Object: c.serviceObject(), Field: "service.runtimeConnection", Msg: fmt.Sprintf("runtime %s (%s) cannot run a %s service", rt.Name, rt.Kind(), backend)})
		return SelectedRuntime{}, nil, false
	}
	sel := SelectedRuntime{Connection: conn.ConnectionName(), Name: rt.Name, Kind: rt.Kind()}
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
			kind = rt.Kind()
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
