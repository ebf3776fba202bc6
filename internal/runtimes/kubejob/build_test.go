package kubejob

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes/fake"

	kuberuntime "github.com/drover-dev/drover/internal/runtimes/kubernetes"
)

func TestLabelManagedIsTheKubernetesRuntimes(t *testing.T) {
	if LabelManaged != kuberuntime.LabelManaged {
		t.Errorf("LabelManaged %q, the Kubernetes runtime's %q", LabelManaged, kuberuntime.LabelManaged)
	}
}

func TestBuildFromImage(t *testing.T) {
	s := Spec{
		Namespace: "ns", NamePrefix: "Rt_apply", Image: "img:1",
		Command: []string{"/bin/sh"}, Args: []string{"-c", "true"}, WorkingDir: "/work",
		ServiceAccount: "deployer",
		Env:            []corev1.EnvVar{{Name: "A", Value: "1"}},
		Labels:         map[string]string{"l": "v"},
		Annotations:    map[string]string{"a": "v"},
	}.withDefaults()
	job, err := build(s)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(job.Name, "rt-apply-") || len(job.Name) != len("rt-apply-")+suffixLen || job.Namespace != "ns" {
		t.Errorf("name %s/%s", job.Namespace, job.Name)
	}
	spec := job.Spec
	if *spec.BackoffLimit != 0 || *spec.ActiveDeadlineSeconds != int64(DefaultTimeout/time.Second) || *spec.TTLSecondsAfterFinished != int32(TTL/time.Second) {
		t.Errorf("backoffLimit %d, activeDeadlineSeconds %d, ttl %d", *spec.BackoffLimit, *spec.ActiveDeadlineSeconds, *spec.TTLSecondsAfterFinished)
	}
	pod := spec.Template.Spec
	c := pod.Containers[0]
	if pod.RestartPolicy != corev1.RestartPolicyNever || pod.ServiceAccountName != "deployer" ||
		c.Name != MainContainer || c.Image != "img:1" || c.Command[0] != "/bin/sh" || c.Args[1] != "true" || c.WorkingDir != "/work" ||
		c.Env[0].Value != "1" || c.TerminationMessagePolicy != corev1.TerminationMessageFallbackToLogsOnError {
		t.Errorf("pod spec %+v", pod)
	}
	if job.Labels["l"] != "v" || spec.Template.Labels["l"] != "v" || job.Annotations["a"] != "v" || spec.Template.Annotations["a"] != "v" {
		t.Errorf("labels %v %v, annotations %v %v", job.Labels, spec.Template.Labels, job.Annotations, spec.Template.Annotations)
	}
}

func TestBuildFromManifest(t *testing.T) {
	given := parseJob(t, manifest)
	given.Spec.ActiveDeadlineSeconds = ptr(int64(10))
	s := Spec{
		Namespace: "ns", Job: given, Timeout: time.Minute,
		Env:    []corev1.EnvVar{{Name: "MODE", Value: "drover"}, {Name: "PVN_SERVICE", Value: "web"}},
		Labels: map[string]string{"app.drover.dev/service": "web"},
	}.withDefaults()
	job, err := build(s)
	if err != nil {
		t.Fatal(err)
	}
	if job.Namespace != "ns" || !strings.HasPrefix(job.Name, "drover-") || job.Labels["team"] != "infra" || job.Labels["app.drover.dev/service"] != "web" {
		t.Errorf("metadata %+v", job.ObjectMeta)
	}
	tmpl := job.Spec.Template
	if _, ok := tmpl.Labels["controller-uid"]; ok || tmpl.Labels[labelExitCode] != "3" || tmpl.Labels["app.drover.dev/service"] != "web" {
		t.Errorf("template labels %v", tmpl.Labels)
	}
	if *job.Spec.BackoffLimit != 0 || tmpl.Spec.RestartPolicy != corev1.RestartPolicyNever || *job.Spec.ActiveDeadlineSeconds != 10 {
		t.Errorf("backoffLimit %d, restartPolicy %s, activeDeadlineSeconds %d", *job.Spec.BackoffLimit, tmpl.Spec.RestartPolicy, *job.Spec.ActiveDeadlineSeconds)
	}
	for _, c := range tmpl.Spec.Containers {
		env := map[string]string{}
		for _, e := range c.Env {
			if _, dup := env[e.Name]; dup {
				t.Errorf("container %s: %s twice", c.Name, e.Name)
			}
			env[e.Name] = e.Value
		}
		if env["MODE"] != "drover" || env["PVN_SERVICE"] != "web" {
			t.Errorf("container %s: env %v", c.Name, c.Env)
		}
	}
	// The given Job is not changed.
	if given.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyOnFailure || len(given.Spec.Template.Spec.Containers[0].Env) != 1 || given.Spec.Template.Labels["controller-uid"] != "stale" {
		t.Errorf("the given Job was modified: %+v", given.Spec.Template)
	}
}

func TestValidate(t *testing.T) {
	for name, spec := range map[string]batchv1.JobSpec{
		"no containers": {},
		"completions":   {Completions: ptr(int32(2)), Template: oneContainer()},
		"parallelism":   {Parallelism: ptr(int32(3)), Template: oneContainer()},
		"indexed":       {CompletionMode: ptr(batchv1.IndexedCompletion), Template: oneContainer()},
	} {
		if err := Validate(&batchv1.Job{Spec: spec}); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if err := Validate(&batchv1.Job{Spec: batchv1.JobSpec{Completions: ptr(int32(1)), Template: oneContainer()}}); err != nil {
		t.Errorf("one pod: %v", err)
	}
}

func oneContainer() corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}}}
}

func TestJobPrefix(t *testing.T) {
	for in, want := range map[string]string{
		"":                      "drover",
		"My_Runtime/apply":      "my-runtime-apply",
		"--a..b--":              "a-b",
		strings.Repeat("x", 80): strings.Repeat("x", validation.DNS1123LabelMaxLength-1-suffixLen),
	} {
		got := jobPrefix(in)
		if got != want {
			t.Errorf("jobPrefix(%q) = %q, want %q", in, got, want)
		}
		if errs := validation.IsDNS1123Label(nameWithSuffix(got)); len(errs) > 0 {
			t.Errorf("name from %q: %v", in, errs)
		}
	}
}

func TestKeepEnd(t *testing.T) {
	w := &tailWriter{limit: 5}
	for _, s := range []string{"hello ", "wörld", "!"} {
		_, _ = w.Write([]byte(s))
	}
	out, cut := w.end()
	if !cut || out != "rld!" || !utf8.ValidString(out) {
		t.Errorf("end %q, cut %v", out, cut)
	}
	if out, cut := keepEnd("short", 10); out != "short" || cut {
		t.Errorf("keepEnd short: %q %v", out, cut)
	}
}

func TestDecide(t *testing.T) {
	now := time.Now()
	job := &batchv1.Job{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "main"}, {Name: "x"}},
	}}}}
	pod := func(age time.Duration, phase corev1.PodPhase, sts ...corev1.ContainerStatus) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "p" + age.String(), CreationTimestamp: metav1.NewTime(now.Add(-age))},
			Status:     corev1.PodStatus{Phase: phase, ContainerStatuses: sts},
		}
	}
	exited := func(name string, code int32) corev1.ContainerStatus {
		return corev1.ContainerStatus{Name: name, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code}}}
	}
	waiting := func(reason string) corev1.ContainerStatus {
		return corev1.ContainerStatus{Name: "main", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: "m"}}}
	}
	failed := func(reason string) *batchv1.Job {
		j := job.DeepCopy()
		j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: reason, Message: "msg"}}
		return j
	}
	unschedulable := pod(time.Second, corev1.PodPending)
	unschedulable.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/2 nodes"}}

	cases := []struct {
		name      string
		job       *batchv1.Job
		pods      []*corev1.Pod
		grace     bool
		done      bool
		code      int32 // when exited
		reason    string
		timedOut  bool
		notStart  bool
		noExit    bool
		container string
	}{
		{name: "nothing yet", job: job},
		{name: "running", job: job, pods: []*corev1.Pod{pod(0, corev1.PodRunning)}, grace: true},
		{name: "main exited, sidecar running", job: job, pods: []*corev1.Pod{pod(0, corev1.PodRunning, exited("x", 0), exited("main", 4))}, done: true, code: 4, container: "main"},
		{name: "latest pod", job: job, pods: []*corev1.Pod{pod(time.Minute, corev1.PodFailed, exited("main", 1)), pod(0, corev1.PodSucceeded, exited("main", 0))}, done: true, code: 0, container: "main"},
		{name: "evicted", job: job, pods: []*corev1.Pod{{Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted", Message: "low memory"}}}, done: true, reason: "Evicted: low memory", noExit: true},
		{name: "deadline", job: failed(batchv1.JobReasonDeadlineExceeded), pods: []*corev1.Pod{pod(0, corev1.PodRunning)}, done: true, reason: "DeadlineExceeded: msg", timedOut: true, noExit: true},
		{name: "failed, pod update on its way", job: failed(batchv1.JobReasonBackoffLimitExceeded), pods: []*corev1.Pod{pod(0, corev1.PodRunning)}},
		{name: "failed without pods", job: failed(batchv1.JobReasonBackoffLimitExceeded), done: true, reason: "BackoffLimitExceeded: msg", noExit: true},
		{name: "deleted", done: true, reason: "the Job was deleted before it finished", noExit: true},
		{name: "image pull, in grace", job: job, pods: []*corev1.Pod{pod(0, corev1.PodPending, waiting("ImagePullBackOff"))}},
		{name: "image pull", job: job, pods: []*corev1.Pod{pod(0, corev1.PodPending, waiting("ImagePullBackOff"))}, grace: true, done: true, reason: "ImagePullBackOff: m", notStart: true, noExit: true},
		{name: "creating", job: job, pods: []*corev1.Pod{pod(0, corev1.PodPending, waiting("ContainerCreating"))}, grace: true},
		{name: "not ready is running", job: job, pods: []*corev1.Pod{pod(0, corev1.PodRunning, waiting("CrashLoopBackOff"))}, grace: true},
		{name: "unschedulable", job: job, pods: []*corev1.Pod{unschedulable}, grace: true, done: true, reason: "Unschedulable: 0/2 nodes", notStart: true, noExit: true},
		{name: "no pod", job: job, grace: true, done: true, reason: "no pod was created", notStart: true, noExit: true},
	}
	for _, c := range cases {
		v := decide(c.job, c.pods, c.grace)
		if v.done != c.done {
			t.Errorf("%s: done %v, want %v (%+v)", c.name, v.done, c.done, v)
			continue
		}
		if !v.done {
			continue
		}
		if (v.exited == nil) != c.noExit || v.exited != nil && v.exited.ExitCode != c.code {
			t.Errorf("%s: exited %+v, want code %d (no exit: %v)", c.name, v.exited, c.code, c.noExit)
		}
		if v.reason != c.reason || v.timedOut != c.timedOut || v.notStarted != c.notStart || v.container != c.container {
			t.Errorf("%s: %+v", c.name, v)
		}
	}
}

// TestOutputPrefersTheLog: the cluster's kwok pods have no logs, so the log
// path is checked with client-go's fake clientset, whose pods/log is "fake logs".
func TestOutputPrefersTheLog(t *testing.T) {
	r := New(fake.NewClientset(), nil)
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "ns"}}
	v := verdict{done: true, pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}}, container: "main",
		exited: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "OOMKilled", Message: "the termination message"}}
	var res Result
	r.conclude(t.Context(), r.log, job, Spec{MaxOutput: 4}, v, &res)
	if res.ExitCode != 1 || res.Reason != "OOMKilled" || res.Output != "logs" || !res.OutputTruncated || res.Pod != "p" || res.Err != nil {
		t.Errorf("result %+v, want the end of the log", res)
	}
	// Without a container to read, the termination message.
	v.container = ""
	res = Result{}
	r.conclude(t.Context(), r.log, job, Spec{MaxOutput: 100}, v, &res)
	if res.Output != "the termination message" {
		t.Errorf("output %q, want the termination message", res.Output)
	}
}
