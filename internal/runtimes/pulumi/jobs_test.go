package pulumi

import (
	"context"
	"crypto/rand"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/runtimes"
	"github.com/drover-dev/drover/internal/runtimes/kubejob"
	"github.com/drover-dev/drover/internal/runtimes/runtimestest"
	"github.com/drover-dev/drover/internal/testing/kubetest"
	"github.com/drover-dev/drover/internal/testing/podexec"
)

// TestJobs: a runner whose proxyRuntime is a cluster previews and updates
// in Jobs (run by the real pulumi on this host, podexec), its state in a
// backend every Job reaches: a preview proposes the resource, up creates
// it, the next preview is converged; a change by hand is drift, healed by
// the next up. The Jobs run the object's image as the runner's service
// account, the secret config from a Secret, and the recorded runs hold no
// secret.
func TestJobs(t *testing.T) {
	needPulumi(t)
	bin, _ := findBinary()
	c := kubetest.Shared(t)
	cs := c.Client(t)
	// A namespace of its own, with the runner's service account, removed
	// after the test.
	ns := "pu-jobs-" + strings.ToLower(rand.Text()[:6])
	nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: podexec.ServiceAccount}}
	t.Cleanup(func() { _ = cs.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	if _, err := cs.CoreV1().Namespaces().Create(t.Context(), nsObj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	} else if _, err := cs.CoreV1().ServiceAccounts(ns).Create(t.Context(), sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pods := podexec.Start(t, cs, ns, kubejob.LabelRuntime+"=pu", podexec.Options{
		HostEnv: []string{"PATH", "HOME", "TMPDIR"},
		Env:     map[string]string{BinaryEnv: bin},
	})

	f := newFixture(t, "")
	f.runner.ServiceAccount = podexec.ServiceAccount
	f.runner.ProxyRuntime = &config.ProxyRuntime{Runtime: "lab", ContainerOrchestration: &config.ContainerOrchestration{K8s: &config.K8sOrchestration{Namespace: ns}}}
	rt, err := JobsFactory(c.Kubeconfig, "")(&config.Runtime{Name: "pu", PulumiRunner: f.runner}, runtimes.Options{DataDir: t.TempDir(), Runs: f})
	if err != nil {
		t.Fatal(err)
	}
	f.rt = rt.(*Runtime)
	f.rt.jobs.PendingGrace = 30 * time.Second
	t.Cleanup(func() { _ = f.rt.Close() })

	const secret = "pu-jobs-secret-value"
	backend := t.TempDir()
	k := ikey("jobs", "staging")
	target := func(version string) runtimes.Target {
		tg := f.target(k, version, func(o *obj) { o.secrets = map[string]string{"dbPassword": secret} })
		tg.Env["PULUMI_BACKEND_URL"] = "file://" + backend
		var o map[string]any
		_ = jsonUnmarshal(tg.Objects[0], &o)
		o["image"] = "example.com/infra/pulumi:v1"
		tg.Objects[0] = jsonMarshal(t, o)
		return tg
	}
	// The program runs in its source directory (a path in the image).
	file := filepath.Join(filepath.Dir(f.program), "site.txt")
	v1 := target("v1")
	st := f.fetch(v1)
	if st.Version != "" || st.Converged || st.Message != "Preview: 1 to create, 0 to update, 0 to delete." {
		runs, _ := f.recorded(k)
		t.Fatalf("before up: %+v\n%s", st, runs[0].Stdout)
	}
	if got := f.apply(v1); !maps.Equal(got, map[string]runtimes.Action{site: runtimes.ActionCreated}) {
		t.Fatalf("first up: %v", got)
	}
	if st := f.fetch(v1); !runtimestest.Converged(st, "v1") {
		t.Fatalf("after up: %+v", st)
	}
	if err := os.WriteFile(file, []byte("changed by hand"), 0o600); err != nil {
		t.Fatal(err)
	}
	f.rt.Forget(k)
	if st := f.fetch(v1); st.Version != "v1" || !st.Drifted {
		t.Fatalf("drifted: %+v", st)
	}
	if got := f.apply(v1); !maps.Equal(got, map[string]runtimes.Action{site: runtimes.ActionConfigured}) {
		t.Fatalf("healing up: %v", got)
	}
	if b, err := os.ReadFile(file); err != nil || string(b) != "hello v1" {
		t.Fatalf("file %q, %v", b, err)
	}

	runs, kinds := f.recorded(k)
	if want := []string{"preview", "up", "preview", "preview", "up", "preview"}; !slices.Equal(kinds, want) {
		t.Errorf("runs %q, want %q", kinds, want)
	}
	for _, r := range runs {
		if strings.Contains(r.Stdout+strings.Join(r.Command, " "), secret) {
			t.Errorf("recorded %s run holds the secret", r.Kind)
		}
	}
	for _, r := range pods.Runs() {
		if r.Image != "example.com/infra/pulumi:v1" || r.ServiceAccount != podexec.ServiceAccount || r.Env["PVN_SERVICE_ID"] != "web/jobs" {
			t.Errorf("pod %s: image %q, service account %q, env %v", r.Pod, r.Image, r.ServiceAccount, r.Env)
		}
		if r.Env["DROVER_PULUMI_SECRET_0"] != secret || !slices.Contains(r.FromSecrets, "DROVER_PULUMI_SECRET_0") {
			t.Errorf("pod %s: the secret config is not from a Secret: %v", r.Pod, r.FromSecrets)
		}
	}
}
