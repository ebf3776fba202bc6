package config

import (
	"encoding/base64"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// The types in this file mirror Prodvana's config format (ProdvanaConfig) field by
// field, with the same lowerCamelCase names, so `*.pvn.yaml` files decode unchanged.
// Fields drover does not implement yet have the type Unsupported: setting one is an
// error ("not supported yet: <field>"), never silently ignored. drover's own
// additions carry a `drover:"extension"` tag and are documented in docs/config.md.
//
// Struct tags understood by the decoder (decode.go):
//   json:"name,omitempty"   the canonical key; snake_case spellings are accepted too
//   alias:"oldName"         a deprecated key with the same meaning
//   drover:"internal"       set by drover itself (resolved files); rejected in input

// File is one decoded `*.pvn.yaml` file: exactly one kind is set.
type File struct {
	Application         *Application         `json:"application,omitempty"`
	ApplicationMetadata *ApplicationMetadata `json:"applicationMetadata,omitempty"`
	Service             *Service             `json:"service,omitempty"`
	ServiceMetadata     *ServiceMetadata     `json:"serviceMetadata,omitempty"`
	Protection          *Protection          `json:"protection,omitempty"`
	Runtime             *Runtime             `json:"runtime,omitempty"`
	DeliveryExtension   *DeliveryExtension   `json:"deliveryExtension,omitempty"`
	ReleaseChannel      *ReleaseChannel      `json:"releaseChannel,omitempty"`
	ContainerRegistry   *ContainerRegistry   `json:"containerRegistry,omitempty" drover:"extension"`
	Webhook             *Webhook             `json:"webhook,omitempty" drover:"extension"`
	Recipe              Unsupported          `json:"recipe,omitzero"`
}

// Webhook is a notification target (drover extension): the config form of
// drover notifications add. Every event its filter matches is POSTed to
// URL as a signed CloudEvent; an empty filter list matches everything.
type Webhook struct {
	Name string `json:"name"`
	URL  string `json:"url"`
	// Secret is the signing secret, a version of a secret of drover's
	// secret store (drover secrets set); it is read when the config is
	// applied.
	Secret SecretRef `json:"secret"`
	// Events are notification types (service.deployed, service.upgraded,
	// service.rolledback, approval.requested, channel.blocked,
	// channel.failed, freeze.started).
	Events          []string `json:"events,omitempty"`
	Applications    []string `json:"applications,omitempty"`
	Services        []string `json:"services,omitempty"`
	ReleaseChannels []string `json:"releaseChannels,omitempty"`
	// Statuses are the statuses of the channels told of (CONVERGED,
	// FAILED, WAITING_MANUAL_APPROVAL, BLOCKED).
	Statuses []string `json:"statuses,omitempty"`
}

// ContainerRegistry names a container registry (drover extension), as a
// registry linked once in Prodvana is named: a parameter's
// imageRegistryInfo.containerRegistry NAME resolves through it to its host
// and repository prefix.
type ContainerRegistry struct {
	Name string `json:"name"`
	// Host is the registry's host, with a port if any (ghcr.io,
	// registry.example.com:5000, docker.io).
	Host string `json:"host"`
	// RepositoryPrefix is put before each image repository
	// ("acme" makes imageRepository web acme/web).
	RepositoryPrefix string `json:"repositoryPrefix,omitempty"`
}

// Application groups services that share release requirements.
type Application struct {
	Name                 string                `json:"name"`
	ReleaseChannels      []ReleaseChannel      `json:"releaseChannels,omitempty"`
	ReleaseChannelGroups []ReleaseChannelGroup `json:"releaseChannelGroups,omitempty"`
	NoCleanupOnDelete    bool                  `json:"noCleanupOnDelete,omitempty"`
	Notifications        *Notifications        `json:"notifications,omitempty"`
	Annotations          Unsupported           `json:"annotations,omitzero"`
	ReleaseSettings      Unsupported           `json:"releaseSettings,omitzero"`
	Alerts               Unsupported           `json:"alerts,omitzero"`
	Capabilities         Unsupported           `json:"capabilities,omitzero"`
	CapabilityInstances  Unsupported           `json:"capabilityInstances,omitzero"`
}

// Notifications is where an application's notifications go (Prodvana's
// NotificationConfig).
type Notifications struct {
	Slack *SlackNotifications `json:"slack,omitempty"`
}

// SlackNotifications are an application's Slack channels: Channel gets
// every notification (deployments, approval requests with Approve and
// Reject buttons, blocked and failed channels, freezes), ErrorChannel only
// failures (failed channels) as well. Either may be left out.
type SlackNotifications struct {
	Channel      string `json:"channel,omitempty"`
	ErrorChannel string `json:"errorChannel,omitempty"`
}

// ApplicationMetadata is display-only information about an application.
type ApplicationMetadata struct {
	Description  string `json:"description,omitempty"`
	Links        []Link `json:"links,omitempty"`
	ServiceLinks []Link `json:"serviceLinks,omitempty"`
}

// Link is a named URL shown next to an application or service.
type Link struct {
	URL         string `json:"url,omitempty"`
	DisplayName string `json:"displayName,omitempty"`
}

// ReleaseChannel is one environment or release stage of an application.
type ReleaseChannel struct {
	// Application attaches a standalone releaseChannel file to an application
	// (drover extension; not allowed inside an application's releaseChannels).
	Application                string                 `json:"application,omitempty" drover:"extension"`
	Name                       string                 `json:"name"`
	Group                      string                 `json:"group,omitempty"`
	Runtimes                   []RuntimeConnection    `json:"runtimes,omitempty"`
	Preconditions              []Precondition         `json:"preconditions,omitempty"`
	Protections                []ProtectionAttachment `json:"protections,omitempty"`
	ServiceInstanceProtections []ProtectionAttachment `json:"serviceInstanceProtections,omitempty"`
	ConvergenceProtections     []ProtectionAttachment `json:"convergenceProtections,omitempty"`
	// DeployWindows are the times a new deployment of the channel may start
	// (drover extension): outside all of them it is BLOCKED until the next
	// one opens. Windows are allowedTimes windows.
	DeployWindows []TimeWindow `json:"deployWindows,omitempty" drover:"extension"`
	// AlertGate holds new deployments of the channel while alerts matching
	// it fire in a Prometheus Alertmanager (drover extension): BLOCKED
	// until they resolve.
	AlertGate             *AlertGate            `json:"alertGate,omitempty" drover:"extension"`
	Constants             []Constant            `json:"constants,omitempty"`
	Labels                []Label               `json:"labels,omitempty"`
	Policy                *ReleaseChannelPolicy `json:"policy,omitempty"`
	DisableAllProtections bool                  `json:"disableAllProtections,omitempty"`
	Order                 Unsupported           `json:"order,omitzero"`
	Maturity              Unsupported           `json:"maturity,omitzero"`
	DeployAnnotations     Unsupported           `json:"deployAnnotations,omitzero"`
}

// ReleaseChannelPolicy holds defaults injected into every service of the channel.
type ReleaseChannelPolicy struct {
	DefaultEnv map[string]EnvValue `json:"defaultEnv,omitempty"`
}

// RuntimeConnection attaches a runtime to a release channel.
type RuntimeConnection struct {
	Runtime                string                  `json:"runtime"`
	Name                   string                  `json:"name,omitempty"`
	ContainerOrchestration *ContainerOrchestration `json:"containerOrchestration,omitempty"`
	Type                   RuntimeType             `json:"type,omitempty"`
}

// ConnectionName is the id services use in runtimeConnection; it defaults to the runtime name.
func (c RuntimeConnection) ConnectionName() string {
	if c.Name != "" {
		return c.Name
	}
	return c.Runtime
}

// ContainerOrchestration selects the namespace (Kubernetes) or prefix (ECS) to use.
type ContainerOrchestration struct {
	K8s *K8sOrchestration `json:"k8s,omitempty"`
	ECS Unsupported       `json:"ecs,omitzero"`
}

// K8sOrchestration names an existing namespace; drover never creates or deletes it.
type K8sOrchestration struct {
	Namespace  string `json:"namespace,omitempty"`
	PvnManaged bool   `json:"pvnManaged,omitempty"`
}

// Precondition gates the rollout of a new version to a release channel.
type Precondition struct {
	ReleaseChannelStable *ReleaseChannelStable `json:"releaseChannelStable,omitempty"`
	ManualApproval       *ManualApproval       `json:"manualApproval,omitempty"`
	SharedManualApproval *SharedManualApproval `json:"sharedManualApproval,omitempty"`
	CustomTask           Unsupported           `json:"customTask,omitzero"`
}

// ReleaseChannelStable waits until the same service version is converged elsewhere.
type ReleaseChannelStable struct {
	ReleaseChannel string `json:"releaseChannel,omitempty"`
	Selector       string `json:"selector,omitempty"`
	AllowEmpty     bool   `json:"allowEmpty,omitempty"`
}

// ManualApproval waits for people to approve the rollout.
type ManualApproval struct {
	Name         string `json:"name,omitempty"`
	Description  string `json:"description,omitempty"`
	EveryAction  bool   `json:"everyAction,omitempty"`
	MinApprovers int32  `json:"minApprovers,omitempty"`
}

// SharedManualApproval is one approval, by name, that every service
// instance naming it shares: within one release (drover release create),
// an approval given on any service's channel counts for all of them.
type SharedManualApproval struct {
	Name         string `json:"name"`
	MinApprovers int32  `json:"minApprovers,omitempty"`
}

// Constant is a fixed template variable (.Constants.<name>).
type Constant struct {
	Name   string          `json:"name"`
	String *StringConstant `json:"string,omitempty"`
}

// StringConstant is the only constant type.
type StringConstant struct {
	Value string `json:"value"`
}

// Label is a key/value pair used by label queries.
type Label struct {
	Label string `json:"label"`
	Value string `json:"value"`
}

// ReleaseChannelGroup expands to one release channel per runtime matched by RuntimeSelector.
type ReleaseChannelGroup struct {
	Name            string          `json:"name"`
	RuntimeSelector string          `json:"runtimeSelector,omitempty"`
	AllowEmpty      bool            `json:"allowEmpty,omitempty"`
	Template        *ReleaseChannel `json:"template,omitempty"`
}

// EnvValue is an environment variable: a plain value or a reference to a secret.
type EnvValue struct {
	Value            string            `json:"value,omitempty"`
	RawSecret        string            `json:"rawSecret,omitempty"`
	Secret           *SecretRef        `json:"secret,omitempty"`
	KubernetesSecret *KubernetesSecret `json:"kubernetesSecret,omitempty"`
}

// SecretRef names a secret stored by drover.
type SecretRef struct {
	Key     string `json:"key"`
	Version string `json:"version,omitempty"`
}

// KubernetesSecret references a key of a Secret in the target namespace.
type KubernetesSecret struct {
	SecretName string `json:"secretName"`
	Key        string `json:"key"`
}

// Service is the unit of deployment, released to every release channel of its application.
type Service struct {
	Name        string `json:"name"`
	Application string `json:"application"`
	ServiceBackend
	PerReleaseChannel             []PerReleaseChannel            `json:"perReleaseChannel,omitempty"`
	Parameters                    []ParameterDefinition          `json:"parameters,omitempty"`
	Constants                     []Constant                     `json:"constants,omitempty"`
	Env                           map[string]EnvValue            `json:"env,omitempty"`
	RuntimeConnection             string                         `json:"runtimeConnection,omitempty"`
	ConvergenceExtensions         []ConvergenceExtension         `json:"convergenceExtensions,omitempty" alias:"deliveryExtensions"`
	ConvergenceExtensionInstances []ConvergenceExtensionInstance `json:"convergenceExtensionInstances,omitempty" alias:"deliveryExtensionInstances"`
	ConvergenceProtections        []ProtectionAttachment         `json:"convergenceProtections,omitempty"`
	ParametersAutogen             ParametersAutogen              `json:"parametersAutogen,omitempty"`
	AutoRollback                  *AutoRollback                  `json:"autoRollback,omitempty"`
	NoCleanupOnDelete             bool                           `json:"noCleanupOnDelete,omitempty"`
	ProgressDeadline              Duration                       `json:"progressDeadline,omitzero"`
	BundleName                    string                         `json:"bundleName,omitempty"`
	// DependsOn (drover's own) holds each release channel of the service
	// until the services named run converged there (or in the channel an
	// entry names): ordering between services.
	DependsOn            []ServiceDependency `json:"dependsOn,omitempty" drover:"extension"`
	Programs             Unsupported         `json:"programs,omitzero"`
	Replicas             Unsupported         `json:"replicas,omitzero"`
	ReleaseStrategy      Unsupported         `json:"releaseStrategy,omitzero"`
	Capabilities         Unsupported         `json:"capabilities,omitzero"`
	DeliveryConfig       Unsupported         `json:"deliveryConfig,omitzero"`
	Volumes              Unsupported         `json:"volumes,omitzero"`
	DeployAnnotations    Unsupported         `json:"deployAnnotations,omitzero"`
	RuntimeSpecific      Unsupported         `json:"runtimeSpecific,omitzero"`
	ParameterValues      Unsupported         `json:"parameterValues,omitzero"`
	AsyncSetDesiredState Unsupported         `json:"asyncSetDesiredState,omitzero"`
	Maestro              *MaestroConfig      `json:"maestro,omitempty"`
}

// ServiceBackend is the backend oneof shared by a service and its per-release-channel overrides.
type ServiceBackend struct {
	KubernetesConfig *KubernetesConfig     `json:"kubernetesConfig,omitempty" alias:"externalConfig"`
	CustomRuntime    *CustomRuntimeValues  `json:"customRuntime,omitempty" alias:"runtimeExtension"`
	Helm             *HelmConfig           `json:"helm,omitempty"`
	AwsEcs           *AwsEcsConfig         `json:"awsEcs,omitempty"`
	AwsLambda        *AwsLambdaConfig      `json:"awsLambda,omitempty" drover:"extension"`
	GoogleCloudRun   *GoogleCloudRunConfig `json:"googleCloudRun,omitempty"`
	Fly              Unsupported           `json:"fly,omitzero"`
	Terraform        Unsupported           `json:"terraform,omitzero"`
	Pulumi           *PulumiConfig         `json:"pulumi,omitempty"`
}

// PerReleaseChannel overrides service fields for one release channel (deep-merged).
type PerReleaseChannel struct {
	ReleaseChannel string `json:"releaseChannel"`
	ServiceBackend
	Env                    map[string]EnvValue    `json:"env,omitempty"`
	Constants              []Constant             `json:"constants,omitempty"`
	Protections            []ProtectionAttachment `json:"protections,omitempty"`
	ConvergenceProtections []ProtectionAttachment `json:"convergenceProtections,omitempty"`
	ConvergenceExtensions  []ConvergenceExtension `json:"convergenceExtensions,omitempty" alias:"deliveryExtensions"`
	RuntimeConnection      string                 `json:"runtimeConnection,omitempty"`
	// DependsOn (drover's own) adds to the service's dependsOn in this
	// release channel; an entry naming a service the service's list names
	// too replaces that entry here.
	DependsOn       []ServiceDependency `json:"dependsOn,omitempty" drover:"extension"`
	Replicas        Unsupported         `json:"replicas,omitzero"`
	Programs        Unsupported         `json:"programs,omitzero"`
	Volumes         Unsupported         `json:"volumes,omitzero"`
	DeliveryConfig  Unsupported         `json:"deliveryConfig,omitzero"`
	CustomHostnames Unsupported         `json:"customHostnames,omitzero"`
	Cert            Unsupported         `json:"cert,omitzero"`
	RuntimeSpecific Unsupported         `json:"runtimeSpecific,omitzero"`
}

// MaestroConfig is how the service's pushes are released (reference.md
// §4.9): MAESTRO_DISABLED (or unset) and IMMEDIATE replace a rollout in
// flight at once; RELEASE_TRAIN queues a push until the rollout before it
// finished everywhere, so a newer one never overtakes an older one.
type MaestroConfig struct {
	Strategy string `json:"strategy,omitempty"`
}

// Maestro strategies.
const (
	MaestroReleaseTrain = "RELEASE_TRAIN"
	MaestroDisabled     = "MAESTRO_DISABLED"
	MaestroImmediate    = "IMMEDIATE"
)

// Train reports whether the service's pushes queue (RELEASE_TRAIN).
func (svc *Service) Train() bool {
	return svc != nil && svc.Maestro != nil && svc.Maestro.Strategy == MaestroReleaseTrain
}

// ServiceDependency names a service of the same application that must run
// converged first (drover's own, service.dependsOn): in the same release
// channel, or in ReleaseChannel when it is set. Within one release the
// dependency must run the release's version of it.
type ServiceDependency struct {
	Service        string `json:"service"`
	ReleaseChannel string `json:"releaseChannel,omitempty"`
}

// HelmConfig renders a Helm chart (from a local path) with values per release channel.
type HelmConfig struct {
	Local             *LocalConfig `json:"local,omitempty"`
	Remote            Unsupported  `json:"remote,omitzero"`
	HelmTarballBlobID Unsupported  `json:"helmTarballBlobId,omitzero"`
	// ValuesOverrides are merged in order (later wins); their text is templated.
	ValuesOverrides []HelmValues `json:"valuesOverrides,omitempty"`
	// ReleaseName defaults to the service name.
	ReleaseName string `json:"releaseName,omitempty"`
	// Namespace is used internally by Prodvana; it must not be set.
	Namespace      string      `json:"namespace,omitempty"`
	FixupOwnership Unsupported `json:"fixupOwnership,omitzero"`
	// Chart holds the chart directory read client-side from local.path;
	// drover sets it in place of local.
	Chart *FileTree `json:"chart,omitempty" drover:"internal"`
}

// HelmValues is one values file, given inline or by a local path.
type HelmValues struct {
	Inlined string       `json:"inlined,omitempty"`
	Local   *LocalConfig `json:"local,omitempty"`
	Remote  Unsupported  `json:"remote,omitzero"`
	// Literal uses the values as they are, not as a Go template (drover
	// extension): for values that hold {{ }} the chart itself evaluates
	// (tpl), such as notification or dashboard templates.
	Literal bool `json:"literal,omitempty" drover:"extension"`
}

// KubernetesConfig references Kubernetes YAML or a kustomize directory.
type KubernetesConfig struct {
	Type             KubernetesConfigType `json:"type"`
	Inlined          string               `json:"inlined,omitempty"`
	Local            *LocalConfig         `json:"local,omitempty"`
	Remote           Unsupported          `json:"remote,omitzero"`
	EnvInjectionMode EnvInjectionMode     `json:"envInjectionMode,omitempty"`
	Patches          []KubernetesPatch    `json:"patches,omitempty"`
	// Literal uses the inlined text or referenced files as they are, not as
	// Go templates (drover extension): for objects that contain {{ }} of
	// their own (policy engines, alerting rules, workflow templates).
	// Patches are still templates, so parameters reach the objects there.
	Literal bool `json:"literal,omitempty" drover:"extension"`
	// Tree holds a local directory referenced with subPath, read client-side;
	// drover sets it in place of local (as pvnctl turns local into remote), and
	// the compiler resolves the templated subPath inside it per release channel.
	Tree *FileTree `json:"tree,omitempty" drover:"internal"`
}

// AwsEcsConfig deploys a service to Amazon ECS: a task definition and an
// ECS service definition, each the JSON the AWS CLI takes
// (register-task-definition and create-service --cli-input-json), as Go
// templates.
type AwsEcsConfig struct {
	TaskDefinition    *EcsSpec `json:"taskDefinition,omitempty"`
	ServiceDefinition *EcsSpec `json:"serviceDefinition,omitempty"`
	// EcsServiceNameOverride names the ECS service (default: the service's
	// name); a template.
	EcsServiceNameOverride string `json:"ecsServiceNameOverride,omitempty"`
	// UpdateTaskDefinitionOnly only points an existing ECS service at the
	// new task definition; the service must exist.
	UpdateTaskDefinitionOnly bool `json:"updateTaskDefinitionOnly,omitempty"`
	// Adopt lets drover take over an ECS service of this name that it does
	// not own (no drover tags: created by hand, or by Prodvana) (drover
	// extension).
	Adopt bool `json:"adopt,omitempty" drover:"extension"`
}

// EcsSpec is one ECS JSON document: inlined, or a local file (path, or a
// directory path and a templated subPath, resolved per release channel).
type EcsSpec struct {
	Inlined string       `json:"inlined,omitempty"`
	Local   *LocalConfig `json:"local,omitempty"`
	Remote  Unsupported  `json:"remote,omitzero"`
	// File is the file the inlined text was read from, for messages;
	// drover sets it when it reads local.path.
	File string `json:"file,omitempty" drover:"internal"`
	// Tree holds the directory of local.path with subPath, read
	// client-side; the compiler resolves the subPath per release channel.
	Tree *FileTree `json:"tree,omitempty" drover:"internal"`
}

// LocalConfig references files relative to the config file.
type LocalConfig struct {
	Path            string   `json:"path,omitempty"`
	Paths           []string `json:"paths,omitempty"`
	SubPath         string   `json:"subPath,omitempty"`
	ExcludePatterns []string `json:"excludePatterns,omitempty"`
	IncludePatterns []string `json:"includePatterns,omitempty"`
}

// FileTree is a directory read client-side: slash-separated relative paths to contents.
type FileTree struct {
	// Root is the directory as written in local.path, for messages; for a
	// kustomize tree that uses bases outside local.path, the directory
	// holding local.path and those bases.
	Root string `json:"root"`
	// Dir is where local.path lies in Files when Root is above it (a
	// kustomize tree with bases beside it); "" when Files are local.path's.
	Dir     string            `json:"dir,omitempty"`
	SubPath string            `json:"subPath"`
	Files   map[string]string `json:"files"`
}

// KubernetesPatch replaces one JSON pointer in the rendered objects it targets.
type KubernetesPatch struct {
	Target  *PatchTarget  `json:"target,omitempty"`
	Replace *PatchReplace `json:"replace,omitempty"`
}

// PatchTarget selects objects; empty fields match anything.
type PatchTarget struct {
	Group     string `json:"group,omitempty"`
	Version   string `json:"version,omitempty"`
	Kind      string `json:"kind,omitempty"`
	Name      string `json:"name,omitempty"`
	Namespace string `json:"namespace,omitempty"`
}

// PatchReplace sets Path to a (templated) string, or to an int given as a templated string.
type PatchReplace struct {
	Path        string  `json:"path"`
	String      *string `json:"string,omitempty"`
	IntAsString *string `json:"intAsString,omitempty"`
}

// CustomRuntimeValues are a service's values for its custom runtime's parameters.
type CustomRuntimeValues struct {
	ParameterValues               []ParameterValue `json:"parameterValues,omitempty"`
	ClearOnPerReleaseChannelMerge bool             `json:"clearOnPerReleaseChannelMerge,omitempty"`
}

// ParameterDefinition declares a value chosen at push time.
type ParameterDefinition struct {
	Name        string                `json:"name"`
	Description string                `json:"description,omitempty"`
	Required    bool                  `json:"required,omitempty"`
	String      *StringParameter      `json:"string,omitempty"`
	Int         *IntParameter         `json:"int,omitempty"`
	DockerImage *DockerImageParameter `json:"dockerImage,omitempty"`
	Secret      *SecretParameter      `json:"secret,omitempty"`
	Commit      *CommitParameter      `json:"commit,omitempty"`
	Blob        *BlobParameter        `json:"blob,omitempty"`
}

// StringParameter is a free-form string parameter.
type StringParameter struct {
	DefaultValue string `json:"defaultValue,omitempty"`
}

// IntParameter is an integer parameter.
type IntParameter struct {
	DefaultValue *Int64      `json:"defaultValue,omitempty"`
	Changes      Unsupported `json:"changes,omitzero"`
}

// DockerImageParameter is an image tag (or digest) in a fixed repository.
type DockerImageParameter struct {
	DefaultTag        string             `json:"defaultTag,omitempty"`
	ImageRegistryInfo *ImageRegistryInfo `json:"imageRegistryInfo,omitempty"`
	Changes           Unsupported        `json:"changes,omitzero"`
}

// ImageRegistryInfo names the registry and repository of an image.
type ImageRegistryInfo struct {
	ContainerRegistry   string `json:"containerRegistry,omitempty"`
	ContainerRegistryID string `json:"containerRegistryId,omitempty"`
	ImageRepository     string `json:"imageRepository,omitempty"`
}

// SecretParameter is a secret value; it never appears in output.
type SecretParameter struct{}

// CommitParameter is a commit SHA of a repository.
type CommitParameter struct {
	Repository string `json:"repository,omitempty"`
	Branch     string `json:"branch,omitempty"`
}

// BlobParameter is an uploaded blob; templates see its id.
type BlobParameter struct {
	DefaultValue string `json:"defaultValue,omitempty"`
}

// ParameterValue is one value for a parameter (custom runtime values, push values).
type ParameterValue struct {
	Name           string       `json:"name"`
	String         *string      `json:"string,omitempty"`
	Int            *Int64       `json:"int,omitempty"`
	DockerImageTag *string      `json:"dockerImageTag,omitempty"`
	Secret         *SecretValue `json:"secret,omitempty"`
	Commit         *string      `json:"commit,omitempty"`
	Blob           *BlobValue   `json:"blob,omitempty"`
}

// SecretValue is a secret given inline or by reference.
type SecretValue struct {
	RawSecret string     `json:"rawSecret,omitempty"`
	SecretRef *SecretRef `json:"secretRef,omitempty"`
}

// BlobValue is blob content given inline.
type BlobValue struct {
	Inlined      string `json:"inlined,omitempty"`
	InlinedBytes string `json:"inlinedBytes,omitempty"`
}

// AutoRollback controls automatic rollback on failure.
type AutoRollback struct {
	Disabled bool `json:"disabled,omitempty"`
}

// ConvergenceExtension runs a job in one lifecycle phase of every service instance.
type ConvergenceExtension struct {
	Inlined      *DeliveryExtension               `json:"inlined,omitempty"`
	Instance     string                           `json:"instance,omitempty"`
	Ref          *DeliveryExtensionRef            `json:"ref,omitempty"`
	Lifecycle    Lifecycle                        `json:"lifecycle"`
	Dependencies []ConvergenceExtensionDependency `json:"dependencies,omitempty"`
}

// ConvergenceExtensionDependency names an extension that must succeed first.
type ConvergenceExtensionDependency struct {
	Name string `json:"name,omitempty"`
}

// ConvergenceExtensionInstance is a named extension shared by several references.
type ConvergenceExtensionInstance struct {
	Name         string                           `json:"name"`
	Inlined      *DeliveryExtension               `json:"inlined,omitempty"`
	Ref          *DeliveryExtensionRef            `json:"ref,omitempty"`
	Dependencies []ConvergenceExtensionDependency `json:"dependencies,omitempty"`
}

// DeliveryExtensionRef references a global deliveryExtension by name.
type DeliveryExtensionRef struct {
	Name       string           `json:"name"`
	Parameters []ParameterValue `json:"parameters,omitempty"`
}

// DeliveryExtension is a run-to-completion job (a "convergence extension").
type DeliveryExtension struct {
	Name              string                `json:"name,omitempty"`
	TaskConfig        *TaskConfig           `json:"taskConfig,omitempty"`
	KubernetesConfig  *KubernetesConfig     `json:"kubernetesConfig,omitempty"`
	Parameters        []ParameterDefinition `json:"parameters,omitempty"`
	Env               map[string]EnvValue   `json:"env,omitempty"`
	RetryPolicy       *RetryPolicy          `json:"retryPolicy,omitempty"`
	SharedInstanceKey string                `json:"sharedInstanceKey,omitempty"`
}

// Protection is a check that gates or fails rollouts.
type Protection struct {
	Name             string                `json:"name"`
	TaskConfig       *TaskConfig           `json:"taskConfig,omitempty"`
	KubernetesConfig *KubernetesConfig     `json:"kubernetesConfig,omitempty"`
	Builtin          *BuiltinProtection    `json:"builtin,omitempty"`
	PollInterval     Duration              `json:"pollInterval,omitzero"`
	Timeout          Duration              `json:"timeout,omitzero"`
	Parameters       []ParameterDefinition `json:"parameters,omitempty"`
	Env              map[string]EnvValue   `json:"env,omitempty"`
}

// AlertGate is a release channel's alert gate (drover extension): a new
// deployment starts only while no alert matching all Matchers fires (active,
// neither silenced nor inhibited) in the Alertmanager at URL.
type AlertGate struct {
	// Alertmanager is the Alertmanager's base URL (http or https).
	Alertmanager string `json:"alertmanager"`
	// Matchers are Alertmanager label matchers, all of which an alert must
	// match: severity="sev1", team=~"payments|billing", env!="dev".
	Matchers []string `json:"matchers"`
	// PollInterval is how often the Alertmanager is asked while the gate
	// holds (default 30s).
	PollInterval Duration `json:"pollInterval,omitzero"`
}

// BuiltinProtection is one of drover's built-in checks.
type BuiltinProtection struct {
	AllowedTimes   *AllowedTimes   `json:"allowedTimes,omitempty"`
	CommitDenylist *CommitDenylist `json:"commitDenylist,omitempty"`
	AlwaysPassing  *struct{}       `json:"alwaysPassing,omitempty"`
	AlwaysFailing  *AlwaysFailing  `json:"alwaysFailing,omitempty"`
}

// AllowedTimes passes only inside one of its windows.
type AllowedTimes struct {
	Windows []TimeWindow `json:"windows,omitempty"`
}

// TimeWindow is days + hours in a time zone, e.g. {days: mon-thu, hours: 9-17, tz: Europe/Paris}.
type TimeWindow struct {
	Days  string `json:"days,omitempty"`
	Hours string `json:"hours,omitempty"`
	TZ    string `json:"tz,omitempty"`
}

// CommitDenylist blocks listed commits or ranges.
type CommitDenylist struct {
	Repository string             `json:"repository,omitempty"`
	Commits    []CommitDefinition `json:"commits,omitempty"`
}

// CommitDefinition is a single commit or a range (start exclusive, end inclusive).
type CommitDefinition struct {
	Commit string       `json:"commit,omitempty"`
	Range  *CommitRange `json:"range,omitempty"`
}

// CommitRange is (StartCommit, EndCommit].
type CommitRange struct {
	StartCommit string `json:"startCommit,omitempty"`
	EndCommit   string `json:"endCommit,omitempty"`
}

// AlwaysFailing fails with Message; for testing.
type AlwaysFailing struct {
	Message string `json:"message,omitempty"`
}

// ProtectionAttachment attaches a protection to a release channel, instance or convergence.
type ProtectionAttachment struct {
	Name      string                `json:"name,omitempty"`
	Ref       *ProtectionRef        `json:"ref,omitempty"`
	Lifecycle []ProtectionLifecycle `json:"lifecycle,omitempty"`
}

// ProtectionRef references a protection by name with parameter values.
type ProtectionRef struct {
	Name       string           `json:"name"`
	Parameters []ParameterValue `json:"parameters,omitempty"`
}

// ProtectionLifecycle is one phase in which a protection is checked.
type ProtectionLifecycle struct {
	PreApproval    *struct{}            `json:"preApproval,omitempty"`
	PostApproval   *struct{}            `json:"postApproval,omitempty"`
	Deployment     *DeploymentCheck     `json:"deployment,omitempty"`
	PostDeployment *PostDeploymentCheck `json:"postDeployment,omitempty"`
}

// DeploymentCheck runs during the deployment.
type DeploymentCheck struct {
	FailureBehavior FailureBehavior `json:"failureBehavior,omitempty"`
}

// PostDeploymentCheck must pass for CheckDuration after the deployment.
type PostDeploymentCheck struct {
	DelayCheckDuration Duration `json:"delayCheckDuration,omitzero"`
	CheckDuration      Duration `json:"checkDuration,omitzero"`
}

// Runtime is a backend where services run.
type Runtime struct {
	Name   string  `json:"name"`
	Labels []Label `json:"labels,omitempty"`
	// Applications, when set, are the only applications whose release
	// channels may deliver to this runtime (drover extension): runtimes
	// are configured by admins of every application, while an
	// application's admin chooses its channels' runtimes, so this keeps
	// one team's channels off another team's cluster or command host.
	// Unset: any application may, as in Prodvana.
	Applications          []string               `json:"applications,omitempty" drover:"extension"`
	AutoRollback          *AutoRollback          `json:"autoRollback,omitempty"`
	Fake                  *FakeRuntime           `json:"fake,omitempty"`
	Custom                *CustomRuntime         `json:"custom,omitempty" alias:"extension"`
	TerraformRunner       *TerraformRunner       `json:"terraformRunner,omitempty"`
	Kubernetes            *KubernetesRuntime     `json:"kubernetes,omitempty" drover:"extension"`
	PulumiRunner          *PulumiRunner          `json:"pulumiRunner,omitempty"`
	AwsEcs                *AwsEcsRuntime         `json:"awsEcs,omitempty"`
	AwsLambda             *AwsLambdaRuntime      `json:"awsLambda,omitempty" drover:"extension"`
	GoogleCloudRun        *GoogleCloudRunRuntime `json:"googleCloudRun,omitempty"`
	Fly                   Unsupported            `json:"fly,omitzero"`
	Kubecost              Unsupported            `json:"kubecost,omitzero"`
	Datadog               Unsupported            `json:"datadog,omitzero"`
	AlbIngress            Unsupported            `json:"albIngress,omitzero"`
	ArgoRollouts          Unsupported            `json:"argoRollouts,omitzero"`
	GkeIngress            Unsupported            `json:"gkeIngress,omitzero"`
	SelfManagedGkeIngress Unsupported            `json:"selfManagedGkeIngress,omitzero"`
	CloudProvider         Unsupported            `json:"cloudProvider,omitzero"`
}

// AwsEcsRuntime is an Amazon ECS cluster in one region. Credentials are
// the ambient ones of wherever the runtime runs (environment, shared
// config, instance or task role: inheritRoleFromRuntimeEnv, the default),
// or a static access key.
type AwsEcsRuntime struct {
	// ProxyRuntime names the linked runtime whose agent calls the ECS API
	// (with its own environment's credentials): the server then holds
	// none.
	ProxyRuntime              *ProxyRuntime `json:"proxyRuntime,omitempty"`
	Region                    string        `json:"region"`
	EcsCluster                string        `json:"ecsCluster"`
	AccessKey                 *AwsAccessKey `json:"accessKey,omitempty"`
	InheritRoleFromRuntimeEnv *InheritRole  `json:"inheritRoleFromRuntimeEnv,omitempty"`
	// PollInterval is how often a rollout is fetched (default 10s);
	// SteadyStatePollInterval how often once converged (default 1m), to
	// see drift (drover extensions).
	PollInterval            Duration `json:"pollInterval,omitzero" drover:"extension"`
	SteadyStatePollInterval Duration `json:"steadyStatePollInterval,omitzero" drover:"extension"`
}

// AwsAccessKey is a static AWS access key.
type AwsAccessKey struct {
	AwsAccessKeyID     string         `json:"awsAccessKeyId"`
	AwsSecretAccessKey AwsSecretValue `json:"awsSecretAccessKey"`
}

// AwsSecretValue is where a secret comes from: secret, a version of a
// secret in drover's store (drover secrets set), read by the server when
// it builds the runtime, or rawSecret (drover extension), sealed at rest
// with the server's keyring. Neither is ever shown.
type AwsSecretValue struct {
	RawSecret        string      `json:"rawSecret,omitempty" drover:"extension"`
	Secret           *SecretRef  `json:"secret,omitempty"`
	KubernetesSecret Unsupported `json:"kubernetesSecret,omitzero"`
}

// InheritRole uses the credentials of the runtime's environment.
type InheritRole struct {
	K8sServiceAccount Unsupported `json:"k8sServiceAccount,omitzero"`
}

// FakeRuntime emulates a runtime, for trying drover without infrastructure.
type FakeRuntime struct {
	CrashingPrograms Unsupported `json:"crashingPrograms,omitzero"`
	// RolloutDuration is how long a simulated rollout takes (drover extension).
	RolloutDuration Duration `json:"rolloutDuration,omitzero" drover:"extension"`
	// FailVersions makes rollouts of matching versions fail (regular expression; drover extension).
	FailVersions string `json:"failVersions,omitempty" drover:"extension"`
}

// KubernetesRuntime connects drover directly to a cluster (drover extension).
// With neither field set, the in-cluster configuration is used.
type KubernetesRuntime struct {
	Kubeconfig string `json:"kubeconfig,omitempty"`
	Context    string `json:"context,omitempty"`
	// KubeVersion is the cluster's Kubernetes version that Helm charts are
	// rendered for (.Capabilities.KubeVersion, a chart's kubeVersion
	// constraint), as "1.31" or "v1.31.2"; by default the version the
	// cluster reported, else DefaultKubeVersion.
	KubeVersion string `json:"kubeVersion,omitempty"`
	// APIVersions are API versions added to those the cluster reported
	// (else to the built-in Kubernetes ones), for charts that test
	// .Capabilities.APIVersions.Has (as helm template --api-versions):
	// "group/version" or "group/version/Kind".
	APIVersions []string `json:"apiVersions,omitempty"`
}

// DefaultKubeVersion is the Kubernetes version charts are rendered for when
// the runtime does not say (the version of the Kubernetes client drover is
// built with).
const DefaultKubeVersion = "v1.35.0"

// CustomRuntime deploys with user commands (Prodvana's ExtensionClusterConfig).
type CustomRuntime struct {
	ProxyRuntime               *ProxyRuntime         `json:"proxyRuntime,omitempty"`
	Apply                      *ApplyCommand         `json:"apply,omitempty"`
	Fetch                      *FetchCommand         `json:"fetch,omitempty"`
	GetInfo                    *GetInfoCommand       `json:"getInfo,omitempty" alias:"debug"`
	Parameters                 []ParameterDefinition `json:"parameters,omitempty"`
	Type                       CustomRuntimeType     `json:"type,omitempty"`
	RequireApprovalBeforeApply bool                  `json:"requireApprovalBeforeApply,omitempty"`
	ConvergenceGracePeriod     Duration              `json:"convergenceGracePeriod,omitzero"`
	ApplyID                    string                `json:"applyId,omitempty"`
}

// ProxyRuntime is the Kubernetes runtime whose Jobs run the commands.
type ProxyRuntime struct {
	Runtime                string                  `json:"runtime"`
	ContainerOrchestration *ContainerOrchestration `json:"containerOrchestration,omitempty"`
}

// ApplyCommand drives a service instance to its desired state.
type ApplyCommand struct {
	TaskConfig         *TaskConfig         `json:"taskConfig,omitempty"`
	KubernetesConfig   *KubernetesConfig   `json:"kubernetesConfig,omitempty"`
	Timeout            Duration            `json:"timeout,omitzero"`
	Env                map[string]EnvValue `json:"env,omitempty"`
	RetryPolicy        *RetryPolicy        `json:"retryPolicy,omitempty"`
	RetryableExitCodes []int32             `json:"retryableExitCodes,omitempty"`
	MaxConcurrency     int32               `json:"maxConcurrency,omitempty"`
}

// FetchCommand reports the current state (exit code or structured output).
type FetchCommand struct {
	TaskConfig              *TaskConfig         `json:"taskConfig,omitempty"`
	KubernetesConfig        *KubernetesConfig   `json:"kubernetesConfig,omitempty"`
	PollInterval            Duration            `json:"pollInterval,omitzero"`
	SteadyStatePollInterval Duration            `json:"steadyStatePollInterval,omitzero"`
	Timeout                 Duration            `json:"timeout,omitzero"`
	RetryPolicy             *RetryPolicy        `json:"retryPolicy,omitempty"`
	Env                     map[string]EnvValue `json:"env,omitempty"`
	FetchMode               FetchMode           `json:"fetchMode,omitempty"`
}

// GetInfoCommand produces display-only information.
type GetInfoCommand struct {
	TaskConfig                     *TaskConfig         `json:"taskConfig,omitempty"`
	KubernetesConfig               *KubernetesConfig   `json:"kubernetesConfig,omitempty"`
	PollInterval                   Duration            `json:"pollInterval,omitzero"`
	RetryPolicy                    *RetryPolicy        `json:"retryPolicy,omitempty"`
	Env                            map[string]EnvValue `json:"env,omitempty"`
	TestOnlyDoNotRequirePvnWrapper bool                `json:"testOnlyDoNotRequirePvnWrapper,omitempty"`
}

// RetryPolicy is exponential backoff from BaseInterval to MaxInterval.
type RetryPolicy struct {
	BaseInterval Duration `json:"baseInterval,omitzero"`
	MaxInterval  Duration `json:"maxInterval,omitzero"`
	MaxAttempts  int32    `json:"maxAttempts,omitempty"`
}

// TerraformRunner runs terraform plan/apply for services on this runtime.
type TerraformRunner struct {
	ProxyRuntime               *ProxyRuntime       `json:"proxyRuntime,omitempty"`
	Env                        map[string]EnvValue `json:"env,omitempty"`
	PreRun                     []RunnerCommand     `json:"preRun,omitempty"`
	PollInterval               Duration            `json:"pollInterval,omitzero"`
	SteadyStatePollInterval    Duration            `json:"steadyStatePollInterval,omitzero"`
	RequireApprovalBeforeApply bool                `json:"requireApprovalBeforeApply,omitempty"`
	ConvergenceGracePeriod     Duration            `json:"convergenceGracePeriod,omitzero"`
	FetchRetryPolicy           *RetryPolicy        `json:"fetchRetryPolicy,omitempty"`
	ApplyRetryPolicy           *RetryPolicy        `json:"applyRetryPolicy,omitempty"`
	DisableDriftDetection      bool                `json:"disableDriftDetection,omitempty"`
	Volumes                    Unsupported         `json:"volumes,omitzero"`
	TaskResources              Unsupported         `json:"taskResources,omitzero"`
	// ServiceAccount is the Kubernetes service account the runner's commands
	// run as once they run as Jobs of a proxyRuntime; until then drover runs
	// them on its own host, and the compile notes say the account is unused.
	ServiceAccount string `json:"serviceAccount,omitempty"`
}

// RunnerCommand is a shell command run before terraform.
type RunnerCommand struct {
	Cmd string `json:"cmd"`
}

// TaskConfig describes a run-to-completion program.
type TaskConfig struct {
	Program     *Program     `json:"program,omitempty"`
	TTL         Duration     `json:"ttl,omitzero"`
	RetryConfig *RetryConfig `json:"retryConfig,omitempty"`
	K8s         *TaskK8s     `json:"k8s,omitempty"`
	Volumes     Unsupported  `json:"volumes,omitzero"`
}

// TaskK8s holds Kubernetes specifics of a task.
type TaskK8s struct {
	ServiceAccount string `json:"serviceAccount,omitempty"`
}

// RetryConfig controls retries of a failed task.
type RetryConfig struct {
	MaxRetryDuration         Duration    `json:"maxRetryDuration,omitzero"`
	RetryForever             bool        `json:"retryForever,omitempty"`
	FirstFailureNotification Unsupported `json:"firstFailureNotification,omitzero"`
}

// Program is a command with its image and environment.
type Program struct {
	Name              string              `json:"name,omitempty"`
	Image             string              `json:"image,omitempty"`
	ImageTag          string              `json:"imageTag,omitempty"`
	ImageRegistryInfo *ImageRegistryInfo  `json:"imageRegistryInfo,omitempty"`
	Cmd               []string            `json:"cmd,omitempty"`
	Entrypoint        []string            `json:"entrypoint,omitempty"`
	Env               map[string]EnvValue `json:"env,omitempty"`
	WorkingDirectory  string              `json:"workingDirectory,omitempty"`
	Resources         Unsupported         `json:"resources,omitzero"`
	HealthCheck       Unsupported         `json:"healthCheck,omitzero"`
	Ports             Unsupported         `json:"ports,omitzero"`
	TemplateComplete  Unsupported         `json:"templateComplete,omitzero"`
}

// ServiceMetadata is display-only information about a service.
type ServiceMetadata struct {
	Description      string      `json:"description,omitempty"`
	Links            []Link      `json:"links,omitempty"`
	FollowRepository Unsupported `json:"followRepository,omitzero"`
}

// AWS Lambda is drover's own kind (Prodvana had none): a runtime is one
// account and region, a service one function released by publishing a
// version and moving an alias to it. See docs/lambda.md.

// KindAwsLambda is the AWS Lambda runtime kind, and BackendAwsLambda the
// service backend it runs.
const (
	KindAwsLambda    = "awsLambda"
	BackendAwsLambda = "awsLambda"
)

// AwsLambdaRuntime is AWS Lambda in one region of an account (drover
// extension). Credentials are as for awsEcs: the environment of wherever
// the runtime runs (inheritRoleFromRuntimeEnv, the default), a static
// access key, or an agent's through proxyRuntime.
type AwsLambdaRuntime struct {
	// ProxyRuntime names the linked runtime whose agent calls the Lambda
	// API with its own environment's credentials: the server holds none.
	ProxyRuntime              *ProxyRuntime `json:"proxyRuntime,omitempty"`
	Region                    string        `json:"region"`
	AccessKey                 *AwsAccessKey `json:"accessKey,omitempty"`
	InheritRoleFromRuntimeEnv *InheritRole  `json:"inheritRoleFromRuntimeEnv,omitempty"`
	// PollInterval is how often a function being released is fetched
	// (default 10s); SteadyStatePollInterval how often once converged
	// (default 1m), to see drift.
	PollInterval            Duration `json:"pollInterval,omitzero"`
	SteadyStatePollInterval Duration `json:"steadyStatePollInterval,omitzero"`
}

// AwsLambdaConfig releases a service as an AWS Lambda function (drover
// extension): the function's configuration is the JSON aws lambda
// create-function --cli-input-json takes, without Code (a Go template);
// its code a zip file or a container image. Each release publishes a
// version and moves the alias to it.
type AwsLambdaConfig struct {
	Function *LambdaFunctionSpec `json:"function,omitempty"`
	Code     *LambdaCode         `json:"code,omitempty"`
	// Alias is the alias drover moves to the version it publishes
	// (default "live"); a template.
	Alias string `json:"alias,omitempty"`
	// RoutingConfig weights the alias between the version it moves to
	// and the one it served before, for a canary.
	RoutingConfig *LambdaRoutingConfig `json:"routingConfig,omitempty"`
	// Adopt lets drover take over a function of this name that it does
	// not own (no drover:instance tag).
	Adopt bool `json:"adopt,omitempty"`
}

// LambdaFunctionSpec is the CreateFunction JSON: inlined, or a local
// file.
type LambdaFunctionSpec struct {
	Inlined string       `json:"inlined,omitempty"`
	Local   *LocalConfig `json:"local,omitempty"`
	// File is the file the inlined text was read from, for messages;
	// drover sets it when it reads local.path.
	File string `json:"file,omitempty" drover:"internal"`
}

// LambdaCode is a function's code: a zip file, or a container image's URI
// (a template).
type LambdaCode struct {
	Zip      *LambdaZip `json:"zip,omitempty"`
	ImageURI string     `json:"imageUri,omitempty"`
}

// LambdaZip is a deployment package read client-side from local.path.
type LambdaZip struct {
	Local *LocalConfig `json:"local,omitempty"`
	// Base64 is the zip's content and File its path, set by drover when
	// it reads local.path.
	Base64 string `json:"base64,omitempty" drover:"internal"`
	File   string `json:"file,omitempty" drover:"internal"`
}

// LambdaRoutingConfig weights an alias for a canary.
type LambdaRoutingConfig struct {
	// PreviousVersionPercent (1 to 99) is the share of invocations, in
	// percent, the alias keeps sending to the version it served before the
	// release (Lambda's additionalVersionWeights); the new version gets
	// the rest. 90 sends 10% to the new version.
	PreviousVersionPercent int32 `json:"previousVersionPercent,omitempty"`
}

// lambdaAliasRE is what Lambda accepts as an alias name (templates are
// checked once rendered).
var lambdaAliasRE = regexp.MustCompile(`^(?:[A-Za-z0-9_-]*[A-Za-z_-][A-Za-z0-9_-]*|.*\{\{.*)$`)

func init() {
	RegisterRuntimeKind(RuntimeKind{
		Name: KindAwsLambda, Configured: func(rt *Runtime) bool { return rt.AwsLambda != nil },
		Backends: []string{BackendAwsLambda},
		Proxy:    func(rt *Runtime, _ bool) string { return proxyOf(rt.AwsLambda.ProxyRuntime) },
		Unproxied: func(rt *Runtime) *Runtime {
			cp, l := *rt, *rt.AwsLambda
			l.ProxyRuntime, cp.AwsLambda = nil, &l
			return &cp
		},
		// Lambda answers at once; a minute covers the function's update
		// (lambdaspec.ConvergenceGrace).
		ConvergenceGrace: time.Minute,
		Validate:         validateAwsLambdaRuntime,
		ValidateBackend:  validateAwsLambdaBackend,
		ResolveLocal:     resolveLambdaLocal,
		SecretRefs: func(rt *Runtime) map[string]SecretRef {
			if k := rt.AwsLambda.AccessKey; k != nil {
				return secretRefs("runtime.awsLambda.accessKey.awsSecretAccessKey", k.AwsSecretAccessKey.Secret)
			}
			return nil
		},
	})
}

// resolveLambdaLocal reads the local files of a Lambda service: the
// function's JSON (local.path, one file) becomes inlined text, the
// deployment package (code.zip.local.path) its content in base64.
func resolveLambdaLocal(b *ServiceBackend, path string, files LocalFiles, fail func(field, msg string)) {
	l := b.AwsLambda
	if l == nil {
		return
	}
	p := path + ".awsLambda"
	if f := l.Function; f != nil && f.Local != nil {
		switch lo := f.Local; {
		case f.Inlined != "":
			fail(p+".function.local", "set only one of inlined and local")
		case lo.Path == "" || len(lo.Paths) > 0 || lo.SubPath != "":
			fail(p+".function.local", "a function is local.path: one JSON file")
		default:
			data, file, err := files.ReadFile(lo.Path)
			if err != nil {
				fail(p+".function.local", err.Error())
				break
			}
			f.Inlined, f.File, f.Local = string(data), filepath.ToSlash(file), nil
		}
	}
	if l.Code != nil && l.Code.Zip != nil && l.Code.Zip.Local != nil {
		switch lo := l.Code.Zip.Local; {
		case lo.Path == "" || len(lo.Paths) > 0 || lo.SubPath != "":
			fail(p+".code.zip.local", "a deployment package is local.path: one .zip file")
		default:
			data, file, err := files.ReadFile(lo.Path)
			switch {
			case err != nil:
				fail(p+".code.zip.local", err.Error())
			case len(data) < 4 || string(data[:2]) != "PK":
				fail(p+".code.zip.local", lo.Path+" is not a zip file")
			default:
				z := l.Code.Zip
				z.Base64, z.File, z.Local = base64.StdEncoding.EncodeToString(data), filepath.ToSlash(file), nil
			}
		}
	}
}

// validateAwsLambdaRuntime checks an awsLambda runtime section.
func validateAwsLambdaRuntime(rt *Runtime, add func(field, msg string)) {
	l, p := rt.AwsLambda, "runtime.awsLambda"
	if pr := l.ProxyRuntime; pr != nil && pr.Runtime == "" {
		add(p+".proxyRuntime.runtime", "name the linked runtime whose agent calls the Lambda API (drover runtimes link)")
	}
	switch {
	case l.Region == "":
		add(p+".region", "region is required (like us-east-1)")
	case !awsRegionRE.MatchString(l.Region):
		add(p+".region", fmt.Sprintf("%q is not an AWS region (like us-east-1)", l.Region))
	}
	if k := l.AccessKey; k != nil {
		if l.InheritRoleFromRuntimeEnv != nil {
			add(p, "set only one of accessKey and inheritRoleFromRuntimeEnv")
		}
		if k.AwsAccessKeyID == "" {
			add(p+".accessKey.awsAccessKeyId", "awsAccessKeyId is required")
		}
		switch sk := k.AwsSecretAccessKey; {
		case sk.RawSecret != "" && sk.Secret != nil:
			add(p+".accessKey.awsSecretAccessKey", "set only one of rawSecret and secret")
		case sk.Secret != nil && (sk.Secret.Key == "" || sk.Secret.Version == ""):
			add(p+".accessKey.awsSecretAccessKey.secret", "key and version are required (drover secrets list shows them)")
		case sk.RawSecret == "" && sk.Secret == nil:
			add(p+".accessKey.awsSecretAccessKey", "secret (a stored secret: drover secrets set) or rawSecret is required")
		}
	}
	for _, d := range []struct {
		field string
		v     Duration
	}{{"pollInterval", l.PollInterval}, {"steadyStatePollInterval", l.SteadyStatePollInterval}} {
		if d.v.Duration < 0 || d.v.Duration > 0 && d.v.Duration < MinPollInterval {
			add(p+"."+d.field, fmt.Sprintf("%s is too short: poll intervals must be at least %v (or 0 for the default)", d.v, MinPollInterval))
		}
	}
}

// validateAwsLambdaBackend checks a service's (or a perReleaseChannel
// entry's) awsLambda section; the compiler checks the rendered JSON.
func validateAwsLambdaBackend(b *ServiceBackend, path string, add func(field, msg string)) string {
	l := b.AwsLambda
	if l == nil {
		return ""
	}
	p := path + ".awsLambda"
	if f := l.Function; f != nil {
		switch {
		case f.Inlined != "" && f.Local != nil:
			add(p+".function", "set only one of inlined and local")
		case f.Inlined == "" && f.Local == nil:
			add(p+".function", "set inlined or local (the CreateFunction JSON)")
		}
	} else if path == "service" {
		add(p+".function", "a function is required: the CreateFunction JSON, inlined or local")
	}
	if c := l.Code; c != nil {
		switch {
		case c.Zip != nil && c.ImageURI != "":
			add(p+".code", "set only one of zip and imageUri")
		case c.Zip == nil && c.ImageURI == "":
			add(p+".code", "set zip (local.path of a deployment package) or imageUri")
		case c.Zip != nil && c.Zip.Local == nil && c.Zip.Base64 == "":
			add(p+".code.zip", "set local.path: the deployment package (.zip)")
		}
	} else if path == "service" {
		add(p+".code", "code is required: zip.local.path or imageUri")
	}
	if l.Alias != "" && (len(l.Alias) > 128 || !lambdaAliasRE.MatchString(l.Alias)) {
		add(p+".alias", fmt.Sprintf("%q is not a Lambda alias name (letters, digits, - and _, not only digits)", l.Alias))
	}
	if rc := l.RoutingConfig; rc != nil && (rc.PreviousVersionPercent < 0 || rc.PreviousVersionPercent > 99) {
		add(p+".routingConfig.previousVersionPercent", "a share of invocations in percent, 1 to 99 (90 keeps 90% on the previous version, a canary of 10%); 0 or unset sends all to the new version")
	}
	return "awsLambda"
}

// GoogleCloudRunRuntime is a Google Cloud project and region whose Cloud
// Run services drover releases. Credentials are the service account key of
// serviceAccountJson, else the environment's (Application Default
// Credentials) of wherever the runtime runs.
type GoogleCloudRunRuntime struct {
	// ProxyRuntime names the linked runtime whose agent calls the Cloud
	// Run API (with its own environment's credentials): the server then
	// holds none.
	ProxyRuntime *ProxyRuntime `json:"proxyRuntime,omitempty"`
	Project      string        `json:"project"`
	Region       string        `json:"region"`
	// ServiceAccountJSON is a service account key (its JSON file's
	// content): a version of a secret in drover's store, read by the
	// server when it builds the runtime, or rawSecret (drover extension).
	ServiceAccountJSON *SecretReferenceValue `json:"serviceAccountJson,omitempty"`
	// PollInterval is how often a rollout is read (default 10s);
	// SteadyStatePollInterval how often once converged (default 1m), to
	// see drift (drover extensions).
	PollInterval            Duration `json:"pollInterval,omitzero" drover:"extension"`
	SteadyStatePollInterval Duration `json:"steadyStatePollInterval,omitzero" drover:"extension"`
}

// SecretReferenceValue is Prodvana's reference to a secret value: a
// stored secret's version, or rawSecret (drover extension); it has
// AwsSecretValue's shape.
type SecretReferenceValue = AwsSecretValue

// GoogleCloudRunConfig is a service's Cloud Run backend: one Knative
// Service YAML (as gcloud run services replace takes it), inlined or a
// local file (path, or a directory path and a templated subPath), a Go
// template like every referenced file unless literal.
type GoogleCloudRunConfig struct {
	Inlined string       `json:"inlined,omitempty"`
	Local   *LocalConfig `json:"local,omitempty"`
	Remote  Unsupported  `json:"remote,omitzero"`
	// Literal uses the YAML as it is, not as a Go template (drover
	// extension).
	Literal bool `json:"literal,omitempty" drover:"extension"`
	// Tree holds a local directory referenced with subPath, read
	// client-side in place of local; the compiler resolves the templated
	// subPath in it per release channel.
	Tree *FileTree `json:"tree,omitempty" drover:"internal"`
}

// KindGoogleCloudRun is the googleCloudRun runtime kind, and
// BackendGoogleCloudRun the service backend it runs.
const (
	KindGoogleCloudRun    = "googleCloudRun"
	BackendGoogleCloudRun = "googleCloudRun"
)

func init() {
	RegisterRuntimeKind(RuntimeKind{
		Name: KindGoogleCloudRun, Configured: func(rt *Runtime) bool { return rt.GoogleCloudRun != nil },
		Backends: []string{BackendGoogleCloudRun},
		Proxy:    func(rt *Runtime, _ bool) string { return proxyOf(rt.GoogleCloudRun.ProxyRuntime) },
		Unproxied: func(rt *Runtime) *Runtime {
			cp, g := *rt, *rt.GoogleCloudRun
			g.ProxyRuntime, cp.GoogleCloudRun = nil, &g
			return &cp
		},
		// As cloudrunspec.ConvergenceGrace, which this package does not import.
		ConvergenceGrace: 5 * time.Minute,
		validate:         (*validator).googleCloudRunRuntime,
		ValidateBackend:  validateGoogleCloudRunBackend,
		ResolveLocal:     resolveCloudRunLocal,
		SecretRefs: func(rt *Runtime) map[string]SecretRef {
			if sa := rt.GoogleCloudRun.ServiceAccountJSON; sa != nil {
				return secretRefs("runtime.googleCloudRun.serviceAccountJson", sa.Secret)
			}
			return nil
		},
	})
}

// resolveCloudRunLocal reads a Cloud Run service's local Knative
// Service YAML as a kubernetesConfig's files are read: a file (or
// several) becomes inlined text that remembers where each line came from,
// a directory with subPath a file tree.
func resolveCloudRunLocal(b *ServiceBackend, path string, files LocalFiles, fail func(field, msg string)) {
	g := b.GoogleCloudRun
	if g == nil || g.Local == nil || g.Inlined != "" {
		return // nothing to read, or refused by validateGoogleCloudRunBackend
	}
	text, tree, err := files.ReadManifests(g.Local)
	if err != nil {
		fail(path+".googleCloudRun.local", err.Error())
		return
	}
	g.Inlined, g.Tree, g.Local = text, tree, nil
}

// googleCloudRunRuntime checks a googleCloudRun runtime section.
func (v *validator) googleCloudRunRuntime(src *Source, rt *Runtime) {
	g := rt.GoogleCloudRun
	p := "runtime.googleCloudRun"
	v.proxy(src, p+".proxyRuntime", g.ProxyRuntime)
	if g.Project == "" {
		v.add(src, p+".project", "project is required: the Google Cloud project ID")
	} else if !gcpProjectRE.MatchString(g.Project) {
		v.add(src, p+".project", "%q is not a Google Cloud project ID (6 to 30 lowercase letters, digits and -)", g.Project)
	}
	if g.Region == "" {
		v.add(src, p+".region", "region is required (like us-central1)")
	} else if !gcpRegionRE.MatchString(g.Region) {
		v.add(src, p+".region", "%q is not a Google Cloud region (like us-central1)", g.Region)
	}
	if sa := g.ServiceAccountJSON; sa != nil {
		switch {
		case sa.RawSecret != "" && sa.Secret != nil:
			v.add(src, p+".serviceAccountJson", "set only one of rawSecret and secret")
		case sa.Secret != nil && (sa.Secret.Key == "" || sa.Secret.Version == ""):
			v.add(src, p+".serviceAccountJson.secret", "key and version are required (drover secrets list shows them)")
		case sa.RawSecret == "" && sa.Secret == nil:
			v.add(src, p+".serviceAccountJson", "secret (a stored secret: drover secrets set) or rawSecret is required; leave serviceAccountJson out to use the environment's credentials")
		}
	}
	v.interval(src, p+".pollInterval", g.PollInterval)
	v.interval(src, p+".steadyStatePollInterval", g.SteadyStatePollInterval)
}

var (
	gcpProjectRE = regexp.MustCompile(`^[a-z][-a-z0-9]{4,28}[a-z0-9]$`)
	gcpRegionRE  = regexp.MustCompile(`^[a-z]+-[a-z]+[0-9]+$`)
)

// validateGoogleCloudRunBackend checks a service's googleCloudRun section:
// a Knative Service, inlined or local; the fields of a Kubernetes config
// it does not take are refused by name.
func validateGoogleCloudRunBackend(b *ServiceBackend, path string, add func(field, msg string)) string {
	g := b.GoogleCloudRun
	if g == nil {
		return ""
	}
	p := path + ".googleCloudRun"
	if g.Inlined != "" && g.Local != nil {
		add(p, "set only one of inlined and local")
	}
	if g.Inlined == "" && g.Local == nil && g.Tree == nil && path == "service" {
		add(p, "a Knative Service is required: inlined or local")
	}
	return BackendGoogleCloudRun
}

// PulumiRunner runs pulumi preview (fetch) and pulumi up (apply) for the
// services on this runtime, each a Pulumi program and stack. It has the
// terraformRunner's shape, as in Prodvana, and its fields mean the same
// (docs/pulumi.md).
type PulumiRunner = TerraformRunner

// PulumiConfig is Prodvana's pulumi backend: the program's directory and
// the stack, as a pulumiRunner service passes them in
// customRuntime.parameterValues. Image is the image the commands run in
// as Kubernetes Jobs; PulumiCommandPrefix goes before every pulumi command
// ([poetry, run]). PvnWrapperPath and ShellPath name Prodvana's wrapper and
// shell in that image: accepted, and not used by drover, which runs pulumi
// itself.
type PulumiConfig struct {
	Image               string   `json:"image,omitempty"`
	Path                string   `json:"path,omitempty"`
	Stack               string   `json:"stack,omitempty"`
	PvnWrapperPath      string   `json:"pvnWrapperPath,omitempty"`
	ShellPath           string   `json:"shellPath,omitempty"`
	PulumiCommandPrefix []string `json:"pulumiCommandPrefix,omitempty"`
}

// KindPulumiRunner is the pulumiRunner runtime kind, and BackendPulumi the
// pulumi service backend it runs beside customRuntime.
const (
	KindPulumiRunner = "pulumiRunner"
	BackendPulumi    = "pulumi"
)

func init() {
	RegisterRuntimeKind(RuntimeKind{
		Name: KindPulumiRunner, Configured: func(rt *Runtime) bool { return rt.PulumiRunner != nil },
		Backends: []string{BackendCustomRuntime, BackendPulumi}, RunsCommands: true, Plans: true,
		Proxy: func(rt *Runtime, _ bool) string { return proxyOf(rt.PulumiRunner.ProxyRuntime) },
		Unproxied: func(rt *Runtime) *Runtime {
			cp, p := *rt, *rt.PulumiRunner
			p.ProxyRuntime, cp.PulumiRunner = nil, &p
			return &cp
		},
		validate:        (*validator).pulumiRuntime,
		ValidateBackend: validatePulumiBackend,
	})
}

// pulumiRuntime checks a pulumiRunner section.
func (v *validator) pulumiRuntime(src *Source, rt *Runtime) {
	const p = "runtime.pulumiRunner"
	t := rt.PulumiRunner
	v.proxy(src, p+".proxyRuntime", t.ProxyRuntime)
	v.env(src, p+".env", t.Env)
	v.interval(src, p+".pollInterval", t.PollInterval)
	v.interval(src, p+".steadyStatePollInterval", t.SteadyStatePollInterval)
	v.retryPolicy(src, p+".fetchRetryPolicy", t.FetchRetryPolicy)
	v.retryPolicy(src, p+".applyRetryPolicy", t.ApplyRetryPolicy)
	for i, c := range t.PreRun {
		if strings.TrimSpace(c.Cmd) == "" {
			v.add(src, fmt.Sprintf("%s.preRun[%d].cmd", p, i), "cmd is required: a shell command run before pulumi")
		}
	}
}

// validatePulumiBackend checks a service's (or a perReleaseChannel
// entry's) pulumi section.
func validatePulumiBackend(b *ServiceBackend, path string, add func(field, msg string)) string {
	pc := b.Pulumi
	if pc == nil {
		return ""
	}
	p := path + ".pulumi"
	if pc.Path == "" && path == "service" {
		add(p+".path", "path is required: the directory of the Pulumi program (its Pulumi.yaml)")
	}
	for i, w := range pc.PulumiCommandPrefix {
		if strings.TrimSpace(w) == "" {
			add(fmt.Sprintf("%s.pulumiCommandPrefix[%d]", p, i), "an empty word: give the command and its arguments, like [poetry, run]")
		}
	}
	return "pulumi"
}
