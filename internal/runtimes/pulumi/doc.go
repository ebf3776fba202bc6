// Package pulumi implements the pulumiRunner runtime: each service instance
// is a stack of a Pulumi program that drover previews (fetch) and updates
// (apply), as Prodvana's pulumi runner does, on the server's machine with
// a local pulumi CLI. It is the sibling of package terraform and shares its
// machinery (package iacrun): the copy of the source, the cache, the
// polls, the watchers and the recorded runs behave the same.
//
// # Binary
//
// $DROVER_PULUMI_BIN, else pulumi on PATH. New fails with ErrNoBinary when
// none is found. pulumi finds its language hosts and providers as it
// always does: plugins installed in PULUMI_HOME, or binaries on the PATH
// drover passes (ambient plugins).
//
// # The object
//
// The compiler gives each target one object:
//
//	{"kind": "pulumiRunner", "runtime": "R", "path": "programs/web",
//	 "stack": "staging", "image": "", "commandPrefix": ["poetry", "run"],
//	 "config": {"web:replicas": "3"}, "secretConfig": {"dbPassword": {"rawSecret": "…"}},
//	 "pulumiRunner": {…the runtime's config…}}
//
// path is the program directory (absolute, or relative to the server's
// working directory), stack the stack's name (never empty), config the
// stack's plain config values, secretConfig its secret ones (the server
// resolves stored secret references to rawSecret before the runtime sees
// them; one that arrives unresolved is an error). commandPrefix words run
// before pulumi in every pulumi command (["poetry", "run"] runs poetry run
// /path/to/pulumi preview …).
//
// # Working directory and state
//
// Each instance has a persistent working directory
//
//	<DataDir>/pulumi/<runtime>/<application>/<service>/<release channel>/
//	    program/          copy of the program; pulumi runs here
//	    program/Pulumi.<stack>.yaml   the stack's settings and config
//	    plan.json         the update plan of the last preview (--save-plan)
//	    config.stamp      what the stack's config was last set to
//	    applied-version   the version of the last successful up
//
// and the runtime's stacks live, unless PULUMI_BACKEND_URL is given in env
// (the target's or the runner's), in the file backend
//
//	<DataDir>/pulumi/<runtime>/backend/<application>/<service>    (PULUMI_BACKEND_URL=file://…)
//
// one per service, shared by its release channels' stacks (which the
// stack names tell apart). A file backend encrypts secrets
// with the passphrase secrets provider: give PULUMI_CONFIG_PASSPHRASE (or
// PULUMI_CONFIG_PASSPHRASE_FILE) in env, or use a backend with its own
// secrets provider (PULUMI_ACCESS_TOKEN for Pulumi Cloud, also only from
// env).
//
// The program must lie, after symbolic links, in one of the host's program
// roots (Settings.Roots: drover server's and drover agent's
// --program-root, ProgramRootFlag; by default the process's
// working directory, none when that is /), and neither in nor around the
// data directory: whoever may configure a service chooses the path. Before
// every preview it is synced into program/ as terraform's modules are
// (iacrun.Sync: changed files rewritten, files the program no longer has
// deleted, symbolic links followed inside the roots, .git never copied, at
// most iacrun.MaxBytes and iacrun.MaxEntries, special files refused). The
// source's Pulumi.<stack>.yaml files are copied, except the one of the
// instance's stack: that file belongs to the copy (pulumi writes the
// stack's encryption salt and drover its config there), and the source's
// version of it (read under the same checks: inside the roots after
// symbolic links, a regular file, at most 1 MiB) is copied over it only
// when it changed, keeping the copy's secrets provider (secretsprovider,
// encryptedkey, encryptionsalt) where the source sets none, before drover
// sets its config again.
//
// # Stack and config
//
// When the stack, its config, the source's stack file or the environment
// (but the identity variables) changed since the last time (config.stamp,
// which holds the secrets' keys and the names of the secret env, not a
// hash of their values: that is kept in memory, so a restarted server sets
// the secrets once more), drover runs, in program/:
//
//	pulumi stack select --create --stack S --non-interactive
//	pulumi config rm-all --stack S K…         (keys drover set before, now gone)
//	pulumi config set-all --stack S --plaintext K=V …
//	pulumi config set --secret --stack S -- K (one per secret; the value on stdin)
//
// A secret value is piped into pulumi's standard input by a shell
// (printf, a built-in, reads it from the shell's environment): it is on no
// command line, and the stack file holds it only encrypted. The preRun
// commands run with sh -c in program/ before these and before every
// preview and up (through localexec: in their own process group, killed on
// cancel, recorded with Options.Processes). pulumi runs through localexec
// too, so its process group is recorded and ended after a crash.
//
// # Environment
//
// Commands get PATH, HOME, TMPDIR, LANG, SSL_CERT_FILE, SSL_CERT_DIR, the
// proxy variables and PULUMI_HOME of the server's environment (nothing
// else of it: the server's credentials are not passed), then the target's
// env, the runner's env (plain values and raw secrets) and the identity
// variables (PVN_SERVICE, PVN_SERVICE_ID, PVN_APPLICATION,
// PVN_APPLICATION_ID, PVN_RELEASE_CHANNEL, PVN_RELEASE_CHANNEL_ID,
// PVN_SERVICE_VERSION, their DROVER_* equivalents, DROVER_DESIRED_STATE_ID),
// then PULUMI_BACKEND_URL (the default file backend) and
// PULUMI_SKIP_UPDATE_CHECK=true unless given.
// PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION is not set: pulumi may
// download the plugins a program needs (give it in env to forbid that).
// Raw secret values (of the env and of secretConfig) are replaced by
// "(redacted)" in recorded runs (arguments and output), errors, change
// names and outputs (package redact).
//
// # Fetch
//
// Fetch is
//
//	pulumi preview --stack S --refresh --json --non-interactive --save-plan <dir>/plan.json
//
// (not --expect-no-changes: with it pulumi exits before saving the plan;
// the JSON's changeSummary says the same). No change proposed: converged
// at the target version (which is recorded as applied, as terraform's
// runner does). Changes: the version of the last successful up ("" if
// none) runs, drifted when that is the target version (a resource changed
// behind drover's back, which --refresh sees, or the program's inputs
// did), with the summary of the proposed steps as the message ("Preview: 1
// to create, 2 to update, 0 to delete."; the stack itself and providers
// are not counted). A failed preview is an error with pulumi's error
// diagnostics (or the error lines of its stderr), not its whole output.
//
// The result is cached and polled as terraform's: the first Fetch of a
// target previews synchronously; a background poll previews the last
// target again every pollInterval (default 5m) while it is not converged,
// every steadyStatePollInterval (default 1h) once it is (never, with
// disableDriftDetection), and notifies watchers when the state changed.
// Errors are not cached. An instance nobody fetched or applied for three
// steady intervals (at least an hour) stops being polled.
//
// # Apply
//
// Apply is
//
//	pulumi up --yes --stack S --json --non-interactive --skip-preview --refresh --plan <dir>/plan.json
//
// with the plan the last preview saved when it was made for the same
// target (version, object, env), program content and environment, after a
// new preview otherwise; a preview without changes is not applied. An up
// given a plan does only what the plan says (pulumi refuses a step the
// plan lacks: "violates plan"), so what was previewed is what is
// applied. --refresh is
// needed: the plan was made after a refresh, and an up that does not
// refresh sees no drift to heal. A saved plan is used at most once. (In
// v3.274.1 --save-plan and --plan need no PULUMI_EXPERIMENTAL; the plan
// holds secrets encrypted.) The changes are read from up's JSON events:
// per resource, "<type>/<name>" of its URN ("drovertest:index:File/site"),
// created, configured (updated or replaced), deleted or unchanged. "the
// stack is currently locked", "another update is currently in progress"
// and a plan the program no longer matches are retryable errors (the next
// Apply previews again); other failures are errors with pulumi's
// diagnostics, retried by the engine. After a successful up the runtime
// reads the stack's outputs, previews again, caches the state and
// notifies watchers.
//
// # Outputs
//
// Info (runtimes.InfoGetter) returns the stack's outputs, read with pulumi
// stack output --json after every successful up and after the first
// preview that finds the stack converged: one InfoOutput per output, its
// value as JSON (a string as it is). Secret outputs stay "[secret]".
//
// Every command (preRun, stack, config, preview, up, output) is reported
// to Options.Runs with its stdout and stderr (the last 64 KiB of each).
//
// # Commands as Kubernetes Jobs
//
// A runtime of JobsFactory (a runner whose proxyRuntime is a linked
// cluster, built in that cluster's agent) runs each preview and up as a
// Job (package kubejob) instead: the object's image, which must then be
// set, holds pulumi, its plugins and the program, path is a directory in
// it, and the container runs /bin/sh -c with the script of jobScript (cd
// path, the preRun commands, stack select --create, the config with each
// secret piped from a variable that comes from a Secret, then pulumi
// preview --refresh --expect-no-changes or pulumi up --refresh (which
// previews again and applies what that preview finds: no plan survives
// from the fetch's Job), read from
// their text output, as a Job's log may be cut to its end: exit 0 is no
// change, "no changes were expected" is changes, anything else an error
// with pulumi's error lines; the steps come from the per-resource lines
// ("+  drovertest:index:File site created")), as the
// runner's serviceAccount, in proxyRuntime.containerOrchestration.k8s.namespace
// or drover-proxy-runtime-<runtime>, with the environment above except the
// server's own variables and the default backend. Each Job starts from the
// image, so the state must live in a remote backend (PULUMI_BACKEND_URL
// and its credentials in env) and no plan is kept between a fetch and an
// apply: up previews again. Caching, polls and the state a preview shows
// are as above; only the version last applied is kept in the data
// directory. Outputs are not read in this mode (Info is empty).
package pulumi
