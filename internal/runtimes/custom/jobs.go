package custom

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/manifest"
	"github.com/drover-dev/drover/internal/runtimes"
	"github.com/drover-dev/drover/internal/runtimes/kubejob"
	kuberuntime "github.com/drover-dev/drover/internal/runtimes/kubernetes"
	"github.com/drover-dev/drover/internal/runtimes/redact"
)

// JobsFactory returns a factory (same signature as Factory) of custom
// runtimes whose commands run as Kubernetes Jobs in the cluster of the
// given kubeconfig and context (both "" = the in-cluster configuration):
// in the namespace proxyRuntime.containerOrchestration.k8s.namespace
// (which must exist; drover never creates nor deletes it), or else in
// drover-proxy-runtime-<runtime name>, which drover creates when missing.
// The factory does not contact the cluster.
func JobsFactory(kubeconfig, kubeContext string) func(cfg *config.Runtime, opts runtimes.Options) (runtimes.Runtime, error) {
	return func(cfg *config.Runtime, opts runtimes.Options) (runtimes.Runtime, error) {
		r, err := newJobs(cfg, kubeconfig, kubeContext, opts)
		if err != nil {
			return nil, err
		}
		return r, nil
	}
}

// NewJobs builds a custom runtime whose commands run as Jobs on the
// cluster kubeconfig and kubeContext name (in-cluster when both are empty).
func NewJobs(cfg *config.Runtime, kubeconfig, kubeContext string, opts runtimes.Options) (*Runtime, error) {
	return newJobs(cfg, kubeconfig, kubeContext, opts)
}

// newJobs builds a custom runtime whose commands run as Jobs.
func newJobs(cfg *config.Runtime, kubeconfig, kubeContext string, opts runtimes.Options) (*Runtime, error) {
	r, err := New(cfg, opts)
	if err != nil {
		return nil, err
	}
	runner, err := kubejob.Connect(kubeconfig, kubeContext, r.log)
	if err != nil {
		_ = r.Close()
		return nil, fmt.Errorf("custom runtime %s: %w", cfg.Name, err)
	}
	e := &jobExecutor{r: r, runner: runner}
	e.namespace, e.createNamespace = kubejob.ProxyNamespace(cfg.Name, cfg.Custom.ProxyRuntime)
	r.exec = e
	return r, nil
}

// jobExecutor runs commands as Kubernetes Jobs.
type jobExecutor struct {
	r               *Runtime
	runner          *kubejob.Runner
	namespace       string
	createNamespace bool
	// pendingGrace is kubejob.Spec.PendingGrace (0 = its default).
	pendingGrace time.Duration
}

var _ executor = (*jobExecutor)(nil)

func (e *jobExecutor) build(kind string, t *runtimes.Target, tc *config.TaskConfig, kc *config.KubernetesConfig, cmdEnv map[string]config.EnvValue, timeout time.Duration) (*command, error) {
	r := e.r
	c := &command{kind: kind, timeout: timeout}
	var progEnv map[string]config.EnvValue
	switch {
	case kc != nil && tc != nil:
		return nil, r.permanent(t, "%s: set only one of taskConfig and kubernetesConfig", kind)
	case kc != nil:
		obj, err := jobManifest(kc)
		if err != nil {
			return nil, r.permanent(t, "%s.kubernetesConfig: %v", kind, err)
		}
		c.manifest = obj
	case tc == nil || tc.Program == nil:
		return nil, r.permanent(t, "%s: taskConfig.program is required", kind)
	default:
		p := tc.Program
		image, err := programImage(p)
		if err != nil {
			return nil, r.permanent(t, "%s.taskConfig.program.imageRegistryInfo: %v", kind, err)
		}
		if image == "" {
			return nil, r.permanent(t, "%s: taskConfig.program.image is required: commands run as Kubernetes Jobs, which need an image (or imageRegistryInfo and imageTag)", kind)
		}
		c.image, c.dir = image, p.WorkingDirectory
		c.argv = append(slices.Clone(p.Entrypoint), p.Cmd...)
		c.nEntry = len(p.Entrypoint)
		if tc.K8s != nil {
			c.serviceAccount = tc.K8s.ServiceAccount
		}
		progEnv = p.Env
	}
	if err := r.environ(c, t, progEnv, cmdEnv, true); err != nil {
		return nil, err
	}
	c.withSecrets(t)
	c.rd = redact.New(c.secrets)
	if c.manifest != nil {
		job, err := decodeJob(c.manifest)
		if err == nil {
			err = kubejob.Validate(job)
		}
		if err != nil {
			return nil, r.permanent(t, "%s.kubernetesConfig: %s", kind, c.rd.Text(err.Error()))
		}
		c.job, c.manifest = job, nil
		main := job.Spec.Template.Spec.Containers[0]
		c.image = main.Image
		c.argv = append(slices.Clone(main.Command), main.Args...)
		c.nEntry = len(main.Command)
	}
	return c, nil
}

func (e *jobExecutor) run(ctx context.Context, key runtimes.InstanceKey, version string, c *command) outcome {
	began := time.Now()
	// Raw secrets reach the container from a Secret, not the Job.
	env, secretEnv := kubejob.SplitSecretEnv(c.containerEnv(), c.secrets)
	jr := e.runner.Run(ctx, kubejob.Spec{
		Namespace:       e.namespace,
		CreateNamespace: e.createNamespace,
		NamePrefix:      e.r.name + "-" + key.Service + "-" + c.kind,
		Labels:          kubejob.Labels(e.r.name, c.kind, key),
		Annotations:     map[string]string{kuberuntime.AnnotationVersion: version},
		Image:           c.image,
		Command:         c.argv[:c.nEntry],
		Args:            c.argv[c.nEntry:],
		WorkingDir:      c.dir,
		ServiceAccount:  c.serviceAccount,
		Env:             env,
		SecretEnv:       secretEnv,
		Job:             c.job,
		Timeout:         c.timeout,
		PendingGrace:    e.pendingGrace,
		MaxOutput:       maxOutput,
	})
	err := jr.Err
	if err != nil && !jr.NotStarted && !jr.TimedOut && !jr.Canceled {
		err = fmt.Errorf("failed: %w", err)
	}
	job := ""
	if jr.Job != "" {
		job = e.namespace + "/" + jr.Job
	}
	return outcome{
		exitCode:        jr.ExitCode,
		err:             err,
		notStarted:      jr.NotStarted,
		timedOut:        jr.TimedOut,
		canceled:        jr.Canceled,
		stdout:          jr.Output,
		stdoutTruncated: jr.OutputTruncated,
		truncated:       jr.OutputTruncated,
		reason:          jr.Reason,
		command:         append([]string{c.image}, c.argv...),
		job:             job,
		duration:        time.Since(began),
	}
}

// containerEnv is c's environment as a container's.
func (c *command) containerEnv() []corev1.EnvVar {
	env := make([]corev1.EnvVar, 0, len(c.env)+len(c.secretEnv))
	for _, kv := range c.env {
		k, v, _ := strings.Cut(kv, "=")
		env = append(env, corev1.EnvVar{Name: k, Value: v})
	}
	for k, ref := range c.secretEnv {
		env = append(env, corev1.EnvVar{Name: k, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: ref.SecretName},
			Key:                  ref.Key,
		}}})
	}
	slices.SortFunc(env, func(a, b corev1.EnvVar) int { return strings.Compare(a.Name, b.Name) })
	return env
}

// programImage is the image reference of a program: image, or
// imageRegistryInfo with imageTag (a tag or a sha256 digest); "" when it
// names none.
func programImage(p *config.Program) (string, error) {
	switch {
	case p.Image != "":
		return p.Image, nil
	case p.ImageRegistryInfo == nil || p.ImageRegistryInfo.ImageRepository == "":
		return "", nil
	}
	repo, err := config.ImageRepository(p.ImageRegistryInfo)
	if err != nil {
		return "", err
	}
	switch tag := p.ImageTag; {
	case tag == "":
		return repo, nil
	case strings.HasPrefix(tag, "sha256:"):
		return repo + "@" + tag, nil
	default:
		return repo + ":" + tag, nil
	}
}

// jobManifest is the one object of a kubernetesConfig, which must be a
// batch/v1 Job, with the config's patches applied.
func jobManifest(kc *config.KubernetesConfig) (manifest.Object, error) {
	if kc.Tree != nil {
		return nil, errors.New("local.subPath is not supported for a command's Job; use local.path or inlined")
	}
	objs, err := manifest.Decode([]byte(kc.Inlined))
	if err != nil {
		return nil, fmt.Errorf("invalid Kubernetes YAML: %w", err)
	}
	if len(objs) != 1 {
		return nil, fmt.Errorf("it must hold exactly one object, a batch/v1 Job; found %s", describeObjects(objs))
	}
	obj := objs[0]
	if obj["apiVersion"] != "batch/v1" || obj["kind"] != "Job" {
		return nil, fmt.Errorf("it must hold exactly one object, a batch/v1 Job; found %s", describeObjects(objs))
	}
	patches, err := jobPatches(kc.Patches)
	if err != nil {
		return nil, err
	}
	if err := manifest.ApplyPatches(objs, patches); err != nil {
		return nil, fmt.Errorf("patches: %w", err)
	}
	return objs[0], nil
}

// jobPatches converts a kubernetesConfig's patches (already rendered).
func jobPatches(ps []config.KubernetesPatch) ([]manifest.Patch, error) {
	var out []manifest.Patch
	for i, p := range ps {
		if p.Replace == nil {
			continue
		}
		mp := manifest.Patch{Path: p.Replace.Path}
		if t := p.Target; t != nil {
			mp.Target = &manifest.Target{Group: t.Group, Version: t.Version, Kind: t.Kind, Name: t.Name, Namespace: t.Namespace}
		}
		switch {
		case p.Replace.String != nil:
			mp.Value = *p.Replace.String
		case p.Replace.IntAsString != nil:
			n, err := strconv.ParseInt(strings.TrimSpace(*p.Replace.IntAsString), 10, 64)
			if err != nil {
				return nil, fmt.Errorf("patches[%d].replace.intAsString: %q is not an integer", i, *p.Replace.IntAsString)
			}
			mp.Value = n
		}
		out = append(out, mp)
	}
	return out, nil
}

// describeObjects lists objects for an error message: "2 objects: Job/a
// (batch/v1), ConfigMap/b (v1)".
func describeObjects(objs []manifest.Object) string {
	if len(objs) == 0 {
		return "no object"
	}
	names := make([]string, 0, min(len(objs), 5))
	for i, o := range objs {
		if i == 5 {
			names = append(names, "…")
			break
		}
		apiVersion, _ := o["apiVersion"].(string)
		names = append(names, fmt.Sprintf("%s (%s)", manifest.ObjectName(o), apiVersion))
	}
	n := "1 object"
	if len(objs) > 1 {
		n = fmt.Sprintf("%d objects", len(objs))
	}
	return n + ": " + strings.Join(names, ", ")
}

// decodeJob decodes a Job manifest strictly: an unknown field is an error,
// as the apiserver's strict field validation (kubectl's default) makes it.
func decodeJob(obj manifest.Object) (*batchv1.Job, error) {
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var job batchv1.Job
	if err := dec.Decode(&job); err != nil {
		return nil, fmt.Errorf("invalid Job: %w", err)
	}
	return &job, nil
}
