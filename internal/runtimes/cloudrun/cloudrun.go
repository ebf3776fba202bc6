// Package cloudrun is the Google Cloud Run runtime: services released as
// Cloud Run services of one project and region, through the Cloud Run
// Admin API v2 (cloud.google.com/go/run/apiv2).
//
// # Apply
//
// Apply translates the instance's Knative Service (cloudrunspec) to the
// v2 API's Service, adds drover's annotations (drover.dev/instance =
// application/service/release channel, drover.dev/version, drover.dev/spec)
// to the service and to its revision template, so every revision carries
// its version, and creates the service or replaces it (with the etag it
// read). An update that would change nothing is not sent. Rolling back to
// a version one of the service's ready revisions runs already names that
// revision in the template (as Knative's own revision names do), so Cloud
// Run serves it again rather than building a new one. A Cloud Run service
// without drover's annotation, or with another instance's, is never
// changed.
//
// # Fetch
//
// A poller per runtime reads the instances' services (GetService): those
// not converged every pollInterval (10s), all every steadyStatePollInterval
// (1m); revisions are read once they have settled (ready or failed), as
// they do not change after. The version is the drover.dev/version of the
// latest created revision when it is the instance's, else of the revisions
// serving traffic. Converged: the service's terminal condition succeeded
// for its generation, the latest revision is ready and traffic is where
// the Knative spec puts it. A latest revision that failed is a failed
// rollout (its condition's message says why). A service changed outside
// drover (its template or traffic no longer what drover sent) is drift.
package cloudrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	run "cloud.google.com/go/run/apiv2"
	"cloud.google.com/go/run/apiv2/runpb"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/drover-dev/drover/internal/cloudrunspec"
	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/runtimes"
)

// EmulatorHostEnv names the environment variable that points the runtime
// at a Cloud Run API test server (host:port, plain gRPC, no credentials),
// after Google's *_EMULATOR_HOST convention.
const EmulatorHostEnv = "CLOUD_RUN_EMULATOR_HOST"

// Default poll intervals.
const (
	DefaultPollInterval       = 10 * time.Second
	DefaultSteadyPollInterval = time.Minute
)

// ObjectType is the object type of a Cloud Run service in a state.
const ObjectType = "CloudRun"

var (
	_ runtimes.Runtime       = (*Runtime)(nil)
	_ runtimes.Watcher       = (*Runtime)(nil)
	_ runtimes.InfoGetter    = (*Runtime)(nil)
	_ runtimes.GraceReporter = (*Runtime)(nil)
	_ runtimes.CheckRunner   = (*Runtime)(nil)
	_ runtimes.Closer        = (*Runtime)(nil)
)

// Runtime is one Cloud Run project and region.
type Runtime struct {
	runtimes.CheckDelegate
	name, project, region string
	services              *run.ServicesClient
	revisions             *run.RevisionsClient
	log                   *slog.Logger
	now                   func() time.Time
	poll, steady          time.Duration

	notifier runtimes.Notifier
	ctx      context.Context
	cancel   context.CancelFunc
	wake     chan struct{}
	wg       sync.WaitGroup

	mu    sync.Mutex
	insts map[runtimes.InstanceKey]*instance
	// revs caches settled revisions by full name (they no longer change).
	revs     map[string]*runpb.Revision
	polledAt time.Time
	steadyAt time.Time
	applyMu  map[runtimes.InstanceKey]*sync.Mutex
}

// instance is what the poller keeps for one service instance.
type instance struct {
	key     runtimes.InstanceKey
	target  runtimes.Target
	obj     cloudrunspec.Object
	desired *runpb.Service
	gen     int
	have    bool
	state   runtimes.State
	err     error
	info    *CloudRun
	usedAt  time.Time
}

// Factory builds a Cloud Run runtime from its config (runtimehost.Registry).
func Factory(cfg *config.Runtime, opts runtimes.Options) (runtimes.Runtime, error) {
	return New(context.Background(), cfg, opts)
}

// New connects to the Cloud Run API for cfg.GoogleCloudRun's project and
// region. Credentials are the service account key of serviceAccountJson
// (a stored secret the server reads, or a rawSecret), else Application
// Default Credentials of wherever the runtime runs (GOOGLE_APPLICATION_CREDENTIALS,
// the metadata server). CLOUD_RUN_EMULATOR_HOST points it at a test
// server instead. client options are added last (tests).
func New(ctx context.Context, cfg *config.Runtime, opts runtimes.Options, client ...option.ClientOption) (*Runtime, error) {
	g := cfg.GoogleCloudRun
	if g == nil {
		return nil, fmt.Errorf("runtime %s is not a googleCloudRun runtime", cfg.Name)
	}
	key, err := serviceAccountKey(ctx, cfg.Name, g, opts)
	if err != nil {
		return nil, err
	}
	var copts []option.ClientOption
	switch host := os.Getenv(EmulatorHostEnv); {
	case host != "":
		copts = append(copts, option.WithEndpoint(host), option.WithoutAuthentication(),
			option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())))
	case key != nil:
		copts = append(copts, option.WithAuthCredentialsJSON(option.ServiceAccount, key))
	}
	copts = append(copts, client...)
	services, err := run.NewServicesClient(ctx, copts...)
	if err != nil {
		return nil, fmt.Errorf("runtime %s: Cloud Run client: %w", cfg.Name, err)
	}
	revisions, err := run.NewRevisionsClient(ctx, copts...)
	if err != nil {
		_ = services.Close()
		return nil, fmt.Errorf("runtime %s: Cloud Run client: %w", cfg.Name, err)
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
		name: cfg.Name, project: g.Project, region: g.Region, services: services, revisions: revisions,
		log: log.With("runtime", cfg.Name), now: now, poll: g.PollInterval.Duration, steady: g.SteadyStatePollInterval.Duration,
		wake: make(chan struct{}, 1), insts: map[runtimes.InstanceKey]*instance{}, revs: map[string]*runpb.Revision{},
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

// serviceAccountKey reads the service account key the runtime config
// references (nil: none, use the environment's credentials). The value is
// never logged nor put in an error.
func serviceAccountKey(ctx context.Context, name string, g *config.GoogleCloudRunRuntime, opts runtimes.Options) ([]byte, error) {
	sa := g.ServiceAccountJSON
	if sa == nil {
		return nil, nil
	}
	value := sa.RawSecret
	if ref := sa.Secret; ref != nil {
		if opts.Secret == nil {
			return nil, fmt.Errorf("runtime %s: serviceAccountJson.secret: stored secrets are read by the drover server, not here; an agent uses the credentials of its own environment (GOOGLE_APPLICATION_CREDENTIALS; leave serviceAccountJson out)", name)
		}
		v, err := opts.Secret(ctx, ref.Key, ref.Version)
		if err != nil {
			return nil, fmt.Errorf("runtime %s: serviceAccountJson.secret: %w", name, err)
		}
		value = v
	}
	var key struct {
		Type        string `json:"type"`
		ClientEmail string `json:"client_email"`
		PrivateKey  string `json:"private_key"`
	}
	if err := json.Unmarshal([]byte(value), &key); err != nil || key.Type != "service_account" || key.ClientEmail == "" || key.PrivateKey == "" {
		return nil, fmt.Errorf("runtime %s: serviceAccountJson is not a service account key (a JSON key file of type service_account, with client_email and private_key)", name)
	}
	return []byte(value), nil
}

// Close stops the poller and closes the clients.
func (r *Runtime) Close() error {
	r.cancel()
	r.wg.Wait()
	r.CloseChecks()
	return errors.Join(r.services.Close(), r.revisions.Close())
}

// Watch calls notify with the key of every instance whose fetched state
// changed, or that was applied, until ctx ends or the runtime closes.
func (r *Runtime) Watch(ctx context.Context, notify func(runtimes.InstanceKey)) error {
	return r.notifier.Watch(ctx, r.ctx.Done(), notify)
}

// ConvergenceGrace is how long after an apply the service may still not
// show the new revision (cloudrunspec.ConvergenceGrace).
func (r *Runtime) ConvergenceGrace() time.Duration { return cloudrunspec.ConvergenceGrace }

// parent is the location's resource name.
func (r *Runtime) parent() string {
	return fmt.Sprintf("projects/%s/locations/%s", r.project, r.region)
}

// parse reads the target's one Cloud Run object and builds the service
// drover sends for it.
func (r *Runtime) parse(t *runtimes.Target) (cloudrunspec.Object, *runpb.Service, error) {
	var o cloudrunspec.Object
	if len(t.Objects) != 1 {
		return o, nil, runtimes.Permanent(fmt.Errorf("%s: want one googleCloudRun object, got %d (push again with this version of drover)", t.InstanceKey, len(t.Objects)))
	}
	if err := json.Unmarshal(t.Objects[0], &o); err != nil || o.Kind != cloudrunspec.Kind {
		return o, nil, runtimes.Permanent(fmt.Errorf("%s: not a googleCloudRun object (a %s service on a Cloud Run runtime?)", t.InstanceKey, t.Backend))
	}
	k, err := cloudrunspec.ParseObject(o)
	if err != nil {
		return o, nil, runtimes.Permanent(fmt.Errorf("%s: Knative Service: %w", t.InstanceKey, err))
	}
	svc, err := k.Translate(r.project, r.region)
	if err != nil {
		return o, nil, runtimes.Permanent(fmt.Errorf("%s: Knative Service: %w", t.InstanceKey, err))
	}
	annotate(svc, t.InstanceKey, t.Version)
	return o, svc, nil
}

// annotate adds drover's annotations to the service and its template.
func annotate(svc *runpb.Service, key runtimes.InstanceKey, version string) {
	hash := cloudrunspec.SpecHash(svc)
	if svc.Annotations == nil {
		svc.Annotations = map[string]string{}
	}
	if svc.Template.Annotations == nil {
		svc.Template.Annotations = map[string]string{}
	}
	for _, m := range []map[string]string{svc.Annotations, svc.Template.Annotations} {
		m[cloudrunspec.AnnotationInstance] = key.String()
		m[cloudrunspec.AnnotationVersion] = version
		m[cloudrunspec.AnnotationSpec] = hash
	}
}

// touch records target as the instance's and returns it; a new target
// drops the cached state.
func (r *Runtime) touch(t runtimes.Target, o cloudrunspec.Object, desired *runpb.Service) *instance {
	r.mu.Lock()
	defer r.mu.Unlock()
	in := r.insts[t.InstanceKey]
	if in == nil {
		in = &instance{key: t.InstanceKey}
		r.insts[t.InstanceKey] = in
	}
	if in.target.Version != t.Version || in.obj.ServiceName != o.ServiceName || string(in.obj.Service) != string(o.Service) {
		in.have = false
		in.gen++
	}
	in.target, in.obj, in.desired, in.usedAt = t, o, desired, r.now()
	return in
}

// Fetch returns the instance's latest observed state, reading its Cloud
// Run service now when there is none for this target.
func (r *Runtime) Fetch(ctx context.Context, t runtimes.Target) (runtimes.State, error) {
	o, desired, err := r.parse(&t)
	if err != nil {
		return runtimes.State{}, err
	}
	in := r.touch(t, o, desired)
	for range 3 {
		r.mu.Lock()
		if in.have {
			defer r.mu.Unlock()
			return in.state, in.err
		}
		r.mu.Unlock()
		r.read(ctx, in)
		if err := ctx.Err(); err != nil {
			return runtimes.State{}, err
		}
	}
	return runtimes.State{}, fmt.Errorf("read Cloud Run service %s: its target kept changing while it was read; retrying", o.ServiceName)
}

// Info returns the instance's Cloud Run object (CloudRun) as JSON.
func (r *Runtime) Info(_ context.Context, key runtimes.InstanceKey) ([]runtimes.InfoOutput, error) {
	r.mu.Lock()
	in := r.insts[key]
	var info *CloudRun
	if in != nil {
		info = in.info
	}
	r.mu.Unlock()
	if info == nil {
		return nil, nil
	}
	text, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return nil, err
	}
	return []runtimes.InfoOutput{{Name: ObjectType, Text: string(text)}}, nil
}

// poller reads the instances that are due.
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
		for _, in := range due {
			r.read(r.ctx, in)
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

// forgetAfter is how long an instance nobody fetches is still polled.
const forgetAfter = 15 * time.Minute

// due returns the instances to read now, and how long until the next
// poll: every pollInterval those not converged, every
// steadyStatePollInterval all of them, at once those never read.
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

// read fetches an instance's service and revisions and records its state.
func (r *Runtime) read(ctx context.Context, in *instance) {
	r.mu.Lock()
	gen, key, obj, desired := in.gen, in.key, in.obj, in.desired
	r.mu.Unlock()
	name := desired.Name
	svc, err := r.services.GetService(ctx, &runpb.GetServiceRequest{Name: name})
	if ctx.Err() != nil {
		return
	}
	var st runtimes.State
	var info *CloudRun
	switch {
	case status.Code(err) == codes.NotFound:
		st = runtimes.State{Message: fmt.Sprintf("Cloud Run service %s does not exist in project %s, region %s", obj.ServiceName, r.project, r.region),
			Objects: []runtimes.Object{{ObjectType: ObjectType, Name: obj.ServiceName, Status: runtimes.ObjectPending}}}
		err = nil
	case err != nil:
		err = fmt.Errorf("read Cloud Run service %s (project %s, region %s): %w", obj.ServiceName, r.project, r.region, err)
	default:
		st, info, err = r.observe(ctx, key, obj, desired, svc)
	}
	r.mu.Lock()
	if in.gen != gen {
		r.mu.Unlock()
		return
	}
	changed := !in.have || errText(err) != errText(in.err) || !sameState(st, in.state)
	in.have, in.state, in.err = true, st, err
	if info != nil || err == nil {
		in.info = info
	}
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

// revision returns a revision, from the cache once it settled.
func (r *Runtime) revision(ctx context.Context, name string) (*runpb.Revision, error) {
	r.mu.Lock()
	rev := r.revs[name]
	r.mu.Unlock()
	if rev != nil {
		return rev, nil
	}
	rev, err := r.revisions.GetRevision(ctx, &runpb.GetRevisionRequest{Name: name})
	if err != nil {
		return nil, err
	}
	if ready(rev.Conditions) != nil && !rev.Reconciling {
		r.mu.Lock()
		if len(r.revs) > 4096 {
			clear(r.revs)
		}
		r.revs[name] = rev
		r.mu.Unlock()
	}
	return rev, nil
}

// ready is a resource's settled Ready condition (nil while it is not).
func ready(conds []*runpb.Condition) *runpb.Condition {
	for _, c := range conds {
		if c.Type == "Ready" && (c.State == runpb.Condition_CONDITION_SUCCEEDED || c.State == runpb.Condition_CONDITION_FAILED) {
			return c
		}
	}
	return nil
}

func short(name string) string { return name[strings.LastIndex(name, "/")+1:] }
