// Package terraform implements the terraformRunner runtime: each service
// instance is a Terraform root module that drover plans (fetch) and applies,
// as Prodvana's pvn-wrapper terraform runner does, but on the server's
// machine with a local terraform (or OpenTofu) binary, driven through
// github.com/hashicorp/terraform-exec. The copy of the module, the cache,
// the polls, the watchers and the recorded runs are package iacrun's,
// shared with the pulumiRunner (package pulumi).
//
// # Binary
//
// $DROVER_TERRAFORM, else terraform on PATH, else tofu on PATH. New fails with
// ErrNoBinary when none is found.
//
// # Working directory and state
//
// Each instance has a persistent working directory
//
//	<DataDir>/terraform/<runtime>/<application>/<service>/<release channel>/
//	    module/           copy of the module; terraform runs here
//	    module/terraform.tfstate   the state (local backend, default path)
//	    module/.terraform/         what terraform init installed
//	    plan.tfplan       the last plan (terraform plan -out)
//	    init.stamp        what the last successful init was for
//	    applied-version   the version of the last successful apply
//
// The module is the directory of the service's path parameter: absolute, or
// relative to the server's working directory. It must lie, after symbolic
// links, in one of the host's module roots (Settings.ModuleRoots: drover
// server's and drover agent's --program-root, ModuleRootFlag; by
// default the process's working directory, none when that is /), and
// neither in nor around the data directory: whoever may configure a
// service chooses the path, and must not reach every directory of the
// host. Before every plan it is synced into module/: changed files are
// rewritten and files the module no longer has are deleted, but
// terraform's own files at the top (.terraform/, terraform.tfstate*,
// terraform.tfstate.d/, .terraform.tfstate.lock.info, and
// .terraform.lock.hcl when the module has none) are never copied from the
// source nor deleted from the copy. So the state of the default local
// backend is kept in the working directory across syncs and restarts,
// without the -state flag (deprecated since Terraform 1.10); a module that
// configures its own backend keeps using it. Symbolic links in the module
// are followed when they lead into a module root (else the sync fails,
// naming the link); .git and .terraform are not copied, at any depth.
// Files are streamed (memory does not grow with their size); a module of
// more than iacrun.MaxBytes or iacrun.MaxEntries files and directories, or
// holding a FIFO, socket or device, is refused before anything is copied.
// Local module sources outside the module directory ("../modules/x") are
// not copied: reference them by absolute path or keep them inside the
// module.
//
// terraform init -input=false runs when the module's content, the
// extraInitArgs parameter or the binary changed since the last successful
// init (and once more when a plan asks for it). extraInitArgs is split like a
// shell would (quotes and backslashes, no expansion); -upgrade,
// -reconfigure, -force-copy, -backend, -get, -backend-config and -plugin-dir
// become terraform-exec options, other flags go to terraform in
// TF_CLI_ARGS_init. The preRun commands run with sh -c in module/ before
// init, before every plan and apply (through localexec: in their own process
// group, which is killed when the fetch or apply is canceled, and recorded
// with Options.Processes so a server restarted after a crash ends what they
// left running). terraform itself runs through terraform-exec, in a process
// group of its own that is killed on cancel and whose leader dies with the
// server (Pdeathsig); terraform-exec does not expose the process, so that
// group is not recorded and what terraform started (providers, local-exec
// provisioners) can outlive a crash.
//
// # Environment
//
// Commands get PATH, HOME, TMPDIR, LANG, TF_PLUGIN_CACHE_DIR,
// TF_PLUGIN_CACHE_MAY_BREAK_DEPENDENCY_LOCK_FILE, TF_CLI_CONFIG_FILE,
// SSL_CERT_FILE, SSL_CERT_DIR and the proxy variables of the server's
// environment (nothing else of it: the server's credentials are not passed;
// give a module its credentials in env), then the target's env (release
// channel defaults and service env), then the runner's env (plain values and
// raw secrets; secret references are an error), then the identity
// variables PVN_SERVICE, PVN_SERVICE_ID (<app>/<service>), PVN_APPLICATION,
// PVN_APPLICATION_ID, PVN_RELEASE_CHANNEL, PVN_RELEASE_CHANNEL_ID
// (<app>/<rc>), PVN_SERVICE_VERSION, their DROVER_* equivalents and
// DROVER_DESIRED_STATE_ID, and TF_VAR_pvn_service_version (VersionVariable):
// a module receives the service version by declaring
//
//	variable "pvn_service_version" { type = string }
//
// Raw secret values (of the target's and the runner's env) are replaced by
// "(redacted)" in recorded runs, errors and change addresses, also in the
// escaped forms terraform and JSON print (package redact). CHECKPOINT_DISABLE=1 is set
// unless given. Variables terraform-exec manages
// (TF_LOG*, TF_INPUT, TF_IN_AUTOMATION, TF_WORKSPACE, ...) are not passed.
//
// # Fetch
//
// Fetch is terraform plan -input=false -detailed-exitcode -out=plan.tfplan.
// Exit 0: converged at the target version. Exit 2: the version of the last
// successful apply ("" if none) runs, drifted when that is the target
// version (what drover applied changed, or its inputs did), with the plan's
// summary ("Plan: 1 to add, 0 to change, 0 to destroy.") as the message.
// Exit 1: an error with terraform's error message.
//
// The result is cached. The first Fetch of a target plans synchronously; a
// background poll then plans the instance's last target again every
// pollInterval (default 5m) while it is not converged, every
// steadyStatePollInterval (default 1h) once it is (never, with
// disableDriftDetection), and notifies watchers when the state changed.
// Errors are not cached: the next Fetch plans again. An instance nobody
// fetched or applied for three steady intervals (at least an hour) stops
// being polled.
//
// # Apply
//
// Apply applies the saved plan when it was made for the same target (version,
// objects, env), module content and environment, and plans first otherwise;
// a plan without changes is not applied. The changes are read from terraform
// show -json (created, configured, deleted, unchanged per resource address).
// A saved plan is applied at most once. "Saved plan is stale" and "Error
// acquiring the state lock" are retryable errors (the next Apply plans
// again); other failures are errors with terraform's message, retried by
// the engine. After a successful apply the runtime plans again, caches the
// state and notifies watchers.
//
// Every command (preRun, init, plan, show, apply) is reported to
// Options.Runs with its stdout and stderr (the last 64 KiB of each; show's
// JSON output, which holds sensitive values in clear, is not kept).
//
// # Commands as Kubernetes Jobs
//
// A runtime of JobsFactory (a runner whose proxyRuntime is a linked
// cluster, built in that cluster's agent) runs each plan and apply as a
// Job (package kubejob) instead: the image parameter is the container's
// image, path a directory in it, and the container runs /bin/sh -c with the
// script of jobScript (cd path, the preRun commands, terraform init
// -input=false -no-color with extraInitArgs, then terraform plan
// -detailed-exitcode or terraform apply -auto-approve), as the runner's
// serviceAccount, in proxyRuntime.containerOrchestration.k8s.namespace or
// drover-proxy-runtime-<runtime>, with overlayEnv plus TF_IN_AUTOMATION=1
// and CHECKPOINT_DISABLE=1. Each Job starts from the image, so the state
// must live in a remote backend and no plan is saved between a fetch and
// an apply: apply plans again. Caching, polls and the state a plan shows
// are as above; only the version last applied is kept in the data
// directory. The changes of an apply are read from its output (per
// resource "Creation/Modifications/Destruction complete" lines), and the
// Job's log (or its termination message) is recorded as the run's stdout.
package terraform
