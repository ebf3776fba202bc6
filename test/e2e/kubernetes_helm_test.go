package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apiv1 "github.com/drover-dev/drover/api/v1"
)

// TestKubernetesHelmCapabilities: a chart renders against what the channel's
// cluster says of itself: its version and the API versions it serves, a
// CustomResourceDefinition installed in it included (which Helm's defaults
// lack), as helm template --validate would render it. drover runtimes shows
// what the cluster said.
func TestKubernetesHelmCapabilities(t *testing.T) {
	requireE2E(t)
	c := k8sCluster(t)
	var version struct {
		GitVersion string `json:"gitVersion"`
	}
	if !k8sGet(t, c, "/version", &version) || version.GitVersion == "" {
		t.Fatal("the cluster has no /version")
	}
	crd := `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
		"metadata":{"name":"gadgets.caps.drover.test"},
		"spec":{"group":"caps.drover.test","scope":"Namespaced",
			"names":{"plural":"gadgets","singular":"gadget","kind":"Gadget"},
			"versions":[{"name":"v1","served":true,"storage":true,
				"schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}}`
	k8sMust(t, c, http.MethodPost, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", "application/json", []byte(crd))
	t.Cleanup(func() {
		k8sDo(t, c, http.MethodDelete, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gadgets.caps.drover.test", "", nil)
	})
	// The CRD is served once established: discovery lists it from then on.
	k8sWait(t, 30*time.Second, "the CRD served", func() bool {
		code, _ := k8sDo(t, c, http.MethodGet, "/apis/caps.drover.test/v1", "", nil)
		return code == http.StatusOK
	})

	dir := t.TempDir()
	files := map[string]string{
		"runtime.pvn.yaml":     "runtime:\n  name: caps-cluster\n  kubernetes:\n    kubeconfig: " + c.Kubeconfig + "\n",
		"app.pvn.yaml":         "application:\n  name: caps\n  releaseChannels:\n    - name: staging\n      runtimes:\n        - runtime: caps-cluster\n",
		"web/web.pvn.yaml":     "service:\n  name: web\n  application: caps\n  helm:\n    local:\n      path: chart\n",
		"web/chart/Chart.yaml": "apiVersion: v2\nname: caps\nversion: 0.1.0\n",
		"web/chart/templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: caps\ndata:\n" +
			"  kube: {{ .Capabilities.KubeVersion.Version | quote }}\n" +
			"  gadget: {{ .Capabilities.APIVersions.Has \"caps.drover.test/v1/Gadget\" | quote }}\n" +
			"  deployments: {{ .Capabilities.APIVersions.Has \"apps/v1/Deployment\" | quote }}\n",
	}
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s := newServer(t, k8sServerFlags...)
	s.ok("alice", "apply", dir+"/...")

	// The server asks the cluster once the runtime's config is applied.
	var rt apiv1.RuntimeInfo
	k8sWait(t, 30*time.Second, "the cluster's facts in drover runtimes", func() bool {
		var list apiv1.RuntimeList
		r := s.ok("alice", "runtimes", "-o", "json")
		if err := json.Unmarshal([]byte(r.stdout), &list); err != nil {
			t.Fatalf("drover runtimes -o json: %v\n%s", err, r.stdout)
		}
		for _, x := range list.Runtimes {
			if x.Name == "caps-cluster" && x.KubeVersion != "" {
				rt = x
				return true
			}
		}
		return false
	})
	if rt.KubeVersion != version.GitVersion || rt.Kind != "kubernetes" {
		t.Errorf("drover runtimes: %+v, want kind kubernetes and version %s", rt, version.GitVersion)
	}
	if !strings.Contains(strings.Join(rt.APIVersions, " "), "caps.drover.test/v1/Gadget") {
		t.Errorf("the cluster's API versions lack the CRD's kind: %v", rt.APIVersions)
	}
	if r := s.ok("alice", "runtimes"); !strings.Contains(r.stdout, "caps-cluster") || !strings.Contains(r.stdout, version.GitVersion) {
		t.Errorf("drover runtimes:\n%s", r.stdout)
	}

	s.push("alice", "caps", "web")
	var cm k8sObjectData
	path := k8sConfigMapPath("drover-caps-staging", "caps")
	k8sWait(t, 60*time.Second, "the chart's ConfigMap applied", func() bool { return k8sGet(t, c, path, &cm) })
	want := map[string]string{"kube": version.GitVersion, "gadget": "true", "deployments": "true"}
	for k, v := range want {
		if cm.Data[k] != v {
			t.Errorf("ConfigMap data %s = %q, want %q (all: %v)", k, cm.Data[k], v, cm.Data)
		}
	}
	if t.Failed() {
		fmt.Println(s.ok("alice", "status", "web", "--app", "caps").stdout)
	}
}

// k8sObjectData is a ConfigMap's data.
type k8sObjectData struct {
	Data map[string]string `json:"data"`
}
