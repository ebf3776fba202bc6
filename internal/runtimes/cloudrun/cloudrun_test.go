package cloudrun

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	run "cloud.google.com/go/run/apiv2"
	"cloud.google.com/go/run/apiv2/runpb"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/drover-dev/drover/internal/cloudrunspec"
	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/runtimes"
	"github.com/drover-dev/drover/internal/runtimes/runtimestest"
	"github.com/drover-dev/drover/internal/testing/cloudruntest"
)

const project, region = "drover-test", "us-central1"

func clientOptions(s *cloudruntest.Server) []option.ClientOption {
	return []option.ClientOption{option.WithEndpoint(s.Addr()), option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials()))}
}

// newRuntime is a runtime on the test server with fast polls.
func newRuntime(t *testing.T, s *cloudruntest.Server) *Runtime {
	t.Helper()
	cfg := &config.Runtime{Name: "cloudrun", GoogleCloudRun: &config.GoogleCloudRunRuntime{Project: project, Region: region,
		PollInterval: config.Duration{Duration: 100 * time.Millisecond}, SteadyStatePollInterval: config.Duration{Duration: time.Second}}}
	r, err := New(t.Context(), cfg, runtimes.Options{}, clientOptions(s)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// client is a Cloud Run client of the test server, for changes made
// outside drover.
func client(t *testing.T, s *cloudruntest.Server) *run.ServicesClient {
	t.Helper()
	c, err := run.NewServicesClient(t.Context(), clientOptions(s)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func serviceName(key runtimes.InstanceKey) string {
	return strings.ToLower(key.Service + "-" + key.ReleaseChannel)
}

// target is a service instance: a Knative Service named after the key,
// the image tag after the version (unless image is given).
func target(key runtimes.InstanceKey, version, image string) runtimes.Target {
	if image == "" {
		image = "us-docker.pkg.dev/cloudrun/container/hello:" + version
	}
	yaml := fmt.Sprintf(`apiVersion: serving.knative.dev/v1
kind: Service
metadata:
  name: %s
  labels: {team: web}
spec:
  template:
    metadata:
      annotations:
        autoscaling.knative.dev/maxScale: "5"
    spec:
      containers:
        - image: %s
          env: [{name: GREETING, value: hello}]
          resources: {limits: {memory: 256Mi}}
`, serviceName(key), image)
	k, err := cloudrunspec.Decode([]byte(yaml))
	if err != nil {
		panic(err)
	}
	svc, _ := cloudrunspec.ServiceJSON(k)
	obj, _ := json.Marshal(cloudrunspec.Object{Kind: cloudrunspec.Kind, Runtime: "cloudrun", ServiceName: serviceName(key), Service: svc})
	return runtimes.Target{InstanceKey: key, Version: version, DesiredStateID: "ds-" + version, Backend: cloudrunspec.Kind, Objects: []json.RawMessage{obj}}
}

func key(svc string) runtimes.InstanceKey {
	return runtimes.InstanceKey{Application: "shop", Service: svc, ReleaseChannel: "prod"}
}

func waitState(t *testing.T, r *Runtime, tg runtimes.Target, what string, cond func(runtimes.State) bool) runtimes.State {
	t.Helper()
	return runtimestest.Eventually(t, r, tg, 20*time.Second, func() { time.Sleep(20 * time.Millisecond) }, what, cond)
}

func apply(t *testing.T, r *Runtime, tg runtimes.Target) string {
	t.Helper()
	res, err := r.Apply(t.Context(), tg)
	if err != nil {
		t.Fatalf("apply %s: %v", tg.Version, err)
	}
	var parts []string
	for _, c := range res.Changes {
		parts = append(parts, fmt.Sprintf("%s %s", c.Object, c.Action))
	}
	return strings.Join(parts, ", ")
}

// The runtime conformance suite, against the Cloud Run API test server.
func TestConformance(t *testing.T) {
	t.Parallel()
	runtimestest.Run(t, runtimestest.Harness{
		New: func(t *testing.T) runtimes.Runtime {
			s := cloudruntest.Start(t)
			s.ReadyDelay = 50 * time.Millisecond
			return newRuntime(t, s)
		},
		Target:           func(k runtimes.InstanceKey, v string) runtimes.Target { return target(k, v, "") },
		Timeout:          30 * time.Second,
		Goroutines:       4,
		KeysPerGoroutine: 6,
	})
}

// Create, converge, update to v2, a broken v3 fails naming the revision
// and the condition's message, and rolling back to v2 serves v2's
// revision again rather than building a new one.
func TestRolloutFailureAndRollback(t *testing.T) {
	t.Parallel()
	s := cloudruntest.Start(t)
	s.ReadyDelay = 50 * time.Millisecond
	r := newRuntime(t, s)
	k := key("web")
	v1 := target(k, "v1", "")
	if got := apply(t, r, v1); got != "Service web-prod created" {
		t.Errorf("first apply: %s", got)
	}
	st := waitState(t, r, v1, "v1 converged", func(s runtimes.State) bool { return runtimestest.Converged(s, "v1") })
	if !strings.Contains(st.Message, "v1 serving: revision web-prod-00001-") || st.Objects[0].ObjectType != "CloudRun" {
		t.Errorf("v1: %+v", st)
	}
	if got := apply(t, r, v1); got != "Service web-prod unchanged" {
		t.Errorf("apply again: %s", got)
	}
	v2 := target(k, "v2", "")
	apply(t, r, v2)
	waitState(t, r, v2, "v2 converged", func(s runtimes.State) bool { return runtimestest.Converged(s, "v2") })

	v3 := target(k, "v3", "hello:"+strings.TrimPrefix(cloudruntest.BrokenTag, ":"))
	apply(t, r, v3)
	st = waitState(t, r, v3, "v3 failed", func(s runtimes.State) bool { return s.Failed })
	if st.Version != "v3" || !strings.Contains(st.Message, "revision web-prod-00003-") || !strings.Contains(st.Message, "failed to start and listen on the port") ||
		!strings.Contains(st.Message, "traffic stays on revision web-prod-00002-") {
		t.Errorf("v3: %+v", st)
	}
	info, _ := r.Info(t.Context(), k)
	if len(info) != 1 || info[0].Name != "CloudRun" || !strings.Contains(info[0].Text, `"latestReadyRevision": "web-prod-00002-`) {
		t.Errorf("info: %+v", info)
	}

	// Rollback: v2 again.
	if got := apply(t, r, v2); !strings.Contains(got, "(revision web-prod-00002-") || !strings.HasSuffix(got, "configured") {
		t.Errorf("rollback: %s", got)
	}
	st = waitState(t, r, v2, "v2 back", func(s runtimes.State) bool { return runtimestest.Converged(s, "v2") })
	if !strings.Contains(st.Message, "revision web-prod-00002-") {
		t.Errorf("after rollback: %s", st.Message)
	}
	calls := s.Calls()
	if calls["CreateService"] != 1 || calls["UpdateService"] != 3 {
		t.Errorf("calls: %v", calls)
	}
}

// A service changed outside drover (a new image, as gcloud run deploy
// would do, keeping the template's annotations) is drift; the next apply
// puts it back.
func TestDriftHealed(t *testing.T) {
	t.Parallel()
	s := cloudruntest.Start(t)
	s.ReadyDelay = 50 * time.Millisecond
	r := newRuntime(t, s)
	c := client(t, s)
	k := key("api")
	v1 := target(k, "v1", "")
	apply(t, r, v1)
	waitState(t, r, v1, "v1 converged", func(s runtimes.State) bool { return runtimestest.Converged(s, "v1") })
	name := fmt.Sprintf("projects/%s/locations/%s/services/api-prod", project, region)
	live, err := c.GetService(t.Context(), &runpb.GetServiceRequest{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	changed := proto.Clone(live).(*runpb.Service)
	changed.Template.Containers[0].Image = "hello:by-hand"
	changed.Template.Revision = ""
	if _, err := c.UpdateService(t.Context(), &runpb.UpdateServiceRequest{Service: changed}); err != nil {
		t.Fatal(err)
	}
	st := waitState(t, r, v1, "drift seen", func(s runtimes.State) bool { return s.Drifted })
	if !strings.Contains(st.Message, "template.containers[0].image is hello:by-hand") {
		t.Errorf("drift: %s", st.Message)
	}
	apply(t, r, v1)
	waitState(t, r, v1, "healed", func(s runtimes.State) bool { return runtimestest.Converged(s, "v1") })
}

// A service of the name that drover did not create is never changed.
func TestNotOurs(t *testing.T) {
	t.Parallel()
	s := cloudruntest.Start(t)
	r := newRuntime(t, s)
	c := client(t, s)
	_, err := c.CreateService(t.Context(), &runpb.CreateServiceRequest{Parent: fmt.Sprintf("projects/%s/locations/%s", project, region), ServiceId: "other-prod",
		Service: &runpb.Service{Template: &runpb.RevisionTemplate{Containers: []*runpb.Container{{Image: "nginx"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	tg := target(key("other"), "v1", "")
	_, err = r.Apply(t.Context(), tg)
	if err == nil || !runtimes.IsPermanent(err) || !strings.Contains(err.Error(), "exists and is not drover's") {
		t.Errorf("apply: %v", err)
	}
	st, err := r.Fetch(t.Context(), tg)
	if err != nil || st.Version != "" || !strings.Contains(st.Message, "is not drover's") {
		t.Errorf("fetch: %+v %v", st, err)
	}
}

// Steady state: one GetService per service per steadyStatePollInterval;
// revisions are read once.
func TestSteadyStateCalls(t *testing.T) {
	t.Parallel()
	s := cloudruntest.Start(t)
	s.ReadyDelay = 20 * time.Millisecond
	r := newRuntime(t, s) // steady 1s
	var tgs []runtimes.Target
	for i := range 3 {
		tg := target(key(fmt.Sprintf("s%d", i)), "v1", "")
		apply(t, r, tg)
		tgs = append(tgs, tg)
	}
	for _, tg := range tgs {
		waitState(t, r, tg, "converged", func(s runtimes.State) bool { return runtimestest.Converged(s, "v1") })
	}
	time.Sleep(1100 * time.Millisecond)
	s.Reset()
	time.Sleep(3 * time.Second)
	calls := s.Calls()
	if calls["GetService"] > 3*4 || calls["GetRevision"] > 0 || len(calls) > 1 {
		t.Errorf("steady state, 3 services, 3s at a 1s interval: %v", calls)
	}
	t.Logf("steady state, 3 services, 3s at a 1s interval: %v", calls)
}

func TestServiceAccountKey(t *testing.T) {
	t.Parallel()
	g := &config.GoogleCloudRunRuntime{Project: project, Region: region, ServiceAccountJSON: &config.SecretReferenceValue{Secret: &config.SecretRef{Key: "sa", Version: "sa-0"}}}
	key := `{"type":"service_account","client_email":"d@p.iam.gserviceaccount.com","private_key":"-----BEGIN PRIVATE KEY-----\nsecret-do-not-show\n-----END PRIVATE KEY-----\n"}`
	got, err := serviceAccountKey(t.Context(), "rt", g, runtimes.Options{Secret: func(_ context.Context, k, v string) (string, error) {
		if k != "sa" || v != "sa-0" {
			return "", fmt.Errorf("no secret %s version %s", k, v)
		}
		return key, nil
	}})
	if err != nil || string(got) != key {
		t.Errorf("key: %v", err)
	}
	if _, err := serviceAccountKey(t.Context(), "rt", g, runtimes.Options{}); err == nil || !strings.Contains(err.Error(), "read by the drover server, not here") {
		t.Errorf("on an agent: %v", err)
	}
	g.ServiceAccountJSON = &config.SecretReferenceValue{RawSecret: `{"type":"authorized_user","client_secret":"secret-do-not-show"}`}
	_, err = serviceAccountKey(t.Context(), "rt", g, runtimes.Options{})
	if err == nil || strings.Contains(err.Error(), "secret-do-not-show") {
		t.Errorf("not a service account key: %v", err)
	}
}
