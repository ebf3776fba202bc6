package kubejob

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/drover-dev/drover/internal/testing/kubetest"
)

func TestMain(m *testing.M) { kubetest.Main(m) }

// Labels and annotations of the local cluster's kwok stages (hack/kube/kwok).
const (
	labelExitCode     = "drover.dev/exit-code"
	annotationMessage = "drover.dev/termination-message"
	annotationDelay   = "drover.dev/exit-delay"
)

// Labels and annotations of a command that runs for an hour.
var (
	longRun       = map[string]string{labelExitCode: "0"}
	longRunLength = map[string]string{annotationDelay: "1h"}
)

// cluster returns a client of the shared test cluster and a namespace of
// the test's own.
func cluster(t *testing.T) (kubernetes.Interface, string) {
	t.Helper()
	c := kubetest.Shared(t)
	rc, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	ns := testNamespace(t)
	createNamespace(t, cs, ns)
	return cs, ns
}

// testNamespace is a namespace name for the test, not created.
func testNamespace(t *testing.T) string {
	t.Helper()
	return nameWithSuffix(jobPrefix("kj-" + strings.TrimPrefix(t.Name(), "TestRun")))
}

func createNamespace(t *testing.T, cs kubernetes.Interface, ns string) {
	t.Helper()
	_, err := cs.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteNamespace(cs, ns) })
	// Pods are refused until the namespace has its default ServiceAccount.
	if err := New(cs, nil).waitServiceAccount(t.Context(), ns, "default"); err != nil {
		t.Fatal(err)
	}
}

func deleteNamespace(cs kubernetes.Interface, ns string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
}

// noJobsLeft fails t when a Job remains in ns.
func noJobsLeft(t *testing.T, cs kubernetes.Interface, ns string) {
	t.Helper()
	list, err := cs.BatchV1().Jobs(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range list.Items {
		t.Errorf("job %s left behind (deleting since %v)", j.Name, j.DeletionTimestamp)
	}
}

func run(t *testing.T, cs kubernetes.Interface, s Spec) Result {
	t.Helper()
	began := time.Now()
	res := New(cs, nil).Run(t.Context(), s)
	t.Logf("ran %s in %v: exit %d, reason %q, err %v", res.Job, time.Since(began).Round(time.Millisecond), res.ExitCode, res.Reason, res.Err)
	noJobsLeft(t, cs, s.Namespace)
	return res
}

func TestRunSucceeds(t *testing.T) {
	t.Parallel()
	cs, ns := cluster(t)
	res := run(t, cs, Spec{Namespace: ns, NamePrefix: "ok", Image: "example.com/tool:1", Command: []string{"/bin/tool"}, Args: []string{"apply"}, Timeout: time.Minute})
	if res.Err != nil || res.ExitCode != 0 || res.TimedOut || res.NotStarted {
		t.Fatalf("result %+v, want exit 0", res)
	}
	if !strings.HasPrefix(res.Job, "ok-") || res.Pod == "" {
		t.Errorf("job %q, pod %q", res.Job, res.Pod)
	}
}

func TestRunExitCodes(t *testing.T) {
	t.Parallel()
	for _, code := range []int{2, 7} {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			t.Parallel()
			cs, ns := cluster(t)
			msg := fmt.Sprintf("exited with %d\n{\"json\": true}", code)
			res := run(t, cs, Spec{
				Namespace:   ns,
				NamePrefix:  "exit",
				Image:       "example.com/tool:1",
				Labels:      map[string]string{labelExitCode: fmt.Sprint(code)},
				Annotations: map[string]string{annotationMessage: msg},
				Timeout:     time.Minute,
			})
			if res.Err != nil || res.ExitCode != code {
				t.Fatalf("result %+v, want exit %d", res, code)
			}
			if res.Output != msg {
				t.Errorf("output %q, want the termination message %q", res.Output, msg)
			}
			if res.Reason != "" {
				t.Errorf("reason %q, want none for a plain exit code", res.Reason)
			}
		})
	}
}

func TestRunTimeout(t *testing.T) {
	t.Parallel()
	cs, ns := cluster(t)
	res := run(t, cs, Spec{
		Namespace: ns, Image: "example.com/tool:1",
		Labels: longRun, Annotations: longRunLength,
		Timeout: 3 * time.Second,
	})
	if !res.TimedOut || res.Err == nil || res.ExitCode != -1 || res.Canceled {
		t.Fatalf("result %+v, want a timeout", res)
	}
	if !strings.Contains(res.Err.Error(), "timed out after 3s") {
		t.Errorf("error %v", res.Err)
	}
}

func TestRunCanceled(t *testing.T) {
	t.Parallel()
	cs, ns := cluster(t)
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(2*time.Second, cancel)
	res := New(cs, nil).Run(ctx, Spec{
		Namespace: ns, Image: "example.com/tool:1",
		Labels: longRun, Annotations: longRunLength,
		Timeout: time.Minute,
	})
	if !res.Canceled || !errors.Is(res.Err, context.Canceled) || res.TimedOut {
		t.Fatalf("result %+v, want canceled", res)
	}
	noJobsLeft(t, cs, ns)
}

const manifest = `
apiVersion: batch/v1
kind: Job
metadata:
  name: from-a-file
  namespace: elsewhere
  labels: {team: infra}
spec:
  backoffLimit: 6
  template:
    metadata:
      labels: {drover.dev/exit-code: "3", controller-uid: stale}
      annotations: {drover.dev/termination-message: "from the manifest"}
    spec:
      restartPolicy: OnFailure
      containers:
      - name: deploy
        image: example.com/deployer:2
        args: [deploy]
        env: [{name: MODE, value: manifest}]
      - name: sidecar
        image: example.com/proxy:1
`

func parseJob(t *testing.T, s string) *batchv1.Job {
	t.Helper()
	var job batchv1.Job
	if err := yaml.UnmarshalStrict([]byte(s), &job); err != nil {
		t.Fatal(err)
	}
	return &job
}

func TestRunManifest(t *testing.T) {
	t.Parallel()
	cs, ns := cluster(t)
	res := run(t, cs, Spec{
		Namespace: ns, NamePrefix: "manifest",
		Job:     parseJob(t, manifest),
		Env:     []corev1.EnvVar{{Name: "MODE", Value: "drover"}},
		Timeout: time.Minute,
	})
	if res.Err != nil || res.ExitCode != 3 || res.Output != "from the manifest" {
		t.Fatalf("result %+v, want exit 3 with the manifest's message", res)
	}
}

func TestRunMissingNamespace(t *testing.T) {
	t.Parallel()
	cs, _ := cluster(t)
	ns := testNamespace(t)
	res := run(t, cs, Spec{Namespace: ns, Image: "example.com/tool:1"})
	if !errors.Is(res.Err, ErrNamespaceMissing) || !strings.Contains(res.Err.Error(), ns) || !res.NotStarted || res.Job != "" {
		t.Fatalf("result %+v, want an error naming the missing namespace %s", res, ns)
	}
	if _, err := cs.CoreV1().Namespaces().Get(t.Context(), ns, metav1.GetOptions{}); err == nil {
		t.Errorf("namespace %s was created without CreateNamespace", ns)
	}
}

func TestRunCreatesNamespace(t *testing.T) {
	t.Parallel()
	cs, _ := cluster(t)
	ns := testNamespace(t)
	t.Cleanup(func() { deleteNamespace(cs, ns) })
	res := run(t, cs, Spec{Namespace: ns, CreateNamespace: true, Image: "example.com/tool:1", Timeout: time.Minute})
	if res.Err != nil || res.ExitCode != 0 {
		t.Fatalf("result %+v, want exit 0", res)
	}
	got, err := cs.CoreV1().Namespaces().Get(t.Context(), ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Labels[LabelManaged] != "true" {
		t.Errorf("namespace labels %v, want %s=true", got.Labels, LabelManaged)
	}
	// An existing namespace is used as it is.
	if res := run(t, cs, Spec{Namespace: ns, CreateNamespace: true, Image: "example.com/tool:1", Timeout: time.Minute}); res.Err != nil {
		t.Fatalf("second run: %+v", res)
	}
}

func TestRunUnschedulable(t *testing.T) {
	t.Parallel()
	cs, ns := cluster(t)
	job := parseJob(t, `
apiVersion: batch/v1
kind: Job
metadata: {name: stuck}
spec:
  template:
    spec:
      nodeSelector: {drover.dev/no-such-node: "true"}
      containers: [{name: main, image: example.com/tool:1}]
`)
	res := run(t, cs, Spec{Namespace: ns, Job: job, PendingGrace: 2 * time.Second, Timeout: time.Minute})
	if res.Err == nil || !res.NotStarted || res.TimedOut || !strings.HasPrefix(res.Reason, "Unschedulable: ") {
		t.Fatalf("result %+v, want a stuck pod with reason Unschedulable", res)
	}
	if res.Pod == "" {
		t.Errorf("no pod named")
	}
}

func TestRunNoPod(t *testing.T) {
	t.Parallel()
	cs, ns := cluster(t)
	// The ServiceAccount does not exist: the Job controller cannot create the pod.
	res := run(t, cs, Spec{Namespace: ns, Image: "example.com/tool:1", ServiceAccount: "nobody", PendingGrace: 2 * time.Second, Timeout: time.Minute})
	if res.Err == nil || !res.NotStarted || !strings.HasPrefix(res.Reason, "no pod was created") {
		t.Fatalf("result %+v, want no pod", res)
	}
	if !strings.Contains(res.Reason, "nobody") {
		t.Errorf("reason %q does not quote the Job's FailedCreate event", res.Reason)
	}
}

// TestRunSecretEnv: SecretEnv values are not in the Job: the containers
// read them from a Secret named after the Job, owned by it while it runs,
// and deleted after the run.
func TestRunSecretEnv(t *testing.T) {
	t.Parallel()
	cs, ns := cluster(t)
	const value = "s3cret-value-of-the-test"
	done := make(chan Result, 1)
	go func() {
		done <- New(cs, nil).Run(t.Context(), Spec{
			Namespace:   ns,
			NamePrefix:  "secret",
			Image:       "example.com/tool:1",
			Env:         []corev1.EnvVar{{Name: "PLAIN", Value: "p"}, {Name: "TOKEN", Value: "overridden"}},
			SecretEnv:   map[string]string{"TOKEN": value, "DB_PASSWORD": value + "-2"},
			Labels:      map[string]string{labelExitCode: "0"},
			Annotations: map[string]string{annotationDelay: "3s"},
			Timeout:     time.Minute,
		})
	}()
	var job *batchv1.Job
	kubetest.Wait(t, 30*time.Second, func() bool {
		list, err := cs.BatchV1().Jobs(ns).List(t.Context(), metav1.ListOptions{})
		if err != nil || len(list.Items) == 0 {
			return false
		}
		job = &list.Items[0]
		return true
	})
	env := map[string]corev1.EnvVar{}
	for _, e := range job.Spec.Template.Spec.Containers[0].Env {
		env[e.Name] = e
	}
	if len(env) != 3 || env["PLAIN"].Value != "p" {
		t.Errorf("env %+v", env)
	}
	sec, err := cs.CoreV1().Secrets(ns).Get(t.Context(), job.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the job's secret: %v", err)
	}
	for name, want := range map[string]string{"TOKEN": value, "DB_PASSWORD": value + "-2"} {
		ref := env[name].ValueFrom
		if env[name].Value != "" || ref == nil || ref.SecretKeyRef == nil || ref.SecretKeyRef.Name != job.Name {
			t.Errorf("%s: %+v, want a reference to secret %s", name, env[name], job.Name)
			continue
		}
		if got := string(sec.Data[ref.SecretKeyRef.Key]); got != want {
			t.Errorf("%s: the secret holds %q, want %q", name, got, want)
		}
	}
	kubetest.Wait(t, 10*time.Second, func() bool {
		sec, err := cs.CoreV1().Secrets(ns).Get(t.Context(), job.Name, metav1.GetOptions{})
		return err == nil && len(sec.OwnerReferences) == 1 && sec.OwnerReferences[0].UID == job.UID
	})
	if b, _ := yaml.Marshal(job); strings.Contains(string(b), value) {
		t.Errorf("the job holds the secret value:\n%s", b)
	}
	if res := <-done; res.Err != nil || res.ExitCode != 0 {
		t.Fatalf("result %+v", res)
	}
	if _, err := cs.CoreV1().Secrets(ns).Get(t.Context(), job.Name, metav1.GetOptions{}); err == nil {
		t.Error("the job's secret is left after the run")
	}
	noJobsLeft(t, cs, ns)
}
