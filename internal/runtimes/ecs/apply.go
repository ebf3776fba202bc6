package ecs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	"github.com/aws/aws-sdk-go-v2/service/ecs/types"

	"github.com/drover-dev/drover/internal/ecsspec"
	"github.com/drover-dev/drover/internal/runtimes"
)

// reuseScan is how many of a family's latest task definitions Apply looks
// through for one it can reuse.
const reuseScan = 10

// Apply registers (or reuses) the target's task definition and creates or
// updates its ECS service to run it.
func (r *Runtime) Apply(ctx context.Context, t runtimes.Target) (runtimes.ApplyResult, error) {
	o, err := parse(&t)
	if err != nil {
		return runtimes.ApplyResult{}, err
	}
	in, err := r.touch(t, o)
	if err != nil {
		return runtimes.ApplyResult{}, err
	}
	unlock := r.lockApply(t.InstanceKey)
	defer unlock()
	res, err := r.apply(ctx, t, o)
	r.mu.Lock()
	in.have = false // the next Fetch describes the service again
	in.gen++        // and what a describe under way saw is stale
	r.mu.Unlock()
	r.kick()
	r.notifier.Notify(t.InstanceKey)
	return res, err
}

// lockApply serializes the applies of one instance.
func (r *Runtime) lockApply(key runtimes.InstanceKey) func() {
	r.mu.Lock()
	m := r.applyMu[key]
	if m == nil {
		m = &sync.Mutex{}
		r.applyMu[key] = m
	}
	r.mu.Unlock()
	m.Lock()
	return m.Unlock
}

// kick wakes the poller.
func (r *Runtime) kick() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

func (r *Runtime) apply(ctx context.Context, t runtimes.Target, o ecsspec.Object) (runtimes.ApplyResult, error) {
	var res runtimes.ApplyResult
	reg, err := ecsspec.TaskDefinition(o.TaskDefinition)
	if err != nil {
		return res, runtimes.Permanent(fmt.Errorf("%s: task definition: %w", t.InstanceKey, err))
	}
	ours := []types.Tag{{Key: aws.String(TagInstance), Value: aws.String(t.String())}, {Key: aws.String(TagVersion), Value: aws.String(t.Version)},
		{Key: aws.String(TagSpec), Value: aws.String(specHash(o.TaskDefinition))}}
	reg.Tags = withTags(reg.Tags, ours)

	out, err := r.client.DescribeServices(ctx, &ecs.DescribeServicesInput{Cluster: aws.String(r.cluster), Services: []string{o.ServiceName},
		Include: []types.ServiceField{types.ServiceFieldTags}})
	if err != nil {
		return res, permanent(fmt.Errorf("describe ECS service %s in cluster %s: %w", o.ServiceName, r.cluster, err))
	}
	var svc *types.Service
	for i := range out.Services {
		if aws.ToString(out.Services[i].ServiceName) == o.ServiceName && aws.ToString(out.Services[i].Status) != "INACTIVE" {
			svc = &out.Services[i]
		}
	}
	if svc != nil {
		if why := owner(t.InstanceKey, o, tagMap(svc.Tags)); why != "" {
			return res, runtimes.Permanent(fmt.Errorf("%s: not changed", why))
		}
	} else if o.UpdateTaskDefinitionOnly {
		return res, runtimes.Permanent(fmt.Errorf("ECS service %s does not exist in cluster %s, and updateTaskDefinitionOnly only updates one that does", o.ServiceName, r.cluster))
	}

	arn, action, err := r.taskDefinitionFor(ctx, t, reg, svc)
	if err != nil {
		return res, err
	}
	res.Changes = append(res.Changes, runtimes.Change{Object: "TaskDefinition " + short(arn), Action: action})

	if svc == nil {
		in, err := ecsspec.Service(o.ServiceDefinition)
		if err != nil {
			return res, runtimes.Permanent(fmt.Errorf("%s: service definition: %w", t.InstanceKey, err))
		}
		in.ServiceName, in.Cluster, in.TaskDefinition = aws.String(o.ServiceName), aws.String(r.cluster), aws.String(arn)
		in.Tags = withTags(in.Tags, ours[:1])
		if in.PropagateTags == "" {
			in.PropagateTags = types.PropagateTagsTaskDefinition
		}
		if _, err := r.client.CreateService(ctx, in); err != nil {
			return res, permanent(fmt.Errorf("create ECS service %s in cluster %s: %w", o.ServiceName, r.cluster, err))
		}
		res.Changes = append(res.Changes, runtimes.Change{Object: "Service " + o.ServiceName, Action: runtimes.ActionCreated})
		return res, nil
	}

	up := &ecs.UpdateServiceInput{Cluster: aws.String(r.cluster), Service: aws.String(o.ServiceName), TaskDefinition: aws.String(arn)}
	if !o.UpdateTaskDefinitionOnly && len(o.ServiceDefinition) > 0 {
		in, err := ecsspec.Service(o.ServiceDefinition)
		if err != nil {
			return res, runtimes.Permanent(fmt.Errorf("%s: service definition: %w", t.InstanceKey, err))
		}
		updatable(up, in)
	}
	if up.PropagateTags == "" && !o.UpdateTaskDefinitionOnly {
		up.PropagateTags = types.PropagateTagsTaskDefinition
	}
	action = runtimes.ActionConfigured
	if aws.ToString(svc.TaskDefinition) == arn && !needsUpdate(up, svc) {
		action = runtimes.ActionUnchanged
	}
	if action != runtimes.ActionUnchanged {
		if _, err := r.client.UpdateService(ctx, up); err != nil {
			return res, permanent(fmt.Errorf("update ECS service %s in cluster %s: %w", o.ServiceName, r.cluster, err))
		}
	}
	if tagMap(svc.Tags)[TagInstance] != t.String() {
		// Adopted: from now on the service is this instance's.
		if _, err := r.client.TagResource(ctx, &ecs.TagResourceInput{ResourceArn: svc.ServiceArn, Tags: ours[:1]}); err != nil {
			return res, permanent(fmt.Errorf("tag ECS service %s as drover's: %w", o.ServiceName, err))
		}
		action = runtimes.ActionConfigured
	}
	res.Changes = append(res.Changes, runtimes.Change{Object: "Service " + o.ServiceName, Action: action})
	return res, nil
}

// taskDefinitionFor returns the ARN of a task definition identical to reg:
// the service's current one, one of the family's latest tagged for this
// instance and version, or a new one it registers. A reused one is tagged
// with the instance and version.
func (r *Runtime) taskDefinitionFor(ctx context.Context, t runtimes.Target, reg *ecs.RegisterTaskDefinitionInput, svc *types.Service) (string, runtimes.Action, error) {
	candidates := []string{}
	if svc != nil {
		candidates = append(candidates, aws.ToString(svc.TaskDefinition))
	}
	list, err := r.client.ListTaskDefinitions(ctx, &ecs.ListTaskDefinitionsInput{FamilyPrefix: reg.Family, Sort: types.SortOrderDesc,
		MaxResults: aws.Int32(reuseScan), Status: types.TaskDefinitionStatusActive})
	if err != nil {
		return "", "", permanent(fmt.Errorf("list task definitions of family %s: %w", aws.ToString(reg.Family), err))
	}
	candidates = append(candidates, list.TaskDefinitionArns...)
	seen := map[string]bool{}
	for _, arn := range candidates {
		if arn == "" || seen[arn] {
			continue
		}
		seen[arn] = true
		td, err := r.taskDefinition(ctx, arn, false)
		if err != nil {
			return "", "", permanent(fmt.Errorf("describe task definition %s: %w", short(arn), err))
		}
		// One drover registered is the same if its spec is; another
		// (registered by hand, or by Prodvana) if its fields are.
		spec, ok := td.tags[TagSpec]
		switch {
		case ok && spec != specOf(reg):
			continue
		case !ok && !sameTaskDefinition(reg, td.def):
			continue
		}
		if td.tags[TagInstance] == t.String() && td.tags[TagVersion] == t.Version {
			return arn, runtimes.ActionUnchanged, nil
		}
		if owner := td.tags[TagInstance]; owner != "" && owner != t.String() {
			continue // another instance's: it keeps its tags
		}
		if _, err := r.client.TagResource(ctx, &ecs.TagResourceInput{ResourceArn: aws.String(arn), Tags: reg.Tags}); err != nil {
			return "", "", permanent(fmt.Errorf("tag task definition %s: %w", short(arn), err))
		}
		if _, err := r.taskDefinition(ctx, arn, true); err != nil {
			return "", "", permanent(err)
		}
		return arn, runtimes.ActionConfigured, nil
	}
	out, err := r.client.RegisterTaskDefinition(ctx, reg)
	if err != nil {
		return "", "", permanent(fmt.Errorf("register task definition %s: %w", aws.ToString(reg.Family), err))
	}
	arn := aws.ToString(out.TaskDefinition.TaskDefinitionArn)
	r.mu.Lock()
	r.taskDefs[arn] = &taskDef{def: out.TaskDefinition, tags: tagMap(reg.Tags)}
	r.mu.Unlock()
	return arn, runtimes.ActionCreated, nil
}

// specHash identifies a compiled task definition: a tag drover puts on
// what it registers, so that one identical is found again exactly.
func specHash(doc []byte) string {
	sum := sha256.Sum256(doc)
	return hex.EncodeToString(sum[:12])
}

// specOf is the spec tag reg carries.
func specOf(reg *ecs.RegisterTaskDefinitionInput) string { return tagMap(reg.Tags)[TagSpec] }

// withTags is tags with ours set (replacing the same keys).
func withTags(tags, ours []types.Tag) []types.Tag {
	out := make([]types.Tag, 0, len(tags)+len(ours))
	for _, t := range tags {
		keep := true
		for _, o := range ours {
			if aws.ToString(t.Key) == aws.ToString(o.Key) {
				keep = false
			}
		}
		if keep {
			out = append(out, t)
		}
	}
	return append(out, ours...)
}

// sameTaskDefinition reports whether def, a task definition drover did
// not register, is what reg would register: every field reg sets has the
// same value in def. Fields reg leaves unset (or zero) are not compared,
// as ECS fills in defaults (the network mode, a container's cpu).
func sameTaskDefinition(reg *ecs.RegisterTaskDefinitionInput, def *types.TaskDefinition) bool {
	if def == nil {
		return false
	}
	want := asTree(reg)
	delete(want, "Tags")
	return subset(want, asTree(def))
}

func asTree(v any) map[string]any {
	raw, _ := json.Marshal(v)
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	return m
}

// subset reports whether every set value of want is in got.
func subset(want, got any) bool {
	switch w := want.(type) {
	case nil:
		return true
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return len(w) == 0 || allZero(w)
		}
		for k, v := range w {
			if !subset(v, g[k]) {
				return false
			}
		}
		return true
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return len(w) == 0 && got == nil
		}
		for i := range w {
			if !subset(w[i], g[i]) {
				return false
			}
		}
		return true
	case string:
		return w == "" || reflect.DeepEqual(want, got)
	case bool:
		return !w || reflect.DeepEqual(want, got)
	case float64:
		return w == 0 || reflect.DeepEqual(want, got)
	}
	return reflect.DeepEqual(want, got)
}

func allZero(m map[string]any) bool {
	for _, v := range m {
		if !subset(v, nil) {
			return false
		}
	}
	return true
}

// updatable copies what UpdateService can change from a service
// definition.
func updatable(up *ecs.UpdateServiceInput, in *ecs.CreateServiceInput) {
	up.DesiredCount = in.DesiredCount
	up.CapacityProviderStrategy = in.CapacityProviderStrategy
	up.DeploymentConfiguration = in.DeploymentConfiguration
	up.NetworkConfiguration = in.NetworkConfiguration
	up.PlacementConstraints = in.PlacementConstraints
	up.PlacementStrategy = in.PlacementStrategy
	up.PlatformVersion = in.PlatformVersion
	up.HealthCheckGracePeriodSeconds = in.HealthCheckGracePeriodSeconds
	up.EnableExecuteCommand = aws.Bool(in.EnableExecuteCommand)
	up.EnableECSManagedTags = aws.Bool(in.EnableECSManagedTags)
	up.LoadBalancers = in.LoadBalancers
	up.ServiceRegistries = in.ServiceRegistries
	up.ServiceConnectConfiguration = in.ServiceConnectConfiguration
	up.VolumeConfigurations = in.VolumeConfigurations
	up.PropagateTags = in.PropagateTags
	up.AvailabilityZoneRebalancing = in.AvailabilityZoneRebalancing
}

// needsUpdate reports whether the service's settings differ from what
// the update sets (beyond the task definition, compared by the caller).
// Settings the service does not report back are always sent again.
func needsUpdate(up *ecs.UpdateServiceInput, svc *types.Service) bool {
	if up.ServiceConnectConfiguration != nil || len(up.VolumeConfigurations) > 0 || up.AvailabilityZoneRebalancing != "" {
		return true
	}
	want := asTree(up)
	for _, k := range []string{"Cluster", "Service", "TaskDefinition", "ForceNewDeployment", "ServiceConnectConfiguration", "VolumeConfigurations", "AvailabilityZoneRebalancing"} {
		delete(want, k)
	}
	return !subset(want, asTree(svc))
}
