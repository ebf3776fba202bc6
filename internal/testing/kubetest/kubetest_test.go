package kubetest_test

import (
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/testing/kubetest"
)

func TestMain(m *testing.M) { kubetest.Main(m) }

// TestSharedCluster checks what tests rely on: the kubeconfig works with a plain TLS client, the
// apiserver is ready, both simulated nodes are Ready and /metrics is open to the admin user.
func TestSharedCluster(t *testing.T) {
	c := kubetest.Shared(t)

	if fi, err := os.Stat(c.Kubeconfig); err != nil || fi.Size() == 0 {
		t.Fatalf("kubeconfig %q: %v (size %d)", c.Kubeconfig, err, sizeOf(fi))
	}

	// /readyz with nothing but crypto/tls and net/http, from what the kubeconfig holds.
	server, tlsConfig, err := kubetest.LoadKubeconfig(c.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(server, "https://127.0.0.1:") {
		t.Errorf("server %q is not on 127.0.0.1", server)
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConfig}}
	resp, err := client.Get(server + "/readyz")
	if err != nil {
		t.Fatalf("GET /readyz: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "ok" {
		t.Fatalf("GET /readyz: %s %q, want 200 \"ok\"", resp.Status, body)
	}

	// Without a client certificate the apiserver treats us as anonymous: no node list.
	anon := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		MinVersion: tls.VersionTLS12, RootCAs: tlsConfig.RootCAs,
	}}}
	if resp, err := anon.Get(server + "/api/v1/nodes"); err != nil {
		t.Errorf("anonymous GET /api/v1/nodes: %v", err)
	} else {
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusForbidden {
			t.Errorf("anonymous GET /api/v1/nodes: %s, want 401 or 403", resp.Status)
		}
	}

	var nodes struct {
		Items []struct {
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
			Status struct {
				Conditions []struct {
					Type   string `json:"type"`
					Status string `json:"status"`
				} `json:"conditions"`
			} `json:"status"`
		} `json:"items"`
	}
	if err := json.Unmarshal(c.Get(t, "/api/v1/nodes"), &nodes); err != nil {
		t.Fatalf("decoding the node list: %v", err)
	}
	ready := map[string]bool{}
	for _, n := range nodes.Items {
		for _, cond := range n.Status.Conditions {
			if cond.Type == "Ready" && cond.Status == "True" {
				ready[n.Metadata.Name] = true
			}
		}
	}
	for _, name := range []string{"kwok-node-0", "kwok-node-1"} {
		if !ready[name] {
			t.Errorf("node %s is not Ready (nodes: %+v)", name, nodes.Items)
		}
	}
	if len(nodes.Items) != 2 {
		t.Errorf("%d nodes, want 2", len(nodes.Items))
	}

	// The Kubernetes runtime counts apiserver requests by verb.
	if metrics := string(c.Get(t, "/metrics")); !strings.Contains(metrics, `apiserver_request_total{`) ||
		!strings.Contains(metrics, `verb="LIST"`) {
		t.Errorf("/metrics has no apiserver_request_total by verb")
	}

	// The default ServiceAccount exists (pods can be created).
	c.Get(t, "/api/v1/namespaces/default/serviceaccounts/default")
}

// TestSharedIsShared checks that Shared hands out one cluster per test binary.
func TestSharedIsShared(t *testing.T) {
	a, b := kubetest.Shared(t), kubetest.Shared(t)
	if a != b || a.Kubeconfig != b.Kubeconfig {
		t.Fatalf("Shared returned two clusters: %s and %s", a.StateDir, b.StateDir)
	}
}

func TestWait(t *testing.T) {
	n := 0
	kubetest.Wait(t, 5*time.Second, func() bool { n++; return n == 3 })
	if n != 3 {
		t.Fatalf("cond called %d times, want 3", n)
	}
}

func sizeOf(fi os.FileInfo) int64 {
	if fi == nil {
		return -1
	}
	return fi.Size()
}

// TestWorkloads checks the kwok simulation: a Deployment rolls out to Ready and a Job completes.
func TestWorkloads(t *testing.T) {
	c := kubetest.Shared(t)
	client := c.HTTPClient()
	create := func(path, manifest string) {
		t.Helper()
		resp, err := client.Post(c.Server+path, "application/json", strings.NewReader(manifest))
		if err != nil {
			t.Fatalf("POST %s: %v", path, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("POST %s: %s: %s", path, resp.Status, body)
		}
	}
	create("/apis/apps/v1/namespaces/default/deployments", `{
		"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "kubetest-web"},
		"spec": {"replicas": 3, "selector": {"matchLabels": {"app": "kubetest-web"}},
			"template": {"metadata": {"labels": {"app": "kubetest-web"}},
				"spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]}}}}`)
	create("/apis/batch/v1/namespaces/default/jobs", `{
		"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "kubetest-job"},
		"spec": {"completions": 2, "template": {"spec": {"restartPolicy": "Never",
			"containers": [{"name": "job", "image": "busybox", "command": ["true"]}]}}}}`)

	var dep struct {
		Metadata struct {
			Generation int64 `json:"generation"`
		} `json:"metadata"`
		Status struct {
			ObservedGeneration int64 `json:"observedGeneration"`
			ReadyReplicas      int   `json:"readyReplicas"`
			UpdatedReplicas    int   `json:"updatedReplicas"`
		} `json:"status"`
	}
	kubetest.Wait(t, 60*time.Second, func() bool {
		if err := json.Unmarshal(c.Get(t, "/apis/apps/v1/namespaces/default/deployments/kubetest-web"), &dep); err != nil {
			t.Fatal(err)
		}
		return dep.Status.ObservedGeneration == dep.Metadata.Generation &&
			dep.Status.ReadyReplicas == 3 && dep.Status.UpdatedReplicas == 3
	})

	var job struct {
		Status struct {
			Succeeded  int `json:"succeeded"`
			Conditions []struct {
				Type   string `json:"type"`
				Status string `json:"status"`
			} `json:"conditions"`
		} `json:"status"`
	}
	kubetest.Wait(t, 60*time.Second, func() bool {
		if err := json.Unmarshal(c.Get(t, "/apis/batch/v1/namespaces/default/jobs/kubetest-job"), &job); err != nil {
			t.Fatal(err)
		}
		for _, cond := range job.Status.Conditions {
			if cond.Type == "Complete" && cond.Status == "True" {
				return job.Status.Succeeded == 2
			}
		}
		return false
	})
}
