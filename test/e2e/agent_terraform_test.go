package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apiv1 "github.com/drover-dev/drover/api/v1"
	"github.com/drover-dev/drover/internal/testing/podexec"
)

// tfJobsModule is a module with no provider to download whose one resource
// holds the service version (TF_VAR_pvn_service_version).
const tfJobsModule = `terraform {
  backend "local" {}
}

variable "pvn_service_version" { type = string }

resource "terraform_data" "release" {
  input = var.pvn_service_version
}
`

// TestAgentTerraformJobs: Prodvana's Terraform runner example (a runtime
// terraformRunner whose proxyRuntime is a linked cluster and a namespace,
// with a service account; an application with staging and production, the
// latter after staging is stable and an approval; a service passing image
// and a per-channel path) runs every plan and apply as a Kubernetes Job
// through the cluster's agent. The Jobs' commands run real terraform on
// this host (package podexec stands in for the kubelet kwok lacks), so the
// module's state holds each channel's version only after its apply. The
// server holds no kubeconfig and no terraform runs in the agent.
func TestAgentTerraformJobs(t *testing.T) {
	requireE2E(t)
	bin := crTerraformBinary(t)
	c := k8sCluster(t)
	const ns = "tf-runner"
	k8sCreateNamespace(t, c, ns)
	k8sMust(t, c, "POST", "/api/v1/namespaces/"+ns+"/serviceaccounts", "application/json",
		fmt.Appendf(nil, `{"apiVersion":"v1","kind":"ServiceAccount","metadata":{"name":%q}}`, podexec.ServiceAccount))
	cs := c.Client(t)
	pods := podexec.Start(t, cs, ns, "app.drover.dev/runtime=terraform-runner", podexec.Options{
		HostEnv: []string{"PATH", "HOME", "TMPDIR"},
		Env:     map[string]string{"DROVER_TERRAFORM": bin},
	})

	modules := t.TempDir()
	for _, rc := range []string{"staging", "production"} {
		writeTree(t, filepath.Join(modules, rc), map[string]string{"main.tf": tfJobsModule})
	}
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"runtimes/terraform-runner.pvn.yaml": fmt.Sprintf(`runtime:
  name: terraform-runner
  terraformRunner:
    serviceAccount: %s
    proxyRuntime:
      runtime: lab
      containerOrchestration:
        k8s:
          namespace: %s
`, podexec.ServiceAccount, ns),
		"applications/terraform/terraform.pvn.yaml": `application:
  name: terraform
  releaseChannels:
    - name: staging
      runtimes:
        - runtime: terraform-runner
    - name: production
      runtimes:
        - runtime: terraform-runner
      preconditions:
        - releaseChannelStable:
            releaseChannel: staging
        - manualApproval: {}
`,
		"applications/terraform/services/infra.pvn.yaml": fmt.Sprintf(`service:
  name: infra
  application: terraform
  perReleaseChannel:
  - releaseChannel: staging
    customRuntime:
      parameterValues:
      - name: image
        string: "{{ .Params.image }}"
      - name: path
        string: %[1]s/staging
  - releaseChannel: production
    customRuntime:
      parameterValues:
      - name: image
        string: "{{ .Params.image }}"
      - name: path
        string: %[1]s/production
  parameters:
    - name: image
      required: true
      dockerImage:
        imageRegistryInfo:
          containerRegistry: registry.example.com
          imageRepository: repository/tf
`, modules),
	})

	// The server and the agent get no terraform: only the "pods" run it.
	s := newServer(t, "--agent-listen", freeAddr(t))
	labLink, labTok := link(t, s, "lab")
	startAgent(t, "lab", agentArgs(labLink, labTok, "--kubeconfig", c.Kubeconfig)...)
	waitAgent(t, s, "lab", "connected")
	s.ok("alice", "apply", dir+"/...")
	v, _ := s.push("alice", "terraform", "infra", "image=v1")

	s.waitStatus("terraform", "infra", 2*time.Minute, "staging converged, production waiting for approval", func(st *apiv1.ServiceStatus) bool {
		sc, pc := findChannel(st, "staging"), findChannel(st, "production")
		return sc != nil && sc.Status == "CONVERGED" && sc.Version == v && pc != nil && strings.Contains(strings.ToLower(pc.Message), "approval")
	})
	tfState := func(rc string) string {
		b, _ := os.ReadFile(filepath.Join(modules, rc, "terraform.tfstate"))
		return string(b)
	}
	if !strings.Contains(tfState("staging"), `"`+v+`"`) || strings.Contains(tfState("production"), v) {
		t.Fatalf("before approval: staging's state must hold %s, production's not:\nstaging: %s\nproduction: %s", v, tfState("staging"), tfState("production"))
	}
	s.ok("bob", "approve", "infra", "--app", "terraform", "--release-channel", "production")
	s.waitStatus("terraform", "infra", 2*time.Minute, "both channels converged", converged(v))
	if !strings.Contains(tfState("production"), `"`+v+`"`) {
		t.Fatalf("production's state does not hold %s:\n%s", v, tfState("production"))
	}

	applies := map[string]int{}
	for _, r := range pods.Runs() {
		if r.Image != "registry.example.com/repository/tf:v1" || r.ServiceAccount != podexec.ServiceAccount || r.Env["PVN_SERVICE_VERSION"] != v {
			t.Errorf("pod %s: image %q, service account %q, env %v", r.Pod, r.Image, r.ServiceAccount, r.Env)
		}
		if r.Labels["app.drover.dev/command"] == "apply" {
			applies[r.Labels["app.drover.dev/release-channel"]]++
			if r.ExitCode != 0 || !strings.Contains(r.Output, "Apply complete! Resources: 1 added") {
				t.Errorf("apply pod %s: exit %d\n%s", r.Pod, r.ExitCode, r.Output)
			}
		}
	}
	if applies["staging"] != 1 || applies["production"] != 1 {
		t.Errorf("apply Jobs per channel: %v, want one each", applies)
	}
	runs := s.ok("alice", "runs", "infra", "--app", "terraform").stdout
	if !strings.Contains(runs, "apply") || !strings.Contains(runs, "plan") {
		t.Errorf("drover runs shows no plan and apply:\n%s", runs)
	}
	k8sWait(t, 30*time.Second, "no Job left in "+ns, func() bool {
		list, err := cs.BatchV1().Jobs(ns).List(t.Context(), metav1.ListOptions{})
		return err == nil && len(list.Items) == 0
	})
}
