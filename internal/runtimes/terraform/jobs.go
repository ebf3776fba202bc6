package terraform

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/drover-dev/drover/internal/atomicfile"
	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/runtimes"
	"github.com/drover-dev/drover/internal/runtimes/kubejob"
	kuberuntime "github.com/drover-dev/drover/internal/runtimes/kubernetes"
	"github.com/drover-dev/drover/internal/runtimes/redact"
)

// Bounds of one command run as a Job: a plan, or an apply (which creates
// what can take long: databases, clusters).
const (
	PlanJobTimeout  = 30 * time.Minute
	ApplyJobTimeout = 2 * time.Hour
)

// jobOutputLimit is how much of a Job's log is kept (the end).
const jobOutputLimit = outputLimit

// jobRunner runs a runtime's commands as Kubernetes Jobs.
type jobRunner struct {
	runner    *kubejob.Runner
	namespace string
	create    bool // create namespace when missing (drover's own)
	// pendingGrace is kubejob.Spec.PendingGrace (0 = its default).
	pendingGrace time.Duration
}

// JobsFactory returns a factory (same signature as Factory) of terraform
// runtimes whose commands run as Kubernetes Jobs in the cluster of the
// given kubeconfig and context (both "": the in-cluster configuration), in
// the namespace proxyRuntime.containerOrchestration.k8s.namespace (which
// must exist) or else in drover-proxy-runtime-<runtime name> (created when
// missing). No terraform binary is needed where the factory runs: the
// image parameter holds terraform and the module. The factory does not
// contact the cluster.
func JobsFactory(kubeconfig, kubeContext string) func(cfg *config.Runtime, opts runtimes.Options) (runtimes.Runtime, error) {
	return func(cfg *config.Runtime, opts runtimes.Options) (runtimes.Runtime, error) {
		if err := checkConfig(cfg); err != nil {
			return nil, err
		}
		runner, err := kubejob.Connect(kubeconfig, kubeContext, opts.Log)
		if err != nil {
			return nil, fmt.Errorf("runtime %s: %w", cfg.Name, err)
		}
		r, err := NewJobs(cfg, opts, runner)
		if err != nil {
			return nil, err
		}
		return r, nil
	}
}

// NewJobs builds the runtime cfg describes, whose commands run as Jobs
// with runner (see JobsFactory).
func NewJobs(cfg *config.Runtime, opts runtimes.Options, runner *kubejob.Runner) (*Runtime, error) {
	if err := checkConfig(cfg); err != nil {
		return nil, err
	}
	r, err := build(cfg, opts, "")
	if err != nil {
		return nil, err
	}
	ns, create := kubejob.ProxyNamespace(cfg.Name, cfg.TerraformRunner.ProxyRuntime)
	r.jobs = &jobRunner{runner: runner, namespace: ns, create: create}
	return r, nil
}

// plan runs terraform plan in a Job and returns the state it shows.
// in.cmd is held.
func (j *jobRunner) plan(ctx context.Context, r *Runtime, in *instance, t runtimes.Target, sp *spec) (runtimes.State, error) {
	o, err := j.run(ctx, r, in, t, sp, kindPlan)
	if err != nil {
		return runtimes.State{}, err
	}
	if o.exitCode != 0 && o.exitCode != 2 {
		return runtimes.State{}, jobError("terraform plan", o)
	}
	return r.stateOf(in, t, sp, &savedPlan{changed: o.exitCode == 2, summary: planSummary(o.stdout)}), nil
}

// apply runs terraform apply in a Job, then plans again to refresh the
// state and notifies watchers. in.cmd is held.
func (j *jobRunner) apply(ctx context.Context, r *Runtime, in *instance, t runtimes.Target, sp *spec) (runtimes.ApplyResult, error) {
	o, err := j.run(ctx, r, in, t, sp, kindApply)
	if err == nil && o.exitCode != 0 {
		err = jobError("terraform apply", o)
		if ctx.Err() == nil && retryableApply(o.stdout) {
			err = fmt.Errorf("%w (retrying plans again)", err)
		}
	}
	if err != nil {
		r.store(in, t, sp, runtimes.State{}, err) // forget the state, poll soon
		r.watchers.Notify(in.key)
		return runtimes.ApplyResult{}, err
	}
	if err := atomicfile.Write(filepath.Join(in.dir, appliedFileName), []byte(t.Version), 0o640); err != nil {
		r.log.Warn("terraform runtime: cannot record the applied version", "runtime", r.name, "instance", in.key.String(), "error", err)
	}
	changes := appliedChanges(o.stdout, sp, r.name)
	st, err := j.plan(ctx, r, in, t, sp)
	r.store(in, t, sp, st, err)
	if err != nil {
		r.log.Warn("terraform runtime: plan after apply failed", "runtime", r.name, "instance", in.key.String(), "version", t.Version, "error", err)
	}
	r.watchers.Notify(in.key)
	return runtimes.ApplyResult{Changes: changes}, nil
}

// run runs one command (kindPlan or kindApply) as a Job and records it. The
// error is for a Job that gave no exit code (it could not start, timed
// out, or ctx ended); the outcome's output is redacted. in.cmd is held.
func (j *jobRunner) run(ctx context.Context, r *Runtime, in *instance, t runtimes.Target, sp *spec, kind string) (outcome, error) {
	env, err := jobEnv(t, sp)
	if err != nil {
		return outcome{}, err
	}
	secrets := rawSecrets(t, sp.runner)
	in.rd = redact.New(secrets)
	// Raw secrets reach the container from a Secret, not the Job.
	env, secretEnv := kubejob.SplitSecretEnv(env, secrets)
	// Only the version applied is kept here (stateOf).
	if err := os.MkdirAll(in.dir, 0o750); err != nil {
		return outcome{}, err
	}
	script := jobScript(sp, kind)
	timeout := PlanJobTimeout
	if kind == kindApply {
		timeout = ApplyJobTimeout
	}
	started := r.now()
	jr := j.runner.Run(ctx, kubejob.Spec{
		Namespace:       j.namespace,
		CreateNamespace: j.create,
		NamePrefix:      r.name + "-" + in.key.Service + "-" + kind,
		Labels:          kubejob.Labels(r.name, kind, in.key),
		Annotations:     map[string]string{kuberuntime.AnnotationVersion: t.Version},
		Image:           sp.image,
		Command:         []string{"/bin/sh", "-c", script},
		ServiceAccount:  sp.runner.ServiceAccount,
		Env:             env,
		SecretEnv:       secretEnv,
		Timeout:         timeout,
		PendingGrace:    j.pendingGrace,
		MaxOutput:       jobOutputLimit,
	})
	o := outcome{stdout: jr.Output, truncated: jr.OutputTruncated, exitCode: jr.ExitCode, err: jr.Err}
	if o.err == nil && o.exitCode != 0 {
		o.err = fmt.Errorf("exit status %d", o.exitCode)
	}
	o = redactOutcome(o, in.rd)
	r.record(ctx, in.key, kind, t.Version, []string{sp.image, "/bin/sh", "-c", script}, started, o)
	if jr.Err == nil {
		return o, nil
	}
	what := "terraform " + kind
	reason := in.rd.Text(jr.Reason)
	switch {
	case jr.Canceled:
		return o, fmt.Errorf("%s: %w", what, ctx.Err())
	case jr.TimedOut:
		return o, fmt.Errorf("%s: the Job timed out after %v (%s)", what, timeout, reason)
	case jr.NotStarted:
		return o, fmt.Errorf("%s could not start: %s", what, in.rd.Text(jr.Err.Error()))
	case reason != "":
		return o, fmt.Errorf("%s failed: %s", what, reason)
	default:
		return o, fmt.Errorf("%s failed: %s", what, in.rd.Text(jr.Err.Error()))
	}
}

// jobEnv is the environment of a command's container: what a command run
// here gets from drover (overlayEnv: the target's env, the runner's env,
// the identity variables), CHECKPOINT_DISABLE=1 and TF_IN_AUTOMATION=1
// unless set. Nothing of the agent's own environment is passed.
func jobEnv(t runtimes.Target, sp *spec) ([]corev1.EnvVar, error) {
	env, err := overlayEnv(t, sp.runner)
	if err != nil {
		return nil, err
	}
	for k, v := range map[string]string{"CHECKPOINT_DISABLE": "1", "TF_IN_AUTOMATION": "1"} {
		if _, ok := env[k]; !ok {
			env[k] = v
		}
	}
	out := make([]corev1.EnvVar, 0, len(env))
	for _, k := range slices.Sorted(maps.Keys(env)) {
		out = append(out, corev1.EnvVar{Name: k, Value: env[k]})
	}
	return out, nil
}

// jobScript is the shell script a command's Job runs: in the module
// directory (the path parameter), the preRun commands, terraform init with
// extraInitArgs, then terraform plan -detailed-exitcode (exit 0: no
// changes, 2: changes, 1: error) or terraform apply -auto-approve. A step
// before the last that fails prints "drover: <step> failed (exit code N)"
// and exits 1. The binary is $DROVER_TERRAFORM, else terraform, else tofu,
// on the image's PATH.
func jobScript(sp *spec, kind string) string {
	var b strings.Builder
	b.WriteString(`fail() { echo "drover: $1 failed (exit code $2)" >&2; exit 1; }
if [ -z "${DROVER_TERRAFORM:-}" ]; then
  if command -v terraform >/dev/null 2>&1; then DROVER_TERRAFORM=terraform
  elif command -v tofu >/dev/null 2>&1; then DROVER_TERRAFORM=tofu
  else echo "drover: neither terraform nor tofu is on the image's PATH (set DROVER_TERRAFORM)" >&2; exit 1
  fi
fi
`)
	fmt.Fprintf(&b, "cd %s || fail %s $?\n", shellQuote(sp.path), shellQuote("cd "+sp.path))
	for i, c := range sp.runner.PreRun {
		fmt.Fprintf(&b, "sh -c %s || fail %s $?\n", shellQuote(c.Cmd), shellQuote(fmt.Sprintf("preRun[%d] (%s)", i, c.Cmd)))
	}
	b.WriteString(`"$DROVER_TERRAFORM" init -input=false -no-color`)
	for _, w := range sp.initArgs.words {
		b.WriteString(" " + shellQuote(w))
	}
	b.WriteString(" || fail 'terraform init' $?\n")
	if kind == kindApply {
		b.WriteString(`exec "$DROVER_TERRAFORM" apply -input=false -no-color -auto-approve` + "\n")
	} else {
		b.WriteString(`exec "$DROVER_TERRAFORM" plan -input=false -no-color -detailed-exitcode` + "\n")
	}
	return b.String()
}

// shellQuote quotes s as one word for sh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// stepFailed matches the line jobScript prints when a step fails.
var stepFailed = regexp.MustCompile(`(?m)^drover: (.+) failed \(exit code (-?\d+)\)\s*$`)

// jobError is the error of a command whose Job exited with a code that
// is not a result: the step that failed (a preRun command, terraform init,
// or the command itself) with terraform's error message.
func jobError(what string, o outcome) error {
	out, code := o.stdout, o.exitCode
	if m := stepFailed.FindStringSubmatchIndex(out); m != nil {
		what = out[m[2]:m[3]]
		if n, err := strconv.Atoi(out[m[4]:m[5]]); err == nil {
			code = n
		}
		out = out[:m[0]]
	}
	msg := errorExcerpt(out)
	if msg == "" {
		msg = "no output"
	}
	return fmt.Errorf("%s failed (exit code %d): %s", what, code, msg)
}

// retryableApply reports whether an apply failed for a reason that a new
// plan and apply may not hit (Prodvana's retryable exit code 2).
func retryableApply(out string) bool {
	return strings.Contains(out, "Saved plan is stale") || strings.Contains(out, "Error acquiring the state lock")
}

// applyLine matches terraform apply's per-resource completion lines.
var applyLine = regexp.MustCompile(`(?m)^(\S+): (Creation|Modifications|Destruction) complete after`)

// appliedChanges lists what an apply changed, from its output: one change
// per resource address (destroyed and created again counts as configured),
// or the module as a whole when the output names none.
func appliedChanges(out string, sp *spec, runtime string) []runtimes.Change {
	actions := map[string]runtimes.Action{}
	var order []string
	for _, m := range applyLine.FindAllStringSubmatch(out, -1) {
		addr := m[1]
		var a runtimes.Action
		switch m[2] {
		case "Creation":
			a = runtimes.ActionCreated
		case "Modifications":
			a = runtimes.ActionConfigured
		default:
			a = runtimes.ActionDeleted
		}
		prev, seen := actions[addr]
		switch {
		case !seen:
			order = append(order, addr)
		case prev != a:
			a = runtimes.ActionConfigured
		}
		actions[addr] = a
	}
	if len(order) == 0 {
		name := sp.Runtime
		if name == "" {
			name = runtime
		}
		a := runtimes.ActionUnchanged
		if !strings.Contains(out, "Resources: 0 added, 0 changed, 0 destroyed") && !strings.Contains(out, "No changes.") {
			a = runtimes.ActionConfigured
		}
		return []runtimes.Change{{Object: "module." + name, Action: a}}
	}
	out2 := make([]runtimes.Change, 0, len(order))
	for _, addr := range order {
		out2 = append(out2, runtimes.Change{Object: addr, Action: actions[addr]})
	}
	return out2
}

// checkConfig checks that cfg is a terraformRunner runtime.
func checkConfig(cfg *config.Runtime) error {
	switch {
	case cfg == nil:
		return errors.New("terraform runtime: no config")
	case cfg.TerraformRunner == nil:
		return fmt.Errorf("runtime %s: not a terraformRunner runtime", cfg.Name)
	}
	return nil
}
