package kubejob

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Defaults for a Spec's zero values.
const (
	DefaultTimeout      = 30 * time.Minute
	DefaultPendingGrace = 2 * time.Minute
	DefaultMaxOutput    = 1 << 20
	// TTL is the Jobs' ttlSecondsAfterFinished: Run deletes its Job itself;
	// this removes one it could not (drover stopped, or the apiserver was
	// unreachable), late enough to look at it first.
	TTL = time.Hour
)

// Internal bounds.
const (
	// cleanupTimeout bounds deleting a Job after its run.
	cleanupTimeout = 30 * time.Second
	// logTimeout bounds reading a pod's log.
	logTimeout = time.Minute
	// saTimeout bounds the wait for the default ServiceAccount of a
	// namespace Run created.
	saTimeout = 30 * time.Second
	// explainTimeout bounds what is read to explain a failure (events, the
	// log of a pod that timed out).
	explainTimeout = 10 * time.Second
)

// Runner runs commands as Jobs with one client. It is safe for concurrent use.
type Runner struct {
	cs  kubernetes.Interface
	log *slog.Logger
}

// New returns a Runner using cs; log may be nil (discard).
func New(cs kubernetes.Interface, log *slog.Logger) *Runner {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Runner{cs: cs, log: log}
}

// Spec is one command to run as a Job: Image (with Command, Args,
// WorkingDir, ServiceAccount), or a Job given as a manifest.
type Spec struct {
	// Namespace is where the Job runs (required).
	Namespace string
	// CreateNamespace creates Namespace, labelled as drover's, when it is
	// missing. Without it a missing namespace is an error naming it.
	CreateNamespace bool
	// NamePrefix starts the Job's name; a random suffix is added, and the
	// prefix is cut to keep the name a DNS label of at most 63 characters.
	NamePrefix string
	// Labels are added to the Job and its pod template (identify the
	// runtime, instance and command).
	Labels map[string]string
	// Annotations are added to the Job and its pod template.
	Annotations map[string]string

	// Image, Command (the entrypoint), Args (the cmd), WorkingDir and
	// ServiceAccount describe the Job's one container. Command and Args
	// empty run the image's own entrypoint and cmd.
	Image      string
	Command    []string
	Args       []string
	WorkingDir string
	// ServiceAccount is the pods' service account ("" = the namespace's
	// default, or the one a Job manifest names).
	ServiceAccount string
	// Env is set in every container (and init container), overriding
	// variables of the same name a Job manifest sets.
	Env []corev1.EnvVar
	// SecretEnv are variables whose values must not appear in the Job
	// (raw secrets): Run puts them in a Secret of the namespace, named
	// after the Job and owned by it, which the containers read them from
	// (overriding Env and the manifest's variables of the same names); the
	// Secret is deleted with the Job.
	SecretEnv map[string]string

	// Job, if set, is used instead of Image and the fields after it, as it
	// is given except: its name (generated), namespace (Namespace), labels
	// and annotations (added), backoffLimit (0), restartPolicy (Never),
	// selector (generated), suspend (cleared), activeDeadlineSeconds (at
	// most Timeout), ttlSecondsAfterFinished (TTL unless set),
	// terminationMessagePolicy (FallbackToLogsOnError unless set), Env and
	// ServiceAccount (when set). It must pass Validate.
	Job *batchv1.Job

	// Timeout bounds the run (DefaultTimeout when 0): the Job's
	// activeDeadlineSeconds, and the wait. When it passes, the Job is
	// deleted and Result.TimedOut set.
	Timeout time.Duration
	// PendingGrace is how long after the Job's creation a pod may stay
	// unscheduled or unable to start its containers (DefaultPendingGrace
	// when 0).
	PendingGrace time.Duration
	// MaxOutput is how many bytes of output are kept, the end
	// (DefaultMaxOutput when 0).
	MaxOutput int
}

// Result is the outcome of a run.
type Result struct {
	// ExitCode is the main container's exit code, or -1 when it did not
	// exit (Err says why).
	ExitCode int
	// Output is the end of the container's log, or its termination message
	// when the log is empty or unavailable. After a timeout it is what the
	// log showed then, if it could be read.
	Output string
	// OutputTruncated says the beginning of the output was dropped.
	OutputTruncated bool
	// Reason says why the run failed, for people: the container's
	// terminated reason when it says more than Completed or Error
	// (OOMKilled), the reason a pod is stuck (ImagePullBackOff: message,
	// Unschedulable: message), or the Job's failure condition
	// (DeadlineExceeded: message).
	Reason string
	// Err is set when there is no exit code: the Job could not be created
	// or run, its pod was stuck or failed without its container exiting,
	// the run timed out or the context ended.
	Err error
	// NotStarted says the container never started (Err says why): the
	// namespace is missing, the Job was refused, no pod was created or the
	// pod was stuck.
	NotStarted bool
	// TimedOut says Spec.Timeout passed; Canceled that the context ended.
	TimedOut, Canceled bool
	// Job and Pod name what ran ("" when it did not get that far).
	Job, Pod string
}

// ErrNamespaceMissing is wrapped by Result.Err when Spec.Namespace does
// not exist and CreateNamespace is false.
var ErrNamespaceMissing = errors.New("namespace does not exist")

// Run runs s as a Job and returns its outcome once the Job is deleted.
func (r *Runner) Run(ctx context.Context, s Spec) Result {
	res := Result{ExitCode: -1}
	s = s.withDefaults()
	job, err := build(s)
	if err != nil {
		res.Err, res.NotStarted = err, true
		return res
	}
	if err := ctx.Err(); err != nil {
		res.Err, res.Canceled, res.NotStarted = err, true, true
		return res
	}
	if err := r.ensureNamespace(ctx, s); err != nil {
		res.Err, res.NotStarted = err, true
		res.Canceled = ctx.Err() != nil
		return res
	}
	var sec *corev1.Secret
	if len(s.SecretEnv) > 0 {
		if sec, err = r.createSecret(ctx, s, job); err != nil {
			res.Err, res.NotStarted = err, true
			res.Canceled = ctx.Err() != nil
			return res
		}
		defer r.deleteSecret(ctx, r.log, sec)
	}
	created, err := r.create(ctx, job)
	if err != nil {
		res.Err, res.NotStarted = err, true
		res.Canceled = ctx.Err() != nil
		return res
	}
	res.Job = created.Name
	log := r.log.With("namespace", created.Namespace, "job", created.Name)
	log.Debug("kubejob: job created")
	defer r.delete(ctx, log, created)
	if sec != nil {
		r.own(ctx, log, sec, created)
	}
	r.wait(ctx, log, created, s, &res)
	log.Debug("kubejob: job finished", "exit_code", res.ExitCode, "reason", res.Reason, "timed_out", res.TimedOut, "canceled", res.Canceled)
	return res
}

func (s Spec) withDefaults() Spec {
	if s.Timeout <= 0 {
		s.Timeout = DefaultTimeout
	}
	if s.PendingGrace <= 0 {
		s.PendingGrace = DefaultPendingGrace
	}
	if s.MaxOutput <= 0 {
		s.MaxOutput = DefaultMaxOutput
	}
	return s
}

// create creates job, with another name suffix if its name is taken.
func (r *Runner) create(ctx context.Context, job *batchv1.Job) (*batchv1.Job, error) {
	jobs := r.cs.BatchV1().Jobs(job.Namespace)
	for attempt := 0; ; attempt++ {
		created, err := jobs.Create(ctx, job, metav1.CreateOptions{})
		switch {
		case err == nil:
			return created, nil
		case apierrors.IsAlreadyExists(err) && attempt < 3:
			job.Name = nameWithSuffix(job.Name[:len(job.Name)-suffixLen-1])
		default:
			return nil, fmt.Errorf("create job %s/%s: %w", job.Namespace, job.Name, err)
		}
	}
}

// delete deletes job and, in the background, its pods. It runs after the
// caller's context may have ended, so it has its own.
func (r *Runner) delete(ctx context.Context, log *slog.Logger, job *batchv1.Job) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	bg := metav1.DeletePropagationBackground
	opts := metav1.DeleteOptions{PropagationPolicy: &bg, Preconditions: &metav1.Preconditions{UID: &job.UID}}
	var err error
	for attempt := range 3 {
		if attempt > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(time.Duration(attempt) * time.Second):
			}
		}
		err = r.cs.BatchV1().Jobs(job.Namespace).Delete(ctx, job.Name, opts)
		if err == nil || apierrors.IsNotFound(err) || apierrors.IsConflict(err) || ctx.Err() != nil {
			break
		}
	}
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		log.Warn("kubejob: deleting the job failed; its ttlSecondsAfterFinished removes it later", "error", err)
	}
}

// ensureNamespace checks that s.Namespace exists, creating it when allowed.
func (r *Runner) ensureNamespace(ctx context.Context, s Spec) error {
	nss := r.cs.CoreV1().Namespaces()
	_, err := nss.Get(ctx, s.Namespace, metav1.GetOptions{})
	switch {
	case err == nil:
		return nil
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("get namespace %s: %w", s.Namespace, err)
	case !s.CreateNamespace:
		return fmt.Errorf("%w: %s", ErrNamespaceMissing, s.Namespace)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.Namespace, Labels: map[string]string{LabelManaged: "true"}}}
	if _, err := nss.Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", s.Namespace, err)
	}
	r.log.Info("kubejob: namespace created", "namespace", s.Namespace)
	// Pods are refused until the ServiceAccount controller made the
	// namespace's default account; the Job controller would retry, with
	// backoff.
	if err := r.waitServiceAccount(ctx, s.Namespace, "default"); err != nil {
		return fmt.Errorf("namespace %s: %w", s.Namespace, err)
	}
	return nil
}
