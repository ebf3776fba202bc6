package config

import (
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"text/template"

	"github.com/drover-dev/drover/internal/labelquery"
)

var (
	nameRE         = regexp.MustCompile(`^[a-z]([a-z0-9-]*[a-z0-9])?$`)
	optionalNameRE = regexp.MustCompile(`^[a-z]?([a-z0-9-]*[a-z0-9])?$`)
	labelRE        = regexp.MustCompile(`^[a-zA-Z0-9.\-_@+]*$`)
	envKeyRE       = regexp.MustCompile(`^[a-zA-Z_]+[a-zA-Z0-9_]*$`)
)

// ValidDockerTag reports whether tag is a valid image tag (a word
// character, then at most 127 word characters, '.' or '-') or a sha256
// digest (64 lower-case hex digits). Every push checks the tag of every
// channel: a loop, where a regular expression with a counted repetition
// took several microseconds.
func ValidDockerTag(tag string) bool {
	if hex, ok := strings.CutPrefix(tag, "sha256:"); ok && len(hex) == 64 {
		return strings.Trim(hex, "0123456789abcdef") == ""
	}
	if tag == "" || len(tag) > 128 {
		return false
	}
	for i := range len(tag) {
		switch c := tag[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '_':
		case (c == '.' || c == '-') && i > 0:
		default:
			return false
		}
	}
	return true
}

// ValidName reports whether name is a valid name of an application,
// service, runtime or release channel (lower-case letters, digits and '-',
// starting with a letter, at most 63 characters).
func ValidName(name string) bool { return len(name) <= 63 && nameRE.MatchString(name) }

// validator collects every problem of a set in one pass.
type validator struct {
	set  *Set
	errs ErrorList
}

func (v *validator) add(src *Source, path, format string, args ...any) {
	v.errs = append(v.errs, src.Errorf(path, format, args...))
}

// slackChannelRE is a Slack channel by name (#name or name) or by ID.
var slackChannelRE = regexp.MustCompile(`^(#?[a-z0-9][a-z0-9._-]{0,79}|[CG][A-Z0-9]{6,20})$`)

// Validate checks each file and the references between them: names, required
// fields, oneofs, label queries, template syntax, and that every application,
// runtime, release channel, protection and delivery extension referenced exists.
// Checks that need compilation (release channel groups, templates with their
// values) are done by the compiler package.
func (s *Set) Validate() ErrorList {
	v := &validator{set: s}
	for _, src := range s.Sources {
		f := src.File
		switch {
		case f.Application != nil:
			v.application(src, f.Application)
		case f.Service != nil:
			v.service(src, f.Service)
		case f.Runtime != nil:
			v.runtime(src, f.Runtime)
		case f.Protection != nil:
			v.protection(src, f.Protection)
		case f.DeliveryExtension != nil:
			v.deliveryExtension(src, "deliveryExtension", f.DeliveryExtension, true)
		case f.ReleaseChannel != nil:
			v.standaloneReleaseChannel(src, f.ReleaseChannel)
		case f.ContainerRegistry != nil:
			v.containerRegistry(src, f.ContainerRegistry)
		case f.Webhook != nil:
			v.webhook(src, f.Webhook)
		}
	}
	v.serviceCycles()
	return v.errs
}

// registryConfigured reports whether info names a containerRegistry config.
func (v *validator) registryConfigured(info *ImageRegistryInfo) bool {
	name := info.ContainerRegistry
	if name == "" {
		name = info.ContainerRegistryID
	}
	_, ok := v.set.Registries[name]
	return ok
}

// registryHostRE is a registry host: DNS names or an IPv4 address, with an
// optional port.
var registryHostRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*(:[0-9]{1,5})?$`)

func (v *validator) containerRegistry(src *Source, r *ContainerRegistry) {
	v.name(src, "containerRegistry.name", r.Name, "name")
	switch host := strings.ToLower(r.Host); {
	case r.Host == "":
		v.add(src, "containerRegistry.host", "host is required (like ghcr.io or registry.example.com:5000)")
	case !registryHostRE.MatchString(host):
		v.add(src, "containerRegistry.host", "%q is not a registry host (like ghcr.io or registry.example.com:5000): no scheme, path or user", r.Host)
	}
	if p := r.RepositoryPrefix; p != "" && (strings.HasPrefix(p, "/") || strings.HasSuffix(p, "/") || strings.Contains(p, "//") || strings.ContainsAny(p, ": @")) {
		v.add(src, "containerRegistry.repositoryPrefix", "%q is not a repository path (like acme or acme/team)", p)
	}
}

// notifyTypes are the notification types a webhook's events may name
// (state.NotifyTypes, which the store checks again).
var notifyTypes = []string{"service.deployed", "service.upgraded", "service.rolledback", "approval.requested",
	"channel.blocked", "channel.failed", "freeze.started"}

// notifyStatuses are the statuses a webhook's statuses may name.
var notifyStatuses = []string{"PENDING", "CONVERGING", "CONVERGED", "FAILED", "WAITING_PRECONDITIONS", "WAITING_MANUAL_APPROVAL",
	"PAUSED", "REPLACED", "ROLLING_BACK", "ROLLED_BACK", "FAILED_ROLLBACK", "BLOCKED"}

func (v *validator) webhook(src *Source, w *Webhook) {
	v.name(src, "webhook.name", w.Name, "name")
	if u, err := url.Parse(w.URL); w.URL == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		v.add(src, "webhook.url", "give an http:// or https:// URL with a host")
	} else if u.User != nil {
		v.add(src, "webhook.url", "credentials in the URL are refused (the secret signs the body)")
	}
	switch {
	case w.Secret.Key == "":
		v.add(src, "webhook.secret.key", "the signing secret is required: secret: {key: KEY, version: KEY-N} (drover secrets set KEY)")
	case w.Secret.Version == "":
		v.add(src, "webhook.secret.version", "name the version of secret %s, like %s-0 (drover secrets list shows them)", w.Secret.Key, w.Secret.Key)
	}
	for i, e := range w.Events {
		if !slices.Contains(notifyTypes, e) {
			v.add(src, fmt.Sprintf("webhook.events[%d]", i), "%q is not a notification type (%s)", e, strings.Join(notifyTypes, ", "))
		}
	}
	for i, st := range w.Statuses {
		if !slices.Contains(notifyStatuses, st) {
			v.add(src, fmt.Sprintf("webhook.statuses[%d]", i), "%q is not a status (%s)", st, strings.Join(notifyStatuses, ", "))
		}
	}
	for _, l := range []struct {
		field string
		vals  []string
	}{{"applications", w.Applications}, {"services", w.Services}, {"releaseChannels", w.ReleaseChannels}} {
		for i, n := range l.vals {
			v.name(src, fmt.Sprintf("webhook.%s[%d]", l.field, i), n, "name")
		}
	}
}

func (v *validator) name(src *Source, path, name, what string) {
	switch {
	case name == "":
		v.add(src, path, "%s is required", what)
	case len(name) > 63:
		v.add(src, path, "%s %q is longer than 63 characters", what, name)
	case !nameRE.MatchString(name):
		v.add(src, path, "%s %q is not valid: use lower-case letters, digits and '-', starting with a letter", what, name)
	}
}

func (v *validator) optionalName(src *Source, path, name string) {
	if name != "" && (len(name) > 63 || !optionalNameRE.MatchString(name)) {
		v.add(src, path, "name %q is not valid: use lower-case letters, digits and '-'", name)
	}
}

func (v *validator) labels(src *Source, path string, labels []Label) {
	seen := map[string]bool{}
	for i, l := range labels {
		p := fmt.Sprintf("%s[%d]", path, i)
		switch {
		case l.Label == "":
			v.add(src, p+".label", "label is required")
		case strings.HasPrefix(l.Label, "@"):
			v.add(src, p+".label", "labels starting with @ are set by drover (@type, @name, @id, @group, @application)")
		case !labelRE.MatchString(l.Label):
			v.add(src, p+".label", "label %q may only hold letters, digits and . - _ @ +", l.Label)
		case seen[l.Label]:
			v.add(src, p+".label", "duplicate label %q", l.Label)
		}
		seen[l.Label] = true
		if !labelRE.MatchString(l.Value) {
			v.add(src, p+".value", "label value %q may only hold letters, digits and . - _ @ +", l.Value)
		}
	}
}

func (v *validator) constants(src *Source, path string, cs []Constant) {
	seen := map[string]bool{}
	for i, c := range cs {
		p := fmt.Sprintf("%s[%d]", path, i)
		if c.Name == "" {
			v.add(src, p+".name", "name is required")
		} else if !envKeyRE.MatchString(c.Name) {
			v.add(src, p+".name", "constant name %q must be a template identifier (letters, digits, _)", c.Name)
		} else if seen[c.Name] {
			v.add(src, p+".name", "duplicate constant %q", c.Name)
		}
		seen[c.Name] = true
		if c.String == nil {
			v.add(src, p, "string is required (constants are strings: string: {value: ...})")
		}
	}
}

func (v *validator) env(src *Source, path string, env map[string]EnvValue) {
	for k, e := range env {
		p := path + "." + k
		if !envKeyRE.MatchString(k) {
			v.add(src, p, "environment variable name %q is not valid", k)
		}
		n := 0
		if e.Value != "" {
			n++
		}
		if e.RawSecret != "" {
			n++
		}
		if e.Secret != nil {
			n++
			if e.Secret.Key == "" {
				v.add(src, p+".secret.key", "key is required")
			}
		}
		if e.KubernetesSecret != nil {
			n++
			if e.KubernetesSecret.SecretName == "" || e.KubernetesSecret.Key == "" {
				v.add(src, p+".kubernetesSecret", "secretName and key are required")
			}
		}
		if n > 1 {
			v.add(src, p, "set only one of value, rawSecret, secret, kubernetesSecret")
		}
	}
}

// template checks that s parses as a Go template; values are checked at compile time.
func (v *validator) template(src *Source, path, s string) {
	if !strings.Contains(s, "{{") {
		return
	}
	if _, err := template.New(path).Option("missingkey=error").Parse(s); err != nil {
		v.add(src, path, "invalid template: %s", trimTemplateErr(err))
	}
}

func trimTemplateErr(err error) string {
	msg := err.Error()
	// "template: NAME:LINE: message" -> "message"
	if i := strings.LastIndex(msg, ": "); strings.HasPrefix(msg, "template: ") && i > 0 {
		return msg[i+2:]
	}
	return msg
}

func (v *validator) labelQuery(src *Source, path, q string) {
	if _, err := labelquery.Parse(q); err != nil {
		v.add(src, path, "%v", err)
	}
}

func (v *validator) application(src *Source, app *Application) {
	v.name(src, "application.name", app.Name, "name")
	if n := app.Notifications; n != nil && n.Slack != nil {
		if n.Slack.Channel == "" && n.Slack.ErrorChannel == "" {
			v.add(src, "application.notifications.slack", "give channel, errorChannel or both")
		}
		for _, f := range []struct{ field, ch string }{{"channel", n.Slack.Channel}, {"errorChannel", n.Slack.ErrorChannel}} {
			if f.ch != "" && !slackChannelRE.MatchString(f.ch) {
				v.add(src, "application.notifications.slack."+f.field, "%q is not a Slack channel: give #name (lowercase letters, digits, - _ .) or a channel ID (C0123ABCD)", f.ch)
			}
		}
	}
	names := map[string]int{}
	for i, rc := range app.ReleaseChannels {
		p := fmt.Sprintf("application.releaseChannels[%d]", i)
		if rc.Application != "" {
			v.add(src, p+".application", "application is only for standalone releaseChannel files")
		}
		v.releaseChannel(src, p, &rc, false)
		for j, c := range rc.Runtimes {
			v.runtimeAllowed(src, fmt.Sprintf("%s.runtimes[%d].runtime", p, j), app.Name, c.Runtime)
		}
		if prev, ok := names[rc.Name]; ok && rc.Name != "" {
			v.add(src, p+".name", "duplicate release channel %q (also releaseChannels[%d])", rc.Name, prev)
		}
		names[rc.Name] = i
	}
	extraNames := map[string]*Source{}
	for _, extra := range v.set.ReleaseChannels[app.Name] {
		rc := extra.File.ReleaseChannel
		if _, ok := names[rc.Name]; ok {
			v.add(extra, "releaseChannel.name", "duplicate release channel %q (also in %s)", rc.Name, src.Path)
		} else if prev, ok := extraNames[rc.Name]; ok && rc.Name != "" {
			v.add(extra, "releaseChannel.name", "duplicate release channel %q (also in %s)", rc.Name, prev.Path)
		} else {
			extraNames[rc.Name] = extra
		}
	}
	groups := map[string]bool{}
	for i, g := range app.ReleaseChannelGroups {
		p := fmt.Sprintf("application.releaseChannelGroups[%d]", i)
		v.name(src, p+".name", g.Name, "name")
		if groups[g.Name] {
			v.add(src, p+".name", "duplicate release channel group %q", g.Name)
		}
		groups[g.Name] = true
		if g.RuntimeSelector != "" {
			v.labelQuery(src, p+".runtimeSelector", g.RuntimeSelector)
		}
		if g.Template != nil {
			// Names in a template are usually templates themselves; they are
			// checked after expansion by the compiler.
			v.releaseChannel(src, p+".template", g.Template, true)
		}
	}
	v.preconditionRefs(src, app, names, groups)
}

// preconditionRefs checks releaseChannelStable references by name, in the
// application and in its standalone releaseChannel files, and finds cycles.
func (v *validator) preconditionRefs(src *Source, app *Application, names map[string]int, _ map[string]bool) {
	extras := v.set.ReleaseChannels[app.Name]
	known := map[string]bool{}
	for n := range names {
		known[n] = true
	}
	for _, extra := range extras {
		known[extra.File.ReleaseChannel.Name] = true
	}
	deps := map[string][]string{}
	check := func(owner *Source, path string, rc *ReleaseChannel) {
		for j, pc := range rc.Preconditions {
			s := pc.ReleaseChannelStable
			if s == nil || s.ReleaseChannel == "" {
				continue
			}
			p := fmt.Sprintf("%s.preconditions[%d].releaseChannelStable.releaseChannel", path, j)
			switch {
			case s.ReleaseChannel == rc.Name:
				v.add(owner, p, "release channel %q cannot wait for itself", rc.Name)
			case !known[s.ReleaseChannel] && len(app.ReleaseChannelGroups) == 0:
				v.add(owner, p, "unknown release channel %q%s", s.ReleaseChannel, hint(s.ReleaseChannel, keys(known)))
			}
			deps[rc.Name] = append(deps[rc.Name], s.ReleaseChannel)
		}
	}
	for i := range app.ReleaseChannels {
		check(src, fmt.Sprintf("application.releaseChannels[%d]", i), &app.ReleaseChannels[i])
	}
	for _, extra := range extras {
		check(extra, "releaseChannel", extra.File.ReleaseChannel)
	}
	if cycle := findCycle(deps); cycle != nil {
		v.errs = append(v.errs, src.Errorf("application.releaseChannels", "release channels wait for each other in a cycle: %s", strings.Join(cycle, " -> ")))
	}
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func hint(s string, candidates []string) string {
	sortStrings(candidates) // equally close candidates: pick the same one every run
	if sug := suggest(s, candidates); sug != "" {
		return fmt.Sprintf(" (did you mean %q?)", sug)
	}
	return ""
}

// findCycle returns one dependency cycle, or nil.
func findCycle(deps map[string][]string) []string {
	const (
		unvisited = iota
		active
		done
	)
	state := map[string]int{}
	var stack []string
	var visit func(n string) []string
	visit = func(n string) []string {
		state[n] = active
		stack = append(stack, n)
		for _, d := range deps[n] {
			switch state[d] {
			case active:
				for i, s := range stack {
					if s == d {
						return append(append([]string(nil), stack[i:]...), d)
					}
				}
			case unvisited:
				if c := visit(d); c != nil {
					return c
				}
			}
		}
		stack = stack[:len(stack)-1]
		state[n] = done
		return nil
	}
	for _, n := range sortedKeys(deps) {
		if state[n] == unvisited {
			if c := visit(n); c != nil {
				return c
			}
		}
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := keys(m)
	sortStrings(out)
	return out
}

func (v *validator) standaloneReleaseChannel(src *Source, rc *ReleaseChannel) {
	if rc.Application == "" {
		v.add(src, "releaseChannel.application", "application is required in a standalone releaseChannel file (drover extension: the application it belongs to)")
	} else if v.set.Applications[rc.Application] == nil {
		v.add(src, "releaseChannel.application", "unknown application %q%s", rc.Application, hint(rc.Application, keys(v.set.Applications)))
	}
	v.releaseChannel(src, "releaseChannel", rc, false)
}

func (v *validator) releaseChannel(src *Source, p string, rc *ReleaseChannel, inTemplate bool) {
	if !inTemplate {
		v.name(src, p+".name", rc.Name, "name")
	} else {
		v.template(src, p+".name", rc.Name)
	}
	if rc.Group != "" && !inTemplate {
		v.name(src, p+".group", rc.Group, "group")
	}
	if len(rc.Runtimes) == 0 && !inTemplate {
		v.add(src, p+".runtimes", "at least one runtime is required")
	}
	conns := map[string]bool{}
	for i, c := range rc.Runtimes {
		cp := fmt.Sprintf("%s.runtimes[%d]", p, i)
		switch {
		case c.Runtime == "":
			v.add(src, cp+".runtime", "runtime is required")
		case inTemplate && strings.Contains(c.Runtime, "{{"):
			v.template(src, cp+".runtime", c.Runtime)
		case v.set.Runtimes[c.Runtime] == nil:
			v.add(src, cp+".runtime", "unknown runtime %q%s", c.Runtime, hint(c.Runtime, keys(v.set.Runtimes)))
		}
		v.optionalName(src, cp+".name", c.Name)
		if conns[c.ConnectionName()] {
			v.add(src, cp, "duplicate runtime connection %q: give each connection a distinct name", c.ConnectionName())
		}
		conns[c.ConnectionName()] = true
		if co := c.ContainerOrchestration; co != nil && co.K8s != nil && co.K8s.Namespace != "" && !nameRE.MatchString(co.K8s.Namespace) {
			v.add(src, cp+".containerOrchestration.k8s.namespace", "namespace %q is not a valid Kubernetes namespace name", co.K8s.Namespace)
		}
	}
	for i, pc := range rc.Preconditions {
		pp := fmt.Sprintf("%s.preconditions[%d]", p, i)
		n := 0
		if s := pc.ReleaseChannelStable; s != nil {
			n++
			switch {
			case s.ReleaseChannel != "" && s.Selector != "":
				v.add(src, pp+".releaseChannelStable", "set only one of releaseChannel and selector")
			case s.ReleaseChannel == "" && s.Selector == "":
				v.add(src, pp+".releaseChannelStable", "releaseChannel or selector is required")
			case s.Selector != "":
				v.labelQuery(src, pp+".releaseChannelStable.selector", s.Selector)
			}
		}
		if a := pc.ManualApproval; a != nil {
			n++
			if a.MinApprovers < 0 {
				v.add(src, pp+".manualApproval.minApprovers", "must not be negative")
			}
		}
		if a := pc.SharedManualApproval; a != nil {
			n++
			switch {
			case a.Name == "":
				v.add(src, pp+".sharedManualApproval.name", "name is required: the services that name it share one approval")
			case !ValidName(a.Name):
				v.add(src, pp+".sharedManualApproval.name", "name %q is not valid: use lower-case letters, digits and '-', starting with a letter", a.Name)
			}
			if a.MinApprovers < 0 {
				v.add(src, pp+".sharedManualApproval.minApprovers", "must not be negative")
			}
		}
		if n != 1 {
			v.add(src, pp, "set exactly one of releaseChannelStable, manualApproval, sharedManualApproval")
		}
	}
	v.attachments(src, p+".protections", rc.Protections)
	for i, w := range rc.DeployWindows {
		if _, err := ParseTimeWindow(w); err != nil {
			v.add(src, fmt.Sprintf("%s.deployWindows[%d]", p, i), "%v", err)
		}
	}
	v.alertGate(src, p+".alertGate", rc.AlertGate)
	v.channelGates(src, p, rc)
	v.attachments(src, p+".serviceInstanceProtections", rc.ServiceInstanceProtections)
	v.attachments(src, p+".convergenceProtections", rc.ConvergenceProtections)
	v.constants(src, p+".constants", rc.Constants)
	v.labels(src, p+".labels", rc.Labels)
	if rc.Policy != nil {
		v.env(src, p+".policy.defaultEnv", rc.Policy.DefaultEnv)
	}
}

func (v *validator) attachments(src *Source, path string, atts []ProtectionAttachment) {
	names := map[string]bool{}
	for i, a := range atts {
		p := fmt.Sprintf("%s[%d]", path, i)
		if a.Ref == nil || a.Ref.Name == "" {
			v.add(src, p+".ref.name", "ref.name is required (the protection to attach)")
		} else if v.set.Protections[a.Ref.Name] == nil {
			v.add(src, p+".ref.name", "unknown protection %q%s", a.Ref.Name, hint(a.Ref.Name, keys(v.set.Protections)))
		}
		name := a.Name
		if name == "" && a.Ref != nil {
			name = a.Ref.Name
		}
		if names[name] {
			v.add(src, p+".name", "duplicate protection attachment %q: set name to tell them apart", name)
		}
		names[name] = true
		v.optionalName(src, p+".name", a.Name)
		if len(a.Lifecycle) == 0 {
			v.add(src, p+".lifecycle", "at least one lifecycle is required (preApproval, postApproval, deployment, postDeployment)")
		}
		for j, l := range a.Lifecycle {
			lp := fmt.Sprintf("%s.lifecycle[%d]", p, j)
			n := 0
			for _, set := range []bool{l.PreApproval != nil, l.PostApproval != nil, l.Deployment != nil, l.PostDeployment != nil} {
				if set {
					n++
				}
			}
			if n != 1 {
				v.add(src, lp, "set exactly one of preApproval, postApproval, deployment, postDeployment")
			}
			if pd := l.PostDeployment; pd != nil && pd.CheckDuration.IsZero() {
				v.add(src, lp+".postDeployment.checkDuration", "checkDuration is required and must be positive")
			}
		}
		if a.Ref != nil {
			v.parameterValues(src, p+".ref.parameters", a.Ref.Parameters)
		}
	}
}

func (v *validator) service(src *Source, svc *Service) {
	v.name(src, "service.name", svc.Name, "name")
	switch {
	case svc.Application == "":
		v.add(src, "service.application", "application is required")
	case v.set.Applications[svc.Application] == nil:
		v.add(src, "service.application", "unknown application %q%s", svc.Application, hint(svc.Application, keys(v.set.Applications)))
	}
	v.backend(src, "service", &svc.ServiceBackend, len(svc.PerReleaseChannel) == 0)
	v.parameters(src, "service.parameters", svc.Parameters)
	v.constants(src, "service.constants", svc.Constants)
	v.env(src, "service.env", svc.Env)
	v.template(src, "service.bundleName", svc.BundleName)
	app := v.set.ApplicationConfig(svc.Application)
	rcNames := map[string]bool{}
	conns := map[string]bool{}
	if app != nil {
		for _, rc := range app.ReleaseChannels {
			rcNames[rc.Name] = true
			for _, c := range rc.Runtimes {
				conns[c.ConnectionName()] = true
			}
		}
	}
	checkConn := func(path, name string) {
		if name != "" && app != nil && len(app.ReleaseChannelGroups) == 0 && !conns[name] {
			v.add(src, path, "no release channel of %q has a runtime connection named %q%s", svc.Application, name, hint(name, keys(conns)))
		}
	}
	checkConn("service.runtimeConnection", svc.RuntimeConnection)
	known := map[string]bool{}
	for _, n := range v.channelNames(svc.Application) {
		known[n] = true
	}
	groups := known["*"]
	delete(known, "*")
	v.serviceDependencies(src, "service.dependsOn", svc, svc.DependsOn, known, groups)
	if m := svc.Maestro; m != nil {
		switch m.Strategy {
		case "", MaestroReleaseTrain, MaestroDisabled, MaestroImmediate:
		default:
			v.add(src, "service.maestro.strategy", "unknown strategy %q: use %s, %s or %s", m.Strategy, MaestroReleaseTrain, MaestroImmediate, MaestroDisabled)
		}
	}
	seen := map[string]int{}
	for i, prc := range svc.PerReleaseChannel {
		p := fmt.Sprintf("service.perReleaseChannel[%d]", i)
		switch {
		case prc.ReleaseChannel == "":
			v.add(src, p+".releaseChannel", "releaseChannel is required")
		case app != nil && len(app.ReleaseChannelGroups) == 0 && !rcNames[prc.ReleaseChannel]:
			v.add(src, p+".releaseChannel", "application %q has no release channel %q%s", svc.Application, prc.ReleaseChannel, hint(prc.ReleaseChannel, keys(rcNames)))
		}
		if prev, ok := seen[prc.ReleaseChannel]; ok {
			v.add(src, p+".releaseChannel", "duplicate entry for release channel %q (also perReleaseChannel[%d])", prc.ReleaseChannel, prev)
		}
		seen[prc.ReleaseChannel] = i
		v.backend(src, p, &prc.ServiceBackend, false)
		v.constants(src, p+".constants", prc.Constants)
		v.env(src, p+".env", prc.Env)
		v.attachments(src, p+".protections", prc.Protections)
		v.attachments(src, p+".convergenceProtections", prc.ConvergenceProtections)
		v.extensions(src, p+".convergenceExtensions", prc.ConvergenceExtensions, svc)
		checkConn(p+".runtimeConnection", prc.RuntimeConnection)
		v.serviceDependencies(src, p+".dependsOn", svc, prc.DependsOn, known, groups)
	}
	v.attachments(src, "service.convergenceProtections", svc.ConvergenceProtections)
	v.extensions(src, "service.convergenceExtensions", svc.ConvergenceExtensions, svc)
	instances := map[string]bool{}
	for i, inst := range svc.ConvergenceExtensionInstances {
		p := fmt.Sprintf("service.convergenceExtensionInstances[%d]", i)
		v.name(src, p+".name", inst.Name, "name")
		if instances[inst.Name] {
			v.add(src, p+".name", "duplicate extension instance %q", inst.Name)
		}
		instances[inst.Name] = true
		v.extensionDefinition(src, p, inst.Inlined, inst.Ref, "")
	}
}

// backend checks the backend oneof. A backend may be set only per release
// channel, so at the top level "none" is allowed when per-channel entries exist.
func (v *validator) backend(src *Source, path string, b *ServiceBackend, required bool) {
	var set []string
	if b.KubernetesConfig != nil {
		set = append(set, "kubernetesConfig")
		// A per-channel entry is a partial config merged over the top level.
		v.kubernetesConfig(src, path+".kubernetesConfig", b.KubernetesConfig, !required && path != "service")
	}
	if h := b.Helm; h != nil {
		set = append(set, "helm")
		if h.Namespace != "" {
			v.add(src, path+".helm.namespace", "namespace is set by drover (the release channel's namespace); do not set it")
		}
		if h.Chart == nil && h.Local == nil && path == "service" {
			v.add(src, path+".helm", "a chart is required: local.path")
		}
		for i, vo := range h.ValuesOverrides {
			v.template(src, fmt.Sprintf("%s.helm.valuesOverrides[%d].inlined", path, i), vo.Inlined)
		}
	}
	if b.CustomRuntime != nil {
		set = append(set, "customRuntime")
		v.parameterValues(src, path+".customRuntime.parameterValues", b.CustomRuntime.ParameterValues)
		for i, pv := range b.CustomRuntime.ParameterValues {
			if pv.String != nil {
				v.template(src, fmt.Sprintf("%s.customRuntime.parameterValues[%d].string", path, i), *pv.String)
			}
		}
	}
	if e := b.AwsEcs; e != nil {
		set = append(set, "awsEcs")
		p := path + ".awsEcs"
		for _, spec := range []struct {
			field string
			s     *EcsSpec
		}{{"taskDefinition", e.TaskDefinition}, {"serviceDefinition", e.ServiceDefinition}} {
			switch {
			case spec.s == nil:
				continue
			case spec.s.Tree != nil:
				v.template(src, p+"."+spec.field+".local.subPath", spec.s.Tree.SubPath)
			case spec.s.Inlined != "":
				v.template(src, p+"."+spec.field+".inlined", spec.s.Inlined)
			case spec.s.Local == nil:
				v.add(src, p+"."+spec.field, "set inlined or local")
			}
		}
		// A per-channel entry is merged over the top level's, which may
		// hold the task definition.
		if e.TaskDefinition == nil && path == "service" && required {
			v.add(src, p+".taskDefinition", "a task definition is required (inlined or local)")
		}
		v.template(src, p+".ecsServiceNameOverride", e.EcsServiceNameOverride)
	}
	// Backends that registered kinds bring validate their own sections.
	for _, k := range RuntimeKinds() {
		if k.ValidateBackend == nil {
			continue
		}
		if name := k.ValidateBackend(b, path, func(field, msg string) { v.add(src, field, "%s", msg) }); name != "" {
			set = append(set, name)
		}
	}
	switch {
	case len(set) > 1:
		v.add(src, path+"."+set[1], "set only one backend (found %s)", strings.Join(set, " and "))
	case len(set) == 0 && required:
		v.add(src, path, "a backend is required: set kubernetesConfig, helm, customRuntime or awsEcs")
	}
}

func (v *validator) kubernetesConfig(src *Source, path string, kc *KubernetesConfig, partial bool) {
	if (kc.Type == "" && !partial) || kc.Type == "UNKNOWN" {
		v.add(src, path+".type", "type is required (KUBERNETES or KUSTOMIZE)")
	}
	if kc.Inlined == "" && kc.Local == nil && kc.Tree == nil && !partial {
		v.add(src, path, "set inlined or local")
	}
	if kc.Tree != nil {
		v.template(src, path+".local.subPath", kc.Tree.SubPath)
	}
	for i, p := range kc.Patches {
		pp := fmt.Sprintf("%s.patches[%d]", path, i)
		r := p.Replace
		if r == nil {
			v.add(src, pp, "replace is required")
			continue
		}
		if !strings.HasPrefix(r.Path, "/") {
			v.add(src, pp+".replace.path", "path must be a JSON pointer starting with / (e.g. /spec/replicas)")
		}
		switch {
		case r.String != nil && r.IntAsString != nil:
			v.add(src, pp+".replace", "set only one of string and intAsString")
		case r.String != nil:
			v.template(src, pp+".replace.string", *r.String)
		case r.IntAsString != nil:
			v.template(src, pp+".replace.intAsString", *r.IntAsString)
		default:
			v.add(src, pp+".replace", "string or intAsString is required")
		}
	}
}

// parameters checks definitions and returns them by name.
func (v *validator) parameters(src *Source, path string, defs []ParameterDefinition) map[string]*ParameterDefinition {
	out := map[string]*ParameterDefinition{}
	for i := range defs {
		d := &defs[i]
		p := fmt.Sprintf("%s[%d]", path, i)
		if d.Name == "" {
			v.add(src, p+".name", "name is required")
		} else if !envKeyRE.MatchString(d.Name) {
			v.add(src, p+".name", "parameter name %q must be a template identifier (letters, digits, _)", d.Name)
		} else if out[d.Name] != nil {
			v.add(src, p+".name", "duplicate parameter %q", d.Name)
		}
		out[d.Name] = d
		types := d.types()
		if len(types) != 1 {
			v.add(src, p, "set exactly one type: string, int, dockerImage, secret, commit or blob")
			continue
		}
		switch {
		case d.DockerImage != nil:
			di := d.DockerImage
			if di.ImageRegistryInfo == nil || di.ImageRegistryInfo.ImageRepository == "" {
				v.add(src, p+".dockerImage.imageRegistryInfo", "imageRegistryInfo with imageRepository is required")
			} else if _, err := RegistryHost(di.ImageRegistryInfo); err != nil && !v.registryConfigured(di.ImageRegistryInfo) {
				v.add(src, p+".dockerImage.imageRegistryInfo", "%v", err)
			}
			if di.DefaultTag != "" && !ValidDockerTag(di.DefaultTag) {
				v.add(src, p+".dockerImage.defaultTag", "invalid image tag %q", di.DefaultTag)
			}
		case d.Commit != nil:
			if d.Commit.Repository == "" {
				v.add(src, p+".commit.repository", "repository is required")
			}
		}
	}
	return out
}

func (d *ParameterDefinition) types() []string {
	var t []string
	for name, set := range map[string]bool{"string": d.String != nil, "int": d.Int != nil, "dockerImage": d.DockerImage != nil, "secret": d.Secret != nil, "commit": d.Commit != nil, "blob": d.Blob != nil} {
		if set {
			t = append(t, name)
		}
	}
	return t
}

func (v *validator) parameterValues(src *Source, path string, vals []ParameterValue) {
	seen := map[string]bool{}
	for i, pv := range vals {
		p := fmt.Sprintf("%s[%d]", path, i)
		if pv.Name == "" {
			v.add(src, p+".name", "name is required")
		} else if seen[pv.Name] {
			v.add(src, p+".name", "duplicate value for parameter %q", pv.Name)
		}
		seen[pv.Name] = true
		n := 0
		for _, set := range []bool{pv.String != nil, pv.Int != nil, pv.DockerImageTag != nil, pv.Secret != nil, pv.Commit != nil, pv.Blob != nil} {
			if set {
				n++
			}
		}
		if n != 1 {
			v.add(src, p, "set exactly one of string, int, dockerImageTag, secret, commit, blob")
		}
	}
}

func (v *validator) extensions(src *Source, path string, exts []ConvergenceExtension, svc *Service) {
	for i, e := range exts {
		p := fmt.Sprintf("%s[%d]", path, i)
		switch e.Lifecycle {
		case "", "UNKNOWN_TASK_LIFECYCLE", "CONVERGENCE_START":
			v.add(src, p+".lifecycle", "lifecycle is required: PRE_APPROVAL, APPROVAL, POST_APPROVAL, DEPLOYMENT or POST_DEPLOYMENT")
		case LifecyclePreApproval, LifecycleApproval, LifecyclePostApproval, LifecycleDeployment, LifecyclePostDeployment:
			// valid
		}
		if e.Instance != "" {
			if e.Inlined != nil || e.Ref != nil {
				v.add(src, p, "set exactly one of inlined, instance, ref")
			}
			found := false
			for _, inst := range svc.ConvergenceExtensionInstances {
				found = found || inst.Name == e.Instance
			}
			if !found {
				v.add(src, p+".instance", "unknown convergence extension instance %q (define it in convergenceExtensionInstances)", e.Instance)
			}
			continue
		}
		v.extensionDefinition(src, p, e.Inlined, e.Ref, "")
	}
}

func (v *validator) extensionDefinition(src *Source, p string, inlined *DeliveryExtension, ref *DeliveryExtensionRef, _ string) {
	switch {
	case inlined != nil && ref != nil, inlined == nil && ref == nil:
		v.add(src, p, "set exactly one of inlined, instance, ref")
	case inlined != nil:
		v.deliveryExtension(src, p+".inlined", inlined, false)
	case ref.Name == "":
		v.add(src, p+".ref.name", "name is required")
	case v.set.DeliveryExtensions[ref.Name] == nil:
		v.add(src, p+".ref.name", "unknown deliveryExtension %q%s", ref.Name, hint(ref.Name, keys(v.set.DeliveryExtensions)))
	default:
		v.parameterValues(src, p+".ref.parameters", ref.Parameters)
	}
}

func (v *validator) deliveryExtension(src *Source, p string, de *DeliveryExtension, named bool) {
	if named {
		v.name(src, p+".name", de.Name, "name")
	}
	v.task(src, p, de.TaskConfig, de.KubernetesConfig, true)
	v.parameters(src, p+".parameters", de.Parameters)
	v.env(src, p+".env", de.Env)
}

// task checks a taskConfig/kubernetesConfig oneof.
func (v *validator) task(src *Source, p string, tc *TaskConfig, kc *KubernetesConfig, required bool) {
	switch {
	case tc != nil && kc != nil:
		v.add(src, p, "set only one of taskConfig and kubernetesConfig")
	case tc == nil && kc == nil:
		if required {
			v.add(src, p, "taskConfig or kubernetesConfig is required")
		}
	case tc != nil:
		if tc.Program == nil {
			v.add(src, p+".taskConfig.program", "program is required")
			return
		}
		prog := tc.Program
		if len(prog.Cmd) == 0 && len(prog.Entrypoint) == 0 {
			v.add(src, p+".taskConfig.program.cmd", "cmd or entrypoint is required")
		}
		for i, c := range prog.Cmd {
			v.template(src, fmt.Sprintf("%s.taskConfig.program.cmd[%d]", p, i), c)
		}
		for i, c := range prog.Entrypoint {
			v.template(src, fmt.Sprintf("%s.taskConfig.program.entrypoint[%d]", p, i), c)
		}
		v.env(src, p+".taskConfig.program.env", prog.Env)
	default:
		v.kubernetesConfig(src, p+".kubernetesConfig", kc, false)
	}
}

var (
	kubeVersionRE = regexp.MustCompile(`^v?[1-9][0-9]*\.[0-9]+(\.[0-9]+)?$`)
	apiVersionRE  = regexp.MustCompile(`^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?v[0-9]+[a-z0-9]*(/[A-Za-z][A-Za-z0-9]*)?$`)
	awsRegionRE   = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-[0-9]+$`)
)

// runtimeAllowed refuses a release channel of application app on runtime
// name when the runtime's applications list does not include it.
func (v *validator) runtimeAllowed(src *Source, field, app, name string) {
	rs := v.set.Runtimes[name]
	if rs == nil || rs.File.Runtime == nil {
		return
	}
	if err := RuntimeAllows(rs.File.Runtime, app); err != nil {
		v.add(src, field, "%v", err)
	}
}

// RuntimeAllows is nil when application app may deliver to rt (its
// applications list is unset or names app; a nil rt is left to the
// unknown-runtime checks), else why not.
func RuntimeAllows(rt *Runtime, app string) error {
	if rt == nil || len(rt.Applications) == 0 || slices.Contains(rt.Applications, app) {
		return nil
	}
	return fmt.Errorf("runtime %q may be used only by application(s) %s (its applications list), not by %s: ask an admin of every application to add %s there, or choose another runtime",
		rt.Name, strings.Join(rt.Applications, ", "), app, app)
}

func (v *validator) runtime(src *Source, rt *Runtime) {
	v.name(src, "runtime.name", rt.Name, "name")
	v.labels(src, "runtime.labels", rt.Labels)
	seen := map[string]bool{}
	for i, app := range rt.Applications {
		f := fmt.Sprintf("runtime.applications[%d]", i)
		v.name(src, f, app, "name")
		if seen[app] {
			v.add(src, f, "application %q is listed twice", app)
		}
		seen[app] = true
	}
	kinds := configuredKinds(rt)
	if len(kinds) > 1 {
		sorted := slices.Clone(kinds)
		sortStrings(sorted)
		v.add(src, "runtime", "set only one runtime type (found %s)", strings.Join(sorted, ", "))
	}
	for _, k := range RuntimeKinds() {
		if !slices.Contains(kinds, k.Name) {
			continue
		}
		switch {
		case k.validate != nil:
			k.validate(v, src, rt)
		case k.Validate != nil:
			k.Validate(rt, func(field, msg string) { v.add(src, field, "%s", msg) })
		}
	}
	v.runtimeIntervals(src, rt)
}

func (v *validator) proxy(src *Source, p string, pr *ProxyRuntime) {
	if pr == nil {
		return // drover runs the commands on its own host
	}
	// The runtime named must be linked (an agent serves it): whether it
	// is, is known at run time; the release channel waits saying so.
	v.name(src, p+".runtime", pr.Runtime, "proxyRuntime.runtime")
	if pr.Runtime != "" && v.set != nil && v.set.Runtimes[pr.Runtime] == nil {
		v.add(src, p+".runtime", "unknown runtime %q: name a runtime linked with drover runtimes link (whose agent runs the commands)%s", pr.Runtime, hint(pr.Runtime, keys(v.set.Runtimes)))
	}
	if co := pr.ContainerOrchestration; co != nil && co.K8s != nil && co.K8s.Namespace != "" && !nameRE.MatchString(co.K8s.Namespace) {
		v.add(src, p+".containerOrchestration.k8s.namespace", "%q is not a valid Kubernetes namespace name", co.K8s.Namespace)
	}
}

func (v *validator) protection(src *Source, pr *Protection) {
	v.name(src, "protection.name", pr.Name, "name")
	n := 0
	if pr.TaskConfig != nil || pr.KubernetesConfig != nil {
		n++
		v.task(src, "protection", pr.TaskConfig, pr.KubernetesConfig, true)
	}
	if b := pr.Builtin; b != nil {
		n++
		k := 0
		for _, set := range []bool{b.AllowedTimes != nil, b.CommitDenylist != nil, b.AlwaysPassing != nil, b.AlwaysFailing != nil} {
			if set {
				k++
			}
		}
		if k != 1 {
			v.add(src, "protection.builtin", "set exactly one of allowedTimes, commitDenylist, alwaysPassing, alwaysFailing")
		}
		if at := b.AllowedTimes; at != nil {
			if len(at.Windows) == 0 {
				v.add(src, "protection.builtin.allowedTimes.windows", "at least one window is required")
			}
			for i, w := range at.Windows {
				if _, err := ParseTimeWindow(w); err != nil {
					v.add(src, fmt.Sprintf("protection.builtin.allowedTimes.windows[%d]", i), "%v", err)
				}
			}
		}
		if cd := b.CommitDenylist; cd != nil {
			v.commitDenylist(src, cd)
		}
	}
	if n != 1 {
		v.add(src, "protection", "set exactly one of taskConfig, kubernetesConfig, builtin")
	}
	v.parameters(src, "protection.parameters", pr.Parameters)
	v.env(src, "protection.env", pr.Env)
	v.interval(src, "protection.pollInterval", pr.PollInterval)
}
