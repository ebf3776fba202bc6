// Package ecs is the Amazon ECS runtime: services released as ECS services
// on one cluster, through the AWS SDK for Go v2.
//
// # Apply
//
// Apply registers the instance's task definition, tagged with the instance
// (drover:instance = application/service/release channel) and the version
// (drover:version), or reuses one that is identical: the ECS service's
// current one, or one of the family's latest revisions tagged with the
// same instance and version. It then creates the ECS service (tagged, with
// tags propagated from the task definition) or updates it to the task
// definition and to what the service definition says (desired count,
// deployment and network configuration, ...). An ECS service without
// drover's tags is not drover's: it is never changed unless the service
// says awsEcs.adopt, and one tagged for another instance never is.
//
// # Fetch
//
// A poller per runtime describes the instances' ECS services, ten per
// DescribeServices call: those not converged every pollInterval (10s), all
// of them every steadyStatePollInterval (1m), on the cluster's beat; Fetch returns
// the latest result (describing at once the first time, and after an
// apply). Task definitions are immutable: each is described once, with its
// tags. The version is the drover:version tag of the service's task
// definition when its drover:instance tag is the instance's (a task
// definition Prodvana registered, with pvn:id and pvn:version, is reported
// as such). Converged means the primary deployment completed and the
// running count is the desired one; a rollout the deployment circuit
// breaker failed is a failure; a desired count changed out of band is
// drift. Throttling and transient errors are retried by the SDK's retryer.
package ecs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	"github.com/aws/aws-sdk-go-v2/service/ecs/types"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/smithy-go"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/ecsspec"
	"github.com/drover-dev/drover/internal/runtimes"
	"github.com/drover-dev/drover/internal/runtimes/awsconf"
	"github.com/drover-dev/drover/internal/runtimes/cloudpoll"
)

// Tags drover puts on the task definitions it registers and the ECS
// services it creates; Prodvana's, read for brownfield services.
const (
	TagInstance = "drover:instance"
	TagVersion  = "drover:version"
	TagSpec     = "drover:spec"
	// TagTaskDef, on an ECS service, is the task definition drover last
	// deployed to it (with TagVersion, its version).
	TagTaskDef    = "drover:task-definition"
	TagPvnID      = "pvn:id"
	TagPvnVersion = "pvn:version"
)

// Default poll intervals.
const (
	DefaultPollInterval       = cloudpoll.DefaultPollInterval
	DefaultSteadyPollInterval = cloudpoll.DefaultSteadyPollInterval
)

// describeBatch is how many services one DescribeServices call may name.
const describeBatch = 10

// What a Runtime is: the core interface and the optional ones the engine
// and the runtime host find by type assertion (its checks run through the
// runtime SetCheckRunner gives, runtimes.CheckDelegate).
var (
	_ runtimes.Runtime       = (*Runtime)(nil)
	_ runtimes.Watcher       = (*Runtime)(nil)
	_ runtimes.InfoGetter    = (*Runtime)(nil)
	_ runtimes.GraceReporter = (*Runtime)(nil)
	_ runtimes.CheckRunner   = (*Runtime)(nil)
	_ runtimes.Closer        = (*Runtime)(nil)
)

// Runtime is one ECS cluster.
type Runtime struct {
	runtimes.CheckDelegate
	name, cluster string
	client        *ecs.Client
	// secrets keeps the instances' secret env (secrets.go).
	secrets *secretsmanager.Client
	log     *slog.Logger
	// poller keeps the instances and describes them (describe); steady
	// is its steady-state interval (tests count calls per interval).
	poller *cloudpoll.Poller[seen]
	steady time.Duration

	mu sync.Mutex
	// taskDefs caches described task definitions by ARN (immutable; tags
	// are refreshed when drover tags one).
	taskDefs map[string]*taskDef
}

// seen is what the poller describes an instance for: its ECS object and
// the service definition's desiredCount (nil: not set).
type seen struct {
	key     runtimes.InstanceKey
	obj     ecsspec.Object
	desired *int32
}

// sameTarget reports whether two ECS objects of an instance are one
// target: the observation of one is the other's.
func sameTarget(a, b seen) bool {
	return a.obj.ServiceName == b.obj.ServiceName && string(a.obj.TaskDefinition) == string(b.obj.TaskDefinition) &&
		string(a.obj.ServiceDefinition) == string(b.obj.ServiceDefinition)
}

type taskDef struct {
	def  *types.TaskDefinition
	tags map[string]string
}

// Factory builds an ECS runtime from its config (runtimehost.Registry).
func Factory(cfg *config.Runtime, opts runtimes.Options) (runtimes.Runtime, error) {
	return New(context.Background(), cfg, opts)
}

// New connects to the cluster of cfg.AwsEcs. Credentials are the static
// access key when one is configured, else the SDK's default chain
// (environment, shared config, web identity, container or instance role);
// the endpoint is the SDK's (AWS_ENDPOINT_URL_ECS or AWS_ENDPOINT_URL
// name another, such as an emulator or a private endpoint). client options
// apply to the ECS client.
func New(ctx context.Context, cfg *config.Runtime, opts runtimes.Options, client ...func(*ecs.Options)) (*Runtime, error) {
	e := cfg.AwsEcs
	if e == nil {
		return nil, fmt.Errorf("runtime %s is not an awsEcs runtime", cfg.Name)
	}
	awsCfg, err := awsconf.Load(ctx, cfg.Name, e.Region, e.AccessKey, opts)
	if err != nil {
		return nil, err
	}
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Runtime{
		name: cfg.Name, cluster: e.EcsCluster, client: ecs.NewFromConfig(awsCfg, client...), log: log.With("runtime", cfg.Name),
		secrets: secretsmanager.NewFromConfig(awsCfg, sameEndpoint(client)), taskDefs: map[string]*taskDef{},
	}
	r.poller = cloudpoll.New(cloudpoll.Config[seen]{Poll: e.PollInterval.Duration, Steady: e.SteadyStatePollInterval.Duration,
		Now: opts.Now, Batch: describeBatch, Same: sameTarget, Describe: r.describe})
	_, r.steady = r.poller.Intervals()
	return r, nil
}

// sameEndpoint points the Secrets Manager client at the endpoint the ECS
// client options name, if they name one (an emulator, or a private
// endpoint that serves both); else it is the SDK's.
func sameEndpoint(client []func(*ecs.Options)) func(*secretsmanager.Options) {
	var o ecs.Options
	for _, f := range client {
		f(&o)
	}
	return func(so *secretsmanager.Options) {
		if o.BaseEndpoint != nil {
			so.BaseEndpoint = o.BaseEndpoint
		}
	}
}

// Close stops the poller.
func (r *Runtime) Close() error {
	r.poller.Close()
	r.CloseChecks()
	return nil
}

// Watch calls notify with the key of every instance whose fetched state
// changed, or that was applied, until ctx ends or the runtime closes.
func (r *Runtime) Watch(ctx context.Context, notify func(runtimes.InstanceKey)) error {
	return r.poller.Watch(ctx, notify)
}

// ConvergenceGrace is how long after an apply the service may still not
// show the new task definition (ecsspec.ConvergenceGrace).
func (r *Runtime) ConvergenceGrace() time.Duration { return ecsspec.ConvergenceGrace }

// parse reads the target's one ECS object.
func parse(t *runtimes.Target) (ecsspec.Object, error) {
	var o ecsspec.Object
	if len(t.Objects) != 1 {
		return o, runtimes.Permanent(fmt.Errorf("%s: want one awsEcs object, got %d (push again with this version of drover)", t.InstanceKey, len(t.Objects)))
	}
	if err := json.Unmarshal(t.Objects[0], &o); err != nil || o.Kind != ecsspec.Kind {
		return o, runtimes.Permanent(fmt.Errorf("%s: not an awsEcs object (a %s service on an ECS runtime?)", t.InstanceKey, t.Backend))
	}
	return o, nil
}

// spec is what the poller describes the target for.
func spec(t runtimes.Target, o ecsspec.Object) (seen, error) {
	var desired *int32
	if len(o.ServiceDefinition) > 0 && !o.UpdateTaskDefinitionOnly {
		in, err := ecsspec.Service(o.ServiceDefinition)
		if err != nil {
			return seen{}, runtimes.Permanent(fmt.Errorf("%s: service definition: %w", t.InstanceKey, err))
		}
		desired = in.DesiredCount
	}
	return seen{key: t.InstanceKey, obj: o, desired: desired}, nil
}

// Fetch returns the instance's latest observed state, describing its ECS
// service now when there is none for this target.
func (r *Runtime) Fetch(ctx context.Context, t runtimes.Target) (runtimes.State, error) {
	o, err := parse(&t)
	if err != nil {
		return runtimes.State{}, err
	}
	sn, err := spec(t, o)
	if err != nil {
		return runtimes.State{}, err
	}
	st, err := r.poller.Fetch(ctx, t, sn)
	if errors.Is(err, cloudpoll.ErrTargetChanged) {
		return runtimes.State{}, fmt.Errorf("ECS service %s: its target kept changing while it was described; retrying", o.ServiceName)
	}
	return st, err
}

// Info returns the latest deployments and service events of the instance.
func (r *Runtime) Info(_ context.Context, key runtimes.InstanceKey) ([]runtimes.InfoOutput, error) {
	return r.poller.Info(key), nil
}

// describe fetches the ECS services of a batch of instances, at most ten
// (describeBatch): one DescribeServices call. The poller calls it on the
// cluster's two beats, so the instances of a beat share calls.
func (r *Runtime) describe(ctx context.Context, batch []seen) []cloudpoll.Result {
	var names []string
	for _, sn := range batch {
		if !slices.Contains(names, sn.obj.ServiceName) {
			names = append(names, sn.obj.ServiceName)
		}
	}
	out, err := r.client.DescribeServices(ctx, &ecs.DescribeServicesInput{Cluster: aws.String(r.cluster), Services: names,
		Include: []types.ServiceField{types.ServiceFieldTags}})
	if ctx.Err() != nil {
		return nil // canceled: what the caller saw is no observation
	}
	found := map[string]*types.Service{}
	failed := map[string]string{}
	if err == nil {
		for i := range out.Services {
			found[aws.ToString(out.Services[i].ServiceName)] = &out.Services[i]
		}
		for _, f := range out.Failures {
			if reason := aws.ToString(f.Reason); reason != "MISSING" {
				failed[short(aws.ToString(f.Arn))] = reason + " " + aws.ToString(f.Detail)
			}
		}
	}
	results := make([]cloudpoll.Result, len(batch))
	for i, sn := range batch {
		res := &results[i]
		res.Err = err
		if why, bad := failed[sn.obj.ServiceName]; bad && res.Err == nil {
			res.Err = errors.New(strings.TrimSpace(why))
		}
		if res.Err == nil {
			res.State, res.Info, res.Err = r.observe(ctx, sn, found[sn.obj.ServiceName])
		}
		if res.Err != nil {
			res.Err = fmt.Errorf("describe ECS service %s in cluster %s: %w", sn.obj.ServiceName, r.cluster, res.Err)
		}
	}
	return results
}

// owner says whose the ECS service is: "" for drover's instance key (or
// adopted), else a sentence saying why it is not.
func owner(key runtimes.InstanceKey, o ecsspec.Object, tags map[string]string) string {
	switch got := tags[TagInstance]; {
	case got == key.String():
		return ""
	case got != "":
		return fmt.Sprintf("ECS service %s belongs to drover's %s, not to %s", o.ServiceName, got, key)
	case o.Adopt:
		return ""
	case tags[TagPvnID] != "":
		return fmt.Sprintf("ECS service %s was deployed by Prodvana (pvn:version %s); set awsEcs.adopt: true to take it over", o.ServiceName, tags[TagPvnVersion])
	}
	return fmt.Sprintf("ECS service %s exists and is not drover's (no %s tag); set awsEcs.adopt: true to take it over", o.ServiceName, TagInstance)
}

// observe turns a described ECS service into the instance's state.
func (r *Runtime) observe(ctx context.Context, in seen, svc *types.Service) (runtimes.State, []runtimes.InfoOutput, error) {
	obj := runtimes.Object{ObjectType: "ECS", Name: in.obj.ServiceName, Status: runtimes.ObjectPending}
	switch {
	case svc == nil || aws.ToString(svc.Status) == "INACTIVE":
		return runtimes.State{Message: fmt.Sprintf("ECS service %s does not exist in cluster %s", in.obj.ServiceName, r.cluster), Objects: []runtimes.Object{obj}}, nil, nil
	case aws.ToString(svc.Status) == "DRAINING":
		return runtimes.State{Message: fmt.Sprintf("ECS service %s in cluster %s is being deleted (draining)", in.obj.ServiceName, r.cluster), Objects: []runtimes.Object{obj}}, nil, nil
	}
	stags := tagMap(svc.Tags)
	if stags[TagPvnID] != "" && stags[TagPvnVersion] == "" {
		// Prodvana tags the task definition with the version.
		if td, err := r.taskDefinition(ctx, aws.ToString(svc.TaskDefinition), false); err == nil {
			stags[TagPvnVersion] = td.tags[TagPvnVersion]
		}
	}
	if why := owner(in.key, in.obj, stags); why != "" {
		return runtimes.State{Message: why, Objects: []runtimes.Object{obj}}, nil, nil
	}
	obj.Replicas, obj.AvailableReplicas, obj.TargetReplicas = svc.RunningCount+svc.PendingCount, svc.RunningCount, svc.DesiredCount
	running := aws.ToString(svc.TaskDefinition)
	st := runtimes.State{}
	switch {
	case running == "":
		st.Message = fmt.Sprintf("ECS service %s has no task definition (deployment controller %s)", in.obj.ServiceName, controller(svc))
	case stags[TagTaskDef] == running:
		// What drover deployed last, recorded on the service once the
		// deployment was asked for.
		st.Version = stags[TagVersion]
	default:
		td, err := r.taskDefinition(ctx, running, false)
		if err != nil {
			return runtimes.State{}, nil, err
		}
		if td.tags[TagPvnID] != "" {
			st.Message = fmt.Sprintf("runs task definition %s, deployed by Prodvana (pvn:version %s)", short(running), td.tags[TagPvnVersion])
		} else {
			st.Message = fmt.Sprintf("runs task definition %s, which drover did not deploy for %s", short(running), in.key)
		}
	}
	obj.Version = st.Version
	var primary *types.Deployment
	primaries, draining := 0, 0
	for i := range svc.Deployments {
		d := &svc.Deployments[i]
		switch {
		case aws.ToString(d.Status) == "PRIMARY":
			primary = d
			primaries++
		case d.RunningCount+d.PendingCount > 0:
			draining++ // an older deployment's tasks still run
		}
	}
	rollout := ""
	if primary != nil {
		rollout = string(primary.RolloutState)
	}
	// A rollout the circuit breaker failed and rolled back is no longer
	// the primary deployment: the failure is the deployment's that ran
	// the task definition drover deployed.
	var failed *types.Deployment
	for i := range svc.Deployments {
		d := &svc.Deployments[i]
		if d.RolloutState == types.DeploymentRolloutStateFailed && (d == primary || aws.ToString(d.TaskDefinition) == stags[TagTaskDef]) {
			failed = d
		}
	}
	if failed != nil && stags[TagTaskDef] != "" && st.Version == "" {
		st.Version = stags[TagVersion]
		st.Message = ""
	}
	counts := fmt.Sprintf("%d/%d tasks running", svc.RunningCount, svc.DesiredCount)
	if svc.PendingCount > 0 {
		counts += fmt.Sprintf(", %d pending", svc.PendingCount)
	}
	switch {
	case st.Version == "":
		// Not ours to judge: the engine applies the target.
	case failed != nil:
		st.Failed = true
		obj.Status = runtimes.ObjectFailed
		st.Message = fmt.Sprintf("%s: rollout failed: %s (%s)", st.Version, aws.ToString(failed.RolloutStateReason), counts)
	case primaries == 1 && draining == 0 && (rollout == string(types.DeploymentRolloutStateCompleted) || rollout == "") &&
		svc.RunningCount == svc.DesiredCount && svc.PendingCount == 0:
		st.Converged = true
		obj.Status = runtimes.ObjectSucceeded
		st.Message = fmt.Sprintf("%s running: %s", st.Version, counts)
	default:
		st.Message = fmt.Sprintf("%s rolling out: %s", st.Version, counts)
		if rollout != "" {
			st.Message += ", deployment " + strings.ToLower(strings.ReplaceAll(rollout, "_", " "))
		}
	}
	if primary != nil && primary.FailedTasks > 0 && !st.Converged {
		st.Message += fmt.Sprintf("; %d tasks failed to start", primary.FailedTasks)
	}
	if st.Version != "" && in.desired != nil && *in.desired != svc.DesiredCount {
		st.Drifted, st.Converged = true, false
		st.Message = fmt.Sprintf("desired count is %d, not %d: changed outside drover", svc.DesiredCount, *in.desired)
	}
	obj.Message = st.Message
	st.Objects = []runtimes.Object{obj}
	return st, info(svc), nil
}

// info is what people read of a service: its deployments and last events.
func info(svc *types.Service) []runtimes.InfoOutput {
	var deps []string
	for _, d := range svc.Deployments {
		line := fmt.Sprintf("%s %s: %s, %d/%d running, %d pending", aws.ToString(d.Status), short(aws.ToString(d.TaskDefinition)),
			strings.ToLower(string(d.RolloutState)), d.RunningCount, d.DesiredCount, d.PendingCount)
		if d.FailedTasks > 0 {
			line += fmt.Sprintf(", %d failed", d.FailedTasks)
		}
		deps = append(deps, line)
	}
	out := []runtimes.InfoOutput{{Name: "deployments", Text: strings.Join(deps, "\n")}}
	var evs []string
	for i, e := range svc.Events {
		if i == 5 {
			break
		}
		evs = append(evs, fmt.Sprintf("%s %s", aws.ToTime(e.CreatedAt).UTC().Format(time.RFC3339), aws.ToString(e.Message)))
	}
	if len(evs) > 0 {
		out = append(out, runtimes.InfoOutput{Name: "events", Text: strings.Join(evs, "\n")})
	}
	return out
}

// short is the family:revision of a task definition ARN.
func short(arn string) string {
	if i := strings.LastIndex(arn, "/"); i >= 0 {
		return arn[i+1:]
	}
	return arn
}

func tagMap(tags []types.Tag) map[string]string {
	m := make(map[string]string, len(tags))
	for _, t := range tags {
		m[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	return m
}

// taskDefinition describes a task definition with its tags, once per ARN
// unless fresh is set.
func (r *Runtime) taskDefinition(ctx context.Context, arn string, fresh bool) (*taskDef, error) {
	r.mu.Lock()
	td := r.taskDefs[arn]
	r.mu.Unlock()
	if td != nil && !fresh {
		return td, nil
	}
	out, err := r.client.DescribeTaskDefinition(ctx, &ecs.DescribeTaskDefinitionInput{TaskDefinition: aws.String(arn),
		Include: []types.TaskDefinitionField{types.TaskDefinitionFieldTags}})
	if err != nil {
		return nil, err
	}
	td = &taskDef{def: out.TaskDefinition, tags: tagMap(out.Tags)}
	r.mu.Lock()
	if len(r.taskDefs) > 4096 {
		clear(r.taskDefs)
	}
	r.taskDefs[arn] = td
	r.mu.Unlock()
	return td, nil
}

// permanent marks the AWS API's refusals of what was asked (bad input,
// missing resources) as errors that retrying does not fix; throttling and
// server errors were already retried by the SDK.
func permanent(err error) error {
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		return err
	}
	msg := strings.ToLower(ae.ErrorMessage())
	for _, transient := range transientMessages {
		if strings.Contains(msg, transient) {
			return err // a refusal that passes: the engine retries with backoff
		}
	}
	switch ae.ErrorCode() {
	case "InvalidParameterException", "ClientException", "ClusterNotFoundException", "AccessDeniedException",
		"UnsupportedFeatureException", "PlatformUnknownException", "PlatformTaskDefinitionIncompatibilityException":
		return runtimes.Permanent(err)
	}
	return err
}

// transientMessages are ECS refusals, under permanent-looking codes, that
// go away by themselves (lowercase).
var transientMessages = []string{
	"too many concurrent attempts", // registering revisions of one family at once
	"unable to assume the service linked role",
	"still draining",
	"does not have an associated load balancer", // a target group being attached
	"rate exceeded",
}

// controller names a service's deployment controller.
func controller(svc *types.Service) string {
	if svc.DeploymentController == nil {
		return "ECS"
	}
	return string(svc.DeploymentController.Type)
}
