// Package custom implements custom runtimes (`runtime: {custom: {...}}`, alias
// `extension`): services deployed by user commands, with Prodvana's
// contract, run by drover on its own host (the local runner, New and
// Factory) or as Kubernetes Jobs (JobsFactory; see "Commands as Jobs").
//
// # Commands
//
// The commands come from the target: its one object is the compiled custom
// runtime object, whose `custom` holds the runtime's config with every
// template already rendered with the service's parameter values. Each
// command is a `taskConfig.program`, run without a shell: argv is
// entrypoint + cmd (Docker semantics; without entrypoint cmd[0] is the
// program, absolute, relative to the working directory when it has a slash,
// else looked up in the command's PATH). `image`, `imageTag` and
// `imageRegistryInfo` are ignored: the program runs on drover's host, not in
// a container. `kubernetesConfig` commands (Kubernetes Jobs on a proxy
// runtime) need Jobs: the local runner refuses them with a permanent error.
//
// The working directory is program.workingDirectory (a relative one is
// under the instance's directory), by default the instance's own directory
// <DataDir>/custom/<runtime>/<application>/<service>/<release channel>
// (under a temporary directory, removed on Close, without DataDir).
//
// The environment of a command is built, each step overriding the ones
// before, from: PATH, HOME, TMPDIR and LANG of drover's own environment
// (nothing else of it is inherited, so drover's credentials never leak into
// commands); the target's env (release channel and service env); the
// program's env; the command's env (apply.env, fetch.env, getInfo.env); and
// PVN_SERVICE, PVN_SERVICE_ID (<application>/<service>), PVN_APPLICATION,
// PVN_APPLICATION_ID, PVN_RELEASE_CHANNEL, PVN_RELEASE_CHANNEL_ID
// (<application>/<release channel>), PVN_SERVICE_VERSION,
// PVN_DESIRED_STATE_ID, each also with a DROVER_ prefix. Env values are
// `value` or `rawSecret`; `secret` and `kubernetesSecret` are not supported
// yet. A raw secret runtime parameter appears in the rendered commands as
// "(secret:NAME)", replaced by its value in argv and in the program's and
// command's env values when the command runs. Environment values are never logged or recorded, and every
// raw secret (of the target's env, the program's and command's env, and the
// secret parameters) is replaced by "(redacted)" in recorded argv, output,
// errors and getInfo outputs, as it is and in its escaped forms (package
// redact), and in every string decoded from a structured fetch or getInfo.
//
// # Tiers
//
//   - Apply only (no fetch): Apply runs the apply command once per
//     (version, rendered applyId); Fetch reports the last successful apply:
//     converged when it was of the target's version and applyId.
//   - EXIT_CODE fetch: exit 0 means converged at the target version; exit 2
//     means not at the desired state: drifted when the target's version was
//     the last one applied successfully, otherwise the version last applied
//     ("" if none) so the engine applies; any other exit is a Fetch error,
//     on which the engine takes no action.
//   - STRUCTURED_OUTPUT fetch: stdout is Prodvana's FetchOutput JSON (see
//     structuredState); a non-zero exit is a Fetch error.
//
// The last successful apply of every instance (its version, applyId,
// desired state and time) is returned as the apply's memo
// (runtimes.ApplyResult.Memo), which the engine keeps with the instance in
// its store and hands back in every target (runtimes.Target.Memo): so a
// restart, another server sharing the store, or an agent started with an
// empty data directory neither re-applies (apply only) nor forgets what
// runs. It is also written to
// <DataDir>/custom/<runtime>/<application>/<service>/<release channel>.applied.json
// (atomically), which is read for an instance whose target carries no memo
// (applied by a drover that kept the record only there); of the two, the
// newer counts.
//
// # Apply
//
// Apply is synchronous: it returns when the command exits. It does nothing
// (reports unchanged) when the instance is known to be converged at the
// target: the last fetch says so, or, without fetch, the last successful
// apply had the target's version and applyId. Exit 0 is success; an exit
// code listed in apply.retryableExitCodes is a plain error saying it is
// retryable; anything else is an error quoting the exit code and the end
// of stderr. apply.timeout defaults to 30m. apply.maxConcurrency limits the
// applies of this runtime running at once (Apply waits for a slot; see
// ApplyWaiting).
//
// # Fetch scheduling
//
// Fetch returns the instance's cached fetch result. The first Fetch of an
// instance, or of a new target (version, applyId, commands or env), and the
// first Fetch after an apply run the fetch command synchronously. A poller
// per instance then re-runs it every fetch.pollInterval (30s) while not
// converged and every fetch.steadyStatePollInterval (5m) once converged,
// backing off after errors (fetch.retryPolicy, from pollInterval), and
// notifies watchers when the result changes: drift made out of band is
// seen within the steady-state interval. A successful apply wakes the
// poller at once and notifies watchers. Pollers do not fetch while an apply
// of their instance runs, and stop when the instance has not been fetched
// for 3 steady-state intervals (or 3 getInfo intervals if longer) and on
// Close. fetch.timeout defaults to 5m.
//
// getInfo, when configured, runs per instance from its first Fetch or
// Apply, then every getInfo.pollInterval (5m), retrying errors with
// getInfo.retryPolicy (30s to 10m). Info returns its latest outputs; an
// error is shown as an output named "error" after the last good outputs.
//
// Every command run is given to Options.Runs.
//
// convergenceGracePeriod is the engine's: it reads it from the compiled
// object. requireApprovalBeforeApply is the engine's too.
//
// # Commands as Jobs
//
// A runtime of JobsFactory runs each command as a Kubernetes Job (package
// kubejob) in the cluster of a kubeconfig, as Prodvana runs them on the
// proxy runtime: in proxyRuntime.containerOrchestration.k8s.namespace,
// which must exist, or else in drover-proxy-runtime-<runtime name>, which
// drover creates when missing. Everything above holds, except:
//
//   - A taskConfig's Job has one container: program.image, or else
//     imageRegistryInfo with imageTag (a tag or a sha256 digest); the
//     entrypoint is the container's command and cmd its args (both empty:
//     the image's own); workingDirectory is the container's, as given;
//     taskConfig.k8s.serviceAccount is the pods' service account. A
//     program without an image is a permanent error.
//   - A kubernetesConfig (inlined or local.path, with its patches) must hold
//     exactly one object, a batch/v1 Job running one pod; anything else is
//     a permanent error. It is used as given except for what package
//     kubejob sets (name, namespace, labels, backoffLimit 0, restartPolicy
//     Never, ...). Its main container is its first. Secret parameter
//     markers are replaced in all its strings.
//   - The environment is set in every container, overriding the Job's own
//     variables of the same names; drover's own PATH, HOME, TMPDIR and LANG
//     are not part of it. A kubernetesSecret env value becomes a reference
//     to the Secret's key in the Job's namespace.
//   - A command's output is its container's log (one stream: stdout and
//     stderr mixed, as Prodvana's), or its termination message when the log
//     is empty or cannot be read; a structured fetch's JSON and getInfo's
//     outputs are read from it. Exit codes mean what they mean above. A Job
//     that fails without its container exiting (a pod that cannot be
//     scheduled or pull its image within 2 minutes, an eviction) is a
//     failure quoting Kubernetes' reason; so is an exit with a reason other
//     than Completed or Error (OOMKilled).
//   - Runs are recorded with the image and argv as their command, the output
//     as stdout and the failure reason as stderr. The Jobs carry the labels
//     app.drover.dev/{runtime,command,application,service,release-channel}
//     and the annotation app.drover.dev/version; each is deleted once its
//     outcome is read (Options.Processes is not used).
package custom

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/drover-dev/drover/internal/atomicfile"
	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/runtimes"
)

var (
	_ runtimes.Runtime    = (*Runtime)(nil)
	_ runtimes.Watcher    = (*Runtime)(nil)
	_ runtimes.InfoGetter = (*Runtime)(nil)
	_ runtimes.Closer     = (*Runtime)(nil)
)

// Runtime runs a custom runtime's commands on this host or as Jobs. It is
// safe for concurrent use.
type Runtime struct {
	name    string
	exec    executor
	now     func() time.Time
	log     *slog.Logger
	runs    runtimes.RunRecorder
	procs   runtimes.ProcessRecorder
	baseDir string // instance directories and state live under it
	tmpDir  string // baseDir when it is temporary (removed on Close)
	persist bool   // baseDir is under Options.DataDir

	ctx    context.Context // ends on Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // pollers and applies

	mu      sync.Mutex
	insts   map[runtimes.InstanceKey]*instance
	closed  bool
	sem     chan struct{} // apply slots when maxConcurrency > 0
	semCap  int32
	waiting map[runtimes.InstanceKey]int

	notifier  runtimes.Notifier
	closeOnce sync.Once
}

// instance is what the runtime knows of one service instance.
type instance struct {
	key runtimes.InstanceKey

	mu       sync.Mutex
	target   runtimes.Target // the latest target fetched or applied
	spec     *spec
	lastUsed time.Time // last Fetch or Apply (Options.Now)

	// The cached fetch result, valid when have is set, for spec identity.
	have      bool
	identity  string
	state     runtimes.State
	err       error
	fetchedAt time.Time // monotonic
	failures  int       // consecutive fetch errors
	// gen changes when an apply starts or ends: a fetch that overlapped
	// one is not cached.
	gen      uint64
	applying int

	applied       *appliedRecord
	appliedLoaded bool

	fetchSem     chan struct{} // one fetch at a time
	fetchWake    chan struct{} // fetch now
	fetchResched chan struct{} // the cached result changed: reschedule
	infoWake     chan struct{}
	fetchPolling bool
	infoPolling  bool

	info         []runtimes.InfoOutput
	goodInfo     []runtimes.InfoOutput
	infoFailures int
}

// Factory builds a custom runtime; it is the runtimehost.Factory for kind "custom".
func Factory(cfg *config.Runtime, opts runtimes.Options) (runtimes.Runtime, error) {
	r, err := New(cfg, opts)
	if err != nil {
		return nil, err
	}
	return r, nil
}

// New builds the custom runtime cfg describes. The commands themselves
// come from each target (rendered per service instance).
func New(cfg *config.Runtime, opts runtimes.Options) (*Runtime, error) {
	if cfg == nil {
		return nil, errors.New("custom runtime: no config")
	}
	if cfg.Custom == nil {
		return nil, fmt.Errorf("runtime %s is not a custom runtime", cfg.Name)
	}
	if cfg.Name == "" {
		return nil, errors.New("custom runtime: no name")
	}
	r := &Runtime{
		name:    cfg.Name,
		now:     opts.Now,
		log:     opts.Log,
		runs:    opts.Runs,
		procs:   opts.Processes,
		insts:   map[runtimes.InstanceKey]*instance{},
		waiting: map[runtimes.InstanceKey]int{},
	}
	r.exec = localExecutor{r}
	if r.now == nil {
		r.now = time.Now
	}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	if opts.DataDir != "" {
		r.baseDir = filepath.Join(opts.DataDir, "custom", safeName(cfg.Name))
		r.persist = true
		if err := os.MkdirAll(r.baseDir, 0o750); err != nil {
			return nil, fmt.Errorf("custom runtime %s: %w", cfg.Name, err)
		}
	} else {
		dir, err := os.MkdirTemp("", "drover-custom-"+safeName(cfg.Name)+"-")
		if err != nil {
			return nil, fmt.Errorf("custom runtime %s: %w", cfg.Name, err)
		}
		r.baseDir, r.tmpDir = dir, dir
	}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	return r, nil
}

// Name is the runtime's name.
func (r *Runtime) Name() string { return r.name }

// Close stops the pollers and any command running, and waits for them.
func (r *Runtime) Close() error {
	r.closeOnce.Do(func() {
		r.mu.Lock()
		r.closed = true
		r.mu.Unlock()
		r.cancel()
		r.wg.Wait()
		if r.tmpDir != "" {
			_ = os.RemoveAll(r.tmpDir)
		}
	})
	return nil
}

// touch records that t was fetched or applied, starting the instance's
// pollers if needed. It returns the instance and a done func to call when
// the caller's work ends (Close waits for it).
func (r *Runtime) touch(t runtimes.Target, sp *spec) (*instance, func(), error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, nil, fmt.Errorf("custom runtime %s is closed", r.name)
	}
	in := r.insts[t.InstanceKey]
	if in == nil {
		in = &instance{
			key:          t.InstanceKey,
			fetchSem:     make(chan struct{}, 1),
			fetchWake:    make(chan struct{}, 1),
			fetchResched: make(chan struct{}, 1),
			infoWake:     make(chan struct{}, 1),
		}
		r.insts[t.InstanceKey] = in
	}
	in.mu.Lock()
	in.target, in.spec, in.lastUsed = t, sp, r.now()
	if sp.custom.Fetch != nil && !in.fetchPolling {
		in.fetchPolling = true
		r.wg.Add(1)
		go r.fetchLoop(in)
	}
	if sp.custom.GetInfo != nil && !in.infoPolling {
		in.infoPolling = true
		r.wg.Add(1)
		go r.infoLoop(in)
	}
	in.mu.Unlock()
	r.wg.Add(1)
	return in, r.wg.Done, nil
}

// Fetch returns the state of the instance target describes: the cached
// result of its fetch command, run now if there is none for this target.
func (r *Runtime) Fetch(ctx context.Context, t runtimes.Target) (runtimes.State, error) {
	if err := ctx.Err(); err != nil {
		return runtimes.State{}, err
	}
	sp, err := r.parse(&t)
	if err != nil {
		return runtimes.State{}, err
	}
	in, done, err := r.touch(t, sp)
	if err != nil {
		return runtimes.State{}, err
	}
	defer done()
	if sp.custom.Fetch == nil {
		in.mu.Lock()
		defer in.mu.Unlock()
		return r.applyOnlyState(in, &t, sp), nil
	}
	in.mu.Lock()
	if in.have && in.identity == sp.identity {
		st, err := in.state, in.err
		in.mu.Unlock()
		return st, err
	}
	in.mu.Unlock()
	ctx, cancel := r.bound(ctx)
	defer cancel()
	return r.fetchOnce(ctx, in, t, sp, false)
}

// bound returns ctx, also canceled when the runtime closes.
func (r *Runtime) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(r.ctx, cancel)
	return ctx, func() {
		stop()
		cancel()
	}
}

// applyOnlyState is the state of an instance without fetch: what its last
// successful apply was.
func (r *Runtime) applyOnlyState(in *instance, t *runtimes.Target, sp *spec) runtimes.State {
	a := r.appliedFor(in, t)
	if a == nil {
		return runtimes.State{}
	}
	obj := runtimes.Object{ObjectType: "custom", Name: r.name, Version: a.Version, Status: runtimes.ObjectSucceeded}
	st := runtimes.State{Version: a.Version, Objects: []runtimes.Object{obj}}
	switch {
	case a.Version != t.Version:
		st.Message = fmt.Sprintf("%s was applied last; %s not yet", a.Version, t.Version)
	case a.ApplyID != sp.applyID:
		st.Drifted = true
		st.Message = fmt.Sprintf("applyId changed from %q to %q: apply needed", a.ApplyID, sp.applyID)
	default:
		st.Converged = true
		st.Message = fmt.Sprintf("%s applied at %s", a.Version, a.AppliedAt.UTC().Format(time.RFC3339))
	}
	return st
}

// fetchOnce runs the fetch command (one at a time per instance) and caches
// its result. A synchronous fetch returns the result of one that ran
// meanwhile for the same target; a background one (the poller's) runs
// unless one finished after it was asked for, and notifies watchers when
// the result changed.
func (r *Runtime) fetchOnce(ctx context.Context, in *instance, t runtimes.Target, sp *spec, background bool) (runtimes.State, error) {
	asked := time.Now()
	select {
	case in.fetchSem <- struct{}{}:
	case <-ctx.Done():
		return runtimes.State{}, ctx.Err()
	}
	defer func() { <-in.fetchSem }()
	in.mu.Lock()
	if in.have && in.identity == sp.identity && (!background || in.fetchedAt.After(asked)) {
		st, err := in.state, in.err
		in.mu.Unlock()
		return st, err
	}
	gen := in.gen
	applied := r.appliedFor(in, &t)
	in.mu.Unlock()

	st, canceled, err := r.runFetch(ctx, &t, sp, applied)
	if canceled {
		return st, err // the caller left or the runtime closed: keep no result
	}
	in.mu.Lock()
	prevHave, prevState, prevErr := in.have, in.state, in.err
	stored := in.gen == gen
	if stored {
		in.have, in.identity, in.state, in.err, in.fetchedAt = true, sp.identity, st, err, time.Now()
		if err != nil {
			in.failures++
		} else {
			in.failures = 0
		}
	}
	in.mu.Unlock()
	if stored && background && (!prevHave || !sameResult(prevState, prevErr, st, err)) {
		r.notify(in.key)
	}
	if stored && !background {
		wake(in.fetchResched)
	}
	return st, err
}

func sameResult(a runtimes.State, aerr error, b runtimes.State, berr error) bool {
	if (aerr == nil) != (berr == nil) || aerr != nil && aerr.Error() != berr.Error() {
		return false
	}
	return reflect.DeepEqual(a, b)
}

// runFetch runs the fetch command and interprets it; canceled says it was
// stopped by ctx rather than finished.
func (r *Runtime) runFetch(ctx context.Context, t *runtimes.Target, sp *spec, applied *appliedRecord) (st runtimes.State, canceled bool, err error) {
	f := sp.custom.Fetch
	c, err := r.build(kindFetch, t, f.TaskConfig, f.KubernetesConfig, f.Env, f.Timeout.Or(DefaultFetchTimeout))
	if err != nil {
		return runtimes.State{}, false, err
	}
	res := r.run(ctx, t.InstanceKey, t.Version, c)
	if res.Canceled {
		return runtimes.State{}, true, fmt.Errorf("custom runtime %s: %s: %s", r.name, t.InstanceKey, r.describeFailure(c, res))
	}
	fail := func(format string, args ...any) (runtimes.State, bool, error) {
		return runtimes.State{}, false, fmt.Errorf("custom runtime %s: %s", r.name, fmt.Sprintf(format, args...))
	}
	if res.Err != nil {
		return fail("%s%s", r.describeFailure(c, res), excerpt(res))
	}
	if sp.structured() {
		if res.ExitCode != 0 {
			return fail("fetch command returned exit code %d%s", res.ExitCode, excerpt(res))
		}
		if res.StdoutTruncated {
			return fail("fetch printed more than %d bytes on stdout", maxOutput)
		}
		out, perr := parseStructured([]byte(res.stdout), c.rd)
		if perr != nil {
			return fail("fetch: %v", perr)
		}
		return redactState(structuredState(out, t.Version), t.Version, c.rd), false, nil
	}
	obj := runtimes.Object{ObjectType: "custom", Name: r.name}
	switch res.ExitCode {
	case 0:
		obj.Version, obj.Status = t.Version, runtimes.ObjectSucceeded
		return runtimes.State{Version: t.Version, Converged: true, Objects: []runtimes.Object{obj}}, false, nil
	case 2:
		obj.Status = runtimes.ObjectPending
		if applied != nil && applied.Version == t.Version {
			obj.Version = t.Version
			obj.Message = "fetch reports drift (exit 2)" + excerpt(res)
			return runtimes.State{Version: t.Version, Drifted: true, Message: obj.Message, Objects: []runtimes.Object{obj}}, false, nil
		}
		st := runtimes.State{Message: "fetch reports changes to apply (exit 2)" + excerpt(res)}
		if applied != nil {
			st.Version, obj.Version = applied.Version, applied.Version
		}
		obj.Message = st.Message
		st.Objects = []runtimes.Object{obj}
		return st, false, nil
	}
	return fail("fetch command returned exit code %d (0 = converged, 2 = changes to apply)%s", res.ExitCode, excerpt(res))
}

// Apply runs the apply command for target and returns when it finished.
func (r *Runtime) Apply(ctx context.Context, t runtimes.Target) (runtimes.ApplyResult, error) {
	if err := ctx.Err(); err != nil {
		return runtimes.ApplyResult{}, err
	}
	if t.Version == "" {
		return runtimes.ApplyResult{}, r.permanent(&t, "the target has no version")
	}
	sp, err := r.parse(&t)
	if err != nil {
		return runtimes.ApplyResult{}, err
	}
	ac := sp.custom.Apply
	if ac == nil {
		return runtimes.ApplyResult{}, r.permanent(&t, "the runtime has no apply command")
	}
	in, done, err := r.touch(t, sp)
	if err != nil {
		return runtimes.ApplyResult{}, err
	}
	defer done()
	c, err := r.build(kindApply, &t, ac.TaskConfig, ac.KubernetesConfig, ac.Env, ac.Timeout.Or(DefaultApplyTimeout))
	if err != nil {
		return runtimes.ApplyResult{}, err
	}
	objName := "custom/" + r.name

	in.mu.Lock()
	applied := r.appliedFor(in, &t)
	unchanged := false
	if sp.custom.Fetch == nil {
		unchanged = applied != nil && applied.Version == t.Version && applied.ApplyID == sp.applyID
	} else {
		unchanged = in.have && in.identity == sp.identity && in.err == nil &&
			in.state.Version == t.Version && in.state.Converged && !in.state.Drifted && !in.state.Failed
	}
	if unchanged {
		in.mu.Unlock()
		return runtimes.ApplyResult{Changes: []runtimes.Change{{Object: objName, Action: runtimes.ActionUnchanged}}}, nil
	}
	prev := ""
	switch {
	case in.have && in.err == nil && in.state.Version != "":
		prev = in.state.Version
	case applied != nil:
		prev = applied.Version
	}
	action := runtimes.ActionCreated
	if prev != "" {
		action = runtimes.ActionConfigured
	}
	in.applying++
	in.gen++
	in.mu.Unlock()
	succeeded := false
	defer func() {
		in.mu.Lock()
		in.applying--
		in.gen++
		in.have = false // what runs may have changed: fetch again
		in.mu.Unlock()
		wake(in.fetchWake)
		if succeeded {
			wake(in.infoWake)
			r.notify(in.key)
		}
	}()

	actx, cancel := r.bound(ctx)
	defer cancel()
	release, err := r.acquire(actx, in.key, ac.MaxConcurrency)
	if err != nil {
		return runtimes.ApplyResult{}, fmt.Errorf("custom runtime %s: %s: %w", r.name, in.key, err)
	}
	res := r.run(actx, in.key, t.Version, c)
	release()

	prefix := fmt.Sprintf("custom runtime %s: ", r.name)
	switch {
	case res.Canceled:
		if r.ctx.Err() != nil {
			return runtimes.ApplyResult{}, errors.New(prefix + "apply stopped: the runtime was closed")
		}
		return runtimes.ApplyResult{}, fmt.Errorf("%sapply stopped: %w", prefix, context.Cause(ctx))
	case res.Err != nil:
		return runtimes.ApplyResult{}, errors.New(prefix + r.describeFailure(c, res) + excerpt(res))
	case res.ExitCode != 0 && slices.ContainsFunc(ac.RetryableExitCodes, func(c int32) bool { return int(c) == res.ExitCode }):
		return runtimes.ApplyResult{}, fmt.Errorf("%sapply exited with retryable exit code %d; it will be retried%s", prefix, res.ExitCode, excerpt(res))
	case res.ExitCode != 0:
		return runtimes.ApplyResult{}, fmt.Errorf("%sapply failed with exit code %d%s", prefix, res.ExitCode, excerpt(res))
	}
	rec := &appliedRecord{Version: t.Version, ApplyID: sp.applyID, DesiredStateID: t.DesiredStateID, AppliedAt: r.now()}
	memo, err := json.Marshal(rec)
	if err != nil {
		return runtimes.ApplyResult{}, fmt.Errorf("%sencode the record of the apply: %w", prefix, err)
	}
	if err := r.saveApplied(in.key, rec); err != nil {
		// The apply happened, and the store keeps its memo.
		r.log.Warn("custom runtime: saving the last apply failed", "runtime", r.name, "instance", in.key.String(), "error", err)
	}
	in.mu.Lock()
	in.applied, in.appliedLoaded = rec, true
	in.mu.Unlock()
	succeeded = true
	return runtimes.ApplyResult{Changes: []runtimes.Change{{Object: objName, Action: action}}, Memo: memo}, nil
}

// acquire waits for an apply slot when maxConcurrency is set.
func (r *Runtime) acquire(ctx context.Context, key runtimes.InstanceKey, n int32) (func(), error) {
	if n <= 0 {
		return func() {}, nil
	}
	r.mu.Lock()
	if r.sem == nil || r.semCap != n {
		// A new limit applies to applies starting from now; running ones
		// release their slot in the old semaphore.
		r.sem, r.semCap = make(chan struct{}, n), n
	}
	sem := r.sem
	r.waiting[key]++
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		if r.waiting[key]--; r.waiting[key] <= 0 {
			delete(r.waiting, key)
		}
		r.mu.Unlock()
	}()
	select {
	case sem <- struct{}{}:
		return func() { <-sem }, nil
	default:
	}
	r.log.Info("custom runtime: apply waiting for a slot", "runtime", r.name, "instance", key.String(), "max_concurrency", n)
	select {
	case sem <- struct{}{}:
		return func() { <-sem }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("apply stopped while waiting for one of the %d apply slots (maxConcurrency): %w", n, context.Cause(ctx))
	}
}

// ApplyWaiting reports whether an apply of key waits for a slot
// (apply.maxConcurrency).
func (r *Runtime) ApplyWaiting(key runtimes.InstanceKey) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.waiting[key] > 0
}

// Info returns the latest getInfo outputs of the instance (nil if none yet).
func (r *Runtime) Info(ctx context.Context, key runtimes.InstanceKey) ([]runtimes.InfoOutput, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r.mu.Lock()
	in := r.insts[key]
	r.mu.Unlock()
	if in == nil {
		return nil, nil
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	return slices.Clone(in.info), nil
}

func wake(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// idleLocked reports whether nobody fetched or applied the instance for
// long enough to stop polling it.
func (r *Runtime) idleLocked(in *instance) bool {
	return r.now().Sub(in.lastUsed) > in.spec.idleAfter()
}

// fetchLoop re-runs the instance's fetch command on schedule.
func (r *Runtime) fetchLoop(in *instance) {
	defer r.wg.Done()
	timer := time.NewTimer(r.nextFetch(in))
	defer timer.Stop()
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-in.fetchResched:
			timer.Reset(r.nextFetch(in))
			continue
		case <-timer.C:
		case <-in.fetchWake:
		}
		in.mu.Lock()
		if r.idleLocked(in) || in.spec.custom.Fetch == nil {
			in.fetchPolling = false
			in.have = false // nobody refreshes it any more
			in.mu.Unlock()
			return
		}
		t, sp, busy := in.target, in.spec, in.applying > 0
		in.mu.Unlock()
		if busy {
			// The apply wakes the poller when it ends.
			timer.Reset(sp.pollInterval())
			continue
		}
		_, _ = r.fetchOnce(r.ctx, in, t, sp, true)
		timer.Reset(r.nextFetch(in))
	}
}

// nextFetch is the time until the instance's next scheduled fetch.
func (r *Runtime) nextFetch(in *instance) time.Duration {
	in.mu.Lock()
	defer in.mu.Unlock()
	if !in.have {
		return in.spec.pollInterval()
	}
	d := in.spec.fetchDelay(in.state, in.err, in.failures, in.target.Version)
	return max(0, time.Until(in.fetchedAt.Add(d)))
}

// infoLoop runs the instance's getInfo command now and then on schedule.
func (r *Runtime) infoLoop(in *instance) {
	defer r.wg.Done()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-timer.C:
		case <-in.infoWake:
		}
		in.mu.Lock()
		if r.idleLocked(in) || in.spec.custom.GetInfo == nil {
			in.infoPolling = false
			in.mu.Unlock()
			return
		}
		t, sp := in.target, in.spec
		in.mu.Unlock()
		outs, canceled, err := r.runInfo(r.ctx, &t, sp)
		if canceled {
			return
		}
		in.mu.Lock()
		before := in.info
		if err != nil {
			in.infoFailures++
			in.info = append(slices.Clone(in.goodInfo), runtimes.InfoOutput{Name: "error", Text: err.Error()})
		} else {
			in.infoFailures = 0
			in.info, in.goodInfo = outs, outs
		}
		changed := !slices.Equal(before, in.info)
		delay := sp.infoDelay(in.infoFailures)
		in.mu.Unlock()
		if changed {
			r.notify(in.key) // the engine records what status shows
		}
		timer.Reset(delay)
	}
}

func (r *Runtime) runInfo(ctx context.Context, t *runtimes.Target, sp *spec) (outs []runtimes.InfoOutput, canceled bool, err error) {
	g := sp.custom.GetInfo
	c, err := r.build(kindGetInfo, t, g.TaskConfig, g.KubernetesConfig, g.Env, DefaultFetchTimeout)
	if err != nil {
		return nil, false, err
	}
	res := r.run(ctx, t.InstanceKey, t.Version, c)
	switch {
	case res.Canceled:
		return nil, true, nil
	case res.Err != nil:
		return nil, false, errors.New(r.describeFailure(c, res) + excerpt(res))
	case res.ExitCode != 0:
		return nil, false, fmt.Errorf("getInfo failed with exit code %d%s", res.ExitCode, excerpt(res))
	case res.StdoutTruncated:
		return nil, false, fmt.Errorf("getInfo printed more than %d bytes on stdout", maxOutput)
	}
	outs, err = parseInfo([]byte(res.stdout), c.rd)
	if err != nil {
		return nil, false, fmt.Errorf("getInfo: %w", err)
	}
	return outs, false, nil
}

// appliedRecord is an instance's last successful apply.
type appliedRecord struct {
	Version        string    `json:"version"`
	ApplyID        string    `json:"applyId,omitempty"`
	DesiredStateID string    `json:"desiredStateId,omitempty"`
	AppliedAt      time.Time `json:"appliedAt"`
}

// appliedFor is the instance's last successful apply as far as anyone
// knows: the record the store keeps (t.Memo, which every server and agent
// is given) or the one this process has (appliedLocked), whichever is
// newer. The store's is the truth across servers; this process's own
// covers an apply whose memo the store did not keep (the instance was
// retargeted meanwhile) and instances applied by a drover that kept the
// record only in the data directory.
func (r *Runtime) appliedFor(in *instance, t *runtimes.Target) *appliedRecord {
	local := r.appliedLocked(in)
	if len(t.Memo) == 0 {
		return local
	}
	var rec appliedRecord
	if err := json.Unmarshal(t.Memo, &rec); err != nil || rec.Version == "" {
		r.log.Warn("custom runtime: the stored record of the last apply is not one; it is ignored", "runtime", r.name, "instance", in.key.String(), "error", err)
		return local
	}
	if local != nil && local.AppliedAt.After(rec.AppliedAt) {
		return local
	}
	return &rec
}

// appliedLocked is the last successful apply this process knows of: its
// own, or the one in the instance's state file, read the first time.
func (r *Runtime) appliedLocked(in *instance) *appliedRecord {
	if in.appliedLoaded {
		return in.applied
	}
	in.appliedLoaded = true
	path := r.statePath(in.key)
	if path == "" {
		return nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			r.log.Warn("custom runtime: reading the last apply failed; it will be applied again", "runtime", r.name, "instance", in.key.String(), "error", err)
		}
		return nil
	}
	var rec appliedRecord
	if err := json.Unmarshal(b, &rec); err != nil || rec.Version == "" {
		r.log.Warn("custom runtime: invalid last apply file; it will be applied again", "runtime", r.name, "path", path, "error", err)
		return nil
	}
	in.applied = &rec
	return in.applied
}

func (r *Runtime) saveApplied(key runtimes.InstanceKey, rec *appliedRecord) error {
	path := r.statePath(key)
	if path == "" {
		return nil
	}
	b, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return err
	}
	return atomicfile.Write(path, append(b, '\n'), 0o600)
}
