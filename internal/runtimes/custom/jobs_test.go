package custom

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/drover-dev/drover/internal/compiler"
	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/runtimes"
	"github.com/drover-dev/drover/internal/runtimes/kubejob"
	kuberuntime "github.com/drover-dev/drover/internal/runtimes/kubernetes"
	"github.com/drover-dev/drover/internal/runtimes/runtimestest"
	"github.com/drover-dev/drover/internal/testing/kubetest"
)

func TestMain(m *testing.M) { kubetest.Main(m) }

// Labels and annotations of the local cluster's kwok stages (hack/kube/kwok/).
const (
	labelExitCode     = "drover.dev/exit-code"
	annotationMessage = "drover.dev/termination-message"
	// kwok's own chaos stage: the container fails with the exit code and
	// reason of its annotations.
	labelChaos      = "pod-container-running-failed.stage.kwok.x-k8s.io"
	annotationChaos = "pod-container-running-failed.stage.kwok.x-k8s.io/"
)

// jobsCluster is a client of the shared test cluster.
type jobsCluster struct {
	kubeconfig string
	cs         kubernetes.Interface
}

func sharedCluster(t *testing.T) jobsCluster {
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
	return jobsCluster{kubeconfig: c.Kubeconfig, cs: cs}
}

func randomName(prefix string) string {
	return prefix + "-" + strings.ToLower(rand.Text()[:6])
}

// namespace creates a namespace for the test, ready for pods.
func (jc jobsCluster) namespace(t *testing.T) string {
	t.Helper()
	ns := randomName("custom-jobs")
	if _, err := jc.cs.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { jc.deleteNamespace(ns) })
	kubetest.Wait(t, 30*time.Second, func() bool {
		_, err := jc.cs.CoreV1().ServiceAccounts(ns).Get(t.Context(), "default", metav1.GetOptions{})
		return err == nil
	})
	return ns
}

func (jc jobsCluster) deleteNamespace(ns string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = jc.cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
}

// runtime builds the runtime testRuntime with JobsFactory, its Jobs in ns
// ("" = its default namespace).
func (jc jobsCluster) runtime(t *testing.T, ns string, opts runtimes.Options) *Runtime {
	t.Helper()
	cfg := &config.Runtime{Name: testRuntime, Custom: &config.CustomRuntime{ProxyRuntime: &config.ProxyRuntime{Runtime: "cluster"}}}
	if ns != "" {
		cfg.Custom.ProxyRuntime.ContainerOrchestration = &config.ContainerOrchestration{K8s: &config.K8sOrchestration{Namespace: ns}}
	}
	if opts.DataDir == "" {
		opts.DataDir = t.TempDir()
	}
	rt, err := JobsFactory(jc.kubeconfig, "")(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	r := rt.(*Runtime)
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// noJobsLeft fails t when a Job remains in ns.
func (jc jobsCluster) noJobsLeft(t *testing.T, ns string) {
	t.Helper()
	list, err := jc.cs.BatchV1().Jobs(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range list.Items {
		t.Errorf("job %s left behind", j.Name)
	}
}

// watchJobs records the Jobs created in ns from now on.
func (jc jobsCluster) watchJobs(t *testing.T, ns string) func() []batchv1.Job {
	t.Helper()
	w, err := jc.cs.BatchV1().Jobs(ns).Watch(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	var mu sync.Mutex
	var jobs []batchv1.Job
	go func() {
		for ev := range w.ResultChan() {
			if j, ok := ev.Object.(*batchv1.Job); ok && ev.Type == watch.Added {
				mu.Lock()
				jobs = append(jobs, *j)
				mu.Unlock()
			}
		}
	}()
	return func() []batchv1.Job {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(jobs)
	}
}

// jobConfig is a kubernetesConfig holding a Job whose pod carries labels
// and annotations (the kwok stages' inputs).
func jobConfig(labels, annotations map[string]string) *config.KubernetesConfig {
	job := map[string]any{
		"apiVersion": "batch/v1",
		"kind":       "Job",
		"metadata":   map[string]any{"name": "command"},
		"spec": map[string]any{"template": map[string]any{
			"metadata": map[string]any{"labels": labels, "annotations": annotations},
			"spec": map[string]any{"containers": []any{map[string]any{
				"name": "run", "image": "example.com/tool:1", "command": []any{"/tool"}, "args": []any{"run"},
			}}},
		}},
	}
	b, err := json.Marshal(job) // JSON is YAML
	if err != nil {
		panic(err)
	}
	return &config.KubernetesConfig{Type: config.KubernetesTypeKubernetes, Inlined: string(b)}
}

// exiting is a Job config whose command exits with code and prints message.
func exiting(code, message string) *config.KubernetesConfig {
	var annotations map[string]string
	if message != "" {
		annotations = map[string]string{annotationMessage: message}
	}
	return jobConfig(map[string]string{labelExitCode: code}, annotations)
}

func imageTask(image string, cmd ...string) *config.TaskConfig {
	return &config.TaskConfig{Program: &config.Program{Image: image, Cmd: cmd}}
}

func TestJobsApplyOnly(t *testing.T) {
	t.Parallel()
	jc := sharedCluster(t)
	ns := jc.namespace(t)
	rec := &recorder{}
	r := jc.runtime(t, ns, runtimes.Options{Runs: rec})
	jobs := jc.watchJobs(t, ns)
	cr := &config.CustomRuntime{Apply: &config.ApplyCommand{
		TaskConfig: &config.TaskConfig{
			Program: &config.Program{
				Image: "example.com/deployer:1", Entrypoint: []string{"/deploy"}, Cmd: []string{"--to", "prod"},
				Env: plain("MODE", "program"), WorkingDirectory: "/work",
			},
			K8s: &config.TaskK8s{ServiceAccount: "default"},
		},
		Env: plain("MODE", "apply"),
	}}
	k := key("web", "prod")
	if a := mustApply(t, r, target(k, "v1", cr)); a != runtimes.ActionCreated {
		t.Errorf("apply: %s", a)
	}
	if st := mustFetch(t, r, target(k, "v1", cr)); !st.Converged || st.Version != "v1" {
		t.Errorf("after apply: %+v", st)
	}
	jc.noJobsLeft(t, ns)

	runs := rec.list(kindApply)
	if len(runs) != 1 || runs[0].ExitCode != 0 || !slices.Equal(runs[0].Command, []string{"example.com/deployer:1", "/deploy", "--to", "prod"}) {
		t.Fatalf("runs %+v", runs)
	}
	var job batchv1.Job
	kubetest.Wait(t, 10*time.Second, func() bool {
		got := jobs()
		if len(got) > 0 {
			job = got[0]
		}
		return len(got) > 0
	})
	if !strings.HasPrefix(job.Name, testRuntime+"-web-apply-") {
		t.Errorf("job name %s", job.Name)
	}
	for l, want := range map[string]string{kubejob.LabelRuntime: testRuntime, kubejob.LabelCommand: "apply", "app.drover.dev/service": "web", "app.drover.dev/release-channel": "prod"} {
		if job.Labels[l] != want || job.Spec.Template.Labels[l] != want {
			t.Errorf("label %s: %q on the job, %q on its pods, want %q", l, job.Labels[l], job.Spec.Template.Labels[l], want)
		}
	}
	if job.Annotations["app.drover.dev/version"] != "v1" {
		t.Errorf("annotations %v", job.Annotations)
	}
	pod := job.Spec.Template.Spec
	c := pod.Containers[0]
	if c.Image != "example.com/deployer:1" || !slices.Equal(c.Command, []string{"/deploy"}) || !slices.Equal(c.Args, []string{"--to", "prod"}) ||
		c.WorkingDir != "/work" || pod.ServiceAccountName != "default" {
		t.Errorf("container %+v, service account %q", c, pod.ServiceAccountName)
	}
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	for name, want := range map[string]string{"MODE": "apply", "PVN_SERVICE": "web", "DROVER_SERVICE_VERSION": "v1", "PVN_RELEASE_CHANNEL_ID": "app/prod"} {
		if env[name] != want {
			t.Errorf("env %s = %q, want %q", name, env[name], want)
		}
	}
	if _, ok := env["PATH"]; ok {
		t.Errorf("drover's PATH reached the container: %v", env)
	}
}

func TestJobsFetchExitCode(t *testing.T) {
	t.Parallel()
	jc := sharedCluster(t)
	ns := jc.namespace(t)
	r := jc.runtime(t, ns, runtimes.Options{})
	cr := func(fetchExit string) *config.CustomRuntime {
		return &config.CustomRuntime{
			Apply: &config.ApplyCommand{KubernetesConfig: exiting("0", "")},
			Fetch: &config.FetchCommand{KubernetesConfig: exiting(fetchExit, "plan: 1 to change")},
		}
	}
	k := key("db", "staging")
	st := mustFetch(t, r, target(k, "v1", cr("2")))
	if st.Converged || st.Version != "" || !strings.Contains(st.Message, "changes to apply (exit 2): plan: 1 to change") {
		t.Errorf("fetch exit 2: %+v", st)
	}
	mustApply(t, r, target(k, "v1", cr("2")))
	st = mustFetch(t, r, target(k, "v1", cr("0")))
	if !st.Converged || st.Version != "v1" {
		t.Errorf("fetch exit 0: %+v", st)
	}
	// Another exit code is a fetch error quoting the output.
	_, err := r.Fetch(t.Context(), target(k, "v1", cr("5")))
	if err == nil || !strings.Contains(err.Error(), "exit code 5") || !strings.Contains(err.Error(), "plan: 1 to change") {
		t.Errorf("fetch exit 5: %v", err)
	}
	jc.noJobsLeft(t, ns)
}

func TestJobsStructuredFetchAndInfo(t *testing.T) {
	t.Parallel()
	jc := sharedCluster(t)
	ns := jc.namespace(t)
	r := jc.runtime(t, ns, runtimes.Options{})
	fetchOut := `{"objects":[{"name":"svc","objectType":"vm","versions":[{"version":"v1","active":true,"replicas":1}],"status":"SUCCEEDED"}]}`
	cr := &config.CustomRuntime{
		Apply:   &config.ApplyCommand{KubernetesConfig: exiting("0", "")},
		Fetch:   &config.FetchCommand{KubernetesConfig: exiting("0", fetchOut), FetchMode: config.FetchModeStructuredOutput},
		GetInfo: &config.GetInfoCommand{KubernetesConfig: exiting("0", `{"outputs":[{"name":"url","text":"https://svc.example.com"}]}`)},
	}
	k := key("svc", "prod")
	st := mustFetch(t, r, target(k, "v1", cr))
	if !st.Converged || st.Version != "v1" || len(st.Objects) != 1 || st.Objects[0].Name != "svc" {
		t.Errorf("structured fetch: %+v", st)
	}
	eventually(t, "getInfo outputs", func() bool {
		outs, _ := r.Info(t.Context(), k)
		return len(outs) == 1 && outs[0].Name == "url" && outs[0].Text == "https://svc.example.com"
	})
}

func TestJobsApplyFailures(t *testing.T) {
	t.Parallel()
	jc := sharedCluster(t)
	ns := jc.namespace(t)
	rec := &recorder{}
	r := jc.runtime(t, ns, runtimes.Options{Runs: rec})
	r.exec.(*jobExecutor).pendingGrace = 2 * time.Second

	oom := jobConfig(map[string]string{labelChaos: "true"}, map[string]string{
		annotationChaos + "exit-code": "137", annotationChaos + "reason": "OOMKilled", annotationChaos + "message": "killed at 512Mi",
		annotationChaos + "delay": "0s", annotationChaos + "jitter-delay": "0s",
	})
	unschedulable := jobConfig(nil, nil)
	unschedulable.Inlined = strings.Replace(unschedulable.Inlined, `"containers"`, `"nodeSelector":{"drover.dev/no-such-node":"true"},"containers"`, 1)
	cases := map[string]struct {
		apply *config.ApplyCommand
		want  []string
	}{
		"exit code": {&config.ApplyCommand{KubernetesConfig: exiting("3", "error: quota exceeded")},
			[]string{"apply failed with exit code 3: error: quota exceeded"}},
		"retryable": {&config.ApplyCommand{KubernetesConfig: exiting("4", "locked"), RetryableExitCodes: []int32{4}},
			[]string{"apply exited with retryable exit code 4; it will be retried: locked"}},
		"reason": {&config.ApplyCommand{KubernetesConfig: oom},
			[]string{"apply failed with exit code 137 (OOMKilled): killed at 512Mi"}},
		"stuck": {&config.ApplyCommand{KubernetesConfig: unschedulable},
			[]string{"apply could not start: Unschedulable: 0/2 nodes are available"}},
		"timeout": {&config.ApplyCommand{KubernetesConfig: jobConfig(map[string]string{labelExitCode: "0"}, map[string]string{"drover.dev/exit-delay": "1h"}), Timeout: dur("2s")},
			[]string{"apply timed out after 2s"}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			k := key(strings.ReplaceAll(name, " ", "-"), "prod")
			_, err := r.Apply(t.Context(), target(k, "v1", &config.CustomRuntime{Apply: c.apply}))
			if err == nil || runtimes.IsPermanent(err) {
				t.Fatalf("apply: %v, want a failure to retry", err)
			}
			for _, want := range c.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			t.Logf("error: %v", err)
		})
	}
	t.Cleanup(func() {
		jc.noJobsLeft(t, ns)
		for _, run := range rec.list(kindApply) {
			if run.Service == "reason" && run.Stderr != "OOMKilled" {
				t.Errorf("recorded run of the OOM kill: stderr %q, want the reason", run.Stderr)
			}
		}
	})
}

func TestJobsConfigErrors(t *testing.T) {
	t.Parallel()
	jc := sharedCluster(t)
	r := jc.runtime(t, "unused", runtimes.Options{})
	twoObjects := exiting("0", "")
	twoObjects.Inlined += "\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: extra}\n"
	cases := map[string]struct {
		apply *config.ApplyCommand
		want  string
	}{
		"two objects": {&config.ApplyCommand{KubernetesConfig: twoObjects},
			"apply.kubernetesConfig: it must hold exactly one object, a batch/v1 Job; found 2 objects: Job/command (batch/v1), ConfigMap/extra (v1)"},
		"not a job": {&config.ApplyCommand{KubernetesConfig: &config.KubernetesConfig{Inlined: "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n"}},
			"found 1 object: Pod/p (v1)"},
		"unknown field": {&config.ApplyCommand{KubernetesConfig: &config.KubernetesConfig{Inlined: "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\nspec: {template: {spec: {containerz: []}}}\n"}},
			`unknown field "containerz"`},
		"parallel": {&config.ApplyCommand{KubernetesConfig: &config.KubernetesConfig{Inlined: "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\nspec: {parallelism: 2, template: {spec: {containers: [{name: c, image: i}]}}}\n"}},
			"parallelism 2"},
		"no image": {&config.ApplyCommand{TaskConfig: task("/bin/deploy")},
			"apply: taskConfig.program.image is required: commands run as Kubernetes Jobs, which need an image"},
		"secret ref": {&config.ApplyCommand{TaskConfig: imageTask("i"), Env: map[string]config.EnvValue{"T": {Secret: &config.SecretRef{Key: "k"}}}},
			"apply.env.T: secret k (version \"\") arrived unresolved: the server resolves secret{key, version} at push"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := r.Apply(t.Context(), target(key(strings.ReplaceAll(name, " ", "-"), "rc"), "v1", &config.CustomRuntime{Apply: c.apply}))
			if err == nil || !runtimes.IsPermanent(err) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want a permanent error with %q", err, c.want)
			}
		})
	}
}

func TestJobsSecretsAndEnv(t *testing.T) {
	t.Parallel()
	jc := sharedCluster(t)
	ns := jc.namespace(t)
	rec := &recorder{}
	r := jc.runtime(t, ns, runtimes.Options{Runs: rec})
	jobs := jc.watchJobs(t, ns)
	kc := exiting("3", "token "+paramSecret+" rejected")
	kc.Inlined = strings.Replace(kc.Inlined, `"args":["run"]`, `"args":["run","--token=`+compiler.SecretMarker("token")+`"],"env":[{"name":"MODE","value":"manifest"},{"name":"KEEP","value":"yes"}]`, 1)
	cr := &config.CustomRuntime{Apply: &config.ApplyCommand{KubernetesConfig: kc, Env: map[string]config.EnvValue{
		"MODE":  {Value: "apply"},
		"CMD":   {RawSecret: cmdSecret},
		"DBPWD": {KubernetesSecret: &config.KubernetesSecret{SecretName: "db", Key: "password"}},
	}}}
	_, err := r.Apply(t.Context(), secretTarget(key("api", "prod"), cr))
	if err == nil || strings.Contains(err.Error(), paramSecret) || !strings.Contains(err.Error(), "token (redacted) rejected") {
		t.Errorf("apply error %v, want exit code 3 with the secret redacted", err)
	}
	runs := rec.list(kindApply)
	if len(runs) != 1 {
		t.Fatalf("runs %+v", runs)
	}
	b, _ := json.Marshal(runs[0])
	for _, s := range []string{paramSecret, cmdSecret, chanSecret, svcSecret} {
		if strings.Contains(string(b), s) {
			t.Errorf("recorded run holds a secret: %s", b)
		}
	}
	if !slices.Contains(runs[0].Command, "--token=(redacted)") {
		t.Errorf("recorded command %q", runs[0].Command)
	}
	kubetest.Wait(t, 10*time.Second, func() bool { return len(jobs()) > 0 })
	job := jobs()[0]
	c := job.Spec.Template.Spec.Containers[0]
	if !slices.Contains(c.Args, "--token="+paramSecret) {
		t.Errorf("args %q: the secret parameter was not put in place of its marker", c.Args)
	}
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}
	if env["MODE"].Value != "apply" || env["KEEP"].Value != "yes" {
		t.Errorf("env %v", slices.Collect(maps.Keys(env)))
	}
	// Raw secrets come from the Job's own Secret, not its spec.
	for _, name := range []string{"CMD", "SVC_SECRET", "CHAN_SECRET"} {
		if ref := env[name].ValueFrom; env[name].Value != "" || ref == nil || ref.SecretKeyRef == nil || ref.SecretKeyRef.Name != job.Name {
			t.Errorf("%s %+v, want a reference to the Job's Secret %s", name, env[name], job.Name)
		}
	}
	if ref := env["DBPWD"].ValueFrom; ref == nil || ref.SecretKeyRef == nil || ref.SecretKeyRef.Name != "db" || ref.SecretKeyRef.Key != "password" {
		t.Errorf("DBPWD %+v, want a reference to the Secret db", env["DBPWD"])
	}
}

func TestJobsNamespaces(t *testing.T) {
	t.Parallel()
	jc := sharedCluster(t)
	// A namespace named by proxyRuntime must exist: drover does not create it.
	missing := randomName("custom-missing")
	r := jc.runtime(t, missing, runtimes.Options{})
	cr := &config.CustomRuntime{Apply: &config.ApplyCommand{TaskConfig: imageTask("example.com/tool:1")}}
	_, err := r.Apply(t.Context(), target(key("a", "rc"), "v1", cr))
	if err == nil || !strings.Contains(err.Error(), "apply could not start: namespace does not exist: "+missing) {
		t.Errorf("apply in a missing namespace: %v", err)
	}
	if _, err := jc.cs.CoreV1().Namespaces().Get(t.Context(), missing, metav1.GetOptions{}); err == nil {
		t.Errorf("namespace %s was created", missing)
	}
	// Without one, the runtime's own is created.
	r = jc.runtime(t, "", runtimes.Options{})
	ns := kubejob.ProxyNamespacePrefix + testRuntime
	t.Cleanup(func() { jc.deleteNamespace(ns) })
	mustApply(t, r, target(key("a", "rc"), "v1", cr))
	got, err := jc.cs.CoreV1().Namespaces().Get(t.Context(), ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Labels[kubejob.LabelManaged] != "true" {
		t.Errorf("namespace labels %v", got.Labels)
	}
	jc.noJobsLeft(t, ns)
}

func TestProxyNamespace(t *testing.T) {
	long := strings.Repeat("r", 60)
	for _, c := range []struct {
		cfg    *config.Runtime
		want   string
		create bool
	}{
		{&config.Runtime{Name: "tf", Custom: &config.CustomRuntime{}}, "drover-proxy-runtime-tf", true},
		{&config.Runtime{Name: "tf", Custom: &config.CustomRuntime{ProxyRuntime: &config.ProxyRuntime{ContainerOrchestration: &config.ContainerOrchestration{K8s: &config.K8sOrchestration{Namespace: "ops"}}}}}, "ops", false},
		{&config.Runtime{Name: long, Custom: &config.CustomRuntime{}}, kuberuntime.DNSLabel(kubejob.ProxyNamespacePrefix + long), true},
	} {
		got, create := kubejob.ProxyNamespace(c.cfg.Name, c.cfg.Custom.ProxyRuntime)
		if got != c.want || create != c.create || len(got) > 63 {
			t.Errorf("%s: %q %v, want %q %v", c.cfg.Name, got, create, c.want, c.create)
		}
	}
}

func TestProgramImage(t *testing.T) {
	info := &config.ImageRegistryInfo{ContainerRegistry: "ghcr.io", ImageRepository: "acme/deployer"}
	for _, c := range []struct {
		p    config.Program
		want string
	}{
		{config.Program{Image: "busybox:1", ImageTag: "ignored", ImageRegistryInfo: info}, "busybox:1"},
		{config.Program{ImageTag: "1.2", ImageRegistryInfo: info}, "ghcr.io/acme/deployer:1.2"},
		{config.Program{ImageTag: "sha256:" + strings.Repeat("a", 64), ImageRegistryInfo: info}, "ghcr.io/acme/deployer@sha256:" + strings.Repeat("a", 64)},
		{config.Program{ImageTag: "3", ImageRegistryInfo: &config.ImageRegistryInfo{ContainerRegistry: "dockerhub-public", ImageRepository: "library/alpine"}}, "docker.io/library/alpine:3"},
		{config.Program{}, ""},
	} {
		got, err := programImage(&c.p)
		if err != nil || got != c.want {
			t.Errorf("%+v: %q, %v; want %q", c.p, got, err, c.want)
		}
	}
	if _, err := programImage(&config.Program{ImageTag: "1", ImageRegistryInfo: &config.ImageRegistryInfo{ContainerRegistry: "my-registry", ImageRepository: "x"}}); err == nil {
		t.Errorf("a registry that is not a host: no error")
	}
}

// TestJobsConformance runs the apply-only tier of the conformance suite
// with Jobs: the other tiers keep state in files a Job cannot share.
func TestJobsConformance(t *testing.T) {
	t.Parallel()
	jc := sharedCluster(t)
	ns := jc.namespace(t)
	cr := &config.CustomRuntime{Apply: &config.ApplyCommand{TaskConfig: imageTask("example.com/deployer:1", "deploy")}}
	runtimestest.Run(t, runtimestest.Harness{
		Goroutines: 4, KeysPerGoroutine: 2, Timeout: 2 * time.Minute,
		New: func(t *testing.T) runtimes.Runtime {
			return jc.runtime(t, ns, runtimes.Options{})
		},
		Target: func(key runtimes.InstanceKey, version string) runtimes.Target {
			return target(key, version, cr)
		},
	})
}
