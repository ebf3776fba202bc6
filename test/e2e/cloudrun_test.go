package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	run "cloud.google.com/go/run/apiv2"
	"cloud.google.com/go/run/apiv2/runpb"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/drover-dev/drover/api/v1"
	"github.com/drover-dev/drover/internal/testing/cloudruntest"
)

// cloudRunTree is an application of two release channels on Cloud Run:
// staging, then prod after staging is stable and an approval, each a
// project of its own; the Knative Service YAML is chosen per release
// channel by a templated subPath and takes the image parameter. With
// proxy, the runtimes are reached through that linked runtime's agent;
// with saKey, prod's runtime names the stored secret as its service
// account key.
func cloudRunTree(t *testing.T, proxy, saKey string) string {
	t.Helper()
	dir := t.TempDir()
	runtime := func(name, project, extra string) string {
		text := fmt.Sprintf("runtime:\n  name: %s\n  googleCloudRun:\n    project: %s\n    region: us-central1\n    pollInterval: 1s\n    steadyStatePollInterval: 5s\n", name, project)
		if proxy != "" {
			text += "    proxyRuntime:\n      runtime: " + proxy + "\n"
		}
		return text + extra
	}
	prodExtra := ""
	if saKey != "" {
		prodExtra = "    serviceAccountJson:\n      secret:\n        key: " + saKey + "\n        version: " + saKey + "-0\n"
	}
	knative := func(rc string) string {
		return `apiVersion: serving.knative.dev/v1
kind: Service
metadata:
  name: hello
  labels: {channel: ` + rc + `}
spec:
  template:
    metadata:
      annotations:
        autoscaling.knative.dev/maxScale: "{{.Constants.maxScale}}"
    spec:
      containers:
        - image: "{{.Params.image}}"
          ports: [{name: http1, containerPort: 8080}]
  traffic:
    - percent: 100
      latestRevision: true
`
	}
	writeTree(t, dir, map[string]string{
		"runtimes/cloudrun-staging.pvn.yaml": runtime("cloudrun-staging", "shop-staging", ""),
		"runtimes/cloudrun-prod.pvn.yaml":    runtime("cloudrun-prod", "shop-prod", prodExtra),
		"app.pvn.yaml": `application:
  name: shop
  releaseChannels:
    - name: staging
      runtimes:
        - runtime: cloudrun-staging
      constants:
        - name: maxScale
          string: {value: "2"}
    - name: prod
      runtimes:
        - runtime: cloudrun-prod
      constants:
        - name: maxScale
          string: {value: "10"}
      preconditions:
        - releaseChannelStable:
            releaseChannel: staging
        - manualApproval: {}
`,
		"services/hello/hello.pvn.yaml": `service:
  name: hello
  application: shop
  googleCloudRun:
    local:
      path: .
      subPath: service-{{.Builtins.ReleaseChannel.Name}}.yaml
  parameters:
    - name: image
      required: true
      string: {}
`,
		"services/hello/service-staging.yaml": knative("staging"),
		"services/hello/service-prod.yaml":    knative("prod"),
	})
	return dir
}

// cloudRunClient is a Cloud Run client of the test server, for looking
// and for changes made outside drover.
func cloudRunClient(t *testing.T, s *cloudruntest.Server) *run.ServicesClient {
	t.Helper()
	c, err := run.NewServicesClient(t.Context(), option.WithEndpoint(s.Addr()), option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func cloudRunService(t *testing.T, c *run.ServicesClient, project string) *runpb.Service {
	t.Helper()
	svc, err := c.GetService(t.Context(), &runpb.GetServiceRequest{Name: "projects/" + project + "/locations/us-central1/services/hello"})
	if err != nil {
		t.Fatalf("get %s's service: %v", project, err)
	}
	return svc
}

// TestCloudRun: a Cloud Run service released through staging, an
// approval and prod, by the drover binary against the Cloud Run API test
// server (CLOUD_RUN_EMULATOR_HOST); prod's runtime reads its service
// account key from drover's secret store, which shows nowhere. Drift made
// outside drover is healed, a version whose revision fails is rolled
// back to the previous revision, a preview shows the change, and at
// steady state the server reads each service once per
// steadyStatePollInterval.
func TestCloudRun(t *testing.T) {
	requireE2E(t)
	cr := cloudruntest.New()
	cr.ReadyDelay = 500 * time.Millisecond
	if err := cr.Start(""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cr.Close)
	c := cloudRunClient(t, cr)
	s := newServerEnv(t, freeAddr(t), []string{"CLOUD_RUN_EMULATOR_HOST=" + cr.Addr()}, "--log-level", "debug")

	// prod's service account key, in drover's secret store.
	const marker = "e2e-gcp-private-key-do-not-show"
	keyFile := filepath.Join(t.TempDir(), "key.json")
	key := `{"type":"service_account","project_id":"shop-prod","client_email":"drover@shop-prod.iam.gserviceaccount.com","private_key":"-----BEGIN PRIVATE KEY-----\n` + marker + `\n-----END PRIVATE KEY-----\n"}`
	if err := os.WriteFile(keyFile, []byte(key), 0o600); err != nil {
		t.Fatal(err)
	}
	s.ok("alice", "secrets", "set", "gcp-prod", "--from-file", keyFile)
	dir := cloudRunTree(t, "", "gcp-prod")
	s.ok("alice", "apply", dir+"/...")
	if info := runtimeInfo(t, s, "cloudrun-prod"); info.Kind != "googleCloudRun" {
		t.Errorf("drover runtimes: %+v", info)
	}

	pushed := time.Now()
	v1, _ := s.push("alice", "shop", "hello", "image=hello:1.0")
	st := s.waitStatus("shop", "hello", 60*time.Second, "staging converged, prod waiting for approval", func(st *apiv1.ServiceStatus) bool {
		return findChannel(st, "staging").Status == "CONVERGED" && findChannel(st, "prod").Status == "WAITING_MANUAL_APPROVAL"
	})
	stagingAt := time.Now()
	if c := findChannel(st, "staging"); c.Version != v1 || len(c.Objects) != 1 || c.Objects[0].ObjectType != "CloudRun" {
		t.Errorf("staging: %s", dump(c))
	}
	s.ok("bob", "approve", "hello", "--app", "shop", "--release-channel", "prod")
	approved := time.Now()
	st = s.waitStatus("shop", "hello", 60*time.Second, "prod converged", converged(v1))
	t.Logf("push -> staging converged %s; approval -> prod converged %s", stagingAt.Sub(pushed).Round(time.Millisecond), time.Since(approved).Round(time.Millisecond))
	for _, p := range []struct{ project, scale string }{{"shop-staging", "2"}, {"shop-prod", "10"}} {
		svc := cloudRunService(t, c, p.project)
		if svc.Template.Containers[0].Image != "hello:1.0" || fmt.Sprint(svc.Template.Scaling.MaxInstanceCount) != p.scale ||
			svc.Annotations["drover.dev/version"] != v1 || svc.Template.Annotations["drover.dev/instance"] != "shop/hello/"+strings.TrimPrefix(p.project, "shop-") {
			t.Errorf("%s: %v", p.project, svc)
		}
	}
	// The runtime info (the CloudRun object) reaches the status.
	if ch := findChannel(st, "prod"); len(ch.Info) == 0 || ch.Info[0].Name != "CloudRun" || !strings.Contains(ch.Info[0].Text, `"latestReadyRevision": "hello-00001-`) {
		t.Errorf("prod's info: %s", dump(ch.Info))
	}

	// Steady state: what the server asks the Cloud Run API for two
	// converged services (steadyStatePollInterval 5s here; 1m by default).
	time.Sleep(6 * time.Second)
	cr.Reset()
	const window = 20 * time.Second
	time.Sleep(window)
	calls := cr.Count()
	t.Logf("steady state, 2 services, %s at a 5s interval: %v: %.1f calls per service per minute (%.2f at the default 1m)",
		window, cr.Calls(), float64(calls)/2/window.Minutes(), float64(calls)/2/window.Minutes()*5/60)
	if calls > 2*int(window/(5*time.Second))+4 {
		t.Errorf("steady state: %d calls in %s for 2 services: %v", calls, window, cr.Calls())
	}

	// A preview shows what a push would change.
	pv := s.ok("alice", "preview", "hello", "--app", "shop", "--param", "image=hello:2.0").stdout
	if !strings.Contains(pv, "hello:2.0") || !strings.Contains(pv, "hello:1.0") {
		t.Errorf("preview does not show the image change:\n%s", pv)
	}

	// Drift: prod's image changed by hand (a new revision, drover's
	// annotations kept, as gcloud run deploy does) is put back.
	live := proto.Clone(cloudRunService(t, c, "shop-prod")).(*runpb.Service)
	live.Template.Containers[0].Image = "hello:by-hand"
	live.Template.Revision = ""
	if _, err := c.UpdateService(t.Context(), &runpb.UpdateServiceRequest{Service: live}); err != nil {
		t.Fatal(err)
	}
	s.waitStatus("shop", "hello", 60*time.Second, "the drift healed", func(st *apiv1.ServiceStatus) bool {
		svc := cloudRunService(t, c, "shop-prod")
		return svc.Template.Containers[0].Image == "hello:1.0" && findChannel(st, "prod").Status == "CONVERGED" && svc.LatestReadyRevision == svc.LatestCreatedRevision
	})
	drift := false
	for _, e := range s.events("shop", "hello") {
		if e.Type == "drift" && e.ReleaseChannel == "prod" && strings.Contains(e.Message, "image is hello:by-hand") {
			drift = true
		}
	}
	if !drift {
		t.Errorf("no drift event for prod: %s", dump(eventKeys(s.events("shop", "hello"))))
	}

	// A failed version: its revision never becomes ready; staging is
	// rolled back to v1's revision, prod never sees it.
	v2, _ := s.push("alice", "shop", "hello", "image=hello"+cloudruntest.BrokenTag)
	st = s.waitStatus("shop", "hello", 60*time.Second, "staging rolled back", channelIs("staging", "ROLLED_BACK", v1))
	failed := false
	for _, e := range s.events("shop", "hello") {
		if e.Type == "failed" && e.ReleaseChannel == "staging" && strings.Contains(e.Message, "revision hello-00002-") && strings.Contains(e.Message, "failed to start") {
			failed = true
		}
	}
	if !failed {
		t.Errorf("no failed event naming the revision: %s", dump(s.events("shop", "hello")))
	}
	svc := cloudRunService(t, c, "shop-staging")
	if !strings.Contains(svc.LatestCreatedRevision, "hello-00001-") || !strings.Contains(svc.LatestReadyRevision, "hello-00001-") || svc.Annotations["drover.dev/version"] != v1 {
		t.Errorf("staging after the rollback of %s: latest created %s, ready %s, version %s", v2, svc.LatestCreatedRevision, svc.LatestReadyRevision, svc.Annotations["drover.dev/version"])
	}
	if ch := findChannel(st, "prod"); ch.Version != v1 {
		t.Errorf("prod: %s", dump(ch))
	}

	// The service account key shows nowhere: status, events, compiled
	// config, the server's data directory and log.
	var raw []byte
	if err := s.getJSON("/v1/apps/shop/services/hello", &raw); err != nil {
		t.Fatal(err)
	}
	compiled := s.ok("alice", "compiled", "hello", "--app", "shop", "-o", "json").stdout
	for what, text := range map[string]string{"status": string(raw), "compiled": compiled, "preview": pv} {
		if strings.Contains(text, marker) {
			t.Errorf("the %s shows the service account key", what)
		}
	}
	s.stop()
	s.atRest(t, func(where, text string) {
		if strings.Contains(text, marker) {
			t.Errorf("%s holds the service account key in clear", where)
		}
	})
}

// TestCloudRunThroughAgent: the Cloud Run runtimes' proxyRuntime is a
// linked runtime whose agent reaches the Cloud Run API with the
// credentials of its own environment; the server has none, and the
// service is released all the same.
func TestCloudRunThroughAgent(t *testing.T) {
	requireE2E(t)
	cr := cloudruntest.New()
	cr.ReadyDelay = 300 * time.Millisecond
	if err := cr.Start(""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cr.Close)
	// The server's Cloud Run endpoint leads nowhere: were it to call the
	// API itself, nothing would converge.
	s := newServerEnv(t, freeAddr(t), []string{"CLOUD_RUN_EMULATOR_HOST=127.0.0.1:9"}, "--agent-listen", freeAddr(t))
	const marker = "e2e-agent-credential-do-not-show"
	creds := filepath.Join(t.TempDir(), "adc.json")
	if err := os.WriteFile(creds, []byte(`{"type":"service_account","private_key":"`+marker+`"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	resp, tok := link(t, s, "gcp")
	startAgentEnv(t, "gcp", []string{"CLOUD_RUN_EMULATOR_HOST=" + cr.Addr(), "GOOGLE_APPLICATION_CREDENTIALS=" + creds}, agentArgs(resp, tok, "--mode", "commands")...)
	waitAgent(t, s, "gcp", "connected")
	s.ok("alice", "apply", cloudRunTree(t, "gcp", "")+"/...")
	v1, _ := s.push("alice", "shop", "hello", "image=hello:1.0")
	s.waitStatus("shop", "hello", 60*time.Second, "staging converged through the agent", func(st *apiv1.ServiceStatus) bool {
		c := findChannel(st, "staging")
		return c.Status == "CONVERGED" && c.Version == v1
	})
	s.ok("bob", "approve", "hello", "--app", "shop", "--release-channel", "prod")
	s.waitStatus("shop", "hello", 60*time.Second, "prod converged through the agent", converged(v1))
	if svc := cloudRunService(t, cloudRunClient(t, cr), "shop-prod"); svc.Template.Containers[0].Image != "hello:1.0" {
		t.Errorf("prod's Cloud Run service: %v", svc)
	}
	if info := runtimeInfo(t, s, "cloudrun-prod"); info.Via != "gcp" || info.Kind != "googleCloudRun" {
		t.Errorf("cloudrun-prod as the server lists it: %+v", info)
	}
	s.stop()
	s.atRest(t, func(where, text string) {
		if strings.Contains(text, marker) || strings.Contains(text, creds) {
			t.Errorf("%s holds the agent's credential", where)
		}
	})
}
