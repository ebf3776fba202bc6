package kubejob

import (
	"crypto/rand"
	"errors"
	"fmt"
	"maps"
	"math"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/drover-dev/drover/internal/kubeobj"
)

// LabelManaged marks the namespaces drover created (value "true"), as the
// Kubernetes runtime marks its own (kubernetes.LabelManaged).
const LabelManaged = kubeobj.LabelManaged

// MainContainer is the name of the container of a Job built from an image.
const MainContainer = "main"

// Labels the Job controller sets on pod templates: a manifest copied from a
// live Job carries them, and they would not match the new Job's selector.
var controllerLabels = []string{
	"batch.kubernetes.io/controller-uid", "controller-uid",
	"batch.kubernetes.io/job-name", "job-name",
}

// Validate checks that a Job manifest can run as one command: one pod
// (completions and parallelism at most 1) with at least one container.
func Validate(job *batchv1.Job) error {
	switch spec := &job.Spec; {
	case len(spec.Template.Spec.Containers) == 0:
		return errors.New("the Job has no containers")
	case spec.Completions != nil && *spec.Completions > 1:
		return fmt.Errorf("the Job has completions %d; a command runs one pod (completions 1)", *spec.Completions)
	case spec.Parallelism != nil && *spec.Parallelism > 1:
		return fmt.Errorf("the Job has parallelism %d; a command runs one pod (parallelism 1)", *spec.Parallelism)
	case spec.CompletionMode != nil && *spec.CompletionMode == batchv1.IndexedCompletion:
		return errors.New("the Job is Indexed; a command runs one pod (completionMode NonIndexed)")
	}
	return nil
}

// build makes the Job s describes (s has its defaults).
func build(s Spec) (*batchv1.Job, error) {
	if s.Namespace == "" {
		return nil, errors.New("no namespace")
	}
	var job *batchv1.Job
	if s.Job != nil {
		if err := Validate(s.Job); err != nil {
			return nil, err
		}
		job = &batchv1.Job{Spec: *s.Job.Spec.DeepCopy()}
		job.Labels = maps.Clone(s.Job.Labels)
		job.Annotations = maps.Clone(s.Job.Annotations)
		tmpl := &job.Spec.Template
		for _, k := range controllerLabels {
			delete(tmpl.Labels, k)
		}
		job.Spec.Selector, job.Spec.ManualSelector, job.Spec.Suspend = nil, nil, nil
	} else {
		if s.Image == "" {
			return nil, errors.New("no image")
		}
		job = &batchv1.Job{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name:       MainContainer,
				Image:      s.Image,
				Command:    s.Command,
				Args:       s.Args,
				WorkingDir: s.WorkingDir,
			}},
		}}}}
	}
	job.Name = nameWithSuffix(jobPrefix(s.NamePrefix))
	job.Namespace = s.Namespace
	job.Labels = merged(job.Labels, s.Labels)
	job.Annotations = merged(job.Annotations, s.Annotations)
	spec := &job.Spec
	spec.BackoffLimit = ptr(int32(0))
	spec.Completions, spec.Parallelism = ptr(int32(1)), ptr(int32(1))
	deadline := int64(math.Ceil(s.Timeout.Seconds()))
	if spec.ActiveDeadlineSeconds == nil || *spec.ActiveDeadlineSeconds > deadline {
		spec.ActiveDeadlineSeconds = &deadline
	}
	if spec.TTLSecondsAfterFinished == nil {
		spec.TTLSecondsAfterFinished = ptr(int32(TTL / time.Second))
	}
	tmpl := &spec.Template
	tmpl.Labels = merged(tmpl.Labels, s.Labels)
	tmpl.Annotations = merged(tmpl.Annotations, s.Annotations)
	pod := &tmpl.Spec
	pod.RestartPolicy = corev1.RestartPolicyNever
	if s.ServiceAccount != "" {
		pod.ServiceAccountName = s.ServiceAccount
		pod.DeprecatedServiceAccount = ""
	}
	for _, cs := range [][]corev1.Container{pod.InitContainers, pod.Containers} {
		for i := range cs {
			c := &cs[i]
			c.Env = withEnv(c.Env, s.Env)
			if c.TerminationMessagePolicy == "" {
				c.TerminationMessagePolicy = corev1.TerminationMessageFallbackToLogsOnError
			}
		}
	}
	return job, nil
}

// withEnv is base without the variables env sets, then env.
func withEnv(base, env []corev1.EnvVar) []corev1.EnvVar {
	if len(env) == 0 {
		return base
	}
	set := make(map[string]corev1.EnvVar, len(env))
	for _, e := range env {
		set[e.Name] = e
	}
	out := make([]corev1.EnvVar, 0, len(base)+len(env))
	for _, e := range base {
		if _, ok := set[e.Name]; !ok {
			out = append(out, e)
		}
	}
	return append(out, env...)
}

func merged(base, add map[string]string) map[string]string {
	if len(add) == 0 {
		return base
	}
	out := maps.Clone(base)
	if out == nil {
		out = make(map[string]string, len(add))
	}
	maps.Copy(out, add)
	return out
}

// suffixLen is the length of the random suffix of a Job name.
const suffixLen = 6

// jobPrefix makes prefix usable as the start of a DNS label: lower case,
// other characters replaced by '-', cut so that "-" and a suffix fit.
func jobPrefix(prefix string) string {
	var b strings.Builder
	for _, c := range strings.ToLower(prefix) {
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
			b.WriteRune(c)
		default:
			b.WriteByte('-')
		}
	}
	p := b.String()
	for strings.Contains(p, "--") {
		p = strings.ReplaceAll(p, "--", "-")
	}
	if n := validation.DNS1123LabelMaxLength - 1 - suffixLen; len(p) > n {
		p = p[:n]
	}
	p = strings.Trim(p, "-")
	if p == "" {
		p = "drover"
	}
	return p
}

// nameWithSuffix is prefix (from jobPrefix), "-" and a random suffix.
func nameWithSuffix(prefix string) string {
	return prefix + "-" + strings.ToLower(rand.Text()[:suffixLen])
}

func ptr[T any](v T) *T { return &v }
