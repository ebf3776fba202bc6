// Package iacrun is what drover's infrastructure-as-code runtimes share:
// terraformRunner (package terraform) and pulumiRunner (package pulumi).
// Each runs a command-line tool on a copy of a source directory (a module,
// a program) per service instance, plans to fetch and applies to apply.
//
//   - Sync copies a source directory into an instance's working
//     directory within Limits: the host's roots (ResolveRoots,
//     DefaultRoots, HostLimits; a source outside them, in the data
//     directory or holding it is refused, naming the path parameter and
//     the roots' flag), caps on bytes and entries, no special files, and
//     the names the tool owns at the top of the copy, which are neither
//     copied nor pruned (a local state, the tool's downloads).
//   - Base is a runtime's instances: their working directories under
//     <DataDir>/<tool>/<runtime>/<app>/<service>/<rc>/, the state their
//     last plan showed (cached per target), background polls that plan
//     the last target again (pollInterval while not converged,
//     steadyStatePollInterval once converged, none with
//     disableDriftDetection; an instance nobody asked about for three
//     steady intervals is dropped), watchers notified when a poll or an
//     apply changed a state, the version of the last successful apply
//     (applied-version), and Fetch and Apply on top of the tool's Parse,
//     Refresh and Update. StateOf turns a plan into a state as both
//     runners do: no change is converged at the target version; changes
//     show the version last applied, drifted when that is the target's.
//   - Exec and PreRun run commands through localexec (own process group,
//     killed on cancel, recorded with the ProcessRecorder) and record them
//     as runs, redacted (Outcome.Redact), keeping the last OutputLimit
//     bytes of each stream; RunJob runs one as a Kubernetes Job instead
//     (package kubejob), its raw secrets from a Secret.
//   - Overlay, PassEnv and RawSecrets make a command's environment: the
//     allow-listed part of drover's own (HostEnv plus the tool's extras),
//     the target's env, the runner's env and the identity variables
//     PVN_* and DROVER_*.
//
// A tool's package keeps what is its own: the commands and their flags,
// how their output reads, the working directory's extra files, and its
// documentation of all of it.
package iacrun
