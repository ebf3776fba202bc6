package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/kubeobj"
	"github.com/drover-dev/drover/internal/runtimes"
)

// FieldManager is the server-side apply field manager of every change drover
// makes: `kubectl apply --server-side --field-manager=drover` replays one.
const FieldManager = "drover"

// Labels and annotations drover puts on what it applies (kubeobj's, which
// every package writing or selecting on them shares).
const (
	LabelApplication    = kubeobj.LabelApplication
	LabelService        = kubeobj.LabelService
	LabelReleaseChannel = kubeobj.LabelReleaseChannel
	// LabelManaged marks the namespaces drover created (value "true").
	LabelManaged = kubeobj.LabelManaged
	// LabelInventory marks inventory ConfigMaps (value "true").
	LabelInventory = kubeobj.LabelInventory

	AnnotationVersion      = kubeobj.AnnotationVersion
	AnnotationDesiredState = kubeobj.AnnotationDesiredState
	// AnnotationAppliedHash is the hash of the object as drover applied it.
	AnnotationAppliedHash = kubeobj.AnnotationAppliedHash
)

// Defaults for Settings.
const (
	DefaultNamespacePrefix = "drover-"
	DefaultQPS             = 50
	DefaultBurst           = 100
	DefaultDebounce        = 100 * time.Millisecond
	DefaultCacheWait       = 5 * time.Second
	DefaultSyncTimeout     = 30 * time.Second
)

// Settings tune a Kubernetes runtime; the zero value means the defaults.
type Settings struct {
	// NamespacePrefix starts the names of managed namespaces
	// (DefaultNamespacePrefix): <prefix><application>-<release channel>.
	NamespacePrefix string
	// QPS and Burst limit the requests to the apiserver (client side).
	QPS   float32
	Burst int
	// Debounce is how long watch events of one instance are gathered before
	// watchers are notified (DefaultDebounce).
	Debounce time.Duration
	// CacheWait bounds how long Apply waits for the watch cache to show what
	// it applied, so that a Fetch right after an Apply sees it (DefaultCacheWait).
	CacheWait time.Duration
	// SyncTimeout bounds the wait for a new watch to list its objects (DefaultSyncTimeout).
	SyncTimeout time.Duration
	// WrapTransport, if set, wraps the HTTP transport (tests count requests with it).
	WrapTransport func(http.RoundTripper) http.RoundTripper
}

func (s Settings) withDefaults() Settings {
	if s.NamespacePrefix == "" {
		s.NamespacePrefix = DefaultNamespacePrefix
	}
	if s.QPS <= 0 {
		s.QPS = DefaultQPS
	}
	if s.Burst <= 0 {
		s.Burst = DefaultBurst
	}
	if s.Debounce <= 0 {
		s.Debounce = DefaultDebounce
	}
	if s.CacheWait <= 0 {
		s.CacheWait = DefaultCacheWait
	}
	if s.SyncTimeout <= 0 {
		s.SyncTimeout = DefaultSyncTimeout
	}
	return s
}

var (
	_ runtimes.Runtime = (*Runtime)(nil)
	_ runtimes.Watcher = (*Runtime)(nil)
	_ runtimes.Closer  = (*Runtime)(nil)
)

// Runtime applies service instances to one cluster and watches them. It is
// safe for concurrent use.
type Runtime struct {
	name     string
	settings Settings
	log      *slog.Logger

	rest   rest.Interface // server-side apply, with the response code
	dyn    dynamic.Interface
	mapper *restmapper.DeferredDiscoveryRESTMapper
	disc   discovery.DiscoveryInterface // uncached, for Discover
	// resetMu guards lastReset: the discovery cache is dropped at most
	// once per second, however many unknown kinds are asked for.
	resetMu   sync.Mutex
	lastReset time.Time

	informers *informerSet
	events    *debouncer

	mu    sync.Mutex
	insts map[instanceID]*instance
	// nsReady holds the managed namespaces known to exist.
	nsReady map[string]bool

	notifier runtimes.Notifier
	// CheckDelegate runs protection commands (SetCheckRunner).
	runtimes.CheckDelegate

	ctx       context.Context // ends at Close
	cancel    context.CancelFunc
	closeOnce sync.Once
}

// Factory builds a Kubernetes runtime; it is the runtimehost.Factory for kind "kubernetes".
func Factory(cfg *config.Runtime, opts runtimes.Options) (runtimes.Runtime, error) {
	r, err := New(cfg, opts)
	if err != nil {
		return nil, err
	}
	return r, nil
}

// New builds the runtime cfg describes: cfg.Kubernetes names a kubeconfig
// and/or context; with neither (or no cfg.Kubernetes at all) the in-cluster
// configuration is used. It does not contact the cluster.
func New(cfg *config.Runtime, opts runtimes.Options) (*Runtime, error) {
	return NewWithSettings(cfg, Settings{}, opts)
}

// NewWithSettings is New with settings.
func NewWithSettings(cfg *config.Runtime, s Settings, opts runtimes.Options) (*Runtime, error) {
	if cfg == nil {
		return nil, errors.New("kubernetes runtime: no config")
	}
	rc, err := restConfig(cfg.Kubernetes)
	if err != nil {
		return nil, fmt.Errorf("runtime %s: %w", cfg.Name, err)
	}
	return Open(cfg.Name, rc, s, opts)
}

// restConfig loads the client configuration the runtime config names.
func restConfig(k *config.KubernetesRuntime) (*rest.Config, error) {
	if k == nil {
		return RESTConfig("", "")
	}
	return RESTConfig(k.Kubeconfig, k.Context)
}

// RESTConfig loads a client configuration with client-go's loading rules:
// the kubeconfig file (else $KUBECONFIG or ~/.kube/config) and context
// (else the current one); with both "" the in-cluster configuration.
func RESTConfig(kubeconfig, kubeContext string) (*rest.Config, error) {
	if kubeconfig == "" && kubeContext == "" {
		rc, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("in-cluster configuration (set kubernetes.kubeconfig to run outside a cluster): %w", err)
		}
		return rc, nil
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if kubeconfig != "" {
		rules = &clientcmd.ClientConfigLoadingRules{ExplicitPath: kubeconfig}
	}
	rc, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: kubeContext}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %q, context %q: %w", kubeconfig, kubeContext, err)
	}
	return rc, nil
}

// Open builds a runtime named name on the cluster base connects to.
func Open(name string, base *rest.Config, s Settings, opts runtimes.Options) (*Runtime, error) {
	s = s.withDefaults()
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg := rest.CopyConfig(base)
	cfg.QPS, cfg.Burst = s.QPS, s.Burst
	// One limiter for every client, so the limits hold for the runtime as a whole.
	cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(s.QPS, s.Burst)
	if cfg.UserAgent == "" {
		cfg.UserAgent = "drover"
	}
	if s.WrapTransport != nil {
		cfg.Wrap(s.WrapTransport)
	}
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes runtime %s: %w", name, err)
	}
	dyn, err := dynamic.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, fmt.Errorf("kubernetes runtime %s: %w", name, err)
	}
	restClient, err := rest.UnversionedRESTClientForConfigAndClient(statusConfig(cfg), httpClient)
	if err != nil {
		return nil, fmt.Errorf("kubernetes runtime %s: %w", name, err)
	}
	disc, err := discovery.NewDiscoveryClientForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, fmt.Errorf("kubernetes runtime %s: %w", name, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &Runtime{
		name:     name,
		settings: s,
		log:      log.With(slog.String("runtime", name)),
		rest:     restClient,
		dyn:      dyn,
		mapper:   restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc)),
		disc:     disc,
		insts:    map[instanceID]*instance{},
		nsReady:  map[string]bool{},
		ctx:      ctx,
		cancel:   cancel,
	}
	r.events = newDebouncer(s.Debounce, r.notify)
	r.informers = newInformerSet(dyn, r.log, r.onEvent)
	return r, nil
}

// statusConfig is cfg for a REST client whose callers read raw JSON bodies,
// and whose errors carry the apiserver's Status (reason, causes, message).
func statusConfig(cfg *rest.Config) *rest.Config {
	scheme := runtime.NewScheme()
	metav1.AddToGroupVersion(scheme, schema.GroupVersion{Version: "v1"})
	c := rest.CopyConfig(cfg)
	c.ContentType, c.AcceptContentTypes = "application/json", "application/json"
	c.NegotiatedSerializer = serializer.NewCodecFactory(scheme).WithoutConversion()
	return c
}

// Name is the runtime's name.
func (r *Runtime) Name() string { return r.name }

// Close stops the watches. It is idempotent; Apply and Fetch fail after it.
func (r *Runtime) Close() error {
	r.closeOnce.Do(func() {
		r.cancel()
		r.informers.shutdown()
		r.events.stop()
		r.CloseChecks()
	})
	return nil
}

func (r *Runtime) closed() error {
	if r.ctx.Err() != nil {
		return fmt.Errorf("kubernetes runtime %s is closed", r.name)
	}
	return nil
}

// namespaceFor returns the namespace of t's instance and whether drover
// manages it (creates it).
func (r *Runtime) namespaceFor(t *runtimes.Target) (string, bool) {
	if t.Namespace != "" {
		return t.Namespace, false
	}
	return managedNamespace(r.settings.NamespacePrefix, t.InstanceKey), true
}

// instanceID is an instance in one namespace: if its release channel moves
// it to another namespace, it starts afresh there.
type instanceID struct {
	runtimes.InstanceKey
	namespace string
}

// instance is what the runtime keeps about one service instance.
type instance struct {
	id instanceID
	// applyMu serialises applies of the instance.
	applyMu sync.Mutex

	// The fields below are guarded by Runtime.mu.

	// inv is the inventory; nil until read from the cluster.
	inv *inventory
	// rv is the resourceVersion of each object (by id) as drover's last
	// apply returned it, to tell unchanged from configured.
	rv map[string]string
	// expect caches what the last fetched target prepares to.
	expect *expectation
}

// instance returns the instance record of id, creating it.
func (r *Runtime) instance(id instanceID) *instance {
	r.mu.Lock()
	defer r.mu.Unlock()
	in := r.insts[id]
	if in == nil {
		in = &instance{id: id, rv: map[string]string{}}
		r.insts[id] = in
	}
	return in
}
