package ecs

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	"github.com/aws/aws-sdk-go-v2/service/ecs/types"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/ecsspec"
	"github.com/drover-dev/drover/internal/runtimes"
	"github.com/drover-dev/drover/internal/runtimes/runtimestest"
	"github.com/drover-dev/drover/internal/testing/mototest"
)

// moto's ECS services report as running the count its server was started
// with (MOTO_ECS_SERVICE_RUNNING), and their one deployment completed when
// that covers the desired count: the tests' services want 2.
var movingMoto = []string{"MOTO_ECS_SERVICE_RUNNING=2"}

var clusters atomic.Int64

// newCluster creates a cluster of its own on the emulator at endpoint and
// returns a runtime for it with fast polls.
func newCluster(t *testing.T, endpoint string) (*Runtime, *ecs.Client) {
	t.Helper()
	name := fmt.Sprintf("c%d-%d", time.Now().UnixNano()%1e6, clusters.Add(1))
	cfg := &config.Runtime{Name: "ecs-" + name, AwsEcs: &config.AwsEcsRuntime{Region: mototest.Region, EcsCluster: name,
		AccessKey:    &config.AwsAccessKey{AwsAccessKeyID: "test", AwsSecretAccessKey: config.AwsSecretValue{RawSecret: "test"}},
		PollInterval: config.Duration{Duration: 200 * time.Millisecond}, SteadyStatePollInterval: config.Duration{Duration: time.Second}}}
	at := func(o *ecs.Options) { o.BaseEndpoint = aws.String(endpoint) }
	r, err := New(t.Context(), cfg, runtimes.Options{}, at)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	if _, err := r.client.CreateCluster(t.Context(), &ecs.CreateClusterInput{ClusterName: aws.String(name)}); err != nil {
		t.Fatal(err)
	}
	return r, r.client
}

// target is a service instance on ECS: task definition family and ECS
// service named after the key, the image tag after the version (unless
// image is given), desiredCount 2.
func target(key runtimes.InstanceKey, version, image string, adopt bool) runtimes.Target {
	if image == "" {
		image = "nginx:" + version
	}
	name := strings.ReplaceAll(key.Service+"-"+key.ReleaseChannel, "/", "-")
	task := fmt.Sprintf(`{"family":%q,"containerDefinitions":[{"name":"web","image":%q,"essential":true,"memory":128}]}`, name, image)
	// (moto does not report a service's deploymentConfiguration back: a
	// service definition with one is updated again at each apply there.)
	svc := `{"desiredCount":2,"launchType":"EC2","enableExecuteCommand":false}`
	obj, _ := json.Marshal(ecsspec.Object{Kind: ecsspec.Kind, Runtime: "ecs", ServiceName: name, TaskDefinition: json.RawMessage(task),
		ServiceDefinition: json.RawMessage(svc), Adopt: adopt})
	return runtimes.Target{InstanceKey: key, Version: version, DesiredStateID: "ds-" + version, Backend: ecsspec.Kind, Objects: []json.RawMessage{obj}}
}

func key(svc string) runtimes.InstanceKey {
	return runtimes.InstanceKey{Application: "shop", Service: svc, ReleaseChannel: "prod"}
}

func waitState(t *testing.T, r *Runtime, tg runtimes.Target, what string, cond func(runtimes.State) bool) runtimes.State {
	t.Helper()
	return runtimestest.Eventually(t, r, tg, 30*time.Second, func() { time.Sleep(50 * time.Millisecond) }, what, cond)
}

func apply(t *testing.T, r *Runtime, tg runtimes.Target) runtimes.ApplyResult {
	t.Helper()
	res, err := r.Apply(t.Context(), tg)
	if err != nil {
		t.Fatalf("apply %s: %v", tg.Version, err)
	}
	return res
}

func actions(res runtimes.ApplyResult) string {
	var parts []string
	for _, c := range res.Changes {
		parts = append(parts, fmt.Sprintf("%s %s", strings.SplitN(c.Object, " ", 2)[0], c.Action))
	}
	return strings.Join(parts, ", ")
}

// The runtime conformance suite, against moto: a server per case, as
// task definition families are the account's, not a cluster's.
func TestConformance(t *testing.T) {
	t.Parallel()
	runtimestest.Run(t, runtimestest.Harness{
		New: func(t *testing.T) runtimes.Runtime {
			r, _ := newCluster(t, mototest.Start(t, movingMoto...).URL())
			return r
		},
		Target:           func(k runtimes.InstanceKey, v string) runtimes.Target { return target(k, v, "", false) },
		Timeout:          60 * time.Second,
		Goroutines:       4,
		KeysPerGoroutine: 6,
	})
}

// Register, create, reuse, update: tags carry the instance and version;
// an identical task definition is reused rather than registered again.
func TestApplyRegistersReusesAndUpdates(t *testing.T) {
	t.Parallel()
	moto := mototest.Start(t, movingMoto...)
	r, c := newCluster(t, moto.URL())
	k := key("web")
	v1 := target(k, "v1", "nginx:1.27", false)
	if got := actions(apply(t, r, v1)); got != "TaskDefinition created, Service created" {
		t.Errorf("first apply: %s", got)
	}
	st := waitState(t, r, v1, "v1 converged", func(s runtimes.State) bool { return runtimestest.Converged(s, "v1") })
	if o := st.Objects[0]; o.ObjectType != "ECS" || o.Name != "web-prod" || o.TargetReplicas != 2 || o.AvailableReplicas < 2 {
		t.Errorf("object: %+v", o)
	}
	svc := describe(t, c, r.cluster, "web-prod")
	if tags := tagMap(svc.Tags); tags[TagInstance] != "shop/web/prod" || tags[TagVersion] != "v1" || svc.PropagateTags != types.PropagateTagsTaskDefinition {
		t.Errorf("service tags %v, propagate %q", svc.Tags, svc.PropagateTags)
	}
	td := describeTD(t, c, aws.ToString(svc.TaskDefinition))
	if td.tags[TagInstance] != "shop/web/prod" || td.tags[TagVersion] != "v1" || td.tags[TagSpec] == "" {
		t.Errorf("task definition tags: %v", td.tags)
	}
	if got := actions(apply(t, r, v1)); got != "TaskDefinition unchanged, Service unchanged" {
		t.Errorf("the same apply again: %s", got)
	}
	// v2 has another image: a new revision, the service updated.
	v2 := target(k, "v2", "nginx:1.28", false)
	if got := actions(apply(t, r, v2)); got != "TaskDefinition created, Service configured" {
		t.Errorf("v2: %s", got)
	}
	waitState(t, r, v2, "v2 converged", func(s runtimes.State) bool { return runtimestest.Converged(s, "v2") })
	if svc := describe(t, c, r.cluster, "web-prod"); !strings.HasSuffix(aws.ToString(svc.TaskDefinition), ":2") {
		t.Errorf("v2 runs %s, want revision 2", aws.ToString(svc.TaskDefinition))
	}
	// v3 is v1's task definition again: revision 1 is reused, retagged.
	v3 := target(k, "v3", "nginx:1.27", false)
	if got := actions(apply(t, r, v3)); got != "TaskDefinition unchanged, Service configured" {
		t.Errorf("v3 (v1's content): %s", got)
	}
	svc = describe(t, c, r.cluster, "web-prod")
	if !strings.HasSuffix(aws.ToString(svc.TaskDefinition), ":1") {
		t.Errorf("v3 runs %s, want revision 1 reused", aws.ToString(svc.TaskDefinition))
	}
	if tags := tagMap(svc.Tags); tags[TagVersion] != "v3" || tags[TagTaskDef] != aws.ToString(svc.TaskDefinition) {
		t.Errorf("the service's tags after v3: %v", tags)
	}
	waitState(t, r, v3, "v3 converged", func(s runtimes.State) bool { return runtimestest.Converged(s, "v3") })
	list, err := c.ListTaskDefinitions(t.Context(), &ecs.ListTaskDefinitionsInput{FamilyPrefix: aws.String("web-prod")})
	if err != nil || len(list.TaskDefinitionArns) != 2 {
		t.Errorf("task definitions registered: %v (%v), want 2", list.TaskDefinitionArns, err)
	}
}

// Drift: a desired count or a task definition changed out of band is
// seen and healed by the next apply.
func TestDriftHealed(t *testing.T) {
	t.Parallel()
	moto := mototest.Start(t, movingMoto...)
	r, c := newCluster(t, moto.URL())
	v1 := target(key("api"), "v1", "", false)
	apply(t, r, v1)
	waitState(t, r, v1, "v1 converged", func(s runtimes.State) bool { return runtimestest.Converged(s, "v1") })
	if _, err := c.UpdateService(t.Context(), &ecs.UpdateServiceInput{Cluster: aws.String(r.cluster), Service: aws.String("api-prod"), DesiredCount: aws.Int32(3)}); err != nil {
		t.Fatal(err)
	}
	st := waitState(t, r, v1, "the count's drift seen", func(s runtimes.State) bool { return s.Drifted })
	if !strings.Contains(st.Message, "desired count is 3, not 2: changed outside drover") || st.Converged {
		t.Errorf("drifted state: %+v", st)
	}
	apply(t, r, v1)
	waitState(t, r, v1, "healed", func(s runtimes.State) bool { return runtimestest.Converged(s, "v1") && !s.Drifted })

	// A task definition registered and deployed by hand.
	reg, err := c.RegisterTaskDefinition(t.Context(), &ecs.RegisterTaskDefinitionInput{Family: aws.String("api-prod"),
		ContainerDefinitions: []types.ContainerDefinition{{Name: aws.String("web"), Image: aws.String("nginx:hand"), Memory: aws.Int32(128)}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.UpdateService(t.Context(), &ecs.UpdateServiceInput{Cluster: aws.String(r.cluster), Service: aws.String("api-prod"),
		TaskDefinition: reg.TaskDefinition.TaskDefinitionArn, DesiredCount: aws.Int32(2)}); err != nil {
		t.Fatal(err)
	}
	st = waitState(t, r, v1, "the hand-made task definition seen", func(s runtimes.State) bool { return s.Version == "" })
	if !strings.Contains(st.Message, "which drover did not deploy for shop/api/prod") {
		t.Errorf("state after a hand deploy: %+v", st)
	}
	if got := actions(apply(t, r, v1)); got != "TaskDefinition unchanged, Service configured" {
		t.Errorf("healing apply: %s", got)
	}
	waitState(t, r, v1, "v1 back", func(s runtimes.State) bool { return runtimestest.Converged(s, "v1") })
}

// An ECS service drover does not own is left alone unless the service
// adopts it; one Prodvana deployed is reported as such, and adopting it
// reuses its identical task definition: nothing is redeployed.
func TestOwnership(t *testing.T) {
	t.Parallel()
	moto := mototest.Start(t, movingMoto...)
	r, c := newCluster(t, moto.URL())
	// By hand, with Prodvana's tags on the task definition.
	reg, err := c.RegisterTaskDefinition(t.Context(), &ecs.RegisterTaskDefinitionInput{Family: aws.String("legacy-prod"),
		ContainerDefinitions: []types.ContainerDefinition{{Name: aws.String("web"), Image: aws.String("nginx:1.27"), Memory: aws.Int32(128), Essential: aws.Bool(true)}},
		Tags:                 []types.Tag{{Key: aws.String(TagPvnID), Value: aws.String("svc-123")}, {Key: aws.String(TagPvnVersion), Value: aws.String("pvn-7")}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateService(t.Context(), &ecs.CreateServiceInput{Cluster: aws.String(r.cluster), ServiceName: aws.String("legacy-prod"),
		TaskDefinition: reg.TaskDefinition.TaskDefinitionArn, DesiredCount: aws.Int32(2),
		Tags: []types.Tag{{Key: aws.String(TagPvnID), Value: aws.String("svc-123")}}}); err != nil {
		t.Fatal(err)
	}
	k := key("legacy")
	mine := target(k, "v1", "nginx:1.27", false)
	st, err := r.Fetch(t.Context(), mine)
	if err != nil || st.Version != "" || !strings.Contains(st.Message, "deployed by Prodvana (pvn:version pvn-7); set awsEcs.adopt: true") {
		t.Errorf("fetch of Prodvana's service: %+v, %v", st, err)
	}
	if _, err := r.Apply(t.Context(), mine); err == nil || !runtimes.IsPermanent(err) || !strings.Contains(err.Error(), "not changed") {
		t.Errorf("apply to a service not drover's: %v", err)
	}
	if svc := describe(t, c, r.cluster, "legacy-prod"); aws.ToString(svc.TaskDefinition) != aws.ToString(reg.TaskDefinition.TaskDefinitionArn) || len(svc.Tags) != 1 {
		t.Errorf("the service was changed: %+v", svc)
	}
	// Another instance's service is never taken, adopt or not.
	other := target(runtimes.InstanceKey{Application: "shop", Service: "legacy", ReleaseChannel: "prod"}, "v1", "nginx:1.27", true)
	adopted := actions(apply(t, r, other))
	if adopted != "TaskDefinition configured, Service configured" {
		t.Errorf("adopting: %s", adopted)
	}
	svc := describe(t, c, r.cluster, "legacy-prod")
	if aws.ToString(svc.TaskDefinition) != aws.ToString(reg.TaskDefinition.TaskDefinitionArn) {
		t.Errorf("adopting redeployed: runs %s, want %s", aws.ToString(svc.TaskDefinition), aws.ToString(reg.TaskDefinition.TaskDefinitionArn))
	}
	waitState(t, r, other, "adopted and converged", func(s runtimes.State) bool { return runtimestest.Converged(s, "v1") })
	thief := target(runtimes.InstanceKey{Application: "shop", Service: "legacy", ReleaseChannel: "staging"}, "v1", "nginx:1.27", true)
	thief.Objects = other.Objects // the same ECS service name
	if _, err := r.Apply(t.Context(), thief); err == nil || !strings.Contains(err.Error(), "belongs to drover's shop/legacy/prod") {
		t.Errorf("apply to another instance's service: %v", err)
	}
}

// Throttled calls are retried by the SDK's retryer: the apply goes through.
func TestThrottlingRetried(t *testing.T) {
	t.Parallel()
	moto := mototest.Start(t, movingMoto...)
	proxy := mototest.NewProxy(t, moto.URL())
	r, _ := newCluster(t, proxy.URL())
	proxy.Throttle(4)
	tg := target(key("busy"), "v1", "", false)
	apply(t, r, tg)
	if proxy.Throttled() != 4 {
		t.Errorf("throttled %d calls, want 4", proxy.Throttled())
	}
	waitState(t, r, tg, "converged after throttling", func(s runtimes.State) bool { return runtimestest.Converged(s, "v1") })
}

// A service whose tasks fail to start says so while it is not converged.
func TestFailedTasksReported(t *testing.T) {
	t.Parallel()
	moto := mototest.Start(t, "MOTO_ECS_SERVICE_RUNNING=0", "MOTO_ECS_SERVICE_FAILED_TASKS=2")
	r, _ := newCluster(t, moto.URL())
	tg := target(key("broken"), "v1", "", false)
	apply(t, r, tg)
	st := waitState(t, r, tg, "failed tasks reported", func(s runtimes.State) bool { return strings.Contains(s.Message, "2 tasks failed to start") })
	if st.Converged || !strings.Contains(st.Message, "v1 rolling out: 0/2 tasks running, 2 pending") {
		t.Errorf("state: %+v", st)
	}
	info, _ := r.Info(t.Context(), tg.InstanceKey)
	if len(info) == 0 || !strings.Contains(info[0].Text, "PRIMARY") {
		t.Errorf("info: %+v", info)
	}
}

// At steady state the poller describes ten services per DescribeServices
// call, once per steady interval, and each task definition once.
func TestSteadyStateCalls(t *testing.T) {
	t.Parallel()
	moto := mototest.Start(t, movingMoto...)
	proxy := mototest.NewProxy(t, moto.URL())
	r, _ := newCluster(t, proxy.URL())
	const n = 20
	var targets []runtimes.Target
	for i := range n {
		tg := target(key(fmt.Sprintf("s%02d", i)), "v1", "", false)
		apply(t, r, tg)
		targets = append(targets, tg)
	}
	for _, tg := range targets {
		waitState(t, r, tg, tg.Service+" converged", func(s runtimes.State) bool { return runtimestest.Converged(s, "v1") })
	}
	time.Sleep(1500 * time.Millisecond) // every instance on its steady interval
	proxy.Reset()
	const window = 5 * time.Second
	time.Sleep(window)
	calls := proxy.Calls()
	describes := calls[mototest.ECSTarget+"DescribeServices"]
	perServicePerMinute := float64(proxy.Count()) / n / window.Minutes() * (r.steady.Minutes() / DefaultSteadyPollInterval.Minutes())
	t.Logf("steady state, %d services, %s: %v; %.2f calls per service per minute at the default 1m interval", n, window, calls, perServicePerMinute)
	// The cluster's steady beat is 1s: two batches of ten per beat, and
	// one more beat for timing.
	if beats := int(window/time.Second) + 1; describes > 2*beats || proxy.Count() != describes {
		t.Errorf("steady state calls: %v", calls)
	}
}

func describe(t *testing.T, c *ecs.Client, cluster, name string) *types.Service {
	t.Helper()
	out, err := c.DescribeServices(context.Background(), &ecs.DescribeServicesInput{Cluster: aws.String(cluster), Services: []string{name},
		Include: []types.ServiceField{types.ServiceFieldTags}})
	if err != nil || len(out.Services) != 1 {
		t.Fatalf("describe %s: %v", name, err)
	}
	return &out.Services[0]
}

func describeTD(t *testing.T, c *ecs.Client, arn string) *taskDef {
	t.Helper()
	out, err := c.DescribeTaskDefinition(context.Background(), &ecs.DescribeTaskDefinitionInput{TaskDefinition: aws.String(arn),
		Include: []types.TaskDefinitionField{types.TaskDefinitionFieldTags}})
	if err != nil {
		t.Fatal(err)
	}
	return &taskDef{def: out.TaskDefinition, tags: tagMap(out.Tags)}
}
