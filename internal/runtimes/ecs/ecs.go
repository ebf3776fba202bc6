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
	"sort"
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
	DefaultPollInterval       = 10 * time.Second
	DefaultSteadyPollInterval = time.Minute
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
	secrets      *secretsmanager.Client
	log          *slog.Logger
	now          func() time.Time
	poll, steady time.Duration

	notifier runtimes.Notifier
	ctx      context.Context
	cancel   context.CancelFunc
	wake     chan struct{}
	wg       sync.WaitGroup

	mu    sync.Mutex
	insts map[runtimes.InstanceKey]*instance
	// polledAt and steadyAt are the poller's last beats (due).
	polledAt, steadyAt time.Time
	// taskDefs caches described task definitions by ARN (immutable; tags
	// are refreshed when drover tags one).
	taskDefs map[string]*taskDef
	// applyMu serializes applies per instance.
	applyMu map[runtimes.InstanceKey]*sync.Mutex
}

// instance is what the poller keeps for one service instance.
type instance struct {
	key    runtimes.InstanceKey
	target runtimes.Target
	obj    ecsspec.Object
	// desired is the service definition's desiredCount (nil: not set).
	desired *int32

	// gen counts the targets the instance had: an observation made for
	// an older one is not kept.
	gen       int
	have      bool
	state     runtimes.State
	err       error
	info      []runtimes.InfoOutput
	fetchedAt time.Time
	usedAt    time.Time
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
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	r := &Runtime{
		name: cfg.Name, cluster: e.EcsCluster, client: ecs.NewFromConfig(awsCfg, client...), log: log.With("runtime", cfg.Name), now: now,
		secrets: secretsmanager.NewFromConfig(awsCfg, sameEndpoint(client)),
		poll:    e.PollInterval.Duration, steady: e.SteadyStatePollInterval.Duration,
		wake: make(chan struct{}, 1), insts: map[runtimes.InstanceKey]*instance{}, taskDefs: map[string]*taskDef{},
		applyMu: map[runtimes.InstanceKey]*sync.Mutex{},
	}
	if r.poll <= 0 {
		r.poll = DefaultPollInterval
	}
	if r.steady <= 0 {
		r.steady = DefaultSteadyPollInterval
	}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	r.wg.Add(1)
	go r.poller()
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
	r.cancel()
	r.wg.Wait()
	r.CloseChecks()
	return nil
}

// Watch calls notify with the key of every instance whose fetched state
// changed, or that was applied, until ctx ends or the runtime closes.
func (r *Runtime) Watch(ctx context.Context, notify func(runtimes.InstanceKey)) error {
	return r.notifier.Watch(ctx, r.ctx.Done(), notify)
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

// touch records target as the instance's and returns it; a new target
// (another version or object) drops the cached state.
func (r *Runtime) touch(t runtimes.Target, o ecsspec.Object) (*instance, error) {
	var desired *int32
	if len(o.ServiceDefinition) > 0 && !o.UpdateTaskDefinitionOnly {
		in, err := ecsspec.Service(o.ServiceDefinition)
		if err != nil {
			return nil, runtimes.Permanent(fmt.Errorf("%s: service definition: %w", t.InstanceKey, err))
		}
		desired = in.DesiredCount
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	in := r.insts[t.InstanceKey]
	if in == nil {
		in = &instance{key: t.InstanceKey}
		r.insts[t.InstanceKey] = in
	}
	if in.target.Version != t.Version || in.obj.ServiceName != o.ServiceName || string(in.obj.TaskDefinition) != string(o.TaskDefinition) ||
		string(in.obj.ServiceDefinition) != string(o.ServiceDefinition) {
		in.have = false
		in.gen++
	}
	in.target, in.obj, in.desired, in.usedAt = t, o, desired, r.now()
	return in, nil
}

// Fetch returns the instance's latest observed state, describing its ECS
// service now when there is none for this target.
func (r *Runtime) Fetch(ctx context.Context, t runtimes.Target) (runtimes.State, error) {
	o, err := parse(&t)
	if err != nil {
		return runtimes.State{}, err
	}
	in, err := r.touch(t, o)
	if err != nil {
		return runtimes.State{}, err
	}
	r.mu.Lock()
	if in.have {
		st, err := in.state, in.err
		r.mu.Unlock()
		return st, err
	}
	r.mu.Unlock()
	for range 3 {
		r.describe(ctx, []*instance{in})
		if err := ctx.Err(); err != nil {
			return runtimes.State{}, err
		}
		r.mu.Lock()
		if in.have {
			defer r.mu.Unlock()
			return in.state, in.err
		}
		r.mu.Unlock() // an apply changed the target meanwhile: again
	}
	return runtimes.State{}, fmt.Errorf("ECS service %s: its target kept changing while it was described; retrying", o.ServiceName)
}

// Info returns the latest deployments and service events of the instance.
func (r *Runtime) Info(_ context.Context, key runtimes.InstanceKey) ([]runtimes.InfoOutput, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if in := r.insts[key]; in != nil {
		return in.info, nil
	}
	return nil, nil
}

// poller describes the instances that are due, in batches.
func (r *Runtime) poller() {
	defer r.wg.Done()
	timer := time.NewTimer(time.Second)
	defer timer.Stop()
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-timer.C:
		case <-r.wake:
		}
		due, next := r.due()
		if len(due) > 0 {
			r.describe(r.ctx, due)
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(next)
	}
}

// forgetAfter is how long an instance nobody fetches is still polled: the
// engine fetches each instance at least every few minutes while it is the
// target of a desired state.
const forgetAfter = 15 * time.Minute

// due returns the instances to describe now, and how long until the next
// poll. The cluster is polled on two beats: every pollInterval, the
// instances not converged; every steadyStatePollInterval, all of them;
// so the instances of a beat share DescribeServices calls, ten to a call.
// An instance not described yet goes at once. Instances nobody fetched
// for forgetAfter (or three steady intervals, if longer) are forgotten.
func (r *Runtime) due() ([]*instance, time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	pollBeat := now.Sub(r.polledAt) >= r.poll
	steadyBeat := now.Sub(r.steadyAt) >= r.steady
	if pollBeat {
		r.polledAt = now
	}
	if steadyBeat {
		r.steadyAt, r.polledAt = now, now
	}
	var out []*instance
	for k, in := range r.insts {
		if now.Sub(in.usedAt) > max(3*r.steady, forgetAfter) {
			delete(r.insts, k)
			continue
		}
		converged := in.have && in.err == nil && in.state.Converged
		if !in.have || steadyBeat || pollBeat && !converged {
			out = append(out, in)
		}
	}
	next := min(r.poll-now.Sub(r.polledAt), r.steady-now.Sub(r.steadyAt))
	return out, max(next, 100*time.Millisecond)
}

// seen is an instance as it was when a describe started.
type seen struct {
	in      *instance
	gen     int
	key     runtimes.InstanceKey
	obj     ecsspec.Object
	desired *int32
}

// describe fetches the ECS services of ins (DescribeServices, ten at a
// time) and records each one's state, notifying watchers of changes.
func (r *Runtime) describe(ctx context.Context, ins []*instance) {
	r.mu.Lock()
	snaps := make([]seen, len(ins))
	for i, in := range ins {
		snaps[i] = seen{in: in, gen: in.gen, key: in.key, obj: in.obj, desired: in.desired}
	}
	r.mu.Unlock()
	sort.Slice(snaps, func(i, j int) bool { return snaps[i].obj.ServiceName < snaps[j].obj.ServiceName })
	for start := 0; start < len(snaps); start += describeBatch {
		batch := snaps[start:min(start+describeBatch, len(snaps))]
		var names []string
		for _, sn := range batch {
			if !slices.Contains(names, sn.obj.ServiceName) {
				names = append(names, sn.obj.ServiceName)
			}
		}
		out, err := r.client.DescribeServices(ctx, &ecs.DescribeServicesInput{Cluster: aws.String(r.cluster), Services: names,
			Include: []types.ServiceField{types.ServiceFieldTags}})
		if ctx.Err() != nil {
			return // canceled: what the caller saw is no observation
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
		for _, sn := range batch {
			var st runtimes.State
			var info []runtimes.InfoOutput
			ferr := err
			if why, bad := failed[sn.obj.ServiceName]; bad && ferr == nil {
				ferr = errors.New(strings.TrimSpace(why))
			}
			if ferr == nil {
				st, info, ferr = r.observe(ctx, sn, found[sn.obj.ServiceName])
			}
			if ferr != nil {
				ferr = fmt.Errorf("describe ECS service %s in cluster %s: %w", sn.obj.ServiceName, r.cluster, ferr)
			}
			r.record(sn, st, info, ferr)
		}
	}
}

// record stores an observation and notifies watchers when it changed.
func (r *Runtime) record(sn seen, st runtimes.State, info []runtimes.InfoOutput, err error) {
	r.mu.Lock()
	in := sn.in
	if in.gen != sn.gen {
		r.mu.Unlock()
		return // the target changed meanwhile: describe again for it
	}
	changed := !in.have || errText(err) != errText(in.err) || !sameState(st, in.state)
	in.have, in.state, in.err, in.fetchedAt = true, st, err, r.now()
	if info != nil || err == nil {
		in.info = info
	}
	key := in.key
	r.mu.Unlock()
	if changed {
		r.notifier.Notify(key)
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func sameState(a, b runtimes.State) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
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
