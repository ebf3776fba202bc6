package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apiv1 "github.com/drover-dev/drover/api/v1"
	"github.com/drover-dev/drover/internal/testing/mototest"
)

// ecsTree is an application in the style of Prodvana's ecs-multi-clusters
// example: staging, then production after staging is stable and an
// approval, each on an ECS cluster of its own; the service's ECS service
// definition is chosen per release channel by a templated subPath, its
// task definition takes the image parameter, and its desired count a
// constant of the release channel. With proxy, the ECS runtimes are
// reached through that linked runtime's agent.
func ecsTree(t *testing.T, proxy string) string {
	t.Helper()
	dir := t.TempDir()
	runtime := func(name, cluster string) string {
		text := fmt.Sprintf("runtime:\n  name: %s\n  awsEcs:\n    region: us-east-1\n    ecsCluster: %s\n    pollInterval: 1s\n    steadyStatePollInterval: 5s\n", name, cluster)
		if proxy != "" {
			text += "    proxyRuntime:\n      runtime: " + proxy + "\n"
		}
		return text
	}
	writeTree(t, dir, map[string]string{
		"runtimes/ecs-staging.pvn.yaml": runtime("ecs-staging", "staging"),
		"runtimes/ecs-prod.pvn.yaml":    runtime("ecs-prod", "production"),
		"app.pvn.yaml": `application:
  name: fleet
  releaseChannels:
    - name: staging
      runtimes:
        - runtime: ecs-staging
      constants:
        - name: count
          string:
            value: "1"
    - name: production
      runtimes:
        - runtime: ecs-prod
      constants:
        - name: count
          string:
            value: "1"
      preconditions:
        - releaseChannelStable:
            releaseChannel: staging
        - manualApproval: {}
`,
		"services/nginx/nginx.pvn.yaml": `service:
  name: nginx
  application: fleet
  awsEcs:
    taskDefinition:
      local:
        path: task.json
    serviceDefinition:
      local:
        path: .
        subPath: service-{{.Builtins.ReleaseChannel.Name}}.json
  parameters:
    - name: image
      required: true
      dockerImage:
        imageRegistryInfo:
          containerRegistry: dockerhub-public
          imageRepository: library/nginx
`,
		"services/nginx/task.json": `{
  "family": "nginx-{{.Builtins.ReleaseChannel.Name}}",
  "containerDefinitions": [
    {"name": "nginx", "image": "{{.Params.image}}", "essential": true, "memory": 128,
     "portMappings": [{"containerPort": 80, "protocol": "tcp"}]}
  ]
}
`,
		"services/nginx/service-staging.json":    `{"launchType": "EC2", "desiredCount": {{.Constants.count}}}` + "\n",
		"services/nginx/service-production.json": `{"launchType": "EC2", "desiredCount": {{.Constants.count}}, "healthCheckGracePeriodSeconds": 30}` + "\n",
	})
	return dir
}

// ecsService describes an ECS service on the emulator.
func ecsService(t *testing.T, endpoint, cluster, name string) map[string]any {
	t.Helper()
	code, body := mototest.Call(t, endpoint, "ecs", mototest.ECSTarget+"DescribeServices",
		fmt.Sprintf(`{"cluster":%q,"services":[%q],"include":["TAGS"]}`, cluster, name))
	var out struct {
		Services []map[string]any `json:"services"`
	}
	if code != 200 || json.Unmarshal(body, &out) != nil || len(out.Services) != 1 {
		t.Fatalf("describe %s/%s: %d %s", cluster, name, code, body)
	}
	return out.Services[0]
}

// TestECSMultiClusters: an ECS service released through staging, an
// approval and production on two clusters of moto's ECS emulator, by the
// drover binary (credentials and endpoint from the environment, as
// AWS_ENDPOINT_URL); drift made out of band is healed; at steady state the
// server calls the ECS API a few times a minute for both services.
func TestECSMultiClusters(t *testing.T) {
	requireE2E(t)
	moto := mototest.Start(t, "MOTO_ECS_SERVICE_RUNNING=1")
	proxy := mototest.NewProxy(t, moto.URL())
	for _, cluster := range []string{"staging", "production"} {
		if code, body := mototest.Call(t, moto.URL(), "ecs", mototest.ECSTarget+"CreateCluster", fmt.Sprintf(`{"clusterName":%q}`, cluster)); code != 200 {
			t.Fatalf("create cluster %s: %d %s", cluster, code, body)
		}
	}
	s := newServerEnv(t, freeAddr(t), proxy.Env(), "--log-level", "debug")
	dir := ecsTree(t, "")
	// production's runtime has a static key of its own: it must show
	// nowhere (status, events, compiled config, the server's log).
	const secretKey = "e2e-aws-secret-key-do-not-show"
	prodRuntime := filepath.Join(dir, "runtimes", "ecs-prod.pvn.yaml")
	text, err := os.ReadFile(prodRuntime)
	if err != nil {
		t.Fatal(err)
	}
	text = append(text, []byte("    accessKey:\n      awsAccessKeyId: AKIAE2E\n      awsSecretAccessKey:\n        rawSecret: "+secretKey+"\n")...)
	if err := os.WriteFile(prodRuntime, text, 0o644); err != nil {
		t.Fatal(err)
	}
	s.ok("alice", "apply", dir+"/...")
	pushed := time.Now()
	v1, _ := s.push("alice", "fleet", "nginx", "image=1.27")
	st := s.waitStatus("fleet", "nginx", 60*time.Second, "staging converged, production waiting for approval", func(st *apiv1.ServiceStatus) bool {
		return findChannel(st, "staging").Status == "CONVERGED" && findChannel(st, "production").Status == "WAITING_MANUAL_APPROVAL"
	})
	stagingAt := time.Now()
	if c := findChannel(st, "staging"); c.Version != v1 || len(c.Objects) != 1 || c.Objects[0].ObjectType != "ECS" || c.Objects[0].AvailableReplicas != 1 {
		t.Errorf("staging: %s", dump(c))
	}
	s.ok("bob", "approve", "nginx", "--app", "fleet", "--release-channel", "production")
	approved := time.Now()
	s.waitStatus("fleet", "nginx", 60*time.Second, "production converged", converged(v1))
	t.Logf("push -> staging converged %s; approval -> production converged %s", stagingAt.Sub(pushed).Round(time.Millisecond), time.Since(approved).Round(time.Millisecond))

	for _, c := range []struct{ cluster, family string }{{"staging", "nginx-staging"}, {"production", "nginx-production"}} {
		svc := ecsService(t, moto.URL(), c.cluster, "nginx")
		if td, _ := svc["taskDefinition"].(string); !strings.HasSuffix(td, "task-definition/"+c.family+":1") {
			t.Errorf("%s runs %v", c.cluster, svc["taskDefinition"])
		}
		if tags := fmt.Sprint(svc["tags"]); !strings.Contains(tags, "drover:instance") || !strings.Contains(tags, "fleet/nginx/"+c.cluster) {
			t.Errorf("%s's tags: %s", c.cluster, tags)
		}
	}

	// Steady state: what the server asks the ECS API for two converged
	// services (steadyStatePollInterval 5s here; 1m by default).
	time.Sleep(6 * time.Second)
	proxy.Reset()
	const window = 20 * time.Second
	time.Sleep(window)
	calls := proxy.Count()
	t.Logf("steady state, 2 services, %s at a 5s interval: %v: %.1f calls per service per minute (%.2f at the default 1m)",
		window, proxy.Calls(), float64(calls)/2/window.Minutes(), float64(calls)/2/window.Minutes()*5/60)
	if calls > 2*int(window/(5*time.Second))+4 {
		t.Errorf("steady state: %d calls in %s for 2 services: %v", calls, window, proxy.Calls())
	}

	var raw []byte
	if err := s.getJSON("/v1/apps/fleet/services/nginx", &raw); err != nil {
		t.Fatal(err)
	}
	compiled := s.ok("alice", "compiled", "nginx", "--app", "fleet", "-o", "json").stdout
	events, _ := json.Marshal(s.events("fleet", "nginx"))
	logText, _ := os.ReadFile(s.logPath)
	for what, text := range map[string]string{"status": string(raw), "compiled": compiled, "events": string(events), "server log": string(logText)} {
		if strings.Contains(text, secretKey) {
			t.Errorf("the %s shows the runtime's secret key", what)
		}
	}

	// Drift: production's desired count changed by hand is put back.
	if code, body := mototest.Call(t, moto.URL(), "ecs", mototest.ECSTarget+"UpdateService", `{"cluster":"production","service":"nginx","desiredCount":3}`); code != 200 {
		t.Fatalf("update by hand: %d %s", code, body)
	}
	s.waitStatus("fleet", "nginx", 60*time.Second, "the drift healed", func(st *apiv1.ServiceStatus) bool {
		svc := ecsService(t, moto.URL(), "production", "nginx")
		return svc["desiredCount"] == float64(1) && findChannel(st, "production").Status == "CONVERGED"
	})
	drift := false
	for _, e := range s.events("fleet", "nginx") {
		if e.Type == "drift" && e.ReleaseChannel == "production" && strings.Contains(e.Message, "desired count is 3, not 1") {
			drift = true
		}
	}
	if !drift {
		t.Errorf("no drift event for production: %s", dump(eventKeys(s.events("fleet", "nginx"))))
	}
}

// TestECSThroughAgent: the ECS runtimes' proxyRuntime is a linked runtime
// whose agent has the AWS endpoint and credentials in its environment;
// the server has none, and the service is released all the same.
func TestECSThroughAgent(t *testing.T) {
	requireE2E(t)
	moto := mototest.Start(t, "MOTO_ECS_SERVICE_RUNNING=1")
	for _, cluster := range []string{"staging", "production"} {
		if code, body := mototest.Call(t, moto.URL(), "ecs", mototest.ECSTarget+"CreateCluster", fmt.Sprintf(`{"clusterName":%q}`, cluster)); code != 200 {
			t.Fatalf("create cluster %s: %d %s", cluster, code, body)
		}
	}
	// The server's AWS settings lead nowhere: were it to call ECS itself,
	// nothing would converge.
	s := newServerEnv(t, freeAddr(t), []string{"AWS_ENDPOINT_URL=http://127.0.0.1:9", "AWS_ACCESS_KEY_ID=server-has-none", "AWS_SECRET_ACCESS_KEY=none", "AWS_EC2_METADATA_DISABLED=true"},
		"--agent-listen", freeAddr(t))
	resp, tok := link(t, s, "aws-account")
	startAgentEnv(t, "aws-account", moto.Env(), agentArgs(resp, tok, "--mode", "commands")...)
	waitAgent(t, s, "aws-account", "connected")
	s.ok("alice", "apply", ecsTree(t, "aws-account")+"/...")
	v1, _ := s.push("alice", "fleet", "nginx", "image=1.27")
	s.waitStatus("fleet", "nginx", 60*time.Second, "staging converged through the agent", func(st *apiv1.ServiceStatus) bool {
		c := findChannel(st, "staging")
		return c.Status == "CONVERGED" && c.Version == v1
	})
	s.ok("bob", "approve", "nginx", "--app", "fleet", "--release-channel", "production")
	s.waitStatus("fleet", "nginx", 60*time.Second, "production converged through the agent", converged(v1))
	if svc := ecsService(t, moto.URL(), "production", "nginx"); svc["desiredCount"] != float64(1) {
		t.Errorf("production's ECS service: %v", svc)
	}
	if info := runtimeInfo(t, s, "ecs-prod"); info.Via != "aws-account" {
		t.Errorf("ecs-prod as the server lists it: %+v", info)
	}
}
