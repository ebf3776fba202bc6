package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	apiv1 "github.com/drover-dev/drover/api/v1"
)

// kubeCheckTree is a service on a Kubernetes runtime (a ConfigMap) whose
// release channel is guarded by a protection that runs a Job
// (kubernetesConfig) at preApproval; the Job's pod exits with exitCode (the
// kwok stage drover.dev/exit-code).
func kubeCheckTree(t *testing.T, kubeconfig, app, exitCode string) string {
	t.Helper()
	dir := t.TempDir()
	job := fmt.Sprintf(`{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"smoke"},"spec":{"template":{"metadata":{"labels":{"drover.dev/exit-code":%q}},"spec":{"containers":[{"name":"smoke","image":"example.com/smoke:1","args":["--channel","{{.Builtins.ReleaseChannel.Name}}"]}]}}}}`, exitCode)
	writeTree(t, dir, map[string]string{
		"runtime.pvn.yaml": fmt.Sprintf("runtime:\n  name: %s-cluster\n  kubernetes:\n    kubeconfig: %s\n", app, kubeconfig),
		"app.pvn.yaml": fmt.Sprintf(`application:
  name: %[1]s
  releaseChannels:
    - name: prod
      runtimes:
        - runtime: %[1]s-cluster
      protections:
        - ref: {name: smoke}
          lifecycle:
            - preApproval: {}
`, app),
		"smoke.pvn.yaml": fmt.Sprintf("protection:\n  name: smoke\n  pollInterval: 1s\n  kubernetesConfig:\n    type: KUBERNETES\n    inlined: '%s'\n", job),
		"web.pvn.yaml":   fmt.Sprintf("service:\n  name: web\n  application: %s\n  kubernetesConfig:\n    type: KUBERNETES\n    inlined: |\n      apiVersion: v1\n      kind: ConfigMap\n      metadata:\n        name: web\n      data:\n        tag: \"{{.Params.tag}}\"\n  parameters:\n    - name: tag\n      string: {defaultValue: one}\n", app),
	})
	return dir
}

// TestKubernetesProtectionJobs: the protection of a release channel on a
// Kubernetes runtime runs as a Job on that cluster (in the namespace
// drover-proxy-runtime-<runtime>): a Job whose pod exits 3 holds the channel
// BLOCKED with the exit code; a config whose Job exits 0 lets the next push
// through; no Job is left behind.
func TestKubernetesProtectionJobs(t *testing.T) {
	requireE2E(t)
	c := k8sCluster(t)
	s := newServer(t, k8sServerFlags...)
	const app = "kchecks"
	s.ok("alice", "apply", kubeCheckTree(t, c.Kubeconfig, app, "3")+"/...")
	s.push("alice", app, "web")
	st := s.waitStatus(app, "web", 90*time.Second, "prod blocked by its failing Job", func(st *apiv1.ServiceStatus) bool {
		return findChannel(st, "prod").Status == "BLOCKED"
	})
	if msg := findChannel(st, "prod").Message; !strings.Contains(msg, "blocked by protection smoke (preApproval): exit code 3") {
		t.Errorf("prod's message: %q", msg)
	}
	var runs apiv1.RunList
	if err := json.Unmarshal([]byte(s.ok("alice", "runs", "web", "--app", app, "--kind", "check", "-o", "json").stdout), &runs); err != nil {
		t.Fatal(err)
	}
	if len(runs.Runs) == 0 || runs.Runs[0].ExitCode != 3 || runs.Runs[0].Runtime != app+"-cluster" {
		t.Fatalf("check runs: %s", dump(runs))
	}

	s.ok("alice", "apply", kubeCheckTree(t, c.Kubeconfig, app, "0")+"/...")
	v2, _ := s.push("alice", app, "web", "tag=two")
	s.waitStatus(app, "web", 90*time.Second, "prod converged past its passing Job", converged(v2))
	var cm struct {
		Data map[string]string `json:"data"`
	}
	if !k8sGet(t, c, k8sConfigMapPath("drover-"+app+"-prod", "web"), &cm) || cm.Data["tag"] != "two" {
		t.Errorf("the ConfigMap after the rollout: %+v", cm)
	}
	var jobs struct {
		Items []json.RawMessage `json:"items"`
	}
	k8sWait(t, 30*time.Second, "no Job left", func() bool {
		return k8sGet(t, c, "/apis/batch/v1/namespaces/drover-proxy-runtime-"+app+"-cluster/jobs", &jobs) && len(jobs.Items) == 0
	})
}
