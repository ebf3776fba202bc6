package ecs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"

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
	sn, err := spec(t, o)
	if err != nil {
		return runtimes.ApplyResult{}, err
	}
	r.poller.Touch(t, sn)
	unlock := r.poller.LockApply(t.InstanceKey)
	defer unlock()
	res, err := r.apply(ctx, t, o)
	// The next Fetch describes the service again, what a describe under
	// way saw is stale, and the poller describes it now.
	r.poller.Applied(t.InstanceKey)
	r.poller.Notify(t.InstanceKey)
	return res, err
}

func (r *Runtime) apply(ctx context.Context, t runtimes.Target, o ecsspec.Object) (res runtimes.ApplyResult, err error) {
	reg, err := ecsspec.TaskDefinition(o.TaskDefinition)
	if err != nil {
		return res, runtimes.Permanent(fmt.Errorf("%s: task definition: %w", t.InstanceKey, err))
	}
	refs, err := r.envSecrets(ctx, t, o)
	if err != nil {
		return res, err
	}
	for _, ref := range refs {
		res.Changes = append(res.Changes, runtimes.Change{Object: "Secret " + ref.secret, Action: ref.action})
	}
	withSecrets(reg, refs)
	spec := specHash(append(slices.Clip(o.TaskDefinition), secretsSpec(refs)...))
	reg.Tags = withTags(reg.Tags, []types.Tag{tag(TagInstance, t.String()), tag(TagVersion, t.Version), tag(TagSpec, spec)})

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
	switch {
	case svc != nil && aws.ToString(svc.Status) == "DRAINING":
		// Being deleted: it can be created again once it is gone.
		return res, fmt.Errorf("ECS service %s in cluster %s is draining (being deleted); retrying", o.ServiceName, r.cluster)
	case svc != nil:
		if why := owner(t.InstanceKey, o, tagMap(svc.Tags)); why != "" {
			return res, runtimes.Permanent(fmt.Errorf("%s: not changed", why))
		}
	case o.UpdateTaskDefinitionOnly:
		return res, runtimes.Permanent(fmt.Errorf("ECS service %s does not exist in cluster %s, and updateTaskDefinitionOnly only updates one that does", o.ServiceName, r.cluster))
	}
	// Secrets of variables the instance dropped are deleted once the
	// service no longer reads them: looked for when it has secret env,
	// or ran a task definition that read some.
	if len(o.SecretEnv) > 0 || svc != nil && r.readsSecrets(ctx, aws.ToString(svc.TaskDefinition)) {
		defer func() {
			if err == nil {
				err = r.pruneSecrets(ctx, t, o.SecretEnv)
			}
		}()
	}

	arn, action, err := r.taskDefinitionFor(ctx, t, o, reg, spec, svc)
	if err != nil {
		return res, err
	}
	res.Changes = append(res.Changes, runtimes.Change{Object: "TaskDefinition " + short(arn), Action: action})
	// The service records what drover deployed to it, once asked for.
	mark := []types.Tag{tag(TagInstance, t.String()), tag(TagVersion, t.Version), tag(TagTaskDef, arn)}

	if svc == nil {
		in, err := ecsspec.Service(o.ServiceDefinition)
		if err != nil {
			return res, runtimes.Permanent(fmt.Errorf("%s: service definition: %w", t.InstanceKey, err))
		}
		in.ServiceName, in.Cluster, in.TaskDefinition = aws.String(o.ServiceName), aws.String(r.cluster), aws.String(arn)
		in.Tags = withTags(in.Tags, mark)
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
	var set map[string]any
	if !o.UpdateTaskDefinitionOnly && len(o.ServiceDefinition) > 0 {
		in, err := ecsspec.Service(o.ServiceDefinition)
		if err != nil {
			return res, runtimes.Permanent(fmt.Errorf("%s: service definition: %w", t.InstanceKey, err))
		}
		if err := json.Unmarshal(o.ServiceDefinition, &set); err != nil {
			return res, runtimes.Permanent(fmt.Errorf("%s: service definition: %w", t.InstanceKey, err))
		}
		updatable(up, in, set)
	}
	action = runtimes.ActionConfigured
	if aws.ToString(svc.TaskDefinition) == arn && !needsUpdate(set, svc) {
		action = runtimes.ActionUnchanged
	}
	if action != runtimes.ActionUnchanged {
		if _, err := r.client.UpdateService(ctx, up); err != nil {
			return res, permanent(fmt.Errorf("update ECS service %s in cluster %s: %w", o.ServiceName, r.cluster, err))
		}
	}
	if stags := tagMap(svc.Tags); stags[TagInstance] != t.String() || stags[TagVersion] != t.Version || stags[TagTaskDef] != arn {
		if _, err := r.client.TagResource(ctx, &ecs.TagResourceInput{ResourceArn: svc.ServiceArn, Tags: mark}); err != nil {
			return res, permanent(fmt.Errorf("tag ECS service %s with what drover deployed: %w", o.ServiceName, err))
		}
		if stags[TagInstance] != t.String() {
			action = runtimes.ActionConfigured // adopted
		}
	}
	res.Changes = append(res.Changes, runtimes.Change{Object: "Service " + o.ServiceName, Action: action})
	return res, nil
}

func tag(k, v string) types.Tag { return types.Tag{Key: aws.String(k), Value: aws.String(v)} }

// taskDefinitionFor returns the ARN of a task definition to deploy: one
// drover registered for this instance with the same spec (the service's
// current one, or one of the family's latest), or, for a service being
// adopted, its current task definition when it has exactly the settings
// of the rendered one (tagged as drover's then); else a new one it
// registers.
func (r *Runtime) taskDefinitionFor(ctx context.Context, t runtimes.Target, o ecsspec.Object, reg *ecs.RegisterTaskDefinitionInput, spec string, svc *types.Service) (string, runtimes.Action, error) {
	current := ""
	if svc != nil {
		current = aws.ToString(svc.TaskDefinition)
	}
	list, err := r.client.ListTaskDefinitions(ctx, &ecs.ListTaskDefinitionsInput{FamilyPrefix: reg.Family, Sort: types.SortOrderDesc,
		MaxResults: aws.Int32(reuseScan), Status: types.TaskDefinitionStatusActive})
	if err != nil {
		return "", "", permanent(fmt.Errorf("list task definitions of family %s: %w", aws.ToString(reg.Family), err))
	}
	active := map[string]bool{}
	for _, arn := range list.TaskDefinitionArns {
		active[arn] = true
	}
	candidates := append([]string{current}, list.TaskDefinitionArns...)
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
		if td.def != nil && td.def.Status == types.TaskDefinitionStatusInactive {
			continue
		}
		switch {
		case td.tags[TagInstance] == t.String() && td.tags[TagSpec] == spec:
			return arn, runtimes.ActionUnchanged, nil
		case arn == current && o.Adopt && td.tags[TagInstance] == "" && sameTaskDefinition(o.TaskDefinition, td.def):
			// A service being adopted keeps its task definition (no
			// redeploy) when it is exactly what drover would register.
			if _, err := r.client.TagResource(ctx, &ecs.TagResourceInput{ResourceArn: aws.String(arn), Tags: reg.Tags}); err != nil {
				return "", "", permanent(fmt.Errorf("tag task definition %s: %w", short(arn), err))
			}
			if _, err := r.taskDefinition(ctx, arn, true); err != nil {
				return "", "", permanent(err)
			}
			return arn, runtimes.ActionConfigured, nil
		}
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
// not register, has exactly the settings of the rendered one (doc): every
// setting doc has, with the same value; and no setting doc leaves out,
// beyond what ECS fills in itself.
func sameTaskDefinition(doc []byte, def *types.TaskDefinition) bool {
	if def == nil {
		return false
	}
	var want map[string]any
	if err := json.Unmarshal(doc, &want); err != nil {
		return false
	}
	delete(want, "tags")
	got := lowerKeys(asTree(def)).(map[string]any)
	for _, k := range []string{"taskDefinitionArn", "revision", "status", "requiresAttributes", "compatibilities", "registeredAt",
		"registeredBy", "deregisteredAt", "deleteRequestedAt"} {
		delete(got, k) // what ECS reports of every task definition
	}
	return same(want, got, true)
}

// defaults are values ECS reports for settings a definition leaves out.
var defaults = map[string]any{"networkMode": "bridge", "cpu": float64(0)}

// same compares a definition's settings (want) with what ECS reports
// (got): equal wherever want has a setting (false, 0 and empty lists
// included). With exact, got may have no other setting either, beyond
// empty values and ECS's defaults.
func same(want, got any, exact bool) bool {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return got == nil && len(w) == 0
		}
		for k, v := range w {
			if !same(v, g[k], exact) {
				return false
			}
		}
		if exact {
			for k, v := range g {
				if _, set := w[k]; !set && !empty(v) && !reflect.DeepEqual(defaults[k], v) {
					return false
				}
			}
		}
		return true
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return len(w) == 0 && (got == nil || exact && empty(got))
		}
		for i := range w {
			if !same(w[i], g[i], exact) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(want, got)
}

// empty reports whether v is an unset value as JSON shows it.
func empty(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case string:
		return x == ""
	case bool:
		return !x
	case float64:
		return x == 0
	case []any:
		return len(x) == 0
	case map[string]any:
		for _, e := range x {
			if !empty(e) {
				return false
			}
		}
		return true
	}
	return false
}

func asTree(v any) map[string]any {
	raw, _ := json.Marshal(v)
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	return m
}

// lowerKeys writes the keys of a tree made from the SDK's types (Go field
// names: AwsvpcConfiguration) as the API's JSON does (awsvpcConfiguration).
func lowerKeys(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			if k != "" {
				k = strings.ToLower(k[:1]) + k[1:]
			}
			out[k] = lowerKeys(e)
		}
		return out
	case []any:
		for i := range x {
			x[i] = lowerKeys(x[i])
		}
	}
	return v
}

// updatable copies into up what the service definition sets (set holds
// its JSON) among what UpdateService can change; what it leaves out is
// left as it is.
func updatable(up *ecs.UpdateServiceInput, in *ecs.CreateServiceInput, set map[string]any) {
	has := func(k string) bool { _, ok := set[k]; return ok }
	up.DesiredCount = in.DesiredCount
	up.CapacityProviderStrategy = in.CapacityProviderStrategy
	up.DeploymentConfiguration = in.DeploymentConfiguration
	up.NetworkConfiguration = in.NetworkConfiguration
	up.PlacementConstraints = in.PlacementConstraints
	up.PlacementStrategy = in.PlacementStrategy
	up.PlatformVersion = in.PlatformVersion
	up.HealthCheckGracePeriodSeconds = in.HealthCheckGracePeriodSeconds
	if has("enableExecuteCommand") {
		up.EnableExecuteCommand = aws.Bool(in.EnableExecuteCommand)
	}
	if has("enableECSManagedTags") {
		up.EnableECSManagedTags = aws.Bool(in.EnableECSManagedTags)
	}
	up.LoadBalancers = in.LoadBalancers
	up.ServiceRegistries = in.ServiceRegistries
	up.ServiceConnectConfiguration = in.ServiceConnectConfiguration
	up.VolumeConfigurations = in.VolumeConfigurations
	up.PropagateTags = in.PropagateTags
	up.AvailabilityZoneRebalancing = in.AvailabilityZoneRebalancing
	up.DeploymentController = in.DeploymentController
	up.VpcLatticeConfigurations = in.VpcLatticeConfigurations
}

// needsUpdate reports whether the service's settings differ from what
// the service definition (set: its JSON) says; settings it leaves out are
// not compared, and those the service does not report back (Service
// Connect, volumes, VPC Lattice) are always sent.
func needsUpdate(set map[string]any, svc *types.Service) bool {
	got := lowerKeys(asTree(svc)).(map[string]any)
	for k, v := range set {
		switch k {
		case "serviceConnectConfiguration", "volumeConfigurations", "vpcLatticeConfigurations", "availabilityZoneRebalancing":
			return true
		case "launchType", "schedulingStrategy", "role", "clientToken", "tags", "serviceName", "cluster", "taskDefinition":
			continue // fixed at creation, or drover's
		}
		if !same(v, got[k], false) {
			return true
		}
	}
	return false
}
