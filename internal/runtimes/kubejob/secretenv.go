package kubejob

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// createSecret makes the Secret holding s.SecretEnv for job (named like it)
// and points the containers of job at it. The Secret is deleted by
// deleteSecret after the run, and by the garbage collector with the Job
// once own has made the Job its owner.
func (r *Runner) createSecret(ctx context.Context, s Spec, job *batchv1.Job) (*corev1.Secret, error) {
	names := slices.Sorted(maps.Keys(s.SecretEnv))
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: job.Name, Namespace: job.Namespace, Labels: maps.Clone(s.Labels)},
		Type:       corev1.SecretTypeOpaque,
		Data:       make(map[string][]byte, len(names)),
	}
	env := make([]corev1.EnvVar, 0, len(names))
	for i, name := range names {
		// Keys of their own: a variable's name need not be a valid key.
		key := "env" + strconv.Itoa(i)
		sec.Data[key] = []byte(s.SecretEnv[name])
		env = append(env, corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: sec.Name},
			Key:                  key,
		}}})
	}
	secrets := r.cs.CoreV1().Secrets(job.Namespace)
	for attempt := 0; ; attempt++ {
		created, err := secrets.Create(ctx, sec, metav1.CreateOptions{})
		switch {
		case err == nil:
			sec = created
		case apierrors.IsAlreadyExists(err) && attempt < 3:
			sec.Name = nameWithSuffix(sec.Name[:len(sec.Name)-suffixLen-1])
			for i := range env {
				env[i].ValueFrom.SecretKeyRef.Name = sec.Name
			}
			continue
		default:
			return nil, fmt.Errorf("create secret %s/%s for the job's environment: %w", job.Namespace, sec.Name, err)
		}
		break
	}
	pod := &job.Spec.Template.Spec
	for _, cs := range [][]corev1.Container{pod.InitContainers, pod.Containers} {
		for i := range cs {
			cs[i].Env = withEnv(cs[i].Env, env)
		}
	}
	return sec, nil
}

// own makes job the owner of sec, so that the garbage collector deletes
// sec with job if drover cannot (it stopped before the run ended).
func (r *Runner) own(ctx context.Context, log *slog.Logger, sec *corev1.Secret, job *batchv1.Job) {
	patch := fmt.Appendf(nil, `{"metadata":{"ownerReferences":[{"apiVersion":"batch/v1","kind":"Job","name":%q,"uid":%q}]}}`, job.Name, job.UID)
	if _, err := r.cs.CoreV1().Secrets(sec.Namespace).Patch(ctx, sec.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		log.Warn("kubejob: cannot make the job own its secret; it is deleted after the run", "secret", sec.Name, "error", err)
	}
}

// deleteSecret deletes sec. It runs after the caller's context may have
// ended, so it has its own.
func (r *Runner) deleteSecret(ctx context.Context, log *slog.Logger, sec *corev1.Secret) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	err := r.cs.CoreV1().Secrets(sec.Namespace).Delete(ctx, sec.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &sec.UID}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		log.Warn("kubejob: deleting the job's secret failed", "secret", sec.Name, "error", err)
	}
}

// SplitSecretEnv moves the variables of env whose values hold one of
// secrets (raw secret values) out of env into a SecretEnv map, so that a
// Job does not show them. Empty secrets are ignored.
func SplitSecretEnv(env []corev1.EnvVar, secrets []string) ([]corev1.EnvVar, map[string]string) {
	var secretEnv map[string]string
	out := env[:0:0]
	for _, e := range env {
		if e.ValueFrom == nil && holdsSecret(e.Value, secrets) {
			if secretEnv == nil {
				secretEnv = map[string]string{}
			}
			secretEnv[e.Name] = e.Value
			continue
		}
		out = append(out, e)
	}
	return out, secretEnv
}

func holdsSecret(v string, secrets []string) bool {
	for _, s := range secrets {
		if s != "" && strings.Contains(v, s) {
			return true
		}
	}
	return false
}
