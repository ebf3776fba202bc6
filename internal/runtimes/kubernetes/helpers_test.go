package kubernetes

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/runtimes"
	"github.com/drover-dev/drover/internal/runtimes/runtimestest"
	"github.com/drover-dev/drover/internal/testing/kubetest"
)

func TestMain(m *testing.M) { kubetest.Main(m) }

// runID keeps the namespaces of one test binary apart from any left over.
var runID = func() string {
	b := make([]byte, 2)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}()

var prefixes atomic.Int64

// uniquePrefix is a managed-namespace prefix no other test uses.
func uniquePrefix() string {
	return fmt.Sprintf("t%s%d-", runID, prefixes.Add(1))
}

// newRuntime returns a runtime on the shared cluster whose managed
// namespaces are the test's own (s.NamespacePrefix, unique when empty).
func newRuntime(t testing.TB, s Settings) *Runtime {
	t.Helper()
	c := kubetest.Shared(t)
	if s.NamespacePrefix == "" {
		s.NamespacePrefix = uniquePrefix()
	}
	r, err := NewWithSettings(&config.Runtime{Name: "kube", Kubernetes: &config.KubernetesRuntime{Kubeconfig: c.Kubeconfig}}, s, runtimes.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// client is a dynamic client on the shared cluster, for the tests' own reads and writes.
func client(t testing.TB) dynamic.Interface {
	t.Helper()
	c := kubetest.Shared(t)
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS, cfg.Burst = 100, 200
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return dyn
}

var (
	deployments = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	namespaces  = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
)

func deploymentObject(name, version string, replicas int64) map[string]any {
	labels := map[string]any{"app": name}
	return map[string]any{
		"apiVersion": "apps/v1",
		"kind":       "Deployment",
		"metadata":   map[string]any{"name": name},
		"spec": map[string]any{
			"replicas": replicas,
			"selector": map[string]any{"matchLabels": labels},
			"template": map[string]any{
				"metadata": map[string]any{"labels": labels},
				"spec": map[string]any{
					"containers": []any{map[string]any{"name": "app", "image": "registry.example/" + name + ":" + version}},
				},
			},
		},
	}
}

func configMapObject(name, version string) map[string]any {
	return map[string]any{
		"apiVersion": "v1",
		"kind":       "ConfigMap",
		"metadata":   map[string]any{"name": name},
		"data":       map[string]any{"version": version},
	}
}

func target(t testing.TB, key runtimes.InstanceKey, version string, objs ...map[string]any) runtimes.Target {
	t.Helper()
	return runtimes.Target{InstanceKey: key, Version: version, DesiredStateID: "ds-" + version, Backend: "kubernetes", Objects: rawObjects(t, objs...)}
}

func key(service string) runtimes.InstanceKey {
	return runtimes.InstanceKey{Application: "shop", Service: service, ReleaseChannel: "staging"}
}

func mustApply(t testing.TB, r *Runtime, tg runtimes.Target) runtimes.ApplyResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := r.Apply(ctx, tg)
	if err != nil {
		t.Fatalf("Apply(%s, %s): %v", tg.InstanceKey, tg.Version, err)
	}
	return res
}

func mustFetch(t testing.TB, r *Runtime, tg runtimes.Target) runtimes.State {
	t.Helper()
	st, err := r.Fetch(context.Background(), tg)
	if err != nil {
		t.Fatalf("Fetch(%s): %v", tg.InstanceKey, err)
	}
	return st
}

// waitState fetches until cond holds (at most timeout).
func waitState(t testing.TB, r *Runtime, tg runtimes.Target, timeout time.Duration, what string, cond func(runtimes.State) bool) runtimes.State {
	t.Helper()
	return runtimestest.Eventually(t, r, tg, timeout, nil, what, cond)
}

func waitConverged(t testing.TB, r *Runtime, tg runtimes.Target) runtimes.State {
	t.Helper()
	return waitState(t, r, tg, 60*time.Second, "converged at "+tg.Version, func(st runtimes.State) bool {
		if st.Failed {
			t.Fatalf("%s: rollout of %s failed: %s", tg.InstanceKey, tg.Version, st.Message)
		}
		return runtimestest.Converged(st, tg.Version)
	})
}

func actions(res runtimes.ApplyResult) map[string]runtimes.Action {
	m := map[string]runtimes.Action{}
	for _, c := range res.Changes {
		m[c.Object] = c.Action
	}
	return m
}

func get(t testing.TB, gvr schema.GroupVersionResource, ns, name string) *unstructured.Unstructured {
	t.Helper()
	obj, err := client(t).Resource(gvr).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get %s %s/%s: %v", gvr.Resource, ns, name, err)
	}
	return obj
}

// notifications collects the keys a Watch reports.
type notifications struct {
	mu   sync.Mutex
	keys []runtimes.InstanceKey
	wake chan struct{}
}

func watch(t testing.TB, r *Runtime) *notifications {
	t.Helper()
	n := &notifications{wake: make(chan struct{}, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = r.Watch(ctx, func(k runtimes.InstanceKey) {
			n.mu.Lock()
			n.keys = append(n.keys, k)
			n.mu.Unlock()
			select {
			case n.wake <- struct{}{}:
			default:
			}
		})
	}()
	t.Cleanup(func() { cancel(); <-done })
	return n
}

// reset forgets what was reported so far.
func (n *notifications) reset() {
	n.mu.Lock()
	n.keys = nil
	n.mu.Unlock()
}

// wait reports how long it took until k was reported, or fails t after timeout.
func (n *notifications) wait(t testing.TB, k runtimes.InstanceKey, timeout time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		n.mu.Lock()
		for _, got := range n.keys {
			if got == k {
				n.mu.Unlock()
				return time.Since(start)
			}
		}
		n.mu.Unlock()
		select {
		case <-n.wake:
		case <-deadline.C:
			t.Fatalf("no notification for %s within %v", k, timeout)
		}
	}
}
