// Package kubejob runs one command as a Kubernetes Job and returns its
// outcome: the exit code of the Job's container, its output, and why it
// failed when it did not exit by itself. The custom runtime and the
// Terraform runner run their commands this way in the cluster of their
// proxy runtime (Connect, ProxyNamespace, Labels).
//
// # A run
//
// Run creates a Job (from an image and argv, or from a Job manifest) with
// backoffLimit 0, restartPolicy Never, activeDeadlineSeconds from the
// timeout, ttlSecondsAfterFinished as a backstop, and
// terminationMessagePolicy FallbackToLogsOnError. It then watches the Job
// and its pods (list and watch, never polling) until the Job's main
// container (its first one) terminated, the Job failed, the timeout passed,
// or the context ended. The exit code is the main container's
// state.terminated.exitCode; the output is the container's log (GET
// pods/log; the end is kept, up to Spec.MaxOutput bytes), or its
// termination message when the log is empty or cannot be read. A pod still
// unscheduled, or waiting with ImagePullBackOff, ErrImagePull,
// CreateContainerConfigError and the like, when Spec.PendingGrace has
// passed since the Job was created, fails the run with that reason; so does
// a Job without a pod by then (the Job's FailedCreate event says why).
// A pod merely creating its containers (pulling a large image) is not
// stuck: only the timeout bounds it.
//
// Run then deletes the Job with propagation Background (its pods go too),
// on every path: after the outcome is read, on timeout, and when the
// context ends (with a fresh context of its own). Only a drover that stops
// before it can delete leaves a Job behind; activeDeadlineSeconds ends it,
// and ttlSecondsAfterFinished removes it an hour later.
//
// # Namespaces
//
// The Job runs in Spec.Namespace. With Spec.CreateNamespace, a missing
// namespace is created, labelled app.drover.dev/managed=true as the
// Kubernetes runtime labels the namespaces it creates, and Run waits for
// its default ServiceAccount; otherwise a missing namespace is an error
// naming it. Run never deletes a namespace.
//
// # Permissions
//
// The client needs, in the namespace: jobs (create, get, list, watch,
// delete), pods (list, watch), pods/log (get), events (list) and, with
// CreateNamespace, serviceaccounts (list, watch), with SecretEnv, secrets
// (create, patch, delete); namespaces (get, and create with
// CreateNamespace) at cluster scope.
package kubejob
