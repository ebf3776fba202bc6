package terraform

import (
	"context"
	"crypto/rand"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/runtimes"
	"github.com/drover-dev/drover/internal/runtimes/kubejob"
	"github.com/drover-dev/drover/internal/runtimes/runtimestest"
	"github.com/drover-dev/drover/internal/testing/kubetest"
	"github.com/drover-dev/drover/internal/testing/podexec"
)

func TestMain(m *testing.M) { kubetest.Main(m) }

// jobsEnv is a namespace of the shared test cluster whose pods run on
// this host (podexec), with a service account for the runner.
type jobsEnv struct {
	kubeconfig string
	cs         kubernetes.Interface
	ns         string
	exec       *podexec.Executor
}

const testServiceAccount = podexec.ServiceAccount

func newJobsEnv(t *testing.T) *jobsEnv {
	t.Helper()
	requireBinary(t)
	c := kubetest.Shared(t)
	cs := c.Client(t)
	e := &jobsEnv{kubeconfig: c.Kubeconfig, cs: cs, ns: "tf-jobs-" + strings.ToLower(rand.Text()[:6])}
	if _, err := cs.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = cs.CoreV1().Namespaces().Delete(ctx, e.ns, metav1.DeleteOptions{})
	})
	if _, err := cs.CoreV1().ServiceAccounts(e.ns).Create(t.Context(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: testServiceAccount}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.exec = podexec.Start(t, cs, e.ns, kubejob.LabelRuntime+"=tf", podexec.Options{
		HostEnv: []string{"PATH", "HOME", "TMPDIR", "TF_PLUGIN_CACHE_DIR"},
		Env:     map[string]string{"DROVER_TERRAFORM": requireBinary(t)},
	})
	return e
}

// runtime builds the runtime tf, its Jobs in the namespace of e.
func (e *jobsEnv) runtime(t *testing.T, runner *config.TerraformRunner, rec *recorder) *Runtime {
	t.Helper()
	runner.ServiceAccount = testServiceAccount
	runner.ProxyRuntime = &config.ProxyRuntime{Runtime: "lab", ContainerOrchestration: &config.ContainerOrchestration{K8s: &config.K8sOrchestration{Namespace: e.ns}}}
	opts := runtimes.Options{DataDir: t.TempDir()}
	if rec != nil {
		opts.Runs = rec
	}
	rt, err := JobsFactory(e.kubeconfig, "")(&config.Runtime{Name: "tf", TerraformRunner: runner}, opts)
	if err != nil {
		t.Fatal(err)
	}
	r := rt.(*Runtime)
	r.jobs.PendingGrace = 30 * time.Second
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// TestJobsConvergeAndHealDrift: a runner whose proxyRuntime is a cluster
// plans and applies in Jobs (run by real terraform on this host): plan 2 ->
// apply -> plan 0; the module's input changes -> drifted -> apply heals it.
// The Jobs run the image of the image parameter as the runner's service
// account, with the identity variables, and none is left behind.
func TestJobsConvergeAndHealDrift(t *testing.T) {
	e := newJobsEnv(t)
	module := writeModule(t, map[string]string{"main.tf": driftModule, "external.txt": "a\n"})
	runner := runnerConfig(t, time.Hour, time.Hour)
	runner.PreRun = []config.RunnerCommand{{Cmd: `echo "prerun in $PWD with $DB_TOKEN"`}}
	const secret = "tf-jobs-secret-value"
	runner.Env["DB_TOKEN"] = config.EnvValue{RawSecret: secret}
	rec := &recorder{}
	rt := e.runtime(t, runner, rec)
	k := key("vm", "staging")
	params := map[string]any{"image": "example.com/infra/tf:v1", "extraInitArgs": "-upgrade"}
	v1 := target(t, k, "v1", module, runner, params)

	st := mustFetch(t, rt, v1)
	if st.Version != "" || st.Converged || st.Drifted || !strings.Contains(st.Message, "Plan: 2 to add, 0 to change, 0 to destroy.") {
		t.Fatalf("before apply: %+v, want nothing deployed and the plan summary", st)
	}
	got := actions(mustApply(t, rt, v1))
	want := map[string]runtimes.Action{"terraform_data.deploy": runtimes.ActionCreated, "terraform_data.external": runtimes.ActionCreated}
	if !sameActions(got, want) {
		t.Fatalf("first apply: %v, want %v", got, want)
	}
	if st := mustFetch(t, rt, v1); !runtimestest.Converged(st, "v1") {
		t.Fatalf("after apply: %+v, want converged at v1", st)
	}
	state, err := os.ReadFile(filepath.Join(module, "terraform.tfstate"))
	if err != nil || !strings.Contains(string(state), `"v1"`) {
		t.Fatalf("state file: %v; want it to hold the version from TF_VAR_pvn_service_version:\n%s", err, state)
	}

	// Out of band: the module's input changes; the next plan shows drift.
	if err := os.WriteFile(filepath.Join(module, "external.txt"), []byte("b\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	rt.Forget(k)
	st = mustFetch(t, rt, v1)
	if st.Version != "v1" || !st.Drifted || st.Converged || !strings.Contains(st.Message, "Plan: 0 to add, 1 to change, 0 to destroy.") {
		t.Fatalf("drifted state: %+v", st)
	}
	got = actions(mustApply(t, rt, v1))
	if want := map[string]runtimes.Action{"terraform_data.external": runtimes.ActionConfigured}; !sameActions(got, want) {
		t.Fatalf("healing apply: %v, want %v", got, want)
	}
	if st := mustFetch(t, rt, v1); !runtimestest.Converged(st, "v1") {
		t.Fatalf("after healing: %+v", st)
	}

	if got, want := kinds(rec.of(k)), []string{"plan", "apply", "plan", "plan", "apply", "plan"}; !slices.Equal(got, want) {
		t.Errorf("recorded runs %v, want %v", got, want)
	}
	for _, run := range rec.of(k) {
		if strings.Contains(run.Stdout, secret) || !strings.Contains(run.Stdout, "with (redacted)") {
			t.Errorf("recorded %s run: the secret is not redacted:\n%s", run.Kind, run.Stdout)
		}
	}
	runs := e.exec.Runs()
	if len(runs) != 6 {
		t.Fatalf("%d pods ran, want 6", len(runs))
	}
	for _, r := range runs {
		if r.Image != "example.com/infra/tf:v1" || r.ServiceAccount != testServiceAccount {
			t.Errorf("pod %s: image %q, service account %q", r.Pod, r.Image, r.ServiceAccount)
		}
		if r.Env["TF_VAR_pvn_service_version"] != "v1" || r.Env["PVN_SERVICE_ID"] != "infra/vm" || r.Env["TF_IN_AUTOMATION"] != "1" {
			t.Errorf("pod %s: env %v", r.Pod, r.Env)
		}
		if r.Env["DB_TOKEN"] != secret || !slices.Contains(r.FromSecrets, "DB_TOKEN") {
			t.Errorf("pod %s: DB_TOKEN %q from secrets %v, want the raw secret from a Secret", r.Pod, r.Env["DB_TOKEN"], r.FromSecrets)
		}
		if r.Labels[kubejob.LabelCommand] != "plan" && r.Labels[kubejob.LabelCommand] != "apply" {
			t.Errorf("pod %s: labels %v", r.Pod, r.Labels)
		}
		if !strings.Contains(r.Output, "prerun in "+module+" with "+secret) || !strings.Contains(r.Output, "has been successfully initialized") || !strings.Contains(strings.Join(r.Argv, " "), "init -input=false -no-color '-upgrade'") {
			t.Errorf("pod %s: output\n%s", r.Pod, r.Output)
		}
	}
	kubetest.Wait(t, 30*time.Second, func() bool {
		list, err := e.cs.BatchV1().Jobs(e.ns).List(t.Context(), metav1.ListOptions{})
		return err == nil && len(list.Items) == 0
	})
}

// TestJobsFailures: a failing step names itself and terraform's error; a
// missing image parameter is refused before any Job; a missing service
// account is the reason the Job never started.
func TestJobsFailures(t *testing.T) {
	e := newJobsEnv(t)
	module := writeModule(t, map[string]string{"main.tf": versionModule})
	runner := runnerConfig(t, time.Hour, time.Hour)
	runner.PreRun = []config.RunnerCommand{{Cmd: "exit 3"}}
	rt := e.runtime(t, runner, nil)
	img := map[string]any{"image": "example.com/infra/tf:v1"}
	_, err := rt.Fetch(t.Context(), target(t, key("pre", "staging"), "v1", module, runner, img))
	if err == nil || !strings.Contains(err.Error(), "preRun[0] (exit 3) failed (exit code 3)") {
		t.Errorf("failing preRun: %v", err)
	}

	runner = runnerConfig(t, time.Hour, time.Hour)
	rt = e.runtime(t, runner, nil)
	bad := writeModule(t, map[string]string{"main.tf": `resource "terraform_data" "x" {`})
	_, err = rt.Fetch(t.Context(), target(t, key("bad", "staging"), "v1", bad, runner, img))
	if err == nil || !strings.Contains(err.Error(), "terraform init failed (exit code 1): Error: ") {
		t.Errorf("bad module: %v", err)
	}
	_, err = rt.Apply(t.Context(), target(t, key("noimage", "staging"), "v1", module, runner, nil))
	if err == nil || !runtimes.IsPermanent(err) || !strings.Contains(err.Error(), "parameter image is empty") {
		t.Errorf("no image: %v", err)
	}

	runner = runnerConfig(t, time.Hour, time.Hour)
	rt = e.runtime(t, runner, nil)
	rt.jobs.PendingGrace = 5 * time.Second
	runner.ServiceAccount = "nobody"
	_, err = rt.Fetch(t.Context(), target(t, key("nosa", "staging"), "v1", module, runner, img))
	if err == nil || !strings.Contains(err.Error(), "terraform plan could not start") || !strings.Contains(err.Error(), "nobody") {
		t.Errorf("missing service account: %v", err)
	}
}
