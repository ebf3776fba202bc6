package e2e

// End-to-end tests of drover's agent: runtimes linked with `drover runtimes
// link` and served by `drover agent` processes that dial out to the server
// over TLS, on two real control planes. The server holds no kubeconfig.

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	apiv1 "github.com/drover-dev/drover/api/v1"
	"github.com/drover-dev/drover/internal/testing/kubetest"
	"github.com/drover-dev/drover/internal/testing/pgtest"
)

// agentProc is a running `drover agent`.
type agentProc struct {
	t       *testing.T
	name    string
	args    []string
	env     []string // added to the agent's environment
	logPath string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	code   int
}

// startAgent runs `drover agent args...` until the test ends.
func startAgent(t *testing.T, name string, args ...string) *agentProc {
	t.Helper()
	return startAgentEnv(t, name, nil, args...)
}

// startAgentEnv is startAgent with env added to the agent's environment.
func startAgentEnv(t *testing.T, name string, env []string, args ...string) *agentProc {
	t.Helper()
	a := &agentProc{t: t, name: name, args: args, env: env, logPath: filepath.Join(t.TempDir(), "agent-"+name+".log")}
	a.start()
	t.Cleanup(func() {
		a.stop()
		if t.Failed() {
			data, _ := os.ReadFile(a.logPath)
			t.Logf("agent %s log:\n%s", name, data)
		}
	})
	return a
}

func (a *agentProc) start() {
	a.t.Helper()
	logf, err := os.OpenFile(a.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		a.t.Fatal(err)
	}
	cmd := exec.Command(droverBin, append([]string{"agent", "--log-level", "debug"}, a.args...)...)
	cmd.Env = append(cleanEnv(), a.env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		a.t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		_ = logf.Close()
		a.mu.Lock()
		a.code = cmd.ProcessState.ExitCode()
		a.mu.Unlock()
		close(exited)
	}()
	a.mu.Lock()
	a.cmd, a.exited = cmd, exited
	a.mu.Unlock()
}

// kill sends SIGKILL and waits for the process to be gone.
func (a *agentProc) kill() {
	a.t.Helper()
	a.mu.Lock()
	cmd, exited := a.cmd, a.exited
	a.mu.Unlock()
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-exited
}

func (a *agentProc) stop() {
	a.mu.Lock()
	cmd, exited := a.cmd, a.exited
	a.mu.Unlock()
	select {
	case <-exited:
		return
	default:
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-exited
	}
}

// waitExit waits for the agent to exit by itself and returns its exit code.
func (a *agentProc) waitExit(timeout time.Duration) int {
	a.t.Helper()
	a.mu.Lock()
	exited := a.exited
	a.mu.Unlock()
	select {
	case <-exited:
	case <-time.After(timeout):
		a.t.Fatalf("agent %s still runs after %v", a.name, timeout)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.code
}

func (a *agentProc) log() string {
	data, _ := os.ReadFile(a.logPath)
	return string(data)
}

// link links runtime name and returns its join instructions; the token is
// also written to a file for --token-file.
func link(t *testing.T, s *server, name string, extra ...string) (apiv1.LinkRuntimeResponse, string) {
	t.Helper()
	r := s.ok("alice", append([]string{"runtimes", "link", name, "-o", "json"}, extra...)...)
	var resp apiv1.LinkRuntimeResponse
	if err := json.Unmarshal([]byte(r.stdout), &resp); err != nil {
		t.Fatalf("link %s: %v\n%s", name, err, r)
	}
	if resp.Token == "" || resp.AgentURL == "" || resp.Fingerprint == "" {
		t.Fatalf("link %s: incomplete answer: %s", name, r.stdout)
	}
	tokenFile := filepath.Join(t.TempDir(), name+".token")
	if err := os.WriteFile(tokenFile, []byte(resp.Token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return resp, tokenFile
}

func agentArgs(resp apiv1.LinkRuntimeResponse, tokenFile string, more ...string) []string {
	return append([]string{"--server", resp.AgentURL, "--fingerprint", "sha256:" + resp.Fingerprint, "--token-file", tokenFile}, more...)
}

// runtimeInfo returns what drover runtimes -o json says of name.
func runtimeInfo(t *testing.T, s *server, name string) apiv1.RuntimeInfo {
	t.Helper()
	var list apiv1.RuntimeList
	if err := json.Unmarshal([]byte(s.ok("alice", "runtimes", "-o", "json").stdout), &list); err != nil {
		t.Fatal(err)
	}
	for _, r := range list.Runtimes {
		if r.Name == name {
			return r
		}
	}
	t.Fatalf("runtime %s is not listed", name)
	return apiv1.RuntimeInfo{}
}

func waitAgent(t *testing.T, s *server, name, state string) apiv1.RuntimeInfo {
	t.Helper()
	var info apiv1.RuntimeInfo
	k8sWait(t, 30*time.Second, "runtime "+name+"'s agent to be "+state, func() bool {
		info = runtimeInfo(t, s, name)
		return info.Agent != nil && info.Agent.State == state
	})
	return info
}

// linkedTree is the Kubernetes test tree without its runtime configs: its
// runtimes staging and prod are linked, served by agents.
func linkedTree(t *testing.T, c *kubetest.Cluster) string {
	t.Helper()
	dir := k8sTree(t, c)
	if err := os.RemoveAll(filepath.Join(dir, "runtimes")); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestAgentTwoClusters: staging on one cluster and prod on another, each
// served by an agent started with that cluster's kubeconfig; the server has
// no kubeconfig. A release goes staging -> approval -> prod; drift on prod's
// cluster is healed through its agent; prod's agent killed mid-rollout
// shows as disconnected with a reason and the rollout finishes once it is
// back, each version applied once; a command-runner agent runs a custom
// runtime's commands; unlinking cuts an agent off; the database holds no
// credential.
func TestAgentTwoClusters(t *testing.T) {
	requireE2E(t)
	c1 := k8sCluster(t)
	lockK8sShop(t) // staging on the shared cluster, as TestKubernetesJourney's
	c2 := kubetest.Start(t)
	k8sCreateNamespace(t, c2, k8sProdNS)
	s := newServer(t, append(k8sServerFlags, "--agent-listen", freeAddr(t))...)

	// The server process knows no cluster.
	environ, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", s.pid()))
	cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", s.pid()))
	for _, b := range [][]byte{environ, cmdline} {
		if bytes.Contains(b, []byte("KUBECONFIG")) || bytes.Contains(b, []byte("kubeconfig")) {
			t.Fatalf("the server's environment or arguments name a kubeconfig: %q", b)
		}
	}

	stagingLink, stagingTok := link(t, s, "staging", "--labels", "env=staging")
	prodLink, prodTok := link(t, s, "prod", "--labels", "env=prod")
	if info := runtimeInfo(t, s, "prod"); !info.Linked || info.Agent.State != "never connected" || info.Labels["env"] != "prod" {
		t.Fatalf("prod before its agent: %+v", info)
	}
	// The manifests link prints are what a real API server accepts.
	manifests := filepath.Join(t.TempDir(), "agent.yaml")
	if err := os.WriteFile(manifests, []byte(prodLink.Manifests), 0o600); err != nil {
		t.Fatal(err)
	}
	c2.Kubectl(t, "apply", "-f", manifests)
	c2.Kubectl(t, "-n", "drover-agent", "get", "deployment/drover-agent", "serviceaccount/drover-agent", "secret/drover-agent-token")
	c2.Kubectl(t, "get", "clusterrole/drover-agent-prod", "clusterrolebinding/drover-agent-prod")
	c2.Kubectl(t, "delete", "-f", manifests, "--wait=false")
	stagingAgent := startAgent(t, "staging", agentArgs(stagingLink, stagingTok, "--kubeconfig", c1.Kubeconfig)...)
	prodAgent := startAgent(t, "prod", agentArgs(prodLink, prodTok, "--kubeconfig", c2.Kubeconfig)...)
	waitAgent(t, s, "staging", "connected")
	info := waitAgent(t, s, "prod", "connected")
	if info.Agent.Mode != "kubernetes" || info.Agent.Version == "" || info.Agent.Host == "" {
		t.Errorf("prod's agent: %+v", info.Agent)
	}
	k8sWait(t, 30*time.Second, "prod's cluster to report its version through the agent", func() bool {
		return runtimeInfo(t, s, "prod").KubeVersion != ""
	})

	dir := linkedTree(t, c1)
	s.ok("alice", "apply", dir+"/...")
	j := &k8sJourney{c: c2, srv: s, dir: dir, stagingNS: "drover-" + k8sApp + "-staging"}
	stagingView := &k8sJourney{c: c1, srv: s, dir: dir, stagingNS: j.stagingNS}

	// A release: staging on cluster 1, approval, prod on cluster 2. The
	// shared cluster may hold a prod Deployment another test of the shop
	// left there: this release must neither make nor change one.
	leftover, hadLeftover := stagingView.deployment(t, k8sProdNS)
	v1, _ := j.releaseAcross(t, stagingView, "image=1.0")
	if d, onC1 := stagingView.deployment(t, k8sProdNS); onC1 &&
		(!hadLeftover || d.Metadata.UID != leftover.Metadata.UID || d.Metadata.Generation != leftover.Metadata.Generation) {
		t.Errorf("prod's Deployment is on staging's cluster: %s", d.image())
	}
	if _, onC2 := j.deployment(t, j.stagingNS); onC2 {
		t.Error("staging's Deployment is on prod's cluster")
	}

	// Drift on cluster 2 is healed through prod's agent (its watch).
	patch := `{"spec":{"template":{"spec":{"containers":[{"name":"web","image":"docker.io/library/nginx:drift"}]}}}}`
	k8sMust(t, c2, http.MethodPatch, k8sDeploymentPath(k8sProdNS, "web"), "application/strategic-merge-patch+json", []byte(patch))
	took := k8sWait(t, k8sHealWithin, "prod's Deployment to be healed through the agent", func() bool {
		d, ok := j.deployment(t, k8sProdNS)
		return ok && d.image() == k8sImage+"1.0"
	})
	t.Logf("drift on cluster 2 healed through the agent in %v", took.Round(time.Millisecond))
	s.waitStatus(k8sApp, "web", 20*time.Second, "converged again after drift", converged(v1))

	// prod's agent dies before prod's rollout: the release waits, saying
	// why; once the agent is back the rollout finishes, applied once.
	prodAgent.kill()
	v2, _ := s.push("alice", k8sApp, "web", "image=2.0")
	s.waitStatus(k8sApp, "web", 60*time.Second, "staging converged "+v2, channelIs("staging", "CONVERGED", v2))
	s.ok("bob", "approve", "web", "--app", k8sApp, "--release-channel", "prod")
	st := s.waitStatus(k8sApp, "web", 30*time.Second, "prod to say its agent is gone", func(st *apiv1.ServiceStatus) bool {
		p := findChannel(st, "prod")
		return p != nil && strings.Contains(p.Message, "runtime prod: agent disconnected, silent for")
	})
	t.Logf("prod while its agent is gone: %s", dump(findChannel(st, "prod")))
	if info := runtimeInfo(t, s, "prod"); info.Agent.State != "disconnected" {
		t.Errorf("prod's agent after SIGKILL: %+v", info.Agent)
	}
	if out := s.ok("alice", "runtimes").stdout; !strings.Contains(out, "disconnected, silent") {
		t.Errorf("drover runtimes while prod's agent is gone:\n%s", out)
	}
	if d, _ := j.deployment(t, k8sProdNS); d.image() != k8sImage+"1.0" {
		t.Fatalf("prod changed while its agent was gone: %s", d.image())
	}
	prodAgent.start()
	waitAgent(t, s, "prod", "connected")
	if r := s.as("bob", "wait", "web", "--app", k8sApp, "--timeout", "60s"); r.code != 0 {
		t.Fatalf("wait once prod's agent is back: %s\n%s", r, dump(s.status(k8sApp, "web")))
	}
	j.waitRolledOut(t, k8sProdNS, "2.0")
	// v1 was applied again once, to heal the drift; v2's apply that the
	// lost agent interrupted was retried, and applied once.
	evs := s.events(k8sApp, "web")
	for v, want := range map[string]int{v1: 2, v2: 1} {
		if n := countEvents(evs, "applied", "prod", v); n != want {
			t.Errorf("prod: %d applied events for %s, want %d:\n%s", n, v, want, k8sEventLines(evs))
		}
	}
	if countEvents(evs, "apply-failed", "prod", v2) != 1 {
		t.Errorf("prod: want one failed apply of %s (its agent gone):\n%s", v2, k8sEventLines(evs))
	}

	// A command-runner agent runs a custom runtime's commands on its host.
	hostsLink, hostsTok := link(t, s, "hosts")
	startAgent(t, "hosts", agentArgs(hostsLink, hostsTok, "--mode", "commands")...)
	waitAgent(t, s, "hosts", "connected")
	opsDir := opsTree(t, "migrate")
	marker := filepath.Join(opsDir, "migrate")
	s.ok("alice", "apply", opsDir+"/...")
	vOps, _ := s.push("alice", "ops", "migrate")
	s.waitStatus("ops", "migrate", 30*time.Second, "ops/migrate converged", converged(vOps))
	if data, err := os.ReadFile(marker); err != nil || strings.TrimSpace(string(data)) != vOps {
		t.Errorf("the commands agent's apply wrote %q (%v), want %s", data, err, vOps)
	}
	if runs := s.ok("alice", "runs", "migrate", "--app", "ops").stdout; !strings.Contains(runs, "apply") || !strings.Contains(runs, "fetch") {
		t.Errorf("runs recorded through the agent:\n%s", runs)
	}
	if info := runtimeInfo(t, s, "hosts"); info.Kind != "commands" || info.Agent.Mode != "commands" {
		t.Errorf("hosts: %+v", info)
	}

	// Unlinking cuts staging's agent off: its next connection is refused.
	s.ok("alice", "runtimes", "unlink", "staging")
	if code := stagingAgent.waitExit(15 * time.Second); code == 0 || !strings.Contains(stagingAgent.log(), "refused this agent's join token") {
		t.Errorf("staging's agent after unlink: exit %d\n%s", code, stagingAgent.log())
	}

	// Nothing secret on the server: neither the join tokens nor the
	// clusters' credentials are in its database or its dump.
	secrets := []string{stagingLink.Token, prodLink.Token, hostsLink.Token}
	for _, c := range []*kubetest.Cluster{c1, c2} {
		secrets = append(secrets, kubeconfigSecrets(t, c.Kubeconfig)...)
	}
	s.cleanup()
	dump := s.ok("alice", "admin", "export", "--data", s.data).stdout
	files, _ := filepath.Glob(filepath.Join(s.data, "*.db*"))
	for _, f := range files {
		data, _ := os.ReadFile(f)
		dump += string(data)
	}
	for _, secret := range secrets {
		if strings.Contains(dump, secret) {
			t.Errorf("the server's store holds a secret (%.12s…)", secret)
		}
	}
	for _, word := range []string{"client-key-data", "client-certificate-data", "PRIVATE KEY", c1.Server, c2.Server} {
		if strings.Contains(dump, word) {
			t.Errorf("the server's store holds %q", word)
		}
	}
}

// releaseAcross pushes params and follows the release: staging converges on
// staging's cluster (view), prod waits for approval, bob approves, prod
// converges on j's cluster.
func (j *k8sJourney) releaseAcross(t *testing.T, staging *k8sJourney, params ...string) (version, dsID string) {
	t.Helper()
	s := k8sView(j.srv, t)
	version, dsID = s.push("alice", k8sApp, "web", params...)
	s.waitStatus(k8sApp, "web", 60*time.Second, "staging converged and prod waiting for approval", k8sWaitingApproval(version))
	if _, ok := j.deployment(t, k8sProdNS); ok {
		t.Fatal("prod has a Deployment before its approval")
	}
	staging.waitRolledOut(t, j.stagingNS, strings.TrimPrefix(params[0], "image="))
	s.ok("bob", "approve", "web", "--app", k8sApp, "--release-channel", "prod")
	if r := s.as("bob", "wait", "web", "--app", k8sApp, "--timeout", "60s"); r.code != 0 {
		t.Fatalf("wait after approving %s: %s\n%s", version, r, dump(s.status(k8sApp, "web")))
	}
	j.waitRolledOut(t, k8sProdNS, strings.TrimPrefix(params[0], "image="))
	return version, dsID
}

func countEvents(evs []apiv1.Event, typ, rc, version string) int {
	n := 0
	for _, e := range evs {
		if e.Type == typ && e.ReleaseChannel == rc && strings.Contains(e.Message, version) {
			n++
		}
	}
	return n
}

// opsTree is an application ops whose services run on a custom runtime
// whose commands run in the agent of linked runtime "hosts"; the apply of
// service S writes its version to the file S in dir.
func opsTree(t *testing.T, services ...string) (dir string) {
	t.Helper()
	dir = t.TempDir()
	files := map[string]string{
		"app.pvn.yaml": "application:\n  name: ops\n  releaseChannels:\n    - name: prod\n      runtimes:\n        - runtime: cmds\n",
		"cmds.pvn.yaml": fmt.Sprintf(`runtime:
  name: cmds
  custom:
    proxyRuntime:
      runtime: hosts
    apply:
      taskConfig:
        program:
          cmd: ["sh", "-c", "echo \"$DROVER_SERVICE_VERSION\" > %[1]s/$DROVER_SERVICE"]
    fetch:
      fetchMode: EXIT_CODE
      taskConfig:
        program:
          cmd: ["sh", "-c", "test \"$(cat %[1]s/$DROVER_SERVICE 2>/dev/null)\" = \"$DROVER_SERVICE_VERSION\" || exit 2"]
`, dir),
	}
	for _, svc := range services {
		files[svc+".pvn.yaml"] = fmt.Sprintf("service:\n  name: %s\n  application: ops\n  customRuntime: {}\n", svc)
	}
	writeTree(t, dir, files)
	return dir
}

// kubeconfigSecrets returns the credentials in a kubeconfig: the client
// key and certificate, as they are written and decoded.
func kubeconfigSecrets(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var kc struct {
		Users []struct {
			User map[string]string `json:"user"`
		} `json:"users"`
	}
	if err := json.Unmarshal(data, &kc); err != nil {
		t.Fatalf("kubeconfig %s: %v", path, err)
	}
	var out []string
	for _, u := range kc.Users {
		for _, k := range []string{"client-key-data", "client-certificate-data", "token"} {
			v := u.User[k]
			if v == "" {
				continue
			}
			out = append(out, v)
			if dec, err := base64.StdEncoding.DecodeString(v); err == nil {
				// A line of the PEM body is enough to recognise it.
				sc := bufio.NewScanner(bytes.NewReader(dec))
				for sc.Scan() {
					if line := sc.Text(); len(line) > 40 && !strings.HasPrefix(line, "-----") {
						out = append(out, line)
						break
					}
				}
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("kubeconfig %s holds no credential to look for", path)
	}
	return out
}

// jobTree is an application whose one service runs on an apply-only custom
// runtime whose apply runs as a Kubernetes Job (a kubernetesConfig) in the
// cluster of linked runtime "lab", in namespace ns; on the local cluster
// the Job's pod ends with exit code applyExit (a kwok stage reads the
// label). Fetch modes through Jobs are tested in internal/runtimes/custom.
func jobTree(t *testing.T, app, ns, applyExit string) string {
	t.Helper()
	dir := t.TempDir()
	job := func(exit string) string {
		return fmt.Sprintf(`{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"step"},"spec":{"template":{"metadata":{"labels":{"drover.dev/exit-code":%q}},"spec":{"containers":[{"name":"step","image":"example.com/migrate:1","args":["up"]}]}}}}`, exit)
	}
	writeTree(t, dir, map[string]string{
		"app.pvn.yaml": fmt.Sprintf("application:\n  name: %s\n  releaseChannels:\n    - name: prod\n      runtimes:\n        - runtime: %s-jobs\n", app, app),
		"jobs.pvn.yaml": fmt.Sprintf(`runtime:
  name: %[1]s-jobs
  custom:
    proxyRuntime:
      runtime: lab
      containerOrchestration:
        k8s:
          namespace: %[2]s
    apply:
      kubernetesConfig:
        type: KUBERNETES
        inlined: '%[3]s'
`, app, ns, job(applyExit)),
		"migrate.pvn.yaml": fmt.Sprintf("service:\n  name: migrate\n  application: %s\n  customRuntime: {}\n", app),
	})
	return dir
}

// TestAgentCustomJobs: a custom runtime whose proxyRuntime is a linked
// cluster runs its commands as Kubernetes Jobs through that cluster's
// agent, in the namespace it names; a failing Job's exit code and reason
// reach the release channel's status; no Job is left behind.
func TestAgentCustomJobs(t *testing.T) {
	requireE2E(t)
	c := k8sCluster(t)
	const ns = "migrations"
	k8sCreateNamespace(t, c, ns)
	s := newServer(t, append(k8sServerFlags, "--agent-listen", freeAddr(t), "--apply-attempts", "2")...)
	labLink, labTok := link(t, s, "lab")
	startAgent(t, "lab", agentArgs(labLink, labTok, "--kubeconfig", c.Kubeconfig)...)
	waitAgent(t, s, "lab", "connected")

	s.ok("alice", "apply", jobTree(t, "jobsok", ns, "0")+"/...")
	v, _ := s.push("alice", "jobsok", "migrate")
	s.waitStatus("jobsok", "migrate", 60*time.Second, "jobsok/migrate converged through Jobs", converged(v))
	runs := s.ok("alice", "runs", "migrate", "--app", "jobsok").stdout
	if !strings.Contains(runs, "apply") || !strings.Contains(runs, "example.com/migrate:1 up") {
		t.Errorf("runs of the Jobs:\n%s", runs)
	}

	s.ok("alice", "apply", jobTree(t, "jobsbad", ns, "3")+"/...")
	s.push("alice", "jobsbad", "migrate")
	st := s.waitStatus("jobsbad", "migrate", 60*time.Second, "jobsbad/migrate to fail", func(st *apiv1.ServiceStatus) bool {
		p := findChannel(st, "prod")
		return p != nil && p.Status == "FAILED"
	})
	t.Logf("the failed Job in status: %s", findChannel(st, "prod").Message)
	if b := dump(st); !strings.Contains(b, "exit code 3") {
		t.Errorf("the failed Job's exit code is not in the status:\n%s", b)
	}
	k8sWait(t, 30*time.Second, "no Job left in "+ns, func() bool {
		var list struct {
			Items []k8sObject `json:"items"`
		}
		k8sGet(t, c, "/apis/batch/v1/namespaces/"+ns+"/jobs", &list)
		return len(list.Items) == 0
	})
}

// TestAgentReplicas: two servers share PostgreSQL; a commands agent is
// connected to one of them. Services pushed through the other converge:
// the server that cannot reach the agent hands each service over to the
// one that can, and the linked runtime's state is the same on both.
func TestAgentReplicas(t *testing.T) {
	requireE2E(t)
	url := pgtest.NewDatabase(t)
	flags := []string{"--database", url, "--secrets-key-file", sharedKeyring(t), "--poll-interval", "100ms", "--lease-ttl", "2s"}
	a := newServer(t, append(flags, "--agent-listen", freeAddr(t))...)
	b := newServer(t, flags...)
	hostsLink, hostsTok := link(t, a, "hosts")
	hosts := startAgent(t, "hosts", agentArgs(hostsLink, hostsTok, "--mode", "commands")...)
	waitAgent(t, b, "hosts", "connected")
	var names []string
	for i := range 6 {
		names = append(names, fmt.Sprintf("svc%d", i))
	}
	dir := opsTree(t, names...)
	b.ok("alice", "apply", dir+"/...")
	versions := map[string]string{}
	for _, svc := range names {
		versions[svc], _ = b.push("alice", "ops", svc)
	}
	for svc, v := range versions {
		b.waitStatus("ops", svc, 60*time.Second, "ops/"+svc+" converged through a's agent", converged(v))
		if data, err := os.ReadFile(filepath.Join(dir, svc)); err != nil || strings.TrimSpace(string(data)) != v {
			t.Errorf("%s: the agent's apply wrote %q (%v), want %s", svc, data, err, v)
		}
	}
	if info := runtimeInfo(t, b, "hosts"); info.Agent.State != "connected" || info.Agent.Server == "" {
		t.Errorf("hosts as b sees it: %+v", info.Agent)
	}
	// Unlinked through b, the agent connected to a is cut off (a hears of
	// it through the store's feed) and refused.
	start := time.Now()
	b.ok("alice", "runtimes", "unlink", "hosts")
	if code := hosts.waitExit(15 * time.Second); code == 0 {
		t.Errorf("the agent after unlink through the other server: exit %d\n%s", code, hosts.log())
	}
	t.Logf("unlinked through b: the agent on a stopped %v later", time.Since(start).Round(time.Millisecond))
}

// spanTree is an application whose release channels run on two linked
// hosts: staging on east's agent, prod (after staging is stable) on
// west's. Each writes the version to <dir>/<channel>-<service>.
func spanTree(t *testing.T, services ...string) (dir string) {
	t.Helper()
	dir = t.TempDir()
	runtime := func(name, proxy string) string {
		return fmt.Sprintf(`runtime:
  name: %[1]s
  custom:
    proxyRuntime:
      runtime: %[2]s
    apply:
      taskConfig:
        program:
          cmd: ["sh", "-c", "echo \"$DROVER_SERVICE_VERSION\" > %[3]s/$DROVER_RELEASE_CHANNEL-$DROVER_SERVICE"]
    fetch:
      fetchMode: EXIT_CODE
      taskConfig:
        program:
          cmd: ["sh", "-c", "test \"$(cat %[3]s/$DROVER_RELEASE_CHANNEL-$DROVER_SERVICE 2>/dev/null)\" = \"$DROVER_SERVICE_VERSION\" || exit 2"]
`, name, proxy, dir)
	}
	files := map[string]string{
		"app.pvn.yaml": `application:
  name: span
  releaseChannels:
    - name: staging
      runtimes:
        - runtime: east-cmds
    - name: prod
      runtimes:
        - runtime: west-cmds
      preconditions:
        - releaseChannelStable:
            releaseChannel: staging
`,
		"east.pvn.yaml": runtime("east-cmds", "east"),
		"west.pvn.yaml": runtime("west-cmds", "west"),
	}
	for _, svc := range services {
		files[svc+".pvn.yaml"] = fmt.Sprintf("service:\n  name: %s\n  application: span\n  customRuntime: {}\n", svc)
	}
	writeTree(t, dir, files)
	return dir
}

// TestAgentsReachEveryServer: two servers share PostgreSQL and the agent
// certificate; agent east dials server a, agent west server b. Each server
// announces itself, so each agent also connects to the other server, and a
// service whose staging runs on east and prod on west converges (each
// server reaches both agents; before, each handed the service to the
// other). Server a killed, a new version still converges through b.
func TestAgentsReachEveryServer(t *testing.T) {
	requireE2E(t)
	url := pgtest.NewDatabase(t)
	flags := []string{"--database", url, "--secrets-key-file", sharedKeyring(t), "--poll-interval", "100ms", "--lease-ttl", "2s"}
	a := newServer(t, append(flags, "--agent-listen", freeAddr(t))...)
	cert, key := filepath.Join(a.data, "agent-tls", "cert.pem"), filepath.Join(a.data, "agent-tls", "key.pem")
	b := newServer(t, append(flags, "--agent-listen", freeAddr(t), "--agent-tls-cert", cert, "--agent-tls-key", key)...)
	eastLink, eastTok := link(t, a, "east")
	westLink, westTok := link(t, b, "west")
	if eastLink.Fingerprint != westLink.Fingerprint || eastLink.AgentURL == westLink.AgentURL {
		t.Fatalf("the servers must share the certificate and listen apart: %+v %+v", eastLink, westLink)
	}
	east := startAgent(t, "east", agentArgs(eastLink, eastTok, "--mode", "commands")...)
	west := startAgent(t, "west", agentArgs(westLink, westTok, "--mode", "commands")...)
	for _, ag := range []*agentProc{east, west} {
		k8sWait(t, 40*time.Second, ag.name+" to connect to the other server too", func() bool {
			return strings.Contains(ag.log(), "connected to a server sharing the main server's store")
		})
	}
	names := []string{"svc0", "svc1", "svc2"}
	dir := spanTree(t, names...)
	a.ok("alice", "apply", dir+"/...")
	versions := map[string]string{}
	for i, svc := range names {
		s := a
		if i%2 == 1 {
			s = b
		}
		versions[svc], _ = s.push("alice", "span", svc)
	}
	for svc, v := range versions {
		b.waitStatus("span", svc, 60*time.Second, "span/"+svc+" converged on east and west", converged(v))
		for _, rc := range []string{"staging", "prod"} {
			if data, err := os.ReadFile(filepath.Join(dir, rc+"-"+svc)); err != nil || strings.TrimSpace(string(data)) != v {
				t.Errorf("%s/%s: the agent's apply wrote %q (%v), want %s", rc, svc, data, err, v)
			}
		}
	}

	// Server a dies: east's main connection is gone, its connection to b
	// serves; b takes a's services over and a new version converges.
	a.kill()
	v2, _ := b.push("alice", "span", "svc0")
	b.waitStatus("span", "svc0", 90*time.Second, "span/svc0 converged through b alone", converged(v2))
	if data, _ := os.ReadFile(filepath.Join(dir, "staging-svc0")); strings.TrimSpace(string(data)) != v2 {
		t.Errorf("east's apply of %s after a died wrote %q", v2, data)
	}
}

// TestAgentOnePerRuntime: `runtimes link --token-file` writes the join
// token to a file only its user reads and prints agent commands that read
// it from there (never the token on a command line). The printed command
// starts an agent; a second one on the same token is refused, says which
// agent serves the runtime and waits, while the first keeps its connection
// (they used to replace each other every few seconds); once the first is
// killed, the second takes the runtime over.
func TestAgentOnePerRuntime(t *testing.T) {
	requireE2E(t)
	s := newServer(t, "--agent-listen", freeAddr(t))
	tokenFile := filepath.Join(t.TempDir(), "hosts.token")
	out := s.ok("alice", "runtimes", "link", "hosts", "--token-file", tokenFile).stdout
	data, err := os.ReadFile(tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(data))
	if fi, err := os.Stat(tokenFile); err != nil || fi.Mode().Perm() != 0o600 || !strings.HasPrefix(token, "drover-agent_") {
		t.Fatalf("token file %s: %v, %v, %q", tokenFile, fi, err, token)
	}
	if !strings.Contains(out, "Join token written to "+tokenFile+" (mode 0600") {
		t.Errorf("link does not say where the token is:\n%s", out)
	}
	var hostCmd []string
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "drover agent ") {
			continue
		}
		if strings.Contains(line, token) || strings.Contains(line, "--token ") || !strings.Contains(line, "--token-file "+tokenFile) {
			t.Errorf("printed agent command %q carries the token, or does not read %s", line, tokenFile)
		}
		if strings.Contains(line, "--mode commands") {
			hostCmd = strings.Fields(line)[2:]
		}
	}
	if hostCmd == nil {
		t.Fatalf("link printed no agent command for a host:\n%s", out)
	}
	// Without --token-file, a step saves the token in a private file and
	// the command reads that one.
	var other apiv1.LinkRuntimeResponse
	if err := json.Unmarshal([]byte(s.ok("alice", "runtimes", "link", "other", "-o", "json").stdout), &other); err != nil {
		t.Fatal(err)
	}
	if other.Token == "" || other.TokenFile != "other.token" || strings.Contains(other.Command, other.Token) || !strings.Contains(other.Command, "--token-file other.token") {
		t.Errorf("link -o json: token %q, file %q, command %q", other.Token, other.TokenFile, other.Command)
	}
	if text := s.ok("alice", "runtimes", "rotate-token", "other").stdout; !strings.Contains(text, "(umask 077 && printf '%s\\n' 'drover-agent_") ||
		!strings.Contains(text, "' > other.token)") {
		t.Errorf("rotate-token does not say how to save the token:\n%s", text)
	}

	first := startAgent(t, "first", hostCmd...)
	connected := waitAgent(t, s, "hosts", "connected").Agent.ConnectedAt
	second := startAgent(t, "second", hostCmd...)
	k8sWait(t, 30*time.Second, "the second agent to be refused twice", func() bool {
		return strings.Count(second.log(), "another agent serves this runtime; retrying") >= 2
	})
	if log := second.log(); !strings.Contains(log, "runtime hosts is already served by an agent connected from 127.0.0.1:") ||
		!strings.Contains(log, "drover runtimes rotate-token hosts") {
		t.Errorf("the refused agent does not say why:\n%s", log)
	}
	if info := runtimeInfo(t, s, "hosts"); info.Agent.State != "connected" || !info.Agent.ConnectedAt.Equal(connected) {
		t.Errorf("the first agent lost its connection to the second: %+v (connected at %s)", info.Agent, connected)
	}
	if info := runtimeInfo(t, s, "hosts"); info.Agent.RemoteAddr == "" || info.Agent.Refused == nil || info.Agent.Refused.Count < 2 {
		t.Errorf("drover runtimes does not show the connected agent's address and the refused one: %s", dump(info.Agent))
	}
	if n := strings.Count(first.log(), `msg="connected to the server"`); n != 1 {
		t.Errorf("the first agent connected %d times:\n%s", n, first.log())
	}
	logText, _ := os.ReadFile(s.logPath)
	if !strings.Contains(string(logText), "agent refused: another agent serves its runtime") {
		t.Error("the server did not log the refused agent")
	}

	first.kill()
	k8sWait(t, 60*time.Second, "the second agent to take the runtime over", func() bool {
		return strings.Contains(second.log(), `msg="connected to the server"`)
	})
	if info := waitAgent(t, s, "hosts", "connected"); !info.Agent.ConnectedAt.After(connected) {
		t.Errorf("after the takeover: %+v", info.Agent)
	}
}

// TestAgentNewDataAppliesOnce: an agent serving an apply-only custom
// runtime (no fetch) is replaced by one started with an empty --data (a pod
// without a volume): what was applied is kept in the server's store, handed
// to the new agent with each target, so nothing is applied again (tour 3's
// B30: the record was in the agent's data directory).
func TestAgentNewDataAppliesOnce(t *testing.T) {
	requireE2E(t)
	s := newServer(t, "--agent-listen", freeAddr(t), "--poll-interval", "200ms")
	resp, tok := link(t, s, "hosts")
	tmp := t.TempDir()
	logPath := filepath.Join(tmp, "applies.log")
	dir := crWriteConfigs(t, filepath.Join(tmp, "config"), map[string]crObj{
		"runtime": {"runtime": crObj{"name": "once", "custom": crObj{
			"proxyRuntime": crObj{"runtime": "hosts"},
			"apply":        crProgram(`echo "apply $PVN_RELEASE_CHANNEL $PVN_SERVICE_VERSION" >> "$LOG"`, map[string]string{"LOG": logPath}),
		}}},
		"app":     crApp("agonce", crChannel("staging", "once")),
		"service": crService("agonce", "job"),
	})
	first := startAgent(t, "first", agentArgs(resp, tok, "--mode", "commands", "--data", filepath.Join(tmp, "data-a"))...)
	waitAgent(t, s, "hosts", "connected")
	s.ok("alice", "apply", dir+"/...")
	v, _ := s.push("alice", "agonce", "job")
	s.waitStatus("agonce", "job", 60*time.Second, "converged through the first agent", converged(v))
	first.kill()
	waitAgent(t, s, "hosts", "disconnected")
	startAgent(t, "second", agentArgs(resp, tok, "--mode", "commands", "--data", filepath.Join(tmp, "data-b"))...)
	waitAgent(t, s, "hosts", "connected")
	s.waitStatus("agonce", "job", 60*time.Second, "converged through the second agent", converged(v))
	// Planning rounds through the new agent.
	time.Sleep(3 * time.Second)
	data, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), "apply staging "+v); n != 1 {
		t.Errorf("%s applied %d times, want once:\n%s", v, n, data)
	}
	for _, ev := range s.events("agonce", "job") {
		if ev.Type == "drift" {
			t.Errorf("drift after the agent changed: %s", ev.Message)
		}
	}
}
