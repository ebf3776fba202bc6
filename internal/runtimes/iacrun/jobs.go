package iacrun

import (
	"context"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/runtimes/kubejob"
	kuberuntime "github.com/drover-dev/drover/internal/runtimes/kubernetes"
	"github.com/drover-dev/drover/internal/runtimes/redact"
)

// Jobs runs a runtime's commands as Kubernetes Jobs (package kubejob).
type Jobs struct {
	Runner    *kubejob.Runner
	Namespace string
	Create    bool // create Namespace when missing (drover's own)
	// PendingGrace is kubejob.Spec.PendingGrace (0 = its default).
	PendingGrace time.Duration
}

// NewJobs runs the commands of runtime name (whose proxyRuntime is proxy)
// with runner, in proxy.containerOrchestration.k8s.namespace or else in
// drover-proxy-runtime-<name>.
func NewJobs(runner *kubejob.Runner, name string, proxy *config.ProxyRuntime) *Jobs {
	ns, create := kubejob.ProxyNamespace(name, proxy)
	return &Jobs{Runner: runner, Namespace: ns, Create: create}
}

// JobCmd is one command run as a Job.
type JobCmd struct {
	Kind, Version  string
	Image          string
	Script         string // run with /bin/sh -c
	ServiceAccount string
	Env            map[string]string
	Secrets        []string // raw secret values: env values holding one come from a Secret
	Timeout        time.Duration
	// FullOutput is how much of the Job's log the Outcome keeps, for a
	// caller that parses it (0: OutputLimit); the run records the last
	// OutputLimit bytes.
	FullOutput int
}

// RunJob runs c for in as a Job of b's runtime and records it. The error is
// for a Job that gave no exit code (it could not start, timed out, or ctx
// ended); the outcome's output (the Job's log) is redacted. in.Cmd is held.
func RunJob[X, S any](ctx context.Context, j *Jobs, b *Base[X, S], in *Instance[X, S], c JobCmd) (Outcome, error) {
	in.RD = redact.New(c.Secrets)
	env := make([]corev1.EnvVar, 0, len(c.Env))
	for _, k := range slices.Sorted(maps.Keys(c.Env)) {
		env = append(env, corev1.EnvVar{Name: k, Value: c.Env[k]})
	}
	// Raw secrets reach the container from a Secret, not the Job.
	env, secretEnv := kubejob.SplitSecretEnv(env, c.Secrets)
	// Only the version applied is kept here.
	if err := os.MkdirAll(in.Dir, 0o750); err != nil {
		return Outcome{}, err
	}
	started := b.Now()
	jr := j.Runner.Run(ctx, kubejob.Spec{
		Namespace:       j.Namespace,
		CreateNamespace: j.Create,
		NamePrefix:      b.Name + "-" + in.Key.Service + "-" + c.Kind,
		Labels:          kubejob.Labels(b.Name, c.Kind, in.Key),
		Annotations:     map[string]string{kuberuntime.AnnotationVersion: c.Version},
		Image:           c.Image,
		Command:         []string{"/bin/sh", "-c", c.Script},
		ServiceAccount:  c.ServiceAccount,
		Env:             env,
		SecretEnv:       secretEnv,
		Timeout:         c.Timeout,
		PendingGrace:    j.PendingGrace,
		MaxOutput:       max(c.FullOutput, OutputLimit),
	})
	o := Outcome{Stdout: jr.Output, Truncated: jr.OutputTruncated, ExitCode: jr.ExitCode, Err: jr.Err}
	if o.Err == nil && o.ExitCode != 0 {
		o.Err = fmt.Errorf("exit status %d", o.ExitCode)
	}
	o = o.Redact(in.RD)
	rec := o
	if len(rec.Stdout) > OutputLimit {
		rec.Stdout, rec.Truncated = tail(rec.Stdout, OutputLimit), true
	}
	b.Record(ctx, in.Key, c.Kind, c.Version, []string{c.Image, "/bin/sh", "-c", c.Script}, started, rec)
	if jr.Err == nil {
		return o, nil
	}
	what := b.Tool + " " + c.Kind
	reason := in.RD.Text(jr.Reason)
	switch {
	case jr.Canceled:
		return o, fmt.Errorf("%s: %w", what, ctx.Err())
	case jr.TimedOut:
		return o, fmt.Errorf("%s: the Job timed out after %v (%s)", what, c.Timeout, reason)
	case jr.NotStarted:
		return o, fmt.Errorf("%s could not start: %s", what, in.RD.Text(jr.Err.Error()))
	case reason != "":
		return o, fmt.Errorf("%s failed: %s", what, reason)
	default:
		return o, fmt.Errorf("%s failed: %s", what, in.RD.Text(jr.Err.Error()))
	}
}

// ScriptFail is the start of a Job's script: fail, which prints "drover:
// <step> failed (exit code N)" and exits 1.
const ScriptFail = `fail() { echo "drover: $1 failed (exit code $2)" >&2; exit 1; }
`

// ScriptSteps writes the first steps of a Job's script to b: cd dir and the
// preRun commands, each failing with fail.
func ScriptSteps(b *strings.Builder, dir string, preRun []config.RunnerCommand) {
	fmt.Fprintf(b, "cd %s || fail %s $?\n", ShellQuote(dir), ShellQuote("cd "+dir))
	for i, c := range preRun {
		fmt.Fprintf(b, "sh -c %s || fail %s $?\n", ShellQuote(c.Cmd), ShellQuote(fmt.Sprintf("preRun[%d] (%s)", i, c.Cmd)))
	}
}

// stepFailed matches the line fail prints.
var stepFailed = regexp.MustCompile(`(?m)^drover: (.+) failed \(exit code (-?\d+)\)\s*$`)

// JobError is the error of a command whose Job exited with a code that is
// not a result: the step that failed (found in out, the Job's log, where
// fail printed it; else what, with exit) with the message msg picks from
// the output before it ("no output" when none).
func JobError(what string, exit int, out string, msg func(out string) string) error {
	if m := stepFailed.FindStringSubmatchIndex(out); m != nil {
		what = out[m[2]:m[3]]
		if n, err := strconv.Atoi(out[m[4]:m[5]]); err == nil {
			exit = n
		}
		out = out[:m[0]]
	}
	text := msg(out)
	if text == "" {
		text = "no output"
	}
	return fmt.Errorf("%s failed (exit code %d): %s", what, exit, text)
}
