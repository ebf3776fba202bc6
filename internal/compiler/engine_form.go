package compiler

import (
	"encoding/json"
	"fmt"
	"sort"
	"time"

	ds "github.com/drover-dev/drover/internal/desiredstate"
)

// Engine returns the engine-facing form of the result: per release channel,
// the runtime, objects, environment, dependencies, gates and timing the
// convergence engine works from. It is what a push stores.
func (r *Result) Engine() (*ds.Compiled, error) {
	c := &ds.Compiled{
		Format: ds.Format, Application: r.Application, Service: r.Service,
		Version: r.BundleVersion, BundleName: r.BundleName, DisplayName: r.DisplayName, Graph: r.DesiredState,
	}
	for _, rc := range r.ReleaseChannels {
		ch := ds.Channel{
			Name: rc.Name, Runtime: rc.Runtime.Name, RuntimeKind: rc.Runtime.Kind, Namespace: rc.Runtime.Namespace,
			Backend: rc.Backend, DependsOn: rc.DependsOn, AutoRollback: !rc.AutoRollbackDisabled,
			Group: rc.Group, Labels: rc.Labels,
		}
		for _, d := range rc.ServiceDependsOn {
			ch.Services = append(ch.Services, ds.ServiceDependency{Service: d.Service, ReleaseChannel: d.ReleaseChannel})
		}
		if rc.ProgressDeadline != nil {
			ch.ProgressDeadline = ds.Duration{Duration: rc.ProgressDeadline.Duration}
		}
		var everyAction bool
		ch.Approvals, everyAction, ch.Checks = r.DesiredState.Gates(rc.Name)
		ch.EveryAction = everyAction
		atts, err := attachments(rc.Protections)
		if err != nil {
			return nil, fmt.Errorf("release channel %s: %w", rc.Name, err)
		}
		ds.CompleteChecks(ch.Checks, atts)
		exts, err := extensions(rc.Extensions)
		if err != nil {
			return nil, fmt.Errorf("release channel %s: %w", rc.Name, err)
		}
		ds.CompleteExtensions(ch.Checks, exts)
		ch.Objects = make([]json.RawMessage, 0, len(rc.Objects))
		for _, obj := range rc.Objects {
			raw, err := json.Marshal(obj)
			if err != nil {
				return nil, fmt.Errorf("release channel %s: encode object: %w", rc.Name, err)
			}
			ch.Objects = append(ch.Objects, raw)
			if o, ok := obj.(channelGater); ok && len(rc.Objects) == 1 {
				grace, every := o.channelGates()
				ch.ConvergenceGrace.Duration = grace
				ch.EveryAction = ch.EveryAction || every
			}
		}
		for k, v := range rc.Env {
			ch.AddEnv(k, v.Value, v.RawSecret, v.Secret != nil || v.KubernetesSecret != nil)
		}
		sort.Strings(ch.SecretEnv)
		c.Channels = append(c.Channels, ch)
	}
	return c, nil
}

// attachments reads the channel's protection attachments as a stored
// result is read (desiredstate reads them by field name), so a push and a
// result stored before Format 2 complete their checks alike.
func attachments(ps []CompiledProtection) ([]ds.Attachment, error) {
	if len(ps) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(ps)
	if err != nil {
		return nil, fmt.Errorf("encode protections: %w", err)
	}
	var out []ds.Attachment
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("decode protections: %w", err)
	}
	return out, nil
}

// extensions reads the channel's compiled extensions as the engine form
// reads them (by field name).
func extensions(es []CompiledExtension) ([]ds.Extension, error) {
	if len(es) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(es)
	if err != nil {
		return nil, fmt.Errorf("encode extensions: %w", err)
	}
	var out []ds.Extension
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("decode extensions: %w", err)
	}
	return out, nil
}

// channelGater is an object whose runtime config sets the channel's
// convergence grace and may ask for an approval before every apply (a
// custom runtime's or a runner's requireApprovalBeforeApply): the
// engine form takes both from the channel's only object.
type channelGater interface {
	channelGates() (grace time.Duration, everyAction bool)
}

// channelGates are the custom runtime's or terraform runner's.
func (o *CustomRuntimeObject) channelGates() (time.Duration, bool) {
	switch {
	case o.Custom != nil:
		return o.Custom.ConvergenceGracePeriod.Duration, o.Custom.RequireApprovalBeforeApply
	case o.TerraformRunner != nil:
		return o.TerraformRunner.ConvergenceGracePeriod.Duration, o.TerraformRunner.RequireApprovalBeforeApply
	}
	return 0, false
}
