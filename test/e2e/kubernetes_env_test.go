package e2e

import (
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestKubernetesEnvInjection: a service relying on Prodvana's env injection
// runs with it. The release channel's defaultEnv, the service's env and
// the PVN_* variables reach the applied Deployment's containers; the
// container's own variable wins; the raw secret and a secret from drover's
// store (drover secrets set) reach them through the
// instance's env Secret, which holds the value, while neither drover
// compile nor the Deployment shows it.
func TestKubernetesEnvInjection(t *testing.T) {
	requireE2E(t)
	c := k8sCluster(t)
	const secret = "s3cr3t-e2e-value"
	const stored = "st0red-e2e-token" // in drover's secret store, as api-token-0
	dir := t.TempDir()
	files := map[string]string{
		"runtime.pvn.yaml": "runtime:\n  name: env-cluster\n  kubernetes:\n    kubeconfig: " + c.Kubeconfig + "\n",
		"app.pvn.yaml": `application:
  name: envapp
  releaseChannels:
    - name: staging
      runtimes:
        - runtime: env-cluster
      policy:
        defaultEnv:
          LOG_LEVEL: {value: debug}
          REGION: {value: eu-west-1}
          DB_PASSWORD: {rawSecret: ` + secret + `}
`,
		"web/web.pvn.yaml": `service:
  name: web
  application: envapp
  env:
    REGION: {value: us-east-1}
    API_TOKEN: {secret: {key: api-token, version: api-token-0}}
  kubernetesConfig:
    type: KUBERNETES
    inlined: |
      apiVersion: apps/v1
      kind: Deployment
      metadata:
        name: web
      spec:
        replicas: 1
        selector:
          matchLabels: {app: web}
        template:
          metadata:
            labels: {app: web}
          spec:
            containers:
              - name: web
                image: docker.io/library/nginx:1.27
                env:
                  - {name: LOG_LEVEL, value: trace}
`,
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
	compiled := runDrover(t, "compile", dir+"/...", "--app", "envapp", "--service", "web", "-o", "json")
	if compiled.code != 0 || !strings.Contains(compiled.stdout, `"PVN_SERVICE_VERSION"`) || strings.Contains(compiled.stdout, secret) {
		t.Fatalf("drover compile shows no injected env, or the secret: %s", compiled)
	}

	s := newServer(t, k8sServerFlags...)
	s.ok("alice", "apply", dir+"/...")
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(stored), 0o600); err != nil {
		t.Fatal(err)
	}
	s.ok("alice", "secrets", "set", "api-token", "--from-file", tokenFile)
	version, _ := s.push("alice", "envapp", "web")

	const ns = "drover-envapp-staging"
	var dep struct {
		Spec struct {
			Template struct {
				Spec struct {
					Containers []struct {
						Env []struct {
							Name      string `json:"name"`
							Value     string `json:"value"`
							ValueFrom *struct {
								SecretKeyRef struct{ Name, Key string } `json:"secretKeyRef"`
							} `json:"valueFrom"`
						} `json:"env"`
					} `json:"containers"`
				} `json:"spec"`
			} `json:"template"`
		} `json:"spec"`
	}
	k8sWait(t, 60*time.Second, "the Deployment applied", func() bool {
		return k8sGet(t, c, "/apis/apps/v1/namespaces/"+ns+"/deployments/web", &dep)
	})
	var got []string
	for _, e := range dep.Spec.Template.Spec.Containers[0].Env {
		if e.ValueFrom != nil {
			got = append(got, e.Name+"<-"+e.ValueFrom.SecretKeyRef.Name+"/"+e.ValueFrom.SecretKeyRef.Key)
			continue
		}
		got = append(got, e.Name+"="+e.Value)
	}
	const secretName = "drover-env.envapp.web.staging"
	want := []string{
		"API_TOKEN<-" + secretName + "/API_TOKEN",
		"DB_PASSWORD<-" + secretName + "/DB_PASSWORD",
		"PVN_APPLICATION=envapp", "PVN_APPLICATION_ID=envapp",
		"PVN_RELEASE_CHANNEL=staging", "PVN_RELEASE_CHANNEL_ID=envapp/staging",
		"PVN_SERVICE=web", "PVN_SERVICE_ID=envapp/web", "PVN_SERVICE_VERSION=" + version,
		"REGION=us-east-1",
		"LOG_LEVEL=trace",
	}
	if !slices.Equal(got, want) {
		t.Errorf("the Deployment's env:\n got %s\nwant %s", strings.Join(got, " "), strings.Join(want, " "))
	}
	var sec k8sObjectData
	if !k8sGet(t, c, "/api/v1/namespaces/"+ns+"/secrets/"+secretName, &sec) {
		t.Fatalf("no Secret %s/%s", ns, secretName)
	}
	if v, err := base64.StdEncoding.DecodeString(sec.Data["DB_PASSWORD"]); err != nil || string(v) != secret || len(sec.Data) != 2 {
		t.Errorf("the env Secret's data: %v (%v)", sec.Data, err)
	}
	if v, err := base64.StdEncoding.DecodeString(sec.Data["API_TOKEN"]); err != nil || string(v) != stored {
		t.Errorf("the stored secret did not reach the env Secret: %v (%v)", sec.Data, err)
	}
	for _, args := range [][]string{{"status", "web", "--app", "envapp", "-o", "json"}, {"events", "web", "--app", "envapp"}, {"compiled", "web", "--app", "envapp", "-o", "json"}} {
		if out := s.ok("alice", args...); strings.Contains(out.stdout+out.stderr, stored) {
			t.Errorf("drover %s shows the stored secret's value", strings.Join(args, " "))
		}
	}
	if t.Failed() {
		fmt.Println(s.ok("alice", "status", "web", "--app", "envapp").stdout)
	}
}
