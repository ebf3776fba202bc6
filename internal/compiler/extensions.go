package compiler

import (
	"fmt"
	"slices"
	"strings"

	"github.com/drover-dev/drover/internal/config"
)

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
