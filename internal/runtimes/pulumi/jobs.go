package pulumi

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/runtimes"
	"github.com/drover-dev/drover/internal/runtimes/iacrun"
	"github.com/drover-dev/drover/internal/runtimes/kubejob"
)

// Bounds of one command run as a Job: a preview, or an up (which creates
// what can take long: databases, clusters).
const (
	PreviewJobTimeout = 30 * time.Minute
	UpJobTimeout      = 2 * time.Hour
)

// JobsFactory returns a factory (same signature as Factory) of pulumi
// runtimes whose commands run as Kubernetes Jobs in the cluster of the
// given kubeconfig and context (both "": the in-cluster configuration), in
// the namespace proxyRuntime.containerOrchestration.k8s.namespace (which
// must exist) or else in drover-proxy-runtime-<runtime name> (created when
// missing). No pulumi binary is needed where the factory runs: the image
// holds pulumi, its plugins and the program. The factory does not contact
// the cluster.
func JobsFactory(kubeconfig, kubeContext string) iacrun.Factory {
	return iacrun.JobsFactoryOf(kubeconfig, kubeContext, checkConfig, NewJobs)
}

// NewJobs builds the runtime cfg describes, whose commands run as Jobs
// with runner (see JobsFactory).
func NewJobs(cfg *config.Runtime, opts runtimes.Options, runner *kubejob.Runner) (*Runtime, error) {
	// No binary here: the image has one.
	r, err := build(cfg, opts, func() (string, error) { return "", nil })
	if err != nil {
		return nil, err
	}
	r.jobs = iacrun.NewJobs(runner, cfg.Name, cfg.PulumiRunner.ProxyRuntime)
	return r, nil
}

// jobPreview runs pulumi preview in a Job and returns the state it shows.
// in.Cmd is held.
func (r *Runtime) jobPreview(ctx context.Context, in *instance, t runtimes.Target, sp *spec) (runtimes.State, error) {
	o, err := r.jobRun(ctx, in, t, sp, kindPreview)
	if err != nil {
		return runtimes.State{}, err
	}
	changed := o.ExitCode != 0 && changesProposed.MatchString(o.Stdout)
	if o.ExitCode != 0 && !changed {
		return runtimes.State{}, jobError("pulumi preview", o)
	}
	res := textSteps(o.Stdout, previewStep)
	return r.stateOf(in, t, sp, &savedPlan{changed: changed, summary: res.summary()}), nil
}

// jobUp runs pulumi up in a Job, then previews again to refresh the state
// and notifies watchers. in.Cmd is held.
func (r *Runtime) jobUp(ctx context.Context, in *instance, t runtimes.Target, sp *spec) (runtimes.ApplyResult, error) {
	o, err := r.jobRun(ctx, in, t, sp, kindUp)
	changes := textSteps(o.Stdout, upStep).changes(in.RD)
	if err == nil && o.ExitCode != 0 {
		if err = jobError("pulumi up", o); retryable(o.Stdout) {
			err = fmt.Errorf("%w (retrying previews again)", err)
		}
	}
	if err != nil {
		r.Store(in, t, sp, sp.runner, runtimes.State{}, err) // forget the state, poll soon
		r.Notify(in.Key)
		return runtimes.ApplyResult{Changes: changes}, err
	}
	r.WriteApplied(in, t.Version)
	st, err := r.jobPreview(ctx, in, t, sp)
	r.Store(in, t, sp, sp.runner, st, err)
	if err != nil {
		r.Log.Warn("pulumi runtime: preview after up failed", "runtime", r.Name, "instance", in.Key.String(), "version", t.Version, "error", err)
	}
	r.Notify(in.Key)
	return runtimes.ApplyResult{Changes: changes}, nil
}

// changesProposed is what pulumi preview --expect-no-changes prints when
// the preview proposes changes ("no changes were expected for preview but
// changes were proposed"; older CLIs leave out "for preview").
var changesProposed = regexp.MustCompile(`no changes were expected( for \w+)? but changes were proposed`)

// Per-resource lines of pulumi's text output (--color never): a symbol,
// the resource's type (with colons, unlike the "+ 1 to create" of the
// summary) and name, and the step ("create" in a preview,
// "created" in an up).
var (
	previewStep = regexp.MustCompile(`(?m)^ *[-+~<>=*]+ +(\S+:\S+) +(\S+) +(create|update|delete|replace)\b`)
	upStep      = regexp.MustCompile(`(?m)^ *[-+~<>=*]+ +(\S+:\S+) +(\S+) +(created|updated|deleted|replaced)\b`)
)

// textSteps reads the steps of a Job's text output (a Job's log can be
// cut to its end, where JSON would not parse) as preview's JSON would
// show them.
func textSteps(out string, re *regexp.Regexp) previewResult {
	var res previewResult
	for _, m := range re.FindAllStringSubmatch(out, -1) {
		var op string
		switch m[3] {
		case "created", "create":
			op = "create"
		case "updated", "update":
			op = "update"
		case "deleted", "delete":
			op = "delete"
		case "replaced", "replace":
			op = "replace"
		}
		res.Steps = append(res.Steps, step{Op: op, URN: "urn:pulumi:job::job::" + m[1] + "::" + m[2]})
	}
	return res
}

// jobRun runs one command (kindPreview or kindUp) as a Job and records it
// (see iacrun.RunJob). in.Cmd is held.
func (r *Runtime) jobRun(ctx context.Context, in *instance, t runtimes.Target, sp *spec, kind string) (iacrun.Outcome, error) {
	env, err := iacrun.Overlay(t, sp.runner, "pulumiRunner")
	if err != nil {
		return iacrun.Outcome{}, err
	}
	if _, ok := env["PULUMI_SKIP_UPDATE_CHECK"]; !ok {
		env["PULUMI_SKIP_UPDATE_CHECK"] = "true"
	}
	keys := slices.Sorted(maps.Keys(sp.secrets))
	for i, k := range keys {
		env[secretEnv(i)] = sp.secrets[k]
	}
	timeout := PreviewJobTimeout
	if kind == kindUp {
		timeout = UpJobTimeout
	}
	return iacrun.RunJob(ctx, r.jobs, r.Base, in, iacrun.JobCmd{
		Kind: kind, Version: t.Version, Image: sp.Image, Script: jobScript(sp, kind),
		ServiceAccount: sp.runner.ServiceAccount, Env: env, Secrets: rawSecrets(t, sp), Timeout: timeout,
		FullOutput: fullStdout,
	})
}

// secretEnv is the variable of a Job holding the i-th secret config value
// (in key order); it comes from a Secret.
func secretEnv(i int) string { return "DROVER_PULUMI_SECRET_" + strconv.Itoa(i) }

// jobScript is the shell script a command's Job runs: in the program
// directory (the object's path), the preRun commands, pulumi stack select
// --create, the config (secrets piped from their variables), then pulumi
// preview --refresh --expect-no-changes or pulumi up --refresh (their text
// output: a Job's log may be cut to its end). A step before the last that fails prints "drover:
// <step> failed (exit code N)" and exits 1. The binary is
// $DROVER_PULUMI_BIN, else pulumi, on the image's PATH, after the object's
// commandPrefix.
func jobScript(sp *spec, kind string) string {
	var b strings.Builder
	q := iacrun.ShellQuote
	b.WriteString(iacrun.ScriptFail + `P="${DROVER_PULUMI_BIN:-pulumi}"
`)
	pulumi := ""
	for _, w := range sp.CommandPrefix {
		pulumi += q(w) + " "
	}
	pulumi += `"$P"`
	stack := q(sp.Stack)
	iacrun.ScriptSteps(&b, sp.path, sp.runner.PreRun)
	fmt.Fprintf(&b, "%s stack select --create --stack %s --non-interactive || fail 'pulumi stack select' $?\n", pulumi, stack)
	if len(sp.Config) > 0 {
		fmt.Fprintf(&b, "%s config set-all --stack %s", pulumi, stack)
		for _, k := range slices.Sorted(maps.Keys(sp.Config)) {
			b.WriteString(" --plaintext " + q(k+"="+sp.Config[k]))
		}
		b.WriteString(" || fail 'pulumi config set-all' $?\n")
	}
	for i, k := range slices.Sorted(maps.Keys(sp.secrets)) {
		fmt.Fprintf(&b, "printf '%%s' \"$%s\" | %s config set --secret --stack %s -- %s || fail %s $?\n", secretEnv(i), pulumi, stack, q(k), q("pulumi config set --secret "+k))
	}
	if kind == kindUp {
		fmt.Fprintf(&b, "exec %s up --yes --stack %s --non-interactive --refresh --color never\n", pulumi, stack)
	} else {
		fmt.Fprintf(&b, "exec %s preview --stack %s --refresh --expect-no-changes --non-interactive --color never\n", pulumi, stack)
	}
	return b.String()
}

// jobError is the error of a command whose Job exited with a code that
// is not a result: the step that failed (a preRun command, the stack or
// config commands, or the command itself) with pulumi's error lines.
func jobError(what string, o iacrun.Outcome) error {
	return iacrun.JobError(what, o.ExitCode, o.Stdout, errorExcerpt)
}
