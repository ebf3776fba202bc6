package e2e

// End-to-end tests of the Kubernetes runtime (internal/runtimes/kubernetes):
// the real drover server and CLI against a real control plane (etcd,
// kube-apiserver, controller manager, scheduler, kwok nodes) started on
// loopback by internal/testing/kubetest. The application is the quickstart's
// shape (testdata/kubernetes/app): staging in the namespace drover manages,
// prod in an existing namespace, after staging is stable and an approval.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	apiv1 "github.com/drover-dev/drover/api/v1"
	"github.com/drover-dev/drover/internal/testing/kubetest"
)

const (
	k8sApp      = "kshop"
	k8sProdNS   = "prod-ns"
	k8sImage    = "docker.io/library/nginx:"
	k8sDeadline = 15 * time.Second // the Deployment's progressDeadlineSeconds
	// k8sHealWithin bounds how long drover may take to undo a change made
	// behind its back. The steady poll interval of the test server is much
	// longer: only the runtime's watch can make it.
	k8sHealWithin = 15 * time.Second
)

// k8sServerFlags: rollouts are followed closely; the steady poll is slow, so
// that drift is seen through the runtime's watch, not by polling.
var k8sServerFlags = []string{"--poll-interval", "250ms", "--steady-poll-interval", "1m", "--progress-deadline", "2m"}

// k8sUsers counts the tests using the shared cluster; the last one to end
// stops it (the package's TestMain does not call kubetest.Stop).
var k8sUsers struct {
	sync.Mutex
	n int
}

// k8sCluster returns the shared test cluster and stops it once no test of
// this package uses it any more. It skips the test where there can be no
// cluster (kubetest.SkipEnv, not Linux).
func k8sCluster(t testing.TB) *kubetest.Cluster {
	t.Helper()
	k8sUsers.Lock()
	k8sUsers.n++
	k8sUsers.Unlock()
	// Registered before Shared, so a skip or failure in it still releases.
	t.Cleanup(func() {
		k8sUsers.Lock()
		defer k8sUsers.Unlock()
		if k8sUsers.n--; k8sUsers.n == 0 {
			kubetest.Stop()
		}
	})
	return kubetest.Shared(t)
}

// k8sShop is held by each test that deploys the k8sApp application to the
// shared cluster (its staging namespace, drover-kshop-staging, is the
// same for all): two at once would prune and overwrite each other's
// objects.
var k8sShop sync.Mutex

// lockK8sShop holds k8sShop until t ends.
func lockK8sShop(t testing.TB) {
	k8sShop.Lock()
	t.Cleanup(k8sShop.Unlock)
}

// k8sDo makes a request to the apiserver as the admin user and returns the
// status code and the body.
func k8sDo(t testing.TB, c *kubetest.Cluster, method, path, contentType string, body []byte) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, c.Server+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.HTTPClient().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the body: %v", method, path, err)
	}
	return resp.StatusCode, data
}

// k8sMust is k8sDo that fails the test unless the status is 2xx.
func k8sMust(t testing.TB, c *kubetest.Cluster, method, path, contentType string, body []byte) []byte {
	t.Helper()
	code, data := k8sDo(t, c, method, path, contentType, body)
	if code/100 != 2 {
		t.Fatalf("%s %s: %d: %s", method, path, code, bytes.TrimSpace(data))
	}
	return data
}

// k8sGet decodes the object at path into out; it reports false when it does
// not exist.
func k8sGet(t testing.TB, c *kubetest.Cluster, path string, out any) bool {
	t.Helper()
	code, data := k8sDo(t, c, http.MethodGet, path, "", nil)
	switch {
	case code == http.StatusNotFound:
		return false
	case code/100 != 2:
		t.Fatalf("GET %s: %d: %s", path, code, bytes.TrimSpace(data))
	}
	if err := json.Unmarshal(data, out); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return true
}

// k8sCreateNamespace creates a namespace (as a person would, before drover).
func k8sCreateNamespace(t testing.TB, c *kubetest.Cluster, name string) {
	t.Helper()
	body := fmt.Sprintf(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":%q,"labels":{"team":"shop"}}}`, name)
	k8sMust(t, c, http.MethodPost, "/api/v1/namespaces", "application/json", []byte(body))
}

// k8sWait polls cond every 50 ms until it holds, failing after timeout. It
// returns how long it took.
func k8sWait(t testing.TB, timeout time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > timeout {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return time.Since(start)
}

// k8sObject is the part of an object the tests read.
type k8sObject struct {
	Metadata struct {
		Name              string            `json:"name"`
		Namespace         string            `json:"namespace"`
		Generation        int64             `json:"generation"`
		UID               string            `json:"uid"`
		Labels            map[string]string `json:"labels"`
		Annotations       map[string]string `json:"annotations"`
		DeletionTimestamp string            `json:"deletionTimestamp"`
	} `json:"metadata"`
	Data map[string]string `json:"data"` // ConfigMaps
	Spec struct {
		Replicas *int `json:"replicas"`
		Template struct {
			Metadata struct {
				Labels      map[string]string `json:"labels"`
				Annotations map[string]string `json:"annotations"`
			} `json:"metadata"`
			Spec struct {
				Containers []struct {
					Name  string `json:"name"`
					Image string `json:"image"`
				} `json:"containers"`
			} `json:"spec"`
		} `json:"template"`
	} `json:"spec"`
	Status struct {
		Phase              string `json:"phase"` // Namespaces
		ObservedGeneration int64  `json:"observedGeneration"`
		Replicas           int    `json:"replicas"`
		ReadyReplicas      int    `json:"readyReplicas"`
		UpdatedReplicas    int    `json:"updatedReplicas"`
		AvailableReplicas  int    `json:"availableReplicas"`
	} `json:"status"`
}

func (o *k8sObject) image() string {
	if len(o.Spec.Template.Spec.Containers) == 0 {
		return ""
	}
	return o.Spec.Template.Spec.Containers[0].Image
}

func (o *k8sObject) replicas() int {
	if o.Spec.Replicas == nil {
		return 1
	}
	return *o.Spec.Replicas
}

// rolledOut reports whether a Deployment runs its current template on all
// its replicas, every one ready.
func (o *k8sObject) rolledOut() bool {
	n := o.replicas()
	return o.Status.ObservedGeneration >= o.Metadata.Generation && o.Status.UpdatedReplicas == n &&
		o.Status.ReadyReplicas == n && o.Status.AvailableReplicas == n && o.Status.Replicas == n
}

func k8sDeploymentPath(ns, name string) string {
	return "/apis/apps/v1/namespaces/" + ns + "/deployments/" + name
}

func k8sConfigMapPath(ns, name string) string {
	return "/api/v1/namespaces/" + ns + "/configmaps/" + name
}

// k8sTree copies testdata/kubernetes/app into a new directory, pointing its
// runtimes at the cluster's kubeconfig.
func k8sTree(t testing.TB, c *kubetest.Cluster) string {
	t.Helper()
	src := filepath.Join(repoRoot, "test", "e2e", "testdata", "kubernetes", "app")
	dst := filepath.Join(t.TempDir(), "app")
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		data = bytes.ReplaceAll(data, []byte("__KUBECONFIG__"), []byte(c.Kubeconfig))
		return os.WriteFile(target, data, 0o644)
	})
	if err != nil {
		t.Fatalf("copy the Kubernetes test tree: %v", err)
	}
	return dst
}

// k8sSampler records every status of a service, as drover status shows it,
// sampled every 25 ms in the background.
type k8sSampler struct {
	mu   sync.Mutex
	seen []apiv1.ChannelStatus
	stop chan struct{}
	done chan struct{}
}

func k8sSample(s *server, app, svc string) *k8sSampler {
	sm := &k8sSampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(sm.done)
		last := map[string]string{}
		for {
			var st apiv1.ServiceStatus
			if err := s.getJSON("/v1/apps/"+app+"/services/"+svc, &st); err == nil {
				sm.mu.Lock()
				for _, c := range st.ReleaseChannels {
					key := c.Status + "|" + c.Reason + "|" + c.Message + "|" + c.Version
					if last[c.Name] != key {
						last[c.Name] = key
						sm.seen = append(sm.seen, c)
					}
				}
				sm.mu.Unlock()
			}
			select {
			case <-sm.stop:
				return
			case <-time.After(25 * time.Millisecond):
			}
		}
	}()
	s.t.Cleanup(sm.close)
	return sm
}

func (sm *k8sSampler) close() {
	select {
	case <-sm.stop:
	default:
		close(sm.stop)
	}
	<-sm.done
}

// take returns the statuses seen so far and forgets them.
func (sm *k8sSampler) take() []apiv1.ChannelStatus {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	out := sm.seen
	sm.seen = nil
	return out
}

func k8sLines(seen []apiv1.ChannelStatus) string {
	var b strings.Builder
	for _, c := range seen {
		fmt.Fprintf(&b, "  %-8s %-16s %-8s %s: %s\n", c.Name, c.Status, c.Version, c.Reason, c.Message)
	}
	return b.String()
}

var k8sReplicasRE = regexp.MustCompile(`Deployment/web: \d+/2 replicas available`)

// k8sView is a server handle for subtest t on the same running server (the
// harness helpers fail the test they hold).
func k8sView(s *server, t *testing.T) *server {
	return &server{t: t, data: s.data, addr: s.addr, url: s.url, flags: s.flags, logPath: s.logPath}
}

// k8sJourney is the state TestKubernetesJourney's steps share.
type k8sJourney struct {
	c         *kubetest.Cluster
	srv       *server
	dir       string
	stagingNS string
	sm        *k8sSampler
}

func (j *k8sJourney) deployment(t *testing.T, ns string) (k8sObject, bool) {
	t.Helper()
	var d k8sObject
	ok := k8sGet(t, j.c, k8sDeploymentPath(ns, "web"), &d)
	return d, ok
}

// waitRolledOut waits until the Deployment web in ns runs image on 2 ready pods.
func (j *k8sJourney) waitRolledOut(t *testing.T, ns, image string) k8sObject {
	t.Helper()
	var d k8sObject
	k8sWait(t, 30*time.Second, "Deployment "+ns+"/web to run "+image+" on 2 ready pods", func() bool {
		var ok bool
		d, ok = j.deployment(t, ns)
		return ok && d.image() == k8sImage+image && d.rolledOut()
	})
	return d
}

func k8sWaitingApproval(version string) func(*apiv1.ServiceStatus) bool {
	return func(st *apiv1.ServiceStatus) bool {
		p := findChannel(st, "prod")
		return channelIs("staging", "CONVERGED", version)(st) && p != nil && p.Status == "WAITING_MANUAL_APPROVAL" && p.DesiredVersion == version
	}
}

// release pushes params and follows the rollout to prod; until staging
// converged and prod waits for the approval, prod must keep prodImage ("":
// have no Deployment).
func (j *k8sJourney) release(t *testing.T, prodImage string, params ...string) (version, dsID string) {
	t.Helper()
	s := k8sView(j.srv, t)
	version, dsID = s.push("alice", k8sApp, "web", params...)
	checkProd := func(st *apiv1.ServiceStatus) {
		t.Helper()
		d, ok := j.deployment(t, k8sProdNS)
		if prodImage == "" && ok || prodImage != "" && (!ok || d.image() != k8sImage+prodImage) {
			t.Fatalf("prod's Deployment changed before staging converged %s and prod was approved: image %q:\n%s", version, d.image(), dump(st))
		}
	}
	deadline := time.Now().Add(60 * time.Second)
	st := s.statusHTTP(k8sApp, "web")
	for ; !k8sWaitingApproval(version)(st); st = s.statusHTTP(k8sApp, "web") {
		checkProd(st)
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for staging to converge %s and prod to wait for approval:\n%s", version, dump(st))
		}
		time.Sleep(50 * time.Millisecond)
	}
	checkProd(st)
	s.ok("bob", "approve", "web", "--app", k8sApp, "--release-channel", "prod")
	if r := s.as("bob", "wait", "web", "--app", k8sApp, "--timeout", "60s"); r.code != 0 {
		t.Fatalf("wait after approving %s: %s\n%s", version, r, dump(s.status(k8sApp, "web")))
	}
	s.waitStatus(k8sApp, "web", 10*time.Second, version+" converged everywhere", converged(version))
	// Converged means rolled out, ready pods included: no waiting here.
	for _, ns := range []string{j.stagingNS, k8sProdNS} {
		if d, ok := j.deployment(t, ns); !ok || !d.rolledOut() || d.Metadata.Annotations["app.drover.dev/version"] != version {
			t.Fatalf("%s converged %s but its Deployment is not rolled out: annotations %v, replicas %d, status %+v", ns, version, d.Metadata.Annotations, d.replicas(), d.Status)
		}
	}
	return version, dsID
}

// drift changes staging behind drover's back and waits until drover has
// undone it and converged version again; it returns the events drover
// recorded meanwhile.
func (j *k8sJourney) drift(t *testing.T, version, what string, change func(), healed func() bool) []apiv1.Event {
	t.Helper()
	s := k8sView(j.srv, t)
	n := len(s.events(k8sApp, "web"))
	change()
	took := k8sWait(t, k8sHealWithin, what+" to be undone by drover", healed)
	t.Logf("%s: healed in %v", what, took.Round(time.Millisecond))
	s.waitStatus(k8sApp, "web", 20*time.Second, "converged again after "+what, converged(version))
	var evs []apiv1.Event
	deadline := time.Now().Add(10 * time.Second)
	for {
		evs = s.events(k8sApp, "web")[n:]
		if indexOf(evs, 0, "converged", "staging") >= 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	iDrift := indexOf(evs, 0, "drift", "staging")
	iApplied := indexOf(evs, max(iDrift, 0), "applied", "staging")
	if iDrift < 0 || iApplied < 0 || indexOf(evs, iApplied, "converged", "staging") < 0 {
		t.Fatalf("%s: want drift, applied and converged events for staging, got:\n%s", what, k8sEventLines(evs))
	}
	for _, e := range evs {
		if e.ReleaseChannel == "prod" {
			t.Errorf("%s in staging touched prod: %s %s", what, e.Type, e.Message)
		}
	}
	t.Logf("%s: events:\n%s", what, k8sEventLines(evs))
	return evs
}

// TestKubernetesJourney is the quickstart's journey on a real cluster: two
// Kubernetes runtimes on one cluster, staging in a managed namespace and prod
// in an existing one; a release, a second one in order, drift healed,
// objects pruned, a stuck rollout rolled back; the existing namespace stays.
func TestKubernetesJourney(t *testing.T) {
	requireE2E(t)
	c := k8sCluster(t)
	lockK8sShop(t)
	began := time.Now()
	k8sCreateNamespace(t, c, k8sProdNS)
	var prodNS k8sObject
	if !k8sGet(t, c, "/api/v1/namespaces/"+k8sProdNS, &prodNS) {
		t.Fatalf("namespace %s not created", k8sProdNS)
	}
	prodNSUID := prodNS.Metadata.UID

	j := &k8sJourney{c: c, dir: k8sTree(t, c), stagingNS: "drover-" + k8sApp + "-staging"}
	j.srv = newServer(t, k8sServerFlags...)
	dir, stagingNS := j.dir, j.stagingNS
	r := j.srv.ok("alice", "apply", dir+"/...")
	for _, want := range []string{"runtime/staging: created", "runtime/prod: created", "service/" + k8sApp + "/web: created"} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("apply output lacks %q:\n%s", want, r.stdout)
		}
	}
	j.sm = k8sSample(j.srv, k8sApp, "web")
	step := func(name string, f func(t *testing.T, s *server)) {
		t.Helper()
		began := time.Now()
		ok := t.Run(name, func(t *testing.T) { f(t, k8sView(j.srv, t)) })
		t.Logf("step %q took %v", name, time.Since(began).Round(time.Millisecond))
		if !ok {
			t.FailNow()
		}
	}

	var v1, v2, v3 string
	step("first release", func(t *testing.T, s *server) {
		var ds1 string
		v1, ds1 = j.release(t, "", "image=1.0")
		d := j.waitRolledOut(t, stagingNS, "1.0")
		for k, v := range map[string]string{"app.drover.dev/application": k8sApp, "app.drover.dev/service": "web", "app.drover.dev/release-channel": "staging", "app": "web"} {
			if d.Metadata.Labels[k] != v {
				t.Errorf("staging Deployment label %s=%q, want %q (labels %v)", k, d.Metadata.Labels[k], v, d.Metadata.Labels)
			}
		}
		if a := d.Metadata.Annotations; a["app.drover.dev/version"] != v1 || a["app.drover.dev/desired-state"] != ds1 || a["app.drover.dev/applied-hash"] == "" {
			t.Errorf("staging Deployment annotations %v, want version %s and desired state %s", a, v1, ds1)
		}
		if got := d.Spec.Template.Metadata.Annotations["app.drover.dev/version"]; got != v1 {
			t.Errorf("pod template version annotation %q, want %s", got, v1)
		}
		var ns k8sObject
		if !k8sGet(t, c, "/api/v1/namespaces/"+stagingNS, &ns) || ns.Metadata.Labels["app.drover.dev/managed"] != "true" {
			t.Errorf("managed namespace %s: labels %v, want app.drover.dev/managed=true", stagingNS, ns.Metadata.Labels)
		}
		var cm k8sObject
		if !k8sGet(t, c, k8sConfigMapPath(stagingNS, "web-config"), &cm) || cm.Data["channel"] != "staging" || cm.Data["image"] != k8sImage+"1.0" {
			t.Errorf("staging ConfigMap web-config: %v", cm.Data)
		}
		p := j.waitRolledOut(t, k8sProdNS, "1.0")
		if p.Metadata.Labels["app.drover.dev/release-channel"] != "prod" || p.Metadata.Annotations["app.drover.dev/version"] != v1 {
			t.Errorf("prod Deployment: labels %v annotations %v", p.Metadata.Labels, p.Metadata.Annotations)
		}
		if !k8sGet(t, c, k8sConfigMapPath(k8sProdNS, "web-config"), &cm) || cm.Data["channel"] != "prod" {
			t.Errorf("prod ConfigMap web-config: %v", cm.Data)
		}
		if code, _ := k8sDo(t, c, http.MethodGet, "/api/v1/namespaces/drover-"+k8sApp+"-prod", "", nil); code != http.StatusNotFound {
			t.Errorf("a managed namespace was created for prod, which names %s (GET: %d)", k8sProdNS, code)
		}
		// Converged: the status gives the ready replicas.
		st := s.status(k8sApp, "web")
		for _, rc := range []string{"staging", "prod"} {
			if ch := channel(t, st, rc); !strings.Contains(ch.Message, "2/2 replicas available") {
				t.Errorf("%s converged: message %q, want the replica counts", rc, ch.Message)
			}
		}
		// The statuses seen while rolling out, for the log. Whether one of
		// them shows replica counts depends on timing: kwok makes pods
		// ready at once, so a rollout can finish between two samples.
		// "stuck rollout is rolled back" checks the counts on a rollout
		// that stays in progress.
		t.Logf("statuses seen:\n%s", k8sLines(j.sm.take()))
	})

	step("second release in order", func(t *testing.T, s *server) {
		v2, _ = j.release(t, "1.0", "image=1.1")
		j.waitRolledOut(t, stagingNS, "1.1")
		j.waitRolledOut(t, k8sProdNS, "1.1")
		evs := s.events(k8sApp, "web")
		iPush := -1
		for i, e := range evs {
			if e.Type == "pushed" && strings.Contains(e.Message, v2) {
				iPush = i
			}
		}
		iConv := -1
		for i := max(iPush, 0); i < len(evs); i++ {
			if evs[i].Type == "converged" && evs[i].ReleaseChannel == "staging" && strings.Contains(evs[i].Message, v2) {
				iConv = i
				break
			}
		}
		iApproved := indexOf(evs, max(iPush, 0), "approved", "prod")
		iStarted := indexOf(evs, max(iPush, 0), "started", "prod")
		if iPush < 0 || iConv < 0 || iApproved < 0 || iStarted < iConv || iStarted < iApproved {
			t.Errorf("want pushed %s, staging converged, prod approved, then prod started (%d %d %d %d):\n%s", v2, iPush, iConv, iApproved, iStarted, k8sEventLines(evs))
		}
		j.sm.take()
	})

	var driftEvents []apiv1.Event
	step("drift is healed", func(t *testing.T, _ *server) {
		dep := k8sDeploymentPath(stagingNS, "web")
		// kubectl set image, as another field manager.
		evs := j.drift(t, v2, "set image", func() {
			k8sMust(t, c, http.MethodPatch, dep+"?fieldManager=e2e-set-image", "application/strategic-merge-patch+json",
				[]byte(`{"spec":{"template":{"spec":{"containers":[{"name":"web","image":"`+k8sImage+`hacked"}]}}}}`))
		}, func() bool {
			d, ok := j.deployment(t, stagingNS)
			return ok && d.image() == k8sImage+"1.1"
		})
		driftEvents = append(driftEvents, evs...)
		i := indexOf(evs, 0, "drift", "staging")
		if !strings.Contains(evs[i].Message, v2) || !strings.Contains(evs[i].Message, "re-applying") {
			t.Errorf("drift event: %q, want the version and re-applying", evs[i].Message)
		}
		if a := evs[indexOf(evs, i, "applied", "staging")]; !strings.Contains(a.Message, "Deployment.apps/"+stagingNS+"/web configured") {
			t.Errorf("the healing apply should say it configured the Deployment: %q", a.Message)
		}
		j.waitRolledOut(t, stagingNS, "1.1")

		// kubectl scale, through the scale subresource.
		evs = j.drift(t, v2, "scale", func() {
			k8sMust(t, c, http.MethodPatch, dep+"/scale?fieldManager=e2e-scale", "application/merge-patch+json", []byte(`{"spec":{"replicas":5}}`))
		}, func() bool {
			d, ok := j.deployment(t, stagingNS)
			return ok && d.replicas() == 2
		})
		driftEvents = append(driftEvents, evs...)
		j.waitRolledOut(t, stagingNS, "1.1")

		// kubectl delete of the ConfigMap.
		var before k8sObject
		k8sGet(t, c, k8sConfigMapPath(stagingNS, "web-config"), &before)
		evs = j.drift(t, v2, "delete ConfigMap", func() {
			k8sMust(t, c, http.MethodDelete, k8sConfigMapPath(stagingNS, "web-config"), "", nil)
		}, func() bool {
			var cm k8sObject
			return k8sGet(t, c, k8sConfigMapPath(stagingNS, "web-config"), &cm) && cm.Metadata.UID != before.Metadata.UID &&
				cm.Data["image"] == k8sImage+"1.1" && cm.Metadata.Labels["app.drover.dev/service"] == "web"
		})
		driftEvents = append(driftEvents, evs...)
		if a := evs[indexOf(evs, indexOf(evs, 0, "drift", "staging"), "applied", "staging")]; !strings.Contains(a.Message, "ConfigMap/"+stagingNS+"/web-config created") {
			t.Errorf("the healing apply should say it created the ConfigMap: %q", a.Message)
		}
		j.sm.take()
	})
	t.Run("drift event names what drifted", func(t *testing.T) {
		// Checked apart from the healing above, which works.
		var missing []string
		for _, e := range driftEvents {
			if e.Type == "drift" && !strings.Contains(e.Message, "Deployment/web") && !strings.Contains(e.Message, "ConfigMap/web-config") {
				missing = append(missing, e.Message)
			}
		}
		if len(missing) > 0 {
			t.Errorf("the drift events do not say which object drifted nor who changed it: %q", missing)
		}
	})

	step("removed object is pruned", func(t *testing.T, s *server) {
		if err := os.Remove(filepath.Join(dir, "services", "web", "configmap.yaml")); err != nil {
			t.Fatal(err)
		}
		r := s.ok("alice", "apply", dir+"/...")
		if !strings.Contains(r.stdout, "service/"+k8sApp+"/web: configured") {
			t.Fatalf("apply without the ConfigMap: %s", r)
		}
		v3, _ = s.push("alice", k8sApp, "web", "image=1.1")
		if v3 == v2 {
			t.Fatalf("the push without the ConfigMap has the version of the one with it: %s", v3)
		}
		st := s.waitStatus(k8sApp, "web", 30*time.Second, "staging converged "+v3, k8sWaitingApproval(v3))
		var cm k8sObject
		if k8sGet(t, c, k8sConfigMapPath(stagingNS, "web-config"), &cm) && cm.Metadata.DeletionTimestamp == "" {
			t.Errorf("staging's ConfigMap web-config was not pruned: %s", dump(st))
		}
		if !k8sGet(t, c, k8sConfigMapPath(k8sProdNS, "web-config"), &cm) {
			t.Errorf("prod's ConfigMap was pruned before prod received %s", v3)
		}
		evs := s.events(k8sApp, "web")
		iPush := len(evs) - 1
		for iPush >= 0 && evs[iPush].Type != "pushed" {
			iPush--
		}
		if i := indexOf(evs, max(iPush, 0), "applied", "staging"); i < 0 || !strings.Contains(evs[i].Message, "ConfigMap/"+stagingNS+"/web-config deleted") {
			t.Errorf("the apply of %s should report the ConfigMap deleted:\n%s", v3, k8sEventLines(evs[max(iPush, 0):]))
		}
		s.ok("bob", "approve", "web", "--app", k8sApp, "--release-channel", "prod")
		s.waitStatus(k8sApp, "web", 30*time.Second, v3+" everywhere", converged(v3))
		k8sWait(t, 10*time.Second, "prod's ConfigMap pruned", func() bool {
			var cm k8sObject
			return !k8sGet(t, c, k8sConfigMapPath(k8sProdNS, "web-config"), &cm)
		})
		j.waitRolledOut(t, stagingNS, "1.1")
		j.waitRolledOut(t, k8sProdNS, "1.1")
		j.sm.take()
	})

	var failedEvent apiv1.Event
	var stuckSeen []apiv1.ChannelStatus
	step("stuck rollout is rolled back", func(t *testing.T, s *server) {
		v4 := compiledVersion(t, dir, k8sApp, "web", "image=1.2", "simulate=not-ready")
		start := time.Now()
		if got, _ := s.push("alice", k8sApp, "web", "image=1.2", "simulate=not-ready"); got != v4 {
			t.Fatalf("push gave %s, compile said %s", got, v4)
		}
		waitc := make(chan result, 1)
		go func() { waitc <- k8sRun(s.url, "wait", "web", "--app", k8sApp, "--timeout", "80s") }()

		// While the new pods stay unready, drover status shows the rollout.
		st := s.waitStatus(k8sApp, "web", 20*time.Second, "staging rolling out "+v4, func(st *apiv1.ServiceStatus) bool {
			ch := findChannel(st, "staging")
			return ch.Status == "CONVERGING" && ch.TargetVersion == v4 && k8sReplicasRE.MatchString(ch.Message)
		})
		t.Logf("while stuck: %s", channel(t, st, "staging").Message)
		text := s.ok("bob", "status", "web", "--app", k8sApp).stdout
		if !regexp.MustCompile(`staging\s+CONVERGING\s+` + v3 + ` \(1\.1\)\s+` + v4 + ` \(1\.2\)\s+UPDATING_PODS: Deployment/web: \d/2 replicas available`).MatchString(text) {
			t.Errorf("drover status while rolling out %s:\n%s", v4, text)
		}
		d, _ := j.deployment(t, stagingNS)
		if d.image() != k8sImage+"1.2" || d.Spec.Template.Metadata.Labels["drover.dev/simulate"] != "not-ready" {
			t.Errorf("staging Deployment while stuck: image %s, template labels %v", d.image(), d.Spec.Template.Metadata.Labels)
		}

		var r result
		select {
		case r = <-waitc:
		case <-time.After(2 * cliTimeout):
			t.Fatal("drover wait did not return")
		}
		took := time.Since(start)
		if r.code != 2 || !strings.Contains(r.stderr, k8sApp+"/web rolled back") {
			t.Errorf("drover wait on a stuck rollout: want exit 2 (rolled back), got %s", r)
		}
		t.Logf("push to rolled back: %v (progress deadline %v)", took.Round(time.Millisecond), k8sDeadline)
		if took < k8sDeadline {
			t.Errorf("rolled back after %v, before the progress deadline of %v", took, k8sDeadline)
		}
		st = s.waitStatus(k8sApp, "web", 30*time.Second, "staging rolled back to "+v3, channelIs("staging", "ROLLED_BACK", v3))
		ch := channel(t, st, "staging")
		if ch.TargetVersion != v3 || ch.DesiredVersion != v4 || !strings.Contains(ch.Message, "rolled back from "+v4+" to "+v3) {
			t.Errorf("staging after the rollback: %s", dump(ch))
		}
		if p := channel(t, st, "prod"); p.Version != v3 || p.TargetVersion != v3 || p.Status != "WAITING_PRECONDITIONS" {
			t.Errorf("prod must stay on %s, waiting for staging: %s", v3, dump(p))
		}
		if d, ok := j.deployment(t, stagingNS); !ok || !d.rolledOut() {
			t.Errorf("staging rolled back but its Deployment is not rolled out: %+v", d.Status)
		}
		d = j.waitRolledOut(t, stagingNS, "1.1")
		if d.Spec.Template.Metadata.Labels["drover.dev/simulate"] != "none" || d.Metadata.Annotations["app.drover.dev/version"] != v3 {
			t.Errorf("staging Deployment after the rollback: template labels %v, annotations %v", d.Spec.Template.Metadata.Labels, d.Metadata.Annotations)
		}
		if p, _ := j.deployment(t, k8sProdNS); p.image() != k8sImage+"1.1" {
			t.Errorf("prod's image changed: %s", p.image())
		}

		evs := s.events(k8sApp, "web")
		iFail := -1
		for i, e := range evs {
			if e.Type == "failed" && e.ReleaseChannel == "staging" && strings.Contains(e.Message, v4) {
				iFail = i
			}
		}
		if iFail < 0 {
			t.Fatalf("no failed event for %s:\n%s", v4, k8sEventLines(evs))
		}
		failedEvent = evs[iFail]
		if !strings.Contains(failedEvent.Message, "ProgressDeadlineExceeded") {
			t.Errorf("the failure should give the Deployment's reason, ProgressDeadlineExceeded: %q", failedEvent.Message)
		}
		iRollback := indexOf(evs, iFail, "rollback", "staging")
		if iRollback < 0 || !strings.Contains(evs[iRollback].Message, "from "+v4+" to "+v3) {
			t.Errorf("want a rollback event from %s to %s after the failure:\n%s", v4, v3, k8sEventLines(evs[iFail:]))
		} else if i := indexOf(evs, iRollback, "converged", "staging"); i < 0 || !strings.Contains(evs[i].Message, v3) {
			t.Errorf("no converged event for %s after the rollback:\n%s", v3, k8sEventLines(evs[iRollback:]))
		}
		t.Logf("events of the stuck rollout:\n%s", k8sEventLines(evs[max(iFail-3, 0):]))
		stuckSeen = j.sm.take()
		t.Logf("statuses seen:\n%s", k8sLines(stuckSeen))
	})
	t.Run("failed status gives the reason", func(t *testing.T) {
		// Checked apart from the rollback above, which works: while staging
		// failed or rolled back, its status should say why.
		for _, ch := range stuckSeen {
			if ch.Name == "staging" && (ch.Status == "FAILED" || ch.Status == "ROLLING_BACK" || ch.Status == "ROLLED_BACK") &&
				(strings.Contains(ch.Message, "ProgressDeadlineExceeded") || strings.Contains(strings.ToLower(ch.Message), "progress deadline") ||
					strings.Contains(ch.Reason, "PROGRESS_DEADLINE")) {
				return
			}
		}
		t.Errorf("no status of staging while FAILED/ROLLING_BACK/ROLLED_BACK says why it failed (the failed event does: %q). Statuses seen:\n%s", failedEvent.Message, k8sLines(stuckSeen))
	})

	step("existing namespace is kept", func(t *testing.T, _ *server) {
		var ns k8sObject
		if !k8sGet(t, c, "/api/v1/namespaces/"+k8sProdNS, &ns) {
			t.Fatalf("drover deleted the existing namespace %s", k8sProdNS)
		}
		if ns.Metadata.UID != prodNSUID || ns.Metadata.DeletionTimestamp != "" || ns.Status.Phase != "Active" {
			t.Errorf("namespace %s: uid %s (was %s), deletion %q, phase %s", k8sProdNS, ns.Metadata.UID, prodNSUID, ns.Metadata.DeletionTimestamp, ns.Status.Phase)
		}
		if ns.Metadata.Labels["app.drover.dev/managed"] != "" || ns.Metadata.Labels["team"] != "shop" {
			t.Errorf("drover changed the labels of the existing namespace %s: %v", k8sProdNS, ns.Metadata.Labels)
		}
		if d, ok := j.deployment(t, k8sProdNS); !ok || !d.rolledOut() {
			t.Errorf("prod's Deployment: %+v", d.Status)
		}
	})
	t.Logf("journey took %v", time.Since(began).Round(time.Millisecond))
}

// k8sRun runs a CLI verb against the server at url (as bob) without a test:
// for a goroutine or a benchmark. Its error, if any, is in the result's
// stderr and code -1.
func k8sRun(url string, args ...string) result {
	return k8sRunArgs(append(args, "--server", url))
}

// k8sRunArgs runs the drover binary with args; a run that could not start
// or finish is reported as exit code -1.
func k8sRunArgs(args []string) result {
	r, err := execDrover(2*cliTimeout, args)
	if err != nil {
		r.code, r.stderr = -1, r.stderr+err.Error()
	}
	return r
}

func k8sEventLines(evs []apiv1.Event) string {
	var b strings.Builder
	for _, e := range evs {
		fmt.Fprintf(&b, "  %-12s %-8s %s\n", e.Type, e.ReleaseChannel, e.Message)
	}
	return b.String()
}
