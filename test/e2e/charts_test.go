package e2e

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestValidateChartsAndTrees: drover validate renders a chart that checks a
// required value with the value given by --param; without it, the error is
// the chart's, and says which --param to give; a mistyped --param is a usage
// error; a kustomize overlay whose bases lie beside local.path validates.
// The trees are the compiler's golden cases.
func TestValidateChartsAndTrees(t *testing.T) {
	requireE2E(t)
	chart := filepath.Join(repoRoot, "internal", "compiler", "testdata", "validate-standin")
	r := runDrover(t, "validate", chart+"/...")
	if r.code != 1 || !strings.Contains(r.stderr, `version "placeholder" is not supported`) || !strings.Contains(r.stderr, "drover validate --param image=VALUE") {
		t.Errorf("without --param: want exit 1, the chart's refusal and the --param to give, got %s", r)
	}
	if r := runDrover(t, "validate", chart+"/...", "--param", "image=1.27.3"); r.code != 0 {
		t.Errorf("with --param image=1.27.3: %s", r)
	}
	if r := runDrover(t, "validate", chart+"/...", "--param", "image=1.19.0"); r.code != 1 || !strings.Contains(r.stderr, "this chart needs 1.20 or later") || strings.Contains(r.stderr, "stand-in") {
		t.Errorf("with an unsupported version: %s", r)
	}
	if r := runDrover(t, "validate", chart+"/...", "--param", "imgae=1.27.3"); r.code != 64 || !strings.Contains(r.stderr, `no service among the configs has a parameter "imgae"`) {
		t.Errorf("a mistyped --param: %s", r)
	}
	tree := filepath.Join(repoRoot, "internal", "compiler", "testdata", "kustomize-beside")
	if r := runDrover(t, "validate", tree+"/..."); r.code != 0 {
		t.Errorf("kustomize bases beside local.path: %s", r)
	}
}

// TestKubernetesHelmHooks: a chart with crds/, a pre-install hook that is an
// object of its CRD, a post-install hook, and a pre-upgrade hook Job with
// generateName, pushed twice on the real control plane: the first version
// installs all of them; the second applies the upgrade hook (a new Job, the
// first version's pruned) and leaves the install hooks as they were.
func TestKubernetesHelmHooks(t *testing.T) {
	requireE2E(t)
	c := k8sCluster(t)
	dir := t.TempDir()
	ns := "hooks-e2e"
	k8sCreateNamespace(t, c, ns)
	t.Cleanup(func() {
		k8sDo(t, c, http.MethodDelete, "/api/v1/namespaces/"+ns, "", nil)
		k8sDo(t, c, http.MethodDelete, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gizmos.hooks.drover.test", "", nil)
	})
	files := map[string]string{
		"runtime.pvn.yaml": "runtime:\n  name: hooks-cluster\n  kubernetes:\n    kubeconfig: " + c.Kubeconfig + "\n",
		"app.pvn.yaml": "application:\n  name: hooks\n  releaseChannels:\n    - name: staging\n      runtimes:\n" +
			"        - runtime: hooks-cluster\n          containerOrchestration: {k8s: {namespace: " + ns + "}}\n",
		"web/web.pvn.yaml": "service:\n  name: web\n  application: hooks\n  helm:\n    local:\n      path: chart\n" +
			"    valuesOverrides:\n      - inlined: |\n          tag: \"{{.Params.tag}}\"\n" +
			"  parameters:\n    - name: tag\n      required: true\n      string: {}\n",
		"web/chart/Chart.yaml": "apiVersion: v2\nname: web\nversion: 0.1.0\n",
		"web/chart/crds/gizmos.yaml": `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gizmos.hooks.drover.test}
spec:
  group: hooks.drover.test
  scope: Namespaced
  names: {plural: gizmos, singular: gizmo, kind: Gizmo}
  versions:
    - name: v1
      served: true
      storage: true
      schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
`,
		"web/chart/templates/setup.yaml": "apiVersion: hooks.drover.test/v1\nkind: Gizmo\nmetadata:\n  name: setup\n" +
			"  annotations: {helm.sh/hook: pre-install}\nspec: {tag: {{ .Values.tag | quote }}}\n",
		"web/chart/templates/installed.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: installed\n" +
			"  annotations: {helm.sh/hook: post-install}\ndata: {tag: {{ .Values.tag | quote }}}\n",
		"web/chart/templates/migrate.yaml": "apiVersion: batch/v1\nkind: Job\nmetadata:\n  generateName: migrate-\n" +
			"  annotations: {helm.sh/hook: \"pre-install,pre-upgrade\"}\nspec:\n  template:\n    spec:\n" +
			"      restartPolicy: Never\n      containers: [{name: m, image: \"registry.example/migrate:{{ .Values.tag }}\"}]\n",
		"web/chart/templates/app.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app}\ndata: {tag: {{ .Values.tag | quote }}}\n",
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
	type jobList struct {
		Items []struct {
			Metadata struct {
				Name              string            `json:"name"`
				Annotations       map[string]string `json:"annotations"`
				DeletionTimestamp *string           `json:"deletionTimestamp"`
			} `json:"metadata"`
		} `json:"items"`
	}
	jobs := func() []string {
		var l jobList
		k8sGet(t, c, "/apis/batch/v1/namespaces/"+ns+"/jobs", &l)
		var out []string
		for _, j := range l.Items {
			if j.Metadata.DeletionTimestamp == nil {
				out = append(out, j.Metadata.Name+"@"+j.Metadata.Annotations["app.drover.dev/version"])
			}
		}
		return out
	}
	tagOf := func(path string) string {
		var cm k8sObjectData
		k8sGet(t, c, path, &cm)
		return cm.Data["tag"]
	}

	v1, _ := s.push("alice", "hooks", "web", "tag=1.0")
	s.waitStatus("hooks", "web", 2*time.Minute, "v1 converged", converged(v1))
	first := jobs()
	if len(first) != 1 || !strings.HasPrefix(first[0], "migrate-") || !strings.HasSuffix(first[0], "@"+v1) {
		t.Fatalf("after v1: jobs %v", first)
	}
	if got := tagOf(k8sConfigMapPath(ns, "installed")); got != "1.0" {
		t.Errorf("post-install hook after v1: tag %q", got)
	}

	v2, _ := s.push("alice", "hooks", "web", "tag=2.0")
	s.waitStatus("hooks", "web", 2*time.Minute, "v2 converged", converged(v2))
	k8sWait(t, 30*time.Second, "one Job, v2's", func() bool {
		j := jobs()
		return len(j) == 1 && j[0] != first[0] && strings.HasSuffix(j[0], "@"+v2)
	})
	if got := tagOf(k8sConfigMapPath(ns, "installed")); got != "1.0" {
		t.Errorf("the post-install hook was applied again by v2: tag %q", got)
	}
	if got := tagOf(k8sConfigMapPath(ns, "app")); got != "2.0" {
		t.Errorf("the release's ConfigMap after v2: tag %q", got)
	}
	var gizmo struct {
		Spec map[string]string `json:"spec"`
	}
	if !k8sGet(t, c, "/apis/hooks.drover.test/v1/namespaces/"+ns+"/gizmos/setup", &gizmo) || gizmo.Spec["tag"] != "1.0" {
		t.Errorf("the pre-install Gizmo after v2: %v", gizmo.Spec)
	}
	if t.Failed() {
		t.Log(s.ok("alice", "events", "web", "--app", "hooks").stdout)
	}
}
