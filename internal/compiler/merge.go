package compiler

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"github.com/drover-dev/drover/internal/config"
)

// serviceForRC is a service's configuration for one release channel, after
// perReleaseChannel has been merged over the top level.
type serviceForRC struct {
	Backend                config.ServiceBackend
	Env                    map[string]config.EnvValue
	Constants              []config.Constant
	Protections            []config.ProtectionAttachment
	ConvergenceProtections []config.ProtectionAttachment
	ConvergenceExtensions  []config.ConvergenceExtension
	RuntimeConnection      string
	// Field is the path of the per-channel entry, or "" when there is none.
	Field string
}

// backendKeys are the members of the service backend oneof: every field
// of config.ServiceBackend, so that a backend a kind adds there is one too.
var backendKeys = func() []string {
	t := reflect.TypeFor[config.ServiceBackend]()
	keys := make([]string, 0, t.NumField())
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		keys = append(keys, name)
	}
	return keys
}()

// sourceKeys are the members of a backend's source oneof (a Kubernetes
// config's, a Cloud Run service's).
var sourceKeys = []string{"inlined", "local", "remote", "tree"}

// mergeService deep-merges the per-channel entry for rc over the service:
// mappings merge key by key, lists and scalars are replaced, a backend or a
// Kubernetes source set per channel replaces the top-level one (as protobuf
// merges a oneof), custom runtime parameter values are joined by name unless
// clearOnPerReleaseChannelMerge is set, env merges per variable and constants
// per name, and the per-channel entry wins throughout.
func mergeService(svc *config.Service, rc string) (*serviceForRC, error) {
	out := &serviceForRC{
		Backend:                svc.ServiceBackend,
		Env:                    map[string]config.EnvValue{},
		Constants:              svc.Constants,
		ConvergenceProtections: svc.ConvergenceProtections,
		ConvergenceExtensions:  svc.ConvergenceExtensions,
		RuntimeConnection:      svc.RuntimeConnection,
	}
	for k, v := range svc.Env {
		out.Env[k] = v
	}
	var prc *config.PerReleaseChannel
	for i := range svc.PerReleaseChannel {
		if svc.PerReleaseChannel[i].ReleaseChannel == rc {
			prc = &svc.PerReleaseChannel[i]
			out.Field = fmt.Sprintf("service.perReleaseChannel[%d]", i)
			break
		}
	}
	if prc == nil {
		return out, nil
	}
	backend, err := mergeBackend(svc.ServiceBackend, prc.ServiceBackend)
	if err != nil {
		return nil, err
	}
	out.Backend = backend
	for k, v := range prc.Env {
		out.Env[k] = v
	}
	out.Constants = mergeConstants(svc.Constants, prc.Constants)
	out.Protections = prc.Protections
	out.ConvergenceProtections = append(append([]config.ProtectionAttachment(nil), svc.ConvergenceProtections...), prc.ConvergenceProtections...)
	out.ConvergenceExtensions = append(append([]config.ConvergenceExtension(nil), svc.ConvergenceExtensions...), prc.ConvergenceExtensions...)
	if prc.RuntimeConnection != "" {
		out.RuntimeConnection = prc.RuntimeConnection
	}
	return out, nil
}

func mergeConstants(base, over []config.Constant) []config.Constant {
	out := append([]config.Constant(nil), base...)
	for _, c := range over {
		replaced := false
		for i := range out {
			if out[i].Name == c.Name {
				out[i], replaced = c, true
			}
		}
		if !replaced {
			out = append(out, c)
		}
	}
	return out
}

func mergeBackend(base, over config.ServiceBackend) (config.ServiceBackend, error) {
	b, err := toTree(base)
	if err != nil {
		return base, err
	}
	o, err := toTree(over)
	if err != nil {
		return base, err
	}
	// A different backend per channel replaces the top-level one.
	for _, k := range backendKeys {
		if _, ok := o[k]; ok {
			for _, other := range backendKeys {
				if other != k {
					delete(b, other)
				}
			}
		}
	}
	// A backend whose source is one of inlined, local, remote and tree
	// (kubernetesConfig, googleCloudRun) takes the channel's source whole.
	for name, ov := range o {
		ok, _ := ov.(map[string]any)
		bk, _ := b[name].(map[string]any)
		if _, backend := serviceBackends[name]; !backend || ok == nil || bk == nil {
			continue
		}
		for _, k := range sourceKeys {
			if _, set := ok[k]; set {
				for _, s := range sourceKeys {
					delete(bk, s)
				}
				break
			}
		}
	}
	// An ECS definition set per channel replaces the top-level one whole
	// (inlined, a file or a subPath tree are one choice).
	if oe, _ := o["awsEcs"].(map[string]any); oe != nil {
		if be, _ := b["awsEcs"].(map[string]any); be != nil {
			for _, doc := range []string{"taskDefinition", "serviceDefinition"} {
				if _, set := oe[doc]; set {
					delete(be, doc)
				}
			}
		}
	}
	var values []config.ParameterValue
	if over.CustomRuntime != nil && base.CustomRuntime != nil && !over.CustomRuntime.ClearOnPerReleaseChannelMerge {
		values = joinValues(base.CustomRuntime.ParameterValues, over.CustomRuntime.ParameterValues)
	}
	merged := deepMerge(b, o)
	var out config.ServiceBackend
	if err := fromTree(merged, &out); err != nil {
		return base, err
	}
	if values != nil {
		out.CustomRuntime.ParameterValues = values
	}
	return out, nil
}

func joinValues(base, over []config.ParameterValue) []config.ParameterValue {
	out := append([]config.ParameterValue(nil), base...)
	for _, v := range over {
		replaced := false
		for i := range out {
			if out[i].Name == v.Name {
				out[i], replaced = v, true
			}
		}
		if !replaced {
			out = append(out, v)
		}
	}
	return out
}

func toTree(v any) (map[string]any, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	m := map[string]any{}
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	stripNulls(m)
	return m, nil
}

// stripNulls drops null members (Unsupported fields marshal as null), so that
// only what the user set takes part in a merge.
func stripNulls(m map[string]any) {
	for k, e := range m {
		switch x := e.(type) {
		case nil:
			delete(m, k)
		case map[string]any:
			stripNulls(x)
		case []any:
			for _, item := range x {
				if im, ok := item.(map[string]any); ok {
					stripNulls(im)
				}
			}
		}
	}
}

func fromTree(m map[string]any, v any) error {
	raw, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, v)
}

// deepMerge merges over into base: mappings recursively, everything else replaced.
func deepMerge(base, over map[string]any) map[string]any {
	for k, ov := range over {
		if ov == nil {
			continue
		}
		bm, bok := base[k].(map[string]any)
		om, ook := ov.(map[string]any)
		if bok && ook {
			base[k] = deepMerge(bm, om)
			continue
		}
		base[k] = ov
	}
	return base
}
