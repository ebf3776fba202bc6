package ecs

import (
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
			Tags: []types.Tag{{Key: aws.String(TagInstance), Value: aws.String(k.String())}}}
	}
	primary := func(state types.DeploymentRolloutState, reason string, failed int32) types.Deployment {
		return types.Deployment{Status: aws.String("PRIMARY"), TaskDefinition: aws.String(arn), RolloutState: state, RolloutStateReason: aws.String(reason), FailedTasks: failed}
	}
	old := types.Deployment{Status: aws.String("ACTIVE"), TaskDefinition: aws.String("arn:aws:ecs:us-east-1:123456789012:task-definition/web:6"), RunningCount: 1}
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
	} {
		st, info, err := r.observe(t.Context(), sn, c.svc)
		if err != nil {
			t.Fatal(err)
		}
		if st.Version != "v7" || st.Converged != c.converged || st.Failed != c.failed || !strings.Contains(st.Message, c.msg) {
			t.Errorf("%s: %+v", c.name, st)
		}
		if len(info) == 0 || !strings.Contains(info[0].Text, "PRIMARY web:7") {
			t.Errorf("%s: info %+v", c.name, info)
		}
	}
	st, _, _ := r.observe(t.Context(), sn, nil)
	if st.Version != "" || !strings.Contains(st.Message, "ECS service web does not exist in cluster main") {
		t.Errorf("missing: %+v", st)
	}
}
