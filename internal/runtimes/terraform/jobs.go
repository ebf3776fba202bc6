package terraform

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/runtimes"
	"github.com/drover-dev/drover/internal/runtimes/iacrun"
	"github.com/drover-dev/drover/internal/runtimes/kubejob"
)

// Bounds of one command run as a Job: a plan, or an apply (which creates
// what can take long: databases, clusters).
const (
	PlanJobTimeout  = 30 * time.Minute
	ApplyJobTimeout = 2 * time.Hour
)

// jobRunner runs a runtime's commands as Kubernetes Jobs.
type jobRunner = iacrun.Jobs

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
	r.jobs = iacrun.NewJobs(runner, cfg.Name, cfg.TerraformRunner.ProxyRuntime)
	return r, nil
}

// plan runs terraform plan in a Job and returns the state it shows.
// in.cmd is held.
func jobPlan(ctx context.Context, j *jobRunner, r *Runtime, in *instance, t runtimes.Target, sp *spec) (runtimes.State, error) {
	o, err := jobRun(ctx, j, r, in, t, sp, kindPlan)
	if err != nil {
		return runtimes.State{}, err
	}
	if o.ExitCode != 0 && o.ExitCode != 2 {
		return runtimes.State{}, jobError("terraform plan", o)
	}
	return r.stateOf(in, t, sp, &savedPlan{changed: o.ExitCode == 2, summary: planSummary(o.Stdout)}), nil
}

// apply runs terraform apply in a Job, then plans again to refresh the
// state and notifies watchers. in.cmd is held.
func jobApply(ctx context.Context, j *jobRunner, r *Runtime, in *instance, t runtimes.Target, sp *spec) (runtimes.ApplyResult, error) {
	o, err := jobRun(ctx, j, r, in, t, sp, kindApply)
	if err == nil && o.ExitCode != 0 {
		err = jobError("terraform apply", o)
		if ctx.Err() == nil && retryableApply(o.Stdout) {
			err = fmt.Errorf("%w (retrying plans again)", err)
		}
	}
	if err != nil {
		r.store(in, t, sp, runtimes.State{}, err) // forget the state, poll soon
		r.Notify(in.Key)
		return runtimes.ApplyResult{}, err
	}
	r.WriteApplied(in, t.Version)
	changes := appliedChanges(o.Stdout, sp, r.Name)
	st, err := jobPlan(ctx, j, r, in, t, sp)
	r.store(in, t, sp, st, err)
	if err != nil {
		r.Log.Warn("terraform runtime: plan after apply failed", "runtime", r.Name, "instance", in.Key.String(), "version", t.Version, "error", err)
	}
	r.Notify(in.Key)
	return runtimes.ApplyResult{Changes: changes}, nil
}

// jobRun runs one command (kindPlan or kindApply) as a Job and records
// it (see iacrun.RunJob). in.Cmd is held.
func jobRun(ctx context.Context, j *jobRunner, r *Runtime, in *instance, t runtimes.Target, sp *spec, kind string) (iacrun.Outcome, error) {
	env, err := jobEnv(t, sp)
	if err != nil {
		return iacrun.Outcome{}, err
	}
	timeout := PlanJobTimeout
	if kind == kindApply {
		timeout = ApplyJobTimeout
	}
	return iacrun.RunJob(ctx, j, r.Base, in, iacrun.JobCmd{
		Kind: kind, Version: t.Version, Image: sp.image, Script: jobScript(sp, kind),
		ServiceAccount: sp.runner.ServiceAccount, Env: env, Secrets: iacrun.RawSecrets(t, sp.runner), Timeout: timeout,
	})
}

// jobEnv is the environment of a command's container: what a command run
// here gets from drover (overlayEnv: the target's env, the runner's env,
// the identity variables), CHECKPOINT_DISABLE=1 and TF_IN_AUTOMATION=1
// unless set. Nothing of the agent's own environment is passed.
func jobEnv(t runtimes.Target, sp *spec) (map[string]string, error) {
	env, err := overlayEnv(t, sp.runner)
	if err != nil {
		return nil, err
	}
	for k, v := range map[string]string{"CHECKPOINT_DISABLE": "1", "TF_IN_AUTOMATION": "1"} {
		if _, ok := env[k]; !ok {
			env[k] = v
		}
	}
	return env, nil
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
	b.WriteString(iacrun.ScriptFail + `if [ -z "${DROVER_TERRAFORM:-}" ]; then
  if command -v terraform >/dev/null 2>&1; then DROVER_TERRAFORM=terraform
  elif command -v tofu >/dev/null 2>&1; then DROVER_TERRAFORM=tofu
  else echo "drover: neither terraform nor tofu is on the image's PATH (set DROVER_TERRAFORM)" >&2; exit 1
  fi
fi
`)
	iacrun.ScriptSteps(&b, sp.path, sp.runner.PreRun)
	b.WriteString(`"$DROVER_TERRAFORM" init -input=false -no-color`)
	for _, w := range sp.initArgs.words {
		b.WriteString(" " + iacrun.ShellQuote(w))
	}
	b.WriteString(" || fail 'terraform init' $?\n")
	if kind == kindApply {
		b.WriteString(`exec "$DROVER_TERRAFORM" apply -input=false -no-color -auto-approve` + "\n")
	} else {
		b.WriteString(`exec "$DROVER_TERRAFORM" plan -input=false -no-color -detailed-exitcode` + "\n")
	}
	return b.String()
}

// jobError is the error of a command whose Job exited with a code that
// is not a result: the step that failed (a preRun command, terraform init,
// or the command itself) with terraform's error message.
func jobError(what string, o iacrun.Outcome) error {
	return iacrun.JobError(what, o.ExitCode, o.Stdout, errorExcerpt)
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
