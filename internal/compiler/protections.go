package compiler

import (
	"fmt"
	"slices"
	"strings"

	"github.com/drover-dev/drover/internal/alerts/alertspec"
	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/desiredstate"
	"github.com/drover-dev/drover/internal/gitcheck/commitspec"
)

// protections lists the channel's protection attachments, and the gates
// its own config fields add (drover's deployWindows and alertGate, kept
// with disableAllProtections: they are no protection; see ChannelGate).
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
				g, err := desiredstate.NewGate(commitspec.Kind, commitRanges(prot.Builtin.CommitDenylist, defs, params))
				if err != nil {
					c.fail(Error{Object: c.serviceObject(), Msg: err.Error()})
					continue
				}
				cp.Gate = g
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
	for _, hook := range channelGates {
		cp, err := hook(&c.rc.ReleaseChannel)
		switch {
		case err != nil:
			c.fail(Error{Object: c.serviceObject(), Msg: err.Error()})
		case cp != nil:
			if cp.Protection == "" {
				cp.Protection = cp.Attachment
			}
			if cp.Source == "" {
				cp.Source = desiredstate.SourceDrover
			}
			if len(cp.Lifecycle) == 0 {
				// A gate holds a deployment from starting (BLOCK).
				cp.Lifecycle = []config.ProtectionLifecycle{{Deployment: &config.DeploymentCheck{FailureBehavior: "BLOCK"}}}
			}
			out.Protections = append(out.Protections, *cp)
		}
	}
}

// ChannelGate is the compile hook of a gate kind that a release channel's
// own config adds: the channel's gate (a CompiledProtection whose Gate or
// Builtin says what decides it), or nil when the channel has none. The
// compiler fills in what the hook leaves empty: the protection's name (the
// attachment's), its source (drover) and its lifecycle (when a deployment
// starts, BLOCK). Hooks run with disableAllProtections too: a gate of a
// channel's own is no protection.
type ChannelGate func(rc *config.ReleaseChannel) (*CompiledProtection, error)

// channelGates are the compile hooks of release channels' gates, one line
// per built-in kind, then those registered, in the order their checks are
// listed.
var channelGates = []ChannelGate{
	deployWindowsGate,
	alertGate,
}

// RegisterChannelGate adds the compile hook of a gate kind that lives
// outside the compiler (its config field, its evaluator and this hook are
// the kind's own). Call it from an init function: compilation reads the
// hooks without a lock.
func RegisterChannelGate(hook ChannelGate) {
	channelGates = append(channelGates, hook)
}

// deployWindowsGate compiles a release channel's deployWindows into an
// allowedTimes builtin.
func deployWindowsGate(rc *config.ReleaseChannel) (*CompiledProtection, error) {
	if len(rc.DeployWindows) == 0 {
		return nil, nil
	}
	return &CompiledProtection{Attachment: DeployWindowsCheck,
		Builtin: builtinCheck(&config.BuiltinProtection{AllowedTimes: &config.AllowedTimes{Windows: rc.DeployWindows}}, nil, nil)}, nil
}

// alertGate compiles a release channel's alertGate: no alert matching it
// may fire when a deployment starts (internal/alerts evaluates it).
func alertGate(rc *config.ReleaseChannel) (*CompiledProtection, error) {
	g := rc.AlertGate
	if g == nil {
		return nil, nil
	}
	gate, err := desiredstate.NewGate(alertspec.Kind, alertspec.Spec{URL: g.Alertmanager, Matchers: g.Matchers})
	if err != nil {
		return nil, err
	}
	return &CompiledProtection{Attachment: AlertGateCheck, Gate: gate, PollInterval: g.PollInterval}, nil
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
func commitRanges(d *config.CommitDenylist, defs []config.ParameterDefinition, params map[string]any) *commitspec.Ranges {
	out := &commitspec.Ranges{Repository: d.Repository, Pushed: pushedCommits(d, defs, params)}
	for _, cd := range d.Commits {
		if cd.Range != nil {
			out.Ranges = append(out.Ranges, commitspec.Range{Start: strings.TrimSpace(cd.Range.StartCommit), End: strings.TrimSpace(cd.Range.EndCommit)})
		}
	}
	return out
}

// pushedCommits are the values of the service's commit parameters for the
// denylist's repository (every one when it names none).
func pushedCommits(d *config.CommitDenylist, defs []config.ParameterDefinition, params map[string]any) []commitspec.PushedCommit {
	var out []commitspec.PushedCommit
	for _, def := range defs {
		if def.Commit == nil || d.Repository != "" && !strings.EqualFold(strings.TrimSuffix(def.Commit.Repository, ".git"), strings.TrimSuffix(d.Repository, ".git")) {
			continue
		}
		if v, _ := params[def.Name].(string); v != "" {
			out = append(out, commitspec.PushedCommit{Param: def.Name, Commit: v, Repository: def.Commit.Repository})
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
