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
	"github.com/drover-dev/drover/internal/runtimes/cloudpoll"
)

// EmulatorHostEnv names the environment variable that points the runtime
// at a Cloud Run API test server (host:port, plain gRPC, no credentials),
// after Google's *_EMULATOR_HOST convention.
const EmulatorHostEnv = "CLOUD_RUN_EMULATOR_HOST"

// Default poll intervals.
const (
	DefaultPollInterval       = cloudpoll.DefaultPollInterval
	DefaultSteadyPollInterval = cloudpoll.DefaultSteadyPollInterval
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
	// poller keeps the instances and reads them (read).
	poller *cloudpoll.Poller[seen]

	mu sync.Mutex
	// revs caches settled revisions by full name (they no longer change).
	revs map[string]*runpb.Revision
}

// seen is what the poller reads an instance for: its Cloud Run object and
// the service drover sends for it.
type seen struct {
	key     runtimes.InstanceKey
	obj     cloudrunspec.Object
	desired *runpb.Service
}

// sameTarget reports whether two Cloud Run objects of an instance are one
// target: the observation of one is the other's.
func sameTarget(a, b seen) bool {
	return a.obj.ServiceName == b.obj.ServiceName && string(a.obj.Service) == string(b.obj.Service)
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
	r := &Runtime{
		name: cfg.Name, project: g.Project, region: g.Region, services: services, revisions: revisions,
		log: log.With("runtime", cfg.Name), revs: map[string]*runpb.Revision{},
	}
	r.poller = cloudpoll.New(cloudpoll.Config[seen]{Poll: g.PollInterval.Duration, Steady: g.SteadyStatePollInterval.Duration,
		Now: opts.Now, Same: sameTarget, Describe: cloudpoll.OneAtATime(r.read)})
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
	r.poller.Close()
	r.CloseChecks()
	return errors.Join(r.services.Close(), r.revisions.Close())
}

// Watch calls notify with the key of every instance whose fetched state
// changed, or that was applied, until ctx ends or the runtime closes.
func (r *Runtime) Watch(ctx context.Context, notify func(runtimes.InstanceKey)) error {
	return r.poller.Watch(ctx, notify)
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

// Fetch returns the instance's latest observed state, reading its Cloud
// Run service now when there is none for this target.
func (r *Runtime) Fetch(ctx context.Context, t runtimes.Target) (runtimes.State, error) {
	o, desired, err := r.parse(&t)
	if err != nil {
		return runtimes.State{}, err
	}
	st, err := r.poller.Fetch(ctx, t, seen{key: t.InstanceKey, obj: o, desired: desired})
	if errors.Is(err, cloudpoll.ErrTargetChanged) {
		return runtimes.State{}, fmt.Errorf("read Cloud Run service %s: its target kept changing while it was read; retrying", o.ServiceName)
	}
	return st, err
}

// Info returns the instance's Cloud Run object (CloudRun) as JSON.
func (r *Runtime) Info(_ context.Context, key runtimes.InstanceKey) ([]runtimes.InfoOutput, error) {
	return r.poller.Info(key), nil
}

// read fetches an instance's service and revisions: what the poller
// records of it, every pollInterval while it is not converged and every
// steadyStatePollInterval once it is.
func (r *Runtime) read(ctx context.Context, sn seen) cloudpoll.Result {
	obj := sn.obj
	svc, err := r.services.GetService(ctx, &runpb.GetServiceRequest{Name: sn.desired.Name})
	var res cloudpoll.Result
	switch {
	case status.Code(err) == codes.NotFound:
		res.State = runtimes.State{Message: fmt.Sprintf("Cloud Run service %s does not exist in project %s, region %s", obj.ServiceName, r.project, r.region),
			Objects: []runtimes.Object{{ObjectType: ObjectType, Name: obj.ServiceName, Status: runtimes.ObjectPending}}}
	case err != nil:
		res.Err = fmt.Errorf("read Cloud Run service %s (project %s, region %s): %w", obj.ServiceName, r.project, r.region, err)
	default:
		var info *CloudRun
		res.State, info, res.Err = r.observe(ctx, sn.key, obj, sn.desired, svc)
		if info != nil {
			// CloudRun has only strings, numbers and booleans: it always
			// marshals.
			text, _ := json.MarshalIndent(info, "", "  ")
			res.Info = []runtimes.InfoOutput{{Name: ObjectType, Text: string(text)}}
		}
	}
	return res
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
