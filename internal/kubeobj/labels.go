package kubeobj

// Labels and annotations drover puts on the Kubernetes objects it applies
// and creates: the objects of a service instance, the namespaces it
// created, its inventories, and the Jobs that run custom runtime and
// Terraform runner commands. Every package that writes or selects on one
// (the Kubernetes runtime, kubejob, the custom runtime and the Terraform
// runner) uses these, so a selector always matches what was written.
const (
	// LabelApplication, LabelService and LabelReleaseChannel name the
	// service instance an object belongs to.
	LabelApplication    = "app.drover.dev/application"
	LabelService        = "app.drover.dev/service"
	LabelReleaseChannel = "app.drover.dev/release-channel"
	// LabelManaged marks the namespaces drover created (value "true").
	LabelManaged = "app.drover.dev/managed"
	// LabelInventory marks inventory ConfigMaps (value "true").
	LabelInventory = "app.drover.dev/inventory"
	// LabelRuntime and LabelCommand name the runtime and the command
	// (fetch, apply, plan, ...) a Job runs.
	LabelRuntime = "app.drover.dev/runtime"
	LabelCommand = "app.drover.dev/command"

	// AnnotationVersion is the service version an object belongs to.
	AnnotationVersion = "app.drover.dev/version"
	// AnnotationDesiredState is the desired state an object was applied from.
	AnnotationDesiredState = "app.drover.dev/desired-state"
	// AnnotationAppliedHash is the hash of the object as drover applied it.
	AnnotationAppliedHash = "app.drover.dev/applied-hash"
	// AnnotationInstance is the service instance (application/service/
	// release channel) of an inventory.
	AnnotationInstance = "app.drover.dev/instance"
)
