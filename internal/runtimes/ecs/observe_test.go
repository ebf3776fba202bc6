package ecs

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ecs/types"

	"github.com/drover-dev/drover/internal/ecsspec"
	"github.com/drover-dev/drover/internal/runtimes"
)

// How a described ECS service maps to drover's state: the rollout states
// and deployments moto does not emulate (a second deployment draining, a
// rollout the circuit breaker failed).
func TestObserveMapping(t *testing.T) {
	t.Parallel()
	const arn = "arn:aws:ecs:us-east-1:123456789012:task-definition/web:7"
	k := runtimes.InstanceKey{Application: "shop", Service: "web", ReleaseChannel: "prod"}
	r := &Runtime{cluster: "main", taskDefs: map[string]*taskDef{arn: {def: &types.TaskDefinition{}, tags: map[string]string{TagInstance: k.String(), TagVersion: "v7"}}}}
	two := int32(2)
	sn := seen{key: k, obj: ecsspec.Object{ServiceName: "web"}, desired: &two}
	svc := func(running, pending int32, deps ...types.Deployment) *types.Service {
		return &types.Service{ServiceName: aws.String("web"), Status: aws.String("ACTIVE"), TaskDefinition: aws.String(arn),
			DesiredCount: 2, RunningCount: running, PendingCount: pending, Deployments: deps,
			Tags: []types.Tag{tag(TagInstance, k.String()), tag(TagVersion, "v7"), tag(TagTaskDef, arn)}}
	}
	primary := func(state types.DeploymentRolloutState, reason string, failed int32) types.Deployment {
		return types.Deployment{Status: aws.String("PRIMARY"), TaskDefinition: aws.String(arn), RolloutState: state, RolloutStateReason: aws.String(reason), FailedTasks: failed}
	}
	const before = "arn:aws:ecs:us-east-1:123456789012:task-definition/web:6"
	old := types.Deployment{Status: aws.String("ACTIVE"), TaskDefinition: aws.String(before), RunningCount: 1}
	// The circuit breaker rolled back: a new primary deployment runs the
	// task definition from before; the failed one is no longer primary.
	rolledBack := svc(2, 0, types.Deployment{Status: aws.String("PRIMARY"), TaskDefinition: aws.String(before), RolloutState: types.DeploymentRolloutStateInProgress},
		types.Deployment{Status: aws.String("ACTIVE"), TaskDefinition: aws.String(arn), RolloutState: types.DeploymentRolloutStateFailed,
			RolloutStateReason: aws.String("ECS deployment circuit breaker: rolling back to deploymentId ecs-svc/1."), FailedTasks: 4})
	rolledBack.TaskDefinition = aws.String(before)
	r.taskDefs[before] = &taskDef{def: &types.TaskDefinition{}, tags: map[string]string{TagInstance: k.String(), TagVersion: "v6"}}
	for _, c := range []struct {
		name      string
		svc       *types.Service
		converged bool
		failed    bool
		msg       string
	}{
		{"completed", svc(2, 0, primary(types.DeploymentRolloutStateCompleted, "", 0)), true, false, "v7 running: 2/2 tasks running"},
		{"in progress", svc(1, 1, primary(types.DeploymentRolloutStateInProgress, "", 0)), false, false, "v7 rolling out: 1/2 tasks running, 1 pending, deployment in progress"},
		{"old deployment draining", svc(2, 0, primary(types.DeploymentRolloutStateCompleted, "", 0), old), false, false, "v7 rolling out: 2/2 tasks running"},
		{"tasks failing", svc(0, 2, primary(types.DeploymentRolloutStateInProgress, "", 3)), false, false, "3 tasks failed to start"},
		{"circuit breaker", svc(0, 0, primary(types.DeploymentRolloutStateFailed, "ECS deployment circuit breaker: tasks failed to start.", 5), old), false, true,
			"v7: rollout failed: ECS deployment circuit breaker: tasks failed to start. (0/2 tasks running)"},
		{"circuit breaker rolled back", rolledBack, false, true, "v7: rollout failed: ECS deployment circuit breaker: rolling back"},
	} {
		st, info, err := r.observe(t.Context(), sn, c.svc)
		if err != nil {
			t.Fatal(err)
		}
		if st.Version != "v7" || st.Converged != c.converged || st.Failed != c.failed || !strings.Contains(st.Message, c.msg) {
			t.Errorf("%s: %+v", c.name, st)
		}
		if len(info) == 0 || !strings.Contains(info[0].Text, "PRIMARY web:") {
			t.Errorf("%s: info %+v", c.name, info)
		}
	}
	st, _, _ := r.observe(t.Context(), sn, nil)
	if st.Version != "" || !strings.Contains(st.Message, "ECS service web does not exist in cluster main") {
		t.Errorf("missing: %+v", st)
	}
}

// A task definition drover did not register is reused (when adopting a
// service) only if it has exactly the rendered settings.
func TestSameTaskDefinition(t *testing.T) {
	t.Parallel()
	doc := []byte(`{"family":"web","containerDefinitions":[{"name":"web","image":"nginx:1","essential":false,"memory":128}]}`)
	base := func() *types.TaskDefinition {
		return &types.TaskDefinition{Family: aws.String("web"), NetworkMode: types.NetworkModeBridge, Revision: 3, Status: types.TaskDefinitionStatusActive,
			ContainerDefinitions: []types.ContainerDefinition{{Name: aws.String("web"), Image: aws.String("nginx:1"), Essential: aws.Bool(false), Memory: aws.Int32(128)}}}
	}
	if !sameTaskDefinition(doc, base()) {
		t.Error("the same settings (and ECS's own fields) differ")
	}
	for name, change := range map[string]func(*types.TaskDefinition){
		"essential":  func(d *types.TaskDefinition) { d.ContainerDefinitions[0].Essential = aws.Bool(true) },
		"privileged": func(d *types.TaskDefinition) { d.ContainerDefinitions[0].Privileged = aws.Bool(true) },
		"task role":  func(d *types.TaskDefinition) { d.TaskRoleArn = aws.String("arn:aws:iam::1:role/x") },
		"environment": func(d *types.TaskDefinition) {
			d.ContainerDefinitions[0].Environment = []types.KeyValuePair{{Name: aws.String("A"), Value: aws.String("1")}}
		},
		"image":   func(d *types.TaskDefinition) { d.ContainerDefinitions[0].Image = aws.String("nginx:2") },
		"network": func(d *types.TaskDefinition) { d.NetworkMode = types.NetworkModeAwsvpc },
	} {
		d := base()
		change(d)
		if sameTaskDefinition(doc, d) {
			t.Errorf("%s: a different task definition counts as the same", name)
		}
	}
}

// An update is sent for every setting the service definition has that
// the service does not: zero counts and false flags included.
func TestNeedsUpdate(t *testing.T) {
	t.Parallel()
	svc := &types.Service{DesiredCount: 2, EnableExecuteCommand: true}
	for def, want := range map[string]bool{
		`{"desiredCount": 2}`:                  false,
		`{"desiredCount": 0}`:                  true,
		`{"enableExecuteCommand": false}`:      true,
		`{"enableExecuteCommand": true}`:       false,
		`{"launchType": "FARGATE"}`:            false,
		`{"volumeConfigurations": []}`:         true,
		`{"healthCheckGracePeriodSeconds": 5}`: true,
	} {
		var set map[string]any
		if err := json.Unmarshal([]byte(def), &set); err != nil {
			t.Fatal(err)
		}
		if got := needsUpdate(set, svc); got != want {
			t.Errorf("%s: needsUpdate %v, want %v", def, got, want)
		}
	}
}
