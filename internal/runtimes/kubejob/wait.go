package kubejob

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
)

// errTimedOut is the cause of the wait's context when Spec.Timeout passed.
var errTimedOut = errors.New("timed out")

// wait watches job and its pods until the run's outcome is known, the
// timeout passes or ctx ends, and fills res (the Job is still there).
func (r *Runner) wait(ctx context.Context, log *slog.Logger, job *batchv1.Job, s Spec, res *Result) {
	if job.Spec.Selector == nil {
		res.Err = fmt.Errorf("job %s/%s has no selector", job.Namespace, job.Name)
		return
	}
	podSelector, err := metav1.LabelSelectorAsSelector(job.Spec.Selector)
	if err != nil {
		res.Err = fmt.Errorf("job %s/%s: selector: %w", job.Namespace, job.Name, err)
		return
	}
	wctx, cancel := context.WithTimeoutCause(ctx, s.Timeout, errTimedOut)
	defer cancel()

	changed := make(chan struct{}, 1)
	poke := func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { poke() },
		UpdateFunc: func(any, any) { poke() },
		DeleteFunc: func(any) { poke() },
	}
	jobs := r.cs.BatchV1().Jobs(job.Namespace)
	pods := r.cs.CoreV1().Pods(job.Namespace)
	jobField := fields.OneTermEqualSelector("metadata.name", job.Name).String()
	jobStore, jobInformer := cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: listWatch(jobs.List, jobs.Watch, func(o *metav1.ListOptions) { o.FieldSelector = jobField }),
		ObjectType:    &batchv1.Job{},
		Handler:       handler,
	})
	podStore, podInformer := cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: listWatch(pods.List, pods.Watch, func(o *metav1.ListOptions) { o.LabelSelector = podSelector.String() }),
		ObjectType:    &corev1.Pod{},
		Handler:       handler,
	})
	var wg sync.WaitGroup
	defer wg.Wait()
	ictx, stop := context.WithCancel(wctx)
	defer stop()
	wg.Go(func() { jobInformer.RunWithContext(ictx) })
	wg.Go(func() { podInformer.RunWithContext(ictx) })
	if !cache.WaitForCacheSync(wctx.Done(), jobInformer.HasSynced, podInformer.HasSynced) {
		r.stopped(ctx, wctx, log, job, s, nil, res)
		return
	}

	grace := time.NewTimer(s.PendingGrace)
	defer grace.Stop()
	graceOver := false
	for {
		current, podList := observed(jobStore, podStore)
		v := decide(current, podList, graceOver)
		if v.done {
			r.conclude(ctx, log, job, s, v, res)
			return
		}
		select {
		case <-wctx.Done():
			r.stopped(ctx, wctx, log, job, s, podList, res)
			return
		case <-grace.C:
			graceOver = true
		case <-changed:
		}
	}
}

// listWatch lists and watches with the options tweak sets.
func listWatch[L runtime.Object](
	list func(context.Context, metav1.ListOptions) (L, error),
	watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error),
	tweak func(*metav1.ListOptions),
) *cache.ListWatch {
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			tweak(&o)
			return list(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			tweak(&o)
			return watchFn(ctx, o)
		},
	}
}

// observed reads the informers' stores: the Job (nil once deleted) and its pods.
func observed(jobStore, podStore cache.Store) (*batchv1.Job, []*corev1.Pod) {
	var job *batchv1.Job
	for _, o := range jobStore.List() {
		if j, ok := o.(*batchv1.Job); ok {
			job = j
		}
	}
	var pods []*corev1.Pod
	for _, o := range podStore.List() {
		if p, ok := o.(*corev1.Pod); ok {
			pods = append(pods, p)
		}
	}
	return job, pods
}

// stopped fills res after the wait's context ended: the timeout passed or
// ctx ended. After a timeout, the reason and the output say what the pod
// was doing, when that can be read.
func (r *Runner) stopped(ctx, wctx context.Context, log *slog.Logger, job *batchv1.Job, s Spec, pods []*corev1.Pod, res *Result) {
	if !errors.Is(context.Cause(wctx), errTimedOut) {
		res.Err, res.Canceled = context.Cause(ctx), true
		return
	}
	res.TimedOut = true
	res.Err = fmt.Errorf("timed out after %v", s.Timeout)
	p := latest(pods)
	if p == nil {
		res.NotStarted = true
		return
	}
	res.Pod = p.Name
	if reason := stuck(p); reason != "" {
		res.Reason, res.NotStarted = reason, true
		return
	}
	if st := containerStatus(p, mainContainer(job)); st != nil && st.State.Running != nil {
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), explainTimeout)
		defer cancel()
		out, cut, err := r.podLog(lctx, job.Namespace, p.Name, st.Name, s.MaxOutput)
		if err != nil {
			log.Debug("kubejob: reading the log of a timed out pod failed", "pod", p.Name, "error", err)
		}
		res.Output, res.OutputTruncated = out, cut
	}
}

// conclude fills res from a verdict, reading the output of an exited container.
func (r *Runner) conclude(ctx context.Context, log *slog.Logger, job *batchv1.Job, s Spec, v verdict, res *Result) {
	if v.pod != nil {
		res.Pod = v.pod.Name
	}
	res.Reason, res.NotStarted, res.TimedOut = v.reason, v.notStarted, v.timedOut
	if v.exited == nil {
		if v.noPod {
			if why := r.jobWarning(ctx, job); why != "" {
				res.Reason += ": " + why
			}
		}
		res.Err = errors.New(res.Reason)
		if v.timedOut {
			res.Err = fmt.Errorf("timed out after %v", s.Timeout)
		}
		return
	}
	res.ExitCode = int(v.exited.ExitCode)
	switch v.exited.Reason {
	case "", "Completed", "Error":
	default:
		res.Reason = v.exited.Reason
	}
	if v.container != "" {
		out, cut, err := r.podLog(ctx, job.Namespace, v.pod.Name, v.container, s.MaxOutput)
		if err != nil {
			log.Debug("kubejob: reading the pod's log failed; using its termination message", "pod", v.pod.Name, "error", err)
		}
		res.Output, res.OutputTruncated = out, cut
	}
	if res.Output == "" {
		res.Output, res.OutputTruncated = keepEnd(v.exited.Message, s.MaxOutput)
	}
}

// jobWarning is the latest warning event of job ("Reason: message"), or "".
func (r *Runner) jobWarning(ctx context.Context, job *batchv1.Job) string {
	ctx, cancel := context.WithTimeout(ctx, explainTimeout)
	defer cancel()
	list, err := r.cs.CoreV1().Events(job.Namespace).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("involvedObject.uid", string(job.UID)).String(),
	})
	if err != nil {
		return ""
	}
	var last *corev1.Event
	for i := range list.Items {
		e := &list.Items[i]
		if e.Type == corev1.EventTypeWarning && (last == nil || !eventTime(e).Before(eventTime(last))) {
			last = e
		}
	}
	if last == nil {
		return ""
	}
	return join(last.Reason, last.Message)
}

func eventTime(e *corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}

// verdict is what a Job and its pods say about the run.
type verdict struct {
	done bool
	// pod is the pod the verdict is about (nil when there is none).
	pod *corev1.Pod
	// exited is the main container's termination; container names it ("" when
	// the pod ended without a status for it: nothing to read a log of).
	exited    *corev1.ContainerStateTerminated
	container string
	// reason says why the run failed without exiting.
	reason     string
	notStarted bool
	timedOut   bool
	// noPod: the Job made no pod within the grace; its events say why.
	noPod bool
}

// decide reads the run's outcome from job (nil once deleted) and its pods;
// graceOver says PendingGrace has passed since the Job was created. It is
// pure: the informers feed it, level-based.
func decide(job *batchv1.Job, pods []*corev1.Pod, graceOver bool) verdict {
	if job == nil {
		return verdict{done: true, reason: "the Job was deleted before it finished"}
	}
	pods = slices.SortedFunc(slices.Values(pods), func(a, b *corev1.Pod) int {
		return b.CreationTimestamp.Compare(a.CreationTimestamp.Time)
	})
	main := mainContainer(job)
	for _, p := range pods {
		if st := containerStatus(p, main); st != nil && st.State.Terminated != nil {
			return verdict{done: true, pod: p, exited: st.State.Terminated, container: st.Name}
		}
	}
	for _, p := range pods {
		switch p.Status.Phase {
		case corev1.PodSucceeded:
			return verdict{done: true, pod: p, exited: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}
		case corev1.PodFailed:
			reason := join(p.Status.Reason, p.Status.Message)
			if reason == "" {
				reason = "the pod failed without its container exiting"
			}
			return verdict{done: true, pod: p, reason: reason}
		case corev1.PodPending, corev1.PodRunning, corev1.PodUnknown:
		}
	}
	if c := jobCondition(job, batchv1.JobFailed, batchv1.JobFailureTarget); c != nil {
		reason := join(c.Reason, c.Message)
		switch {
		case c.Reason == batchv1.JobReasonDeadlineExceeded:
			return verdict{done: true, pod: latest(pods), reason: reason, timedOut: true}
		case len(pods) == 0:
			return verdict{done: true, reason: reason}
		}
		// The pod's end, which the Job controller saw, is on its way.
	}
	if jobCondition(job, batchv1.JobComplete, batchv1.JobSuccessCriteriaMet) != nil && len(pods) == 0 {
		// Succeeded, and the pod is gone already: nothing more to read.
		return verdict{done: true, exited: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}
	}
	if !graceOver {
		return verdict{}
	}
	p := latest(pods)
	if p == nil {
		return verdict{done: true, noPod: true, notStarted: true, reason: "no pod was created"}
	}
	if reason := stuck(p); reason != "" {
		return verdict{done: true, pod: p, notStarted: true, reason: reason}
	}
	return verdict{}
}

// stuckReasons are the waiting reasons of a container that will not start
// by itself. (CrashLoopBackOff is not one: with restartPolicy Never a
// container that ran is terminated, not restarted.)
var stuckReasons = map[string]bool{
	"ErrImagePull":               true,
	"ImagePullBackOff":           true,
	"InvalidImageName":           true,
	"ErrImageNeverPull":          true,
	"CreateContainerConfigError": true,
	"CreateContainerError":       true,
	"RunContainerError":          true,
}

// stuck says why p cannot start: a container waiting for a reason that
// needs someone to act, or no node for it. "" when it is not stuck.
func stuck(p *corev1.Pod) string {
	for _, sts := range [][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
		for _, st := range sts {
			if w := st.State.Waiting; w != nil && stuckReasons[w.Reason] {
				return join(w.Reason, w.Message)
			}
		}
	}
	if p.Status.Phase == corev1.PodPending {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
				return join(cmp.Or(c.Reason, "Unschedulable"), c.Message)
			}
		}
	}
	return ""
}

// mainContainer names the Job's main container: its first.
func mainContainer(job *batchv1.Job) string {
	if cs := job.Spec.Template.Spec.Containers; len(cs) > 0 {
		return cs[0].Name
	}
	return ""
}

// containerStatus is the status of p's container name, or else of its
// first container; nil when p has none yet.
func containerStatus(p *corev1.Pod, name string) *corev1.ContainerStatus {
	sts := p.Status.ContainerStatuses
	for i := range sts {
		if sts[i].Name == name {
			return &sts[i]
		}
	}
	if len(sts) > 0 && name == "" {
		return &sts[0]
	}
	return nil
}

// jobCondition is the first of the types that is true on job, or nil.
func jobCondition(job *batchv1.Job, types ...batchv1.JobConditionType) *batchv1.JobCondition {
	for _, t := range types {
		for i := range job.Status.Conditions {
			if c := &job.Status.Conditions[i]; c.Type == t && c.Status == corev1.ConditionTrue {
				return c
			}
		}
	}
	return nil
}

// latest is the pod created last (nil without pods).
func latest(pods []*corev1.Pod) *corev1.Pod {
	var out *corev1.Pod
	for _, p := range pods {
		if out == nil || p.CreationTimestamp.After(out.CreationTimestamp.Time) {
			out = p
		}
	}
	return out
}

// join is "reason: message", or whichever is not empty.
func join(reason, message string) string {
	switch {
	case reason == "":
		return message
	case message == "":
		return reason
	}
	return reason + ": " + message
}

// waitServiceAccount waits until the namespace has the ServiceAccount name.
func (r *Runner) waitServiceAccount(ctx context.Context, ns, name string) error {
	ctx, cancel := context.WithTimeout(ctx, saTimeout)
	defer cancel()
	sas := r.cs.CoreV1().ServiceAccounts(ns)
	sel := fields.OneTermEqualSelector("metadata.name", name).String()
	lw := listWatch(sas.List, sas.Watch, func(o *metav1.ListOptions) { o.FieldSelector = sel })
	exists := func(store cache.Store) (bool, error) { return len(store.List()) > 0, nil }
	created := func(ev watch.Event) (bool, error) { return ev.Type == watch.Added || ev.Type == watch.Modified, nil }
	if _, err := watchtools.UntilWithSync(ctx, lw, &corev1.ServiceAccount{}, exists, created); err != nil {
		return fmt.Errorf("waiting for its %s ServiceAccount: %w", name, err)
	}
	return nil
}
