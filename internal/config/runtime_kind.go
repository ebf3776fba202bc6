package config

import (
	"fmt"
	"slices"
	"sync"
	"time"
)

// Backends a service may set, as RuntimeKind.Backends names them.
const (
	// BackendKubernetesConfig is kubernetesConfig (and helm, rendered to
	// Kubernetes objects).
	BackendKubernetesConfig = "kubernetesConfig"
	// BackendCustomRuntime is customRuntime: parameter values for the
	// runtime's commands.
	BackendCustomRuntime = "customRuntime"
	// BackendAwsEcs is awsEcs: an ECS task and service definition.
	BackendAwsEcs = "awsEcs"
)

// RuntimeKind is what drover knows of one kind of runtime without building
// one: the facts the compiler, the server, the runtime host, the agent and
// the remote runtime look up by name instead of switching on the kind. Its
// factory (what builds a runtime of the kind) is registered beside the
// runtime implementations (runtimehost/builtin), which this package does
// not import.
type RuntimeKind struct {
	// Name is the kind ("kubernetes", "custom", "awsEcs", ...), as
	// compiled channels and the runtime host's registry name it.
	Name string
	// Configured reports whether a runtime config is of this kind (its
	// section is set).
	Configured func(rt *Runtime) bool
	// Backends are the service backends the kind runs (Backend*); nil
	// with AnyBackend.
	Backends []string
	// AnyBackend kinds run every backend (the fake runtime simulates one).
	AnyBackend bool
	// Proxy returns the linked runtime whose agent serves rt ("" = the
	// server builds rt itself); linked is whether rt is linked itself.
	Proxy func(rt *Runtime, linked bool) string
	// Unproxied returns a copy of rt as the agent serving it builds it:
	// without its proxyRuntime (nil = rt as it is).
	Unproxied func(rt *Runtime) *Runtime
	// RunsCommands kinds run commands: an agent in Kubernetes mode runs
	// them as Jobs, which it needs a factory for (agent.Config.Jobs).
	RunsCommands bool
	// Cluster kinds are Kubernetes clusters: an agent serving one uses its
	// own credentials, and the server asks it about the cluster.
	Cluster bool
	// Plans kinds report, in the observation of a version they fetched,
	// the plan of applying it (a Terraform plan): a push's preview shows
	// it.
	Plans bool
	// ConvergenceGrace is how long after an apply a runtime of the kind may
	// still not show it (0 = the engine's default), for runtimes served by
	// an agent, which cannot say so themselves.
	ConvergenceGrace time.Duration
	// Validate checks rt's section, reporting each problem with add (field
	// is a path such as "runtime.awsEcs.region"); nil = nothing to check.
	Validate func(rt *Runtime, add func(field, msg string))
	// ValidateBackend, for a kind that brings a service backend of its own,
	// checks that backend's section of b (path is "service" or a
	// perReleaseChannel entry's path) and returns its name when b sets it
	// ("" when not), so that a service setting two backends is refused.
	ValidateBackend func(b *ServiceBackend, path string, add func(field, msg string)) string
	// SecretRefs are the stored secrets (drover secrets) rt's section
	// references, by field ("runtime.awsEcs.accessKey.awsSecretAccessKey"):
	// an apply naming one that does not exist is refused. nil = none.
	SecretRefs func(rt *Runtime) map[string]SecretRef
	// ResolveLocal, for a kind whose service backend references local
	// files, reads them client-side, before the config is sent (path is
	// "service" or a perReleaseChannel entry's path): what it reads goes
	// into b's section, problems to fail (field is a path such as
	// "service.awsLambda.code.zip.local").
	ResolveLocal func(b *ServiceBackend, path string, files LocalFiles, fail func(field, msg string))
	// validate is a built-in kind's Validate, which needs the whole set of
	// configs (proxy runtimes are looked up).
	validate func(v *validator, src *Source, rt *Runtime)
}

// Accepts reports whether the kind runs a service backend (Backend*).
func (k RuntimeKind) Accepts(backend string) bool {
	return k.AnyBackend || slices.Contains(k.Backends, backend)
}

// runtimeKinds are the registered kinds, in registration order: the first
// whose Configured holds names a config's kind.
var runtimeKinds struct {
	sync.RWMutex
	list []RuntimeKind
}

// RegisterRuntimeKind adds a kind of runtime; it panics if the name is
// taken or k lacks Name or Configured (a programming error, found by any
// test). Kinds drover builds in are registered by this package; a kind of
// another package registers from its init.
func RegisterRuntimeKind(k RuntimeKind) {
	if k.Name == "" || k.Configured == nil {
		panic("config: a runtime kind needs a name and Configured")
	}
	runtimeKinds.Lock()
	defer runtimeKinds.Unlock()
	for _, o := range runtimeKinds.list {
		if o.Name == k.Name {
			panic(fmt.Sprintf("config: runtime kind %q registered twice", k.Name))
		}
	}
	// Kubernetes, the kind of a config with no section, stays last.
	i := len(runtimeKinds.list)
	if i > 0 && runtimeKinds.list[i-1].Name == KindKubernetes {
		i--
	}
	runtimeKinds.list = slices.Insert(runtimeKinds.list, i, k)
}

// LookupRuntimeKind returns the kind named name.
func LookupRuntimeKind(name string) (RuntimeKind, bool) {
	runtimeKinds.RLock()
	defer runtimeKinds.RUnlock()
	for _, k := range runtimeKinds.list {
		if k.Name == name {
			return k, true
		}
	}
	return RuntimeKind{}, false
}

// RuntimeKinds returns every registered kind.
func RuntimeKinds() []RuntimeKind {
	runtimeKinds.RLock()
	defer runtimeKinds.RUnlock()
	return slices.Clone(runtimeKinds.list)
}

// Kind returns the name of rt's kind: that of its section (fake, custom,
// terraformRunner, awsEcs, kubernetes, or a registered kind's). A runtime
// with no type is a Kubernetes runtime, as in Prodvana.
func (rt *Runtime) Kind() string { return rt.KindFacts().Name }

// KindFacts returns rt's kind.
func (rt *Runtime) KindFacts() RuntimeKind {
	runtimeKinds.RLock()
	defer runtimeKinds.RUnlock()
	for _, k := range runtimeKinds.list {
		if k.Configured(rt) {
			return k
		}
	}
	return kubernetesKind // not reached: kubernetes is Configured for all
}

// configuredKinds names every kind whose section rt sets (more than one is
// an error); kubernetes counts only with its kubernetes section.
func configuredKinds(rt *Runtime) []string {
	var out []string
	for _, k := range RuntimeKinds() {
		if k.Name == KindKubernetes {
			if rt.Kubernetes != nil {
				out = append(out, k.Name)
			}
		} else if k.Configured(rt) {
			out = append(out, k.Name)
		}
	}
	return out
}

// The built-in kinds' names.
const (
	KindFake            = "fake"
	KindKubernetes      = "kubernetes"
	KindCustom          = "custom"
	KindTerraformRunner = "terraformRunner"
	KindAwsEcs          = "awsEcs"
)

// kubernetesKind is the kind of a runtime with a kubernetes section or none.
var kubernetesKind = RuntimeKind{
	Name: KindKubernetes, Configured: func(*Runtime) bool { return true },
	Backends: []string{BackendKubernetesConfig}, Cluster: true,
	// A linked Kubernetes runtime is served by its own agent.
	Proxy: func(rt *Runtime, linked bool) string {
		if linked {
			return rt.Name
		}
		return ""
	},
	validate: (*validator).kubernetesRuntime,
}

// proxyOf is the runtime a proxyRuntime names ("" for none).
func proxyOf(p *ProxyRuntime) string {
	if p == nil {
		return ""
	}
	return p.Runtime
}

func init() {
	for _, k := range []RuntimeKind{
		kubernetesKind,
		{
			Name: KindFake, Configured: func(rt *Runtime) bool { return rt.Fake != nil }, AnyBackend: true,
			validate: (*validator).fakeRuntime,
		},
		{
			Name: KindCustom, Configured: func(rt *Runtime) bool { return rt.Custom != nil },
			Backends: []string{BackendCustomRuntime}, RunsCommands: true,
			Proxy: func(rt *Runtime, _ bool) string { return proxyOf(rt.Custom.ProxyRuntime) },
			Unproxied: func(rt *Runtime) *Runtime {
				cp, c := *rt, *rt.Custom
				c.ProxyRuntime, cp.Custom = nil, &c
				return &cp
			},
			validate: (*validator).customRuntime,
		},
		{
			Name: KindTerraformRunner, Configured: func(rt *Runtime) bool { return rt.TerraformRunner != nil },
			Backends: []string{BackendCustomRuntime}, RunsCommands: true, Plans: true,
			Proxy: func(rt *Runtime, _ bool) string { return proxyOf(rt.TerraformRunner.ProxyRuntime) },
			Unproxied: func(rt *Runtime) *Runtime {
				cp, t := *rt, *rt.TerraformRunner
				t.ProxyRuntime, cp.TerraformRunner = nil, &t
				return &cp
			},
			validate: (*validator).terraformRuntime,
		},
		{
			Name: KindAwsEcs, Configured: func(rt *Runtime) bool { return rt.AwsEcs != nil },
			Backends: []string{BackendAwsEcs},
			Proxy:    func(rt *Runtime, _ bool) string { return proxyOf(rt.AwsEcs.ProxyRuntime) },
			Unproxied: func(rt *Runtime) *Runtime {
				cp, e := *rt, *rt.AwsEcs
				e.ProxyRuntime, cp.AwsEcs = nil, &e
				return &cp
			},
			// As long as the ECS runtime waits for a deployment to start
			// (ecsspec.ConvergenceGrace, which this package does not import).
			ConvergenceGrace: time.Minute,
			validate:         (*validator).awsEcsRuntime,
			SecretRefs: func(rt *Runtime) map[string]SecretRef {
				if k := rt.AwsEcs.AccessKey; k != nil {
					return secretRefs("runtime.awsEcs.accessKey.awsSecretAccessKey", k.AwsSecretAccessKey.Secret)
				}
				return nil
			},
		},
	} {
		RegisterRuntimeKind(k)
	}
}

// LocalFiles reads the files a config references, confined as every
// local reference is (to the config's tree and the --allow-path roots).
type LocalFiles interface {
	// ReadFile reads the regular file at path (as written in the config:
	// relative to the config file's directory, or absolute) and returns
	// its content and its absolute path.
	ReadFile(path string) (data []byte, abs string, err error)
	// ReadManifests reads YAML files as a kubernetesConfig's local is
	// read: path or paths (files, or directories of .yaml files) become
	// text whose lines remember their file (LocateSource); a directory
	// path with subPath becomes a FileTree.
	ReadManifests(l *LocalConfig) (text string, tree *FileTree, err error)
}

// localFiles are the files of one config file's directory.
type localFiles struct {
	c       *confinement
	baseDir string
}

func (l localFiles) ReadFile(path string) ([]byte, string, error) {
	abs := join(l.baseDir, path)
	data, err := l.c.readFile(path, abs)
	return data, abs, err
}

// secretRefs is {field: ref} for a set reference, nil for none.
func secretRefs(field string, ref *SecretRef) map[string]SecretRef {
	if ref == nil {
		return nil
	}
	return map[string]SecretRef{field: *ref}
}

func (l localFiles) ReadManifests(lc *LocalConfig) (string, *FileTree, error) {
	kc := &KubernetesConfig{Local: lc}
	if err := l.c.resolveKubernetesLocal(kc, KubernetesTypeKubernetes, l.baseDir); err != nil {
		return "", nil, err
	}
	return kc.Inlined, kc.Tree, nil
}
