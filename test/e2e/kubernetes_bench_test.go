package e2e

// Benchmarks of the Kubernetes runtime through the real drover server, on a
// cluster of their own (internal/testing/kubetest). Run them one at a time:
//
//	go test -run '^$' -bench Kubernetes -benchtime 1x ./test/e2e/
//
// They are skipped with -short.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	apiv1 "github.com/drover-dev/drover/api/v1"
	"github.com/drover-dev/drover/internal/testing/kubetest"
)

// k8sBenchServer is a `drover server` for a benchmark (the harness's server
// needs a *testing.T).
type k8sBenchServer struct {
	url     string
	token   string
	logPath string
}

var k8sListeningRE = regexp.MustCompile(`drover server listening on (http://\S+)`)

// k8sStartServer starts a server on a free port and stops it (SIGTERM) when
// the benchmark ends; stop stops it earlier.
func k8sStartServer(b *testing.B, flags ...string) (s *k8sBenchServer, stop func()) {
	b.Helper()
	base := b.TempDir()
	s = &k8sBenchServer{logPath: filepath.Join(base, "server.log")}
	logf, err := os.Create(s.logPath)
	if err != nil {
		b.Fatal(err)
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(droverBin, append([]string{"server", "--data", filepath.Join(base, "data"), "--listen", "127.0.0.1:0"}, flags...)...)
	cmd.Env = cleanEnv()
	cmd.Stdout, cmd.Stderr = pw, logf
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	_ = pw.Close()
	urlc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if m := k8sListeningRE.FindStringSubmatch(sc.Text()); m != nil {
				urlc <- m[1]
			}
		}
		_ = pr.Close()
	}()
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); _ = logf.Close(); close(exited) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(15 * time.Second):
				_ = cmd.Process.Kill()
				<-exited
			}
		})
	}
	b.Cleanup(stop)
	select {
	case s.url = <-urlc:
		s.token = readToken(b, filepath.Join(base, "data"))
	case <-exited:
		b.Fatalf("drover server exited:\n%s", s.logTail())
	case <-time.After(30 * time.Second):
		b.Fatalf("drover server did not start:\n%s", s.logTail())
	}
	return s, stop
}

func (s *k8sBenchServer) logTail() string {
	data, _ := os.ReadFile(s.logPath)
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	return strings.Join(lines[max(len(lines)-40, 0):], "\n")
}

// ok runs a CLI verb against the server and fails unless it exits 0.
func (s *k8sBenchServer) ok(b *testing.B, args ...string) result {
	b.Helper()
	r := k8sRun(s.url, args...)
	if r.code != 0 {
		b.Fatalf("unexpected failure: %s\nserver log:\n%s", r, s.logTail())
	}
	return r
}

func (s *k8sBenchServer) push(b *testing.B, app, svc string, params ...string) string {
	b.Helper()
	args := []string{"push", svc, "--app", app}
	for _, p := range params {
		args = append(args, "--param", p)
	}
	r := s.ok(b, args...)
	m := pushedRE.FindStringSubmatch(r.stdout)
	if m == nil {
		b.Fatalf("cannot parse the push output: %s", r)
	}
	return m[1]
}

func (s *k8sBenchServer) get(b *testing.B, path string, out any) {
	b.Helper()
	req, err := newAPIRequest(http.MethodGet, s.url+path, s.token, nil)
	if err != nil {
		b.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		b.Fatalf("GET %s: %s", path, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		b.Fatalf("GET %s: %v", path, err)
	}
}

// waitConverged polls the status every 10 ms until channel rc of app/svc
// runs version converged.
func (s *k8sBenchServer) waitConverged(b *testing.B, app, svc, rc, version string, timeout time.Duration) {
	b.Helper()
	deadline := time.Now().Add(timeout)
	for {
		var st apiv1.ServiceStatus
		s.get(b, "/v1/apps/"+app+"/services/"+svc, &st)
		if ch := findChannel(&st, rc); ch != nil && ch.Status == "CONVERGED" && ch.Version == version {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("%s/%s not converged on %s within %v:\n%s\nserver log:\n%s", app, svc, version, timeout, dump(st), s.logTail())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// pushConverged pushes app's web (image 1.0) and returns how long it took
// until staging converged; converged means rolled out, which it checks.
func (s *k8sBenchServer) pushConverged(b *testing.B, c *kubetest.Cluster, app string) time.Duration {
	b.Helper()
	start := time.Now()
	v := s.push(b, app, "web", "image=1.0")
	s.waitConverged(b, app, "web", "staging", v, 60*time.Second)
	took := time.Since(start)
	// Converged means rolled out: what kubectl rollout status waits for.
	var d k8sObject
	if !k8sGet(b, c, k8sDeploymentPath("drover-"+app+"-staging", "web"), &d) || !d.rolledOut() {
		b.Fatalf("%s converged before its Deployment rolled out: %+v", app, d.Status)
	}
	return took
}

// k8sExec runs the drover binary with args; errors are in the result.
func k8sExec(args ...string) result { return k8sRunArgs(args) }

// k8sBenchTree writes one application per name, each with a single release
// channel, staging, on the Kubernetes runtime staging (the managed
// namespace), and the given services: the journey's web service (a
// Deployment with replicas and a ConfigMap).
func k8sBenchTree(b *testing.B, c *kubetest.Cluster, apps []string, services []string, replicas int) string {
	b.Helper()
	src := filepath.Join(repoRoot, "test", "e2e", "testdata", "kubernetes", "app")
	read := func(rel string) string {
		data, err := os.ReadFile(filepath.Join(src, rel))
		if err != nil {
			b.Fatal(err)
		}
		return string(data)
	}
	dir := filepath.Join(b.TempDir(), "tree")
	files := map[string]string{
		"runtimes/staging.pvn.yaml": strings.ReplaceAll(read("runtimes/staging.pvn.yaml"), "__KUBECONFIG__", c.Kubeconfig),
	}
	for _, app := range apps {
		files["apps/"+app+"/app.pvn.yaml"] = "application:\n  name: " + app + "\n  releaseChannels:\n    - name: staging\n      runtimes:\n        - runtime: staging\n"
		for _, svc := range services {
			p := "apps/" + app + "/services/" + svc + "/"
			files[p+svc+".pvn.yaml"] = strings.NewReplacer("name: web\n", "name: "+svc+"\n", "application: kshop", "application: "+app).Replace(read("services/web/web.pvn.yaml"))
			files[p+"deployment.yaml"] = strings.NewReplacer("name: web\n", "name: "+svc+"\n", "app: web", "app: "+svc, "replicas: 2", "replicas: "+strconv.Itoa(replicas)).Replace(read("services/web/deployment.yaml"))
			files[p+"configmap.yaml"] = strings.ReplaceAll(read("services/web/configmap.yaml"), "name: web-config", "name: "+svc+"-config")
		}
	}
	for rel, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return dir
}

// k8sInterleave times rounds rounds per benchmark iteration of first and
// second, one after the other, each given the round's index (from 1: 0 is
// the untimed warm-up).
func k8sInterleave(b *testing.B, rounds int, first, second func(i int) time.Duration) (x, y []time.Duration) {
	b.Helper()
	b.ResetTimer()
	next := 1
	for range b.N {
		for range rounds {
			x = append(x, first(next))
			y = append(y, second(next))
			next++
		}
	}
	b.StopTimer()
	return x, y
}

func k8sMedian(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// BenchmarkKubernetesPushToConverged compares the time from `drover push`
// to staging converged (a first rollout of the journey's service, a
// Deployment of 2 replicas and a ConfigMap, into a new managed namespace)
// with the time of `kubectl apply --server-side` of the same manifests (from
// `drover compile -o json`) plus `kubectl rollout status`, in a new
// namespace created beforehand (not timed). Reported: the medians of 3
// rounds per iteration, after one untimed round of each, and their ratio
// (goal: at most 1.1). The server runs with its default settings.
func BenchmarkKubernetesPushToConverged(b *testing.B) {
	if testing.Short() {
		b.Skip("end-to-end benchmark: skipped with -short")
	}
	c := kubetest.Start(b)
	c.KubectlCommand(b, "version", "--client") // skips without kubectl
	const rounds = 3
	var apps []string
	for i := range 1 + rounds*b.N {
		apps = append(apps, fmt.Sprintf("kbench%d", i))
	}
	dir := k8sBenchTree(b, c, apps, []string{"web"}, 2)
	s, _ := k8sStartServer(b)
	s.ok(b, "apply", dir+"/...")

	pushDrover := func(app string) time.Duration { return s.pushConverged(b, c, app) }
	applyKubectl := func(app string) time.Duration {
		r := k8sExec("compile", dir+"/...", "--app", app, "--service", "web", "--param", "image=1.0", "-o", "json")
		if r.code != 0 {
			b.Fatalf("compile: %s", r)
		}
		var out struct {
			ReleaseChannels []struct {
				Objects []json.RawMessage `json:"objects"`
			} `json:"releaseChannels"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || len(out.ReleaseChannels) != 1 {
			b.Fatalf("compile output (%v): %s", err, r.stdout)
		}
		var manifests bytes.Buffer
		for _, o := range out.ReleaseChannels[0].Objects {
			manifests.WriteString("---\n")
			manifests.Write(o)
			manifests.WriteString("\n")
		}
		file := filepath.Join(b.TempDir(), app+".yaml")
		if err := os.WriteFile(file, manifests.Bytes(), 0o644); err != nil {
			b.Fatal(err)
		}
		ns := "kubectl-" + app
		k8sCreateNamespace(b, c, ns)
		start := time.Now()
		c.Kubectl(b, "apply", "--server-side", "-n", ns, "-f", file)
		c.Kubectl(b, "rollout", "status", "-n", ns, "deployment/web", "--timeout", "60s")
		return time.Since(start)
	}

	// Warm up both: the first push starts drover's runtime and its watches,
	// the first kubectl fills its discovery cache.
	b.Logf("untimed: drover %v, kubectl %v", pushDrover(apps[0]), applyKubectl(apps[0]))
	drover, kubectl := k8sInterleave(b, rounds, func(i int) time.Duration { return pushDrover(apps[i]) },
		func(i int) time.Duration { return applyKubectl(apps[i]) })
	md, mk := k8sMedian(drover), k8sMedian(kubectl)
	b.Logf("drover push -> converged: %v; kubectl apply + rollout status: %v", drover, kubectl)
	b.ReportMetric(md.Seconds(), "drover-s")
	b.ReportMetric(mk.Seconds(), "kubectl-s")
	b.ReportMetric(md.Seconds()/mk.Seconds(), "ratio")
}

// k8sRequests reads the apiserver's /metrics: apiserver_request_total
// summed by verb and by "verb resource", and the watches open now
// (apiserver_longrunning_requests) by "open-WATCH resource".
func k8sRequests(b *testing.B, c *kubetest.Cluster) (total, open map[string]float64) {
	b.Helper()
	total, open = map[string]float64{}, map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(c.Get(b, "/metrics")))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		name, rest, ok := strings.Cut(line, "{")
		if !ok || name != "apiserver_request_total" && name != "apiserver_longrunning_requests" {
			continue
		}
		end := strings.LastIndexByte(rest, '}')
		v, err := strconv.ParseFloat(strings.TrimSpace(rest[end+1:]), 64)
		if err != nil {
			continue
		}
		labels := map[string]string{}
		for _, kv := range strings.Split(rest[:end], ",") {
			if k, val, ok := strings.Cut(kv, "="); ok {
				labels[k] = strings.Trim(val, `"`)
			}
		}
		res := labels["resource"]
		if res == "" {
			res = "(non-resource)"
		}
		if name == "apiserver_longrunning_requests" {
			if labels["verb"] == "WATCH" {
				open["open-WATCH "+res] += v
			}
			continue
		}
		total[labels["verb"]] += v
		total[labels["verb"]+" "+res] += v
	}
	if err := sc.Err(); err != nil {
		b.Fatal(err)
	}
	return total, open
}

// k8sRate is the per-minute rate of each key between two snapshots.
func k8sRate(before, after map[string]float64, d time.Duration) map[string]float64 {
	out := map[string]float64{}
	for k, v := range after {
		if n := v - before[k]; n != 0 {
			out[k] = n * float64(time.Minute) / float64(d)
		}
	}
	return out
}

func k8sRateLines(rate map[string]float64) string {
	keys := make([]string, 0, len(rate))
	for k := range rate {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var sb strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&sb, "  %-40s %8.1f\n", k, rate[k])
	}
	return sb.String()
}

// BenchmarkKubernetesSteadyRequests measures the kube-apiserver's request
// rate (apiserver_request_total, by verb, per minute) while one drover
// server holds 50 converged services (a Deployment of 1 replica and a
// ConfigMap each, one release channel) and fetches each every 5 s
// (--steady-poll-interval 5s): over 60 s with drover running, then over 30 s
// with drover stopped (the cluster's own baseline: controllers, scheduler,
// kwok heartbeats). drover's share is the difference; the goal is no GET or
// LIST polling. The *-drover metrics count only the resources drover uses
// (deployments, configmaps, namespaces), the *-baseline ones are with drover
// stopped. A WATCH is counted when it ends, so WATCH/min counts
// re-established watches; watches-drover is how many more watches are open
// on drover's resources while it runs.
func BenchmarkKubernetesSteadyRequests(b *testing.B) { k8sSteadyRequests(b, false) }

// BenchmarkKubernetesAgentSteadyRequests is BenchmarkKubernetesSteadyRequests
// with the runtime served by a drover agent (drover runtimes link, drover
// agent --kubeconfig): the agent holds the watches; the baseline is taken
// with both the server and the agent stopped.
func BenchmarkKubernetesAgentSteadyRequests(b *testing.B) { k8sSteadyRequests(b, true) }

func k8sSteadyRequests(b *testing.B, viaAgent bool) {
	if testing.Short() {
		b.Skip("end-to-end benchmark: skipped with -short")
	}
	const services = 50
	c := kubetest.Start(b)
	var names []string
	for i := range services {
		names = append(names, fmt.Sprintf("svc%02d", i))
	}
	dir := k8sBenchTree(b, c, []string{"kload"}, names, 1)
	flags := []string{"--steady-poll-interval", "5s"}
	if viaAgent {
		flags = append(flags, "--agent-listen", "127.0.0.1:0")
	}
	s, stopServer := k8sStartServer(b, flags...)
	stop := stopServer
	if viaAgent {
		k8sUnlinkTree(b, dir, "staging", "staging")
		stopAgent := k8sLinkAgent(b, s, c, "staging")
		stop = func() { stopServer(); stopAgent() }
	}
	s.ok(b, "apply", dir+"/...")
	start := time.Now()
	versions := make([]string, services)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i, name := range names {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			r := k8sRun(s.url, "push", name, "--app", "kload", "--param", "image=1.0")
			if m := pushedRE.FindStringSubmatch(r.stdout); r.code == 0 && m != nil {
				versions[i] = m[1]
			} else {
				b.Errorf("push %s: %s", name, r)
			}
		}()
	}
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
	for i, name := range names {
		s.waitConverged(b, "kload", name, "staging", versions[i], 3*time.Minute)
	}
	b.Logf("%d services pushed and converged in %v", services, time.Since(start).Round(time.Millisecond))

	// measure returns the request rates over d and the watches open at its end.
	measure := func(d time.Duration) (rate, open map[string]float64) {
		time.Sleep(5 * time.Second) // let the last status updates settle
		before, _ := k8sRequests(b, c)
		began := time.Now()
		time.Sleep(d)
		after, open := k8sRequests(b, c)
		return k8sRate(before, after, time.Since(began)), open
	}
	b.ResetTimer()
	var with, without, openWith, openWithout map[string]float64
	for range b.N {
		with, openWith = measure(60 * time.Second)
	}
	b.StopTimer()
	var st apiv1.ServiceList
	s.get(b, "/v1/services", &st)
	for _, svc := range st.Services {
		if svc.Status != "CONVERGED" {
			b.Errorf("%s/%s is %s after the measurement", svc.Application, svc.Service, svc.Status)
		}
	}
	stop()
	without, openWithout = measure(30 * time.Second)
	b.Logf("apiserver requests with drover running (%d converged services, through an agent: %v), per minute over 60 s:\n%s", services, viaAgent, k8sRateLines(with))
	b.Logf("apiserver requests with drover stopped, per minute over 30 s:\n%s", k8sRateLines(without))
	watches := 0.0
	for _, res := range []string{"deployments", "configmaps", "namespaces"} {
		k := "open-WATCH " + res
		b.Logf("watches open on %s: %.0f with drover running, %.0f with drover stopped", res, openWith[k], openWithout[k])
		watches += openWith[k] - openWithout[k]
	}
	b.ReportMetric(watches, "watches-drover")

	for _, verb := range []string{"GET", "LIST", "WATCH", "PATCH"} {
		b.ReportMetric(with[verb], verb+"/min")
		drover := 0.0
		for _, res := range []string{"deployments", "configmaps", "namespaces"} {
			drover += with[verb+" "+res]
		}
		b.ReportMetric(drover, verb+"-drover/min")
		b.ReportMetric(without[verb], verb+"-baseline/min")
	}
}

// k8sUnlinkTree makes the runtime of a bench tree a linked one: its config
// file goes, and the applications name runtime instead of staging.
func k8sUnlinkTree(b *testing.B, dir, from, runtime string) {
	b.Helper()
	if err := os.RemoveAll(filepath.Join(dir, "runtimes")); err != nil {
		b.Fatal(err)
	}
	apps, err := filepath.Glob(filepath.Join(dir, "apps", "*", "app.pvn.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	for _, p := range apps {
		data, err := os.ReadFile(p)
		if err != nil {
			b.Fatal(err)
		}
		data = bytes.ReplaceAll(data, []byte("- runtime: "+from+"\n"), []byte("- runtime: "+runtime+"\n"))
		if err := os.WriteFile(p, data, 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

// k8sLinkAgent links runtime name on the server (started with
// --agent-listen) and runs its agent with the cluster's kubeconfig until
// the benchmark ends (or stop); it returns once the agent is connected.
func k8sLinkAgent(b *testing.B, s *k8sBenchServer, c *kubetest.Cluster, name string) (stop func()) {
	b.Helper()
	r := s.ok(b, "runtimes", "link", name, "-o", "json")
	var resp apiv1.LinkRuntimeResponse
	if err := json.Unmarshal([]byte(r.stdout), &resp); err != nil {
		b.Fatalf("link: %v: %s", err, r)
	}
	tokenFile := filepath.Join(b.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(resp.Token), 0o600); err != nil {
		b.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(b.TempDir(), "agent.log"))
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(droverBin, "agent", "--server", resp.AgentURL, "--fingerprint", "sha256:"+resp.Fingerprint,
		"--token-file", tokenFile, "--kubeconfig", c.Kubeconfig)
	cmd.Env = cleanEnv()
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); _ = logf.Close(); close(exited) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(10 * time.Second):
				_ = cmd.Process.Kill()
				<-exited
			}
		})
	}
	b.Cleanup(stop)
	deadline := time.Now().Add(30 * time.Second)
	for {
		var list apiv1.RuntimeList
		s.get(b, "/v1/runtimes", &list)
		for _, rt := range list.Runtimes {
			if rt.Name == name && rt.Agent != nil && rt.Agent.State == "connected" {
				return stop
			}
		}
		if time.Now().After(deadline) {
			b.Fatalf("the agent of %s did not connect", name)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// BenchmarkKubernetesAgentPushToConverged compares the time from drover push
// to staging converged (the journey's service: a Deployment of 2 replicas
// and a ConfigMap, into a new managed namespace) on a runtime served by a
// drover agent with the same on a runtime the server reaches with a
// kubeconfig, on one cluster and one server. Reported: the medians of 3
// rounds of each per iteration, after one untimed round of each, and their
// ratio (agent over direct).
func BenchmarkKubernetesAgentPushToConverged(b *testing.B) {
	if testing.Short() {
		b.Skip("end-to-end benchmark: skipped with -short")
	}
	c := kubetest.Start(b)
	const rounds = 3
	var direct, viaAgent []string
	for i := range 1 + rounds*b.N {
		direct = append(direct, fmt.Sprintf("kdirect%d", i))
		viaAgent = append(viaAgent, fmt.Sprintf("kagent%d", i))
	}
	dirDirect := k8sBenchTree(b, c, direct, []string{"web"}, 2)
	dirAgent := k8sBenchTree(b, c, viaAgent, []string{"web"}, 2)
	k8sUnlinkTree(b, dirAgent, "staging", "edge")
	s, _ := k8sStartServer(b, "--agent-listen", "127.0.0.1:0")
	k8sLinkAgent(b, s, c, "edge")
	s.ok(b, "apply", dirDirect+"/...")
	s.ok(b, "apply", dirAgent+"/...")
	push := func(app string) time.Duration { return s.pushConverged(b, c, app) }
	b.Logf("untimed: direct %v, through the agent %v", push(direct[0]), push(viaAgent[0]))
	tDirect, tAgent := k8sInterleave(b, rounds, func(i int) time.Duration { return push(direct[i]) },
		func(i int) time.Duration { return push(viaAgent[i]) })
	md, ma := k8sMedian(tDirect), k8sMedian(tAgent)
	b.Logf("drover push -> converged, direct: %v; through the agent: %v", tDirect, tAgent)
	b.ReportMetric(md.Seconds(), "direct-s")
	b.ReportMetric(ma.Seconds(), "agent-s")
	b.ReportMetric(ma.Seconds()/md.Seconds(), "ratio")
}
