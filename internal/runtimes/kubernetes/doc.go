// Package kubernetes implements the Kubernetes runtime (`runtime: {name,
// kubernetes: {kubeconfig, context}}`, or a runtime with no type: in-cluster
// configuration). drover talks to the apiserver directly with client-go.
//
// # Apply
//
// Every object is applied with server-side apply, field manager "drover",
// conflicts forced: `kubectl apply --server-side --field-manager=drover
// --force-conflicts` replays an apply exactly. Objects get the labels
// app.drover.dev/{application,service,release-channel} and the annotations
// app.drover.dev/version, app.drover.dev/desired-state and
// app.drover.dev/applied-hash (the hash of the object as applied); the pod
// templates of workloads get the version annotation too, so a new version
// rolls the pods (a Job, whose template is immutable, is recreated).
// Namespaced objects without a namespace go to the release channel's
// namespace (which must exist; drover never creates nor deletes it) or to a
// managed namespace drover-<application>-<release channel> (truncated with a
// hash beyond 63 characters) that drover creates. Namespaces and CRDs are
// applied first. Changes are reported with the ChangeSet vocabulary: created
// (the apiserver answered 201), unchanged (the resourceVersion did not move:
// a no-op apply writes nothing), configured, deleted (pruned), skipped.
//
// # Inventory and prune
//
// What an apply applied is recorded in the instance's inventory, the
// ConfigMap drover-inventory.<application>.<service>.<release channel> in
// its namespace: each object's group, version, kind, resource, namespace,
// name, applied hash and the hash of the fields drover's manager owns after
// the apply. New objects are added to it before they are created, so an
// interrupted apply still knows what to prune; objects of the previous apply
// missing from the new target are deleted. The inventory is read once per
// process and then kept in memory.
//
// # Fetch, watch and drift
//
// Fetch never polls: one shared informer per resource type (a single watch
// per GVR for the whole cluster, selecting the objects that carry the service
// label) is started when an instance first uses the type, and Fetch reads its
// cache. Health comes from kstatus (a Job must complete). An object has
// drifted when it is missing or being deleted, when its applied-hash differs
// from the inventory's, or when the fields drover's manager owns changed:
// another manager writing a field drover set (kubectl set image, kubectl
// scale, kubectl edit) takes ownership of it, which changes drover's
// managedFields entry. Watch reports every informer event as a notification
// of the object's instance, debounced, so drift and rollout progress are seen
// within moments.
package kubernetes
