// Package lambda is the AWS Lambda runtime (drover's own kind): each
// service instance is one function, released by publishing a version and
// moving an alias to it, through the AWS SDK for Go v2.
//
// # Apply
//
// Apply creates the function (tagged drover:instance = application/
// service/release channel) or brings its $LATEST to the rendered code and
// configuration, then publishes a version whose description carries the
// drover version and a hash of what it runs (drover:spec), unless a
// published version of the function has that hash already (a rollback, or
// a reapply: nothing is published again), and moves the alias to it,
// weighted with the version it served before when the service asks for a
// canary. The function is then tagged with what drover deployed
// (drover:version, drover:function-version). A function without drover's
// tag is not drover's and is never changed unless the service says adopt.
//
// # Fetch
//
// A poller per runtime reads each instance's alias (GetAlias) and
// function (GetFunction: $LATEST and the tags) every pollInterval (10s)
// while it is being released and every steadyStatePollInterval (1m) once
// converged; published versions are immutable and read once each. The
// version is drover:version while the alias points at drover's
// drover:function-version (or the drover version in the description of
// the version it points at); converged means that version is Active; a
// version Lambda put in state Failed is a failure; an alias moved, weighted
// or a $LATEST changed outside drover is drift, healed by the next apply.
package lambda

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"
	"github.com/aws/smithy-go"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/lambdaspec"
	"github.com/drover-dev/drover/internal/runtimes"
	"github.com/drover-dev/drover/internal/runtimes/awsconf"
	"github.com/drover-dev/drover/internal/runtimes/cloudpoll"
)

// Tags drover puts on the functions it deploys.
const (
	TagInstance = "drover:instance"
	// TagVersion and TagFunctionVersion are the drover version and the
	// published function version drover last moved the alias to.
	TagVersion         = "drover:version"
	TagFunctionVersion = "drover:function-version"
	// TagSpec is the hash (lambdaspec.Object.Spec) of what drover last
	// brought $LATEST to.
	TagSpec = "drover:spec"
)

// Default poll intervals.
const (
	DefaultPollInterval       = cloudpoll.DefaultPollInterval
	DefaultSteadyPollInterval = cloudpoll.DefaultSteadyPollInterval
)

var (
	_ runtimes.Runtime       = (*Runtime)(nil)
	_ runtimes.Watcher       = (*Runtime)(nil)
	_ runtimes.InfoGetter    = (*Runtime)(nil)
	_ runtimes.GraceReporter = (*Runtime)(nil)
	_ runtimes.CheckRunner   = (*Runtime)(nil)
	_ runtimes.Closer        = (*Runtime)(nil)
)

// Runtime is AWS Lambda in one region of an account.
type Runtime struct {
	runtimes.CheckDelegate
	name, region string
	client       *lambda.Client
	log          *slog.Logger
	now          func() time.Time
	// wait is how long apply waits between reads of a function being
	// updated.
	wait time.Duration
	// poller keeps the instances and reads them (read).
	poller *cloudpoll.Poller[seen]

	mu sync.Mutex
	// versions caches published versions by ARN (immutable once Active
	// or Failed).
	versions map[string]*published
}

// seen is what the poller reads an instance for: its Lambda object and
// the function it renders.
type seen struct {
	key  runtimes.InstanceKey
	obj  lambdaspec.Object
	want *lambda.CreateFunctionInput
}

// sameTarget reports whether two Lambda objects of an instance are one
// target: the observation of one is the other's.
func sameTarget(a, b seen) bool {
	return a.obj.Spec() == b.obj.Spec() && a.obj.Alias == b.obj.Alias && a.obj.FunctionName == b.obj.FunctionName &&
		a.obj.PreviousVersionWeight == b.obj.PreviousVersionWeight
}

// Factory builds a Lambda runtime from its config (runtimehost.Registry).
func Factory(cfg *config.Runtime, opts runtimes.Options) (runtimes.Runtime, error) {
	return New(context.Background(), cfg, opts)
}

// New connects to Lambda in cfg.AwsLambda's region. Credentials are the
// static access key when one is configured (a stored secret read through
// opts.Secret), else the SDK's default chain; the endpoint is the SDK's
// (AWS_ENDPOINT_URL_LAMBDA or AWS_ENDPOINT_URL name another). client
// options apply to the Lambda client.
func New(ctx context.Context, cfg *config.Runtime, opts runtimes.Options, client ...func(*lambda.Options)) (*Runtime, error) {
	l := cfg.AwsLambda
	if l == nil {
		return nil, fmt.Errorf("runtime %s is not an awsLambda runtime", cfg.Name)
	}
	awsCfg, err := awsconf.Load(ctx, cfg.Name, l.Region, l.AccessKey, opts)
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
		name: cfg.Name, region: l.Region, client: lambda.NewFromConfig(awsCfg, client...), log: log.With("runtime", cfg.Name), now: now,
		wait: time.Second, versions: map[string]*published{},
	}
	r.poller = cloudpoll.New(cloudpoll.Config[seen]{Poll: l.PollInterval.Duration, Steady: l.SteadyStatePollInterval.Duration,
		Now: now, Same: sameTarget, Describe: cloudpoll.OneAtATime(r.describe)})
	return r, nil
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

// ConvergenceGrace is how long after an apply the alias may still not show
// the new version (lambdaspec.ConvergenceGrace).
func (r *Runtime) ConvergenceGrace() time.Duration { return lambdaspec.ConvergenceGrace }

// parse reads the target's one Lambda object.
func parse(t *runtimes.Target) (lambdaspec.Object, *lambda.CreateFunctionInput, error) {
	var o lambdaspec.Object
	if len(t.Objects) != 1 {
		return o, nil, runtimes.Permanent(fmt.Errorf("%s: want one awsLambda object, got %d (push again with this version of drover)", t.InstanceKey, len(t.Objects)))
	}
	if err := json.Unmarshal(t.Objects[0], &o); err != nil || o.Kind != lambdaspec.Kind {
		return o, nil, runtimes.Permanent(fmt.Errorf("%s: not an awsLambda object (a %s service on a Lambda runtime?)", t.InstanceKey, t.Backend))
	}
	in, err := lambdaspec.Function(o.Function)
	if err != nil {
		return o, nil, runtimes.Permanent(fmt.Errorf("%s: function: %w", t.InstanceKey, err))
	}
	if o.Alias == "" {
		o.Alias = lambdaspec.DefaultAlias
	}
	return o, in, nil
}

// Fetch returns the instance's latest observed state, reading the
// function now when there is none for this target.
func (r *Runtime) Fetch(ctx context.Context, t runtimes.Target) (runtimes.State, error) {
	o, want, err := parse(&t)
	if err != nil {
		return runtimes.State{}, err
	}
	st, err := r.poller.Fetch(ctx, t, seen{key: t.InstanceKey, obj: o, want: want})
	if errors.Is(err, cloudpoll.ErrTargetChanged) {
		return runtimes.State{}, fmt.Errorf("lambda function %s: its target kept changing while it was read; retrying", o.FunctionName)
	}
	return st, err
}

// Info returns what people read of the instance: the Lambda object (the
// alias, the version it serves and the function's $LATEST) as JSON.
func (r *Runtime) Info(_ context.Context, key runtimes.InstanceKey) ([]runtimes.InfoOutput, error) {
	return r.poller.Info(key), nil
}

// kick wakes the poller.
func (r *Runtime) kick() { r.poller.Wake() }

// describe reads the instance's alias and function: what the poller
// records of it, every pollInterval while it is not converged and every
// steadyStatePollInterval once it is.
func (r *Runtime) describe(ctx context.Context, sn seen) cloudpoll.Result {
	st, info, err := r.read(ctx, sn)
	if err != nil {
		err = fmt.Errorf("read Lambda function %s in %s: %w", sn.obj.FunctionName, r.region, err)
	}
	return cloudpoll.Result{State: st, Info: info, Err: err}
}

// read is one observation: GetFunction, GetAlias and, once per published
// version, its configuration.
func (r *Runtime) read(ctx context.Context, sn seen) (runtimes.State, []runtimes.InfoOutput, error) {
	fn, err := r.client.GetFunction(ctx, &lambda.GetFunctionInput{FunctionName: aws.String(sn.obj.FunctionName)})
	if notFound(err) {
		return missing(sn, fmt.Sprintf("Lambda function %s does not exist in %s", sn.obj.FunctionName, r.region)), nil, nil
	}
	if err != nil {
		return runtimes.State{}, nil, err
	}
	if why := owner(sn.key, sn.obj, fn.Tags); why != "" {
		return missing(sn, why), nil, nil
	}
	alias, err := r.client.GetAlias(ctx, &lambda.GetAliasInput{FunctionName: aws.String(sn.obj.FunctionName), Name: aws.String(sn.obj.Alias)})
	if notFound(err) {
		return missing(sn, fmt.Sprintf("Lambda function %s has no alias %s yet", sn.obj.FunctionName, sn.obj.Alias)), nil, nil
	}
	if err != nil {
		return runtimes.State{}, nil, err
	}
	ver, err := r.version(ctx, sn.obj.FunctionName, aws.ToString(alias.FunctionVersion))
	if err != nil {
		return runtimes.State{}, nil, err
	}
	view := viewOf(sn, fn, alias, ver)
	st := observe(sn, view)
	raw, _ := json.MarshalIndent(view, "", "  ")
	return st, []runtimes.InfoOutput{{Name: "Lambda", Text: string(raw)}}, nil
}

// missing is the state of an instance whose function or alias is not
// there (or not drover's): no version runs.
func missing(sn seen, msg string) runtimes.State {
	return runtimes.State{Message: msg, Objects: []runtimes.Object{{ObjectType: "Lambda", Name: sn.obj.FunctionName, Status: runtimes.ObjectPending, Message: msg}}}
}

// published is what drover reads of a published version.
type published struct {
	Number      string `json:"number"`
	State       string `json:"state,omitempty"`
	StateReason string `json:"stateReason,omitempty"`
	CodeSha256  string `json:"codeSha256,omitempty"`
	Description string `json:"description,omitempty"`
}

// version reads a published version's configuration, once per version
// when it settled (not Pending).
func (r *Runtime) version(ctx context.Context, function, number string) (*published, error) {
	key := function + ":" + number
	r.mu.Lock()
	p := r.versions[key]
	r.mu.Unlock()
	if p != nil {
		return p, nil
	}
	cfg, err := r.client.GetFunctionConfiguration(ctx, &lambda.GetFunctionConfigurationInput{FunctionName: aws.String(function), Qualifier: aws.String(number)})
	if err != nil {
		return nil, err
	}
	p = &published{Number: number, State: string(cfg.State), StateReason: aws.ToString(cfg.StateReason), CodeSha256: aws.ToString(cfg.CodeSha256),
		Description: aws.ToString(cfg.Description)}
	if cfg.State != types.StatePending && number != "$LATEST" {
		r.mu.Lock()
		if len(r.versions) > 4096 {
			clear(r.versions)
		}
		r.versions[key] = p
		r.mu.Unlock()
	}
	return p, nil
}

// owner says whose the function is: "" for drover's instance key (or
// adopted), else a sentence saying why it is not.
func owner(key runtimes.InstanceKey, o lambdaspec.Object, tags map[string]string) string {
	switch got := tags[TagInstance]; {
	case got == key.String():
		return ""
	case got != "":
		return fmt.Sprintf("Lambda function %s belongs to drover's %s, not to %s", o.FunctionName, got, key)
	case o.Adopt:
		return ""
	}
	return fmt.Sprintf("Lambda function %s exists and is not drover's (no %s tag); set awsLambda.adopt: true to take it over", o.FunctionName, TagInstance)
}

// notFound reports a ResourceNotFoundException.
func notFound(err error) bool {
	var nf *types.ResourceNotFoundException
	return errors.As(err, &nf)
}

// permanent marks the Lambda API's refusals of what was asked (bad input,
// a role or layer that does not exist, a zip too large) as errors that
// retrying does not fix; throttling and server errors were retried by the
// SDK, and a function still being updated (ResourceConflictException) is
// retried by the engine.
func permanent(err error) error {
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		return err
	}
	switch ae.ErrorCode() {
	case "InvalidParameterValueException", "ValidationException", "ResourceNotFoundException", "AccessDeniedException",
		"CodeStorageExceededException", "CodeVerificationFailedException", "InvalidCodeSignatureException",
		"RequestTooLargeException", "UnsupportedMediaTypeException", "PreconditionFailedException":
		return runtimes.Permanent(err)
	}
	return err
}

// description is a published version's description: the drover version
// and the spec, which Apply looks for to reuse the version.
func description(version, spec string) string {
	d := "drover " + version + " spec " + spec
	if len(d) > 256 {
		d = d[:256]
	}
	return d
}

// parseDescription returns the drover version and spec of a version drover
// published ("" when another published it).
func parseDescription(d string) (version, spec string) {
	f := strings.Fields(d)
	if len(f) == 4 && f[0] == "drover" && f[2] == "spec" {
		return f[1], f[3]
	}
	return "", ""
}

// sortedKeys is the keys of m in order.
func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
