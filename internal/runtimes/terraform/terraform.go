package terraform

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/terraform-exec/tfexec"
	tfjson "github.com/hashicorp/terraform-json"

	"github.com/drover-dev/drover/internal/atomicfile"
	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/runtimes"
	"github.com/drover-dev/drover/internal/runtimes/localexec"
	"github.com/drover-dev/drover/internal/runtimes/redact"
)

// Defaults of the runner's poll intervals (Prodvana's terraformRunner).
const (
	DefaultPollInterval            = 5 * time.Minute
	DefaultSteadyStatePollInterval = time.Hour
)

// BinaryEnv names the environment variable that selects the terraform (or
// OpenTofu) binary.
const BinaryEnv = "DROVER_TERRAFORM"

// ErrNoBinary is returned by New when no terraform binary is found.
var ErrNoBinary = errors.New("terraform not found: install terraform or OpenTofu, or set " + BinaryEnv)

// Kinds of the runs reported to Options.Runs.
const (
	kindPreRun = "preRun"
	kindInit   = "init"
	kindPlan   = "plan"
	kindShow   = "show"
	kindApply  = "apply"
)

// Files in an instance's working directory.
const (
	moduleDirName   = "module"          // the copy of the module; terraform runs here
	planFileName    = "plan.tfplan"     // the last plan
	initStampName   = "init.stamp"      // what the last successful init was for
	appliedFileName = "applied-version" // the version of the last successful apply
)

var (
	_ runtimes.Runtime = (*Runtime)(nil)
	_ runtimes.Watcher = (*Runtime)(nil)
	_ runtimes.Closer  = (*Runtime)(nil)
)

// Runtime runs terraform for the services of one terraformRunner runtime.
// It is safe for concurrent use; commands of one instance run one at a time.
type Runtime struct {
	name    string
	bin     string
	runner  *config.TerraformRunner // the runtime's own config, used when a target carries none
	jobs    *jobRunner              // runs the commands as Kubernetes Jobs; nil: on this host
	modules moduleLimits            // where modules on this host may be, and how much is copied
	root    string                  // <DataDir>/terraform/<runtime>
	tempDir string                  // root's temporary parent when Options.DataDir is "", removed by Close
	now     func() time.Time
	runs    runtimes.RunRecorder
	procs   runtimes.ProcessRecorder
	log     *slog.Logger

	ctx    context.Context // background polls; canceled by Close
	cancel context.CancelFunc

	mu     sync.Mutex
	insts  map[runtimes.InstanceKey]*instance
	closed bool
	wg     sync.WaitGroup // running polls

	watchers  runtimes.Notifier
	done      chan struct{} // closed by Close
	closeOnce sync.Once
}

// instance is one service instance's working directory and cached state.
type instance struct {
	key runtimes.InstanceKey
	dir string // <root>/<app>/<service>/<rc>

	// cmd serializes the instance's commands; the fields below it are
	// guarded by it.
	cmd   sync.Mutex
	tf    *tfexec.Terraform
	saved *savedPlan // what plan.tfplan holds, nil when unknown
	// rd hides the raw secrets the commands get from their recorded output
	// and errors.
	rd *redact.Redactor

	// Guarded by Runtime.mu.
	target   runtimes.Target // the target of the last fetch or apply, re-planned by polls
	spec     *spec
	cached   bool
	cacheKey string
	state    runtimes.State
	applying int
	timer    *time.Timer
	pollGen  uint64
	lastUsed time.Time
}

// savedPlan describes plan.tfplan.
type savedPlan struct {
	key     string // planKey of what it was planned for
	changed bool   // terraform plan exited 2
	summary string
}

// spec is a target's compiled terraformRunner object.
type spec struct {
	Kind            string                  `json:"kind"`
	Runtime         string                  `json:"runtime"`
	ParameterValues map[string]any          `json:"parameterValues"`
	TerraformRunner *config.TerraformRunner `json:"terraformRunner"`

	path     string // absolute module path; as given (a path in the image) for Jobs
	image    string // the image parameter: what runs the commands as Jobs
	rawInit  string
	initArgs initArgs
	runner   *config.TerraformRunner
}

// Settings are the host's rules for the modules of the terraform runtimes
// it builds: the flags of drover server and drover agent.
type Settings struct {
	// ModuleRoots are the directories a module directory (the service's
	// path parameter), and every file copied from it after symbolic links,
	// must lie in. None: no module directory on this host is allowed.
	ModuleRoots []string
	// MaxModuleBytes and MaxModuleEntries cap what is copied of one module
	// (0: MaxModuleBytes and MaxModuleEntries).
	MaxModuleBytes   int64
	MaxModuleEntries int
}

// DefaultModuleRoots are the module roots when none is configured: the
// working directory of the process, so that a relative path parameter
// works as documented; none when that is the file system's root (a
// service manager's default), which would allow every directory.
func DefaultModuleRoots() ([]string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return nil, fmt.Errorf("terraform module roots: %w", err)
	}
	roots, err := ResolveModuleRoots([]string{wd})
	if err != nil {
		return nil, err
	}
	if filepath.Dir(roots[0]) == roots[0] {
		return nil, nil
	}
	return roots, nil
}

// ResolveModuleRoots makes dirs (the values of ModuleRootFlag) absolute
// with their symbolic links resolved, and checks that each is a directory.
func ResolveModuleRoots(dirs []string) ([]string, error) {
	out := make([]string, 0, len(dirs))
	for _, d := range dirs {
		abs, err := filepath.Abs(d)
		if err == nil {
			abs, err = filepath.EvalSymlinks(abs)
		}
		var info os.FileInfo
		if err == nil {
			info, err = os.Stat(abs)
		}
		if err == nil && !info.IsDir() {
			err = errors.New("not a directory")
		}
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", ModuleRootFlag, d, err)
		}
		out = append(out, abs)
	}
	return out, nil
}

// Factory builds a terraform runtime; it is the runtimehost.Factory for kind
// "terraformRunner", with the default module roots (DefaultModuleRoots).
func Factory(cfg *config.Runtime, opts runtimes.Options) (runtimes.Runtime, error) {
	r, err := New(cfg, opts)
	if err != nil {
		return nil, err
	}
	return r, nil
}

// FactoryWith is Factory with the host's settings s (drover server and
// drover agent make s from their flags).
func FactoryWith(s Settings) func(cfg *config.Runtime, opts runtimes.Options) (runtimes.Runtime, error) {
	return func(cfg *config.Runtime, opts runtimes.Options) (runtimes.Runtime, error) {
		r, err := NewWith(cfg, opts, s)
		if err != nil {
			return nil, err
		}
		return r, nil
	}
}

// New builds the runtime cfg describes (cfg.TerraformRunner), with the
// default module roots (DefaultModuleRoots). The binary is
// $DROVER_TERRAFORM, else terraform on PATH, else tofu on PATH; New fails
// with ErrNoBinary when there is none. Working directories live under
// <opts.DataDir>/terraform/<runtime>/ (a temporary directory, removed by
// Close, when opts.DataDir is "").
func New(cfg *config.Runtime, opts runtimes.Options) (*Runtime, error) {
	roots, err := DefaultModuleRoots()
	if err != nil {
		return nil, fmt.Errorf("runtime %s: %w", cfg.Name, err)
	}
	return NewWith(cfg, opts, Settings{ModuleRoots: roots})
}

// NewWith is New with the host's settings s.
func NewWith(cfg *config.Runtime, opts runtimes.Options, s Settings) (*Runtime, error) {
	if err := checkConfig(cfg); err != nil {
		return nil, err
	}
	bin, err := findBinary()
	if err != nil {
		return nil, fmt.Errorf("runtime %s: %w", cfg.Name, err)
	}
	r, err := build(cfg, opts, bin)
	if err != nil {
		return nil, err
	}
	if err := r.setModules(s, opts.DataDir); err != nil {
		_ = r.Close()
		return nil, fmt.Errorf("runtime %s: %w", cfg.Name, err)
	}
	return r, nil
}

// setModules sets where the runtime's modules may be (in s's roots, never
// in the data directory) and how much of one is copied.
func (r *Runtime) setModules(s Settings, dataDir string) error {
	roots, err := ResolveModuleRoots(s.ModuleRoots)
	if err != nil {
		return err
	}
	r.modules = moduleLimits{roots: roots, maxBytes: s.MaxModuleBytes, maxEntries: s.MaxModuleEntries}
	if r.modules.maxBytes <= 0 {
		r.modules.maxBytes = MaxModuleBytes
	}
	if r.modules.maxEntries <= 0 {
		r.modules.maxEntries = MaxModuleEntries
	}
	for _, d := range []string{dataDir, r.tempDir} {
		if d == "" {
			continue
		}
		resolved, err := filepath.Abs(d)
		if err == nil {
			resolved, err = filepath.EvalSymlinks(resolved)
		}
		if err != nil {
			return fmt.Errorf("data directory: %w", err)
		}
		r.modules.exclude = append(r.modules.exclude, resolved)
	}
	return nil
}

// build builds the runtime of cfg (a terraformRunner) running bin.
func build(cfg *config.Runtime, opts runtimes.Options, bin string) (*Runtime, error) {
	name, err := pathElem(cfg.Name)
	if err != nil {
		return nil, fmt.Errorf("runtime %s: %w", cfg.Name, err)
	}
	r := &Runtime{
		name:   cfg.Name,
		bin:    bin,
		runner: cfg.TerraformRunner,
		now:    opts.Now,
		runs:   opts.Runs,
		procs:  opts.Processes,
		log:    opts.Log,
		insts:  map[runtimes.InstanceKey]*instance{},
		done:   make(chan struct{}),
	}
	if r.now == nil {
		r.now = time.Now
	}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	base := opts.DataDir
	if base == "" {
		if base, err = os.MkdirTemp("", "drover-terraform-"); err != nil {
			return nil, fmt.Errorf("runtime %s: %w", cfg.Name, err)
		}
		r.tempDir = base
	}
	// terraform runs in module/ and is given paths in the working
	// directory (plan.tfplan): they must not be relative.
	if base, err = filepath.Abs(base); err != nil {
		return nil, fmt.Errorf("runtime %s: %w", cfg.Name, err)
	}
	r.root = filepath.Join(base, "terraform", name)
	if err := os.MkdirAll(r.root, 0o750); err != nil {
		return nil, fmt.Errorf("runtime %s: %w", cfg.Name, err)
	}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	return r, nil
}

// findBinary finds the terraform binary to run.
func findBinary() (string, error) {
	if p := os.Getenv(BinaryEnv); p != "" {
		path, err := exec.LookPath(p)
		if err != nil {
			return "", fmt.Errorf("%s=%s: %w", BinaryEnv, p, err)
		}
		return filepath.Abs(path)
	}
	for _, name := range []string{"terraform", "tofu"} {
		if path, err := exec.LookPath(name); err == nil {
			return filepath.Abs(path)
		}
	}
	return "", ErrNoBinary
}

// Binary is the terraform (or OpenTofu) binary the runtime runs.
func (r *Runtime) Binary() string { return r.bin }

var safeElem = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// pathElem checks that name can be one directory name.
func pathElem(name string) (string, error) {
	if !safeElem.MatchString(name) || name == "." || name == ".." {
		return "", fmt.Errorf("name %q cannot be used as a directory name", name)
	}
	return name, nil
}

// parseSpec reads the terraformRunner object of t.
func (r *Runtime) parseSpec(t runtimes.Target) (*spec, error) {
	if len(t.Objects) != 1 {
		return nil, fmt.Errorf("target has %d objects, want one terraformRunner object", len(t.Objects))
	}
	sp := &spec{}
	if err := json.Unmarshal(t.Objects[0], sp); err != nil {
		return nil, fmt.Errorf("decode terraformRunner object: %w", err)
	}
	if sp.Kind != "terraformRunner" {
		return nil, fmt.Errorf("object kind %q, want terraformRunner", sp.Kind)
	}
	str := func(name string) (string, error) {
		switch v := sp.ParameterValues[name].(type) {
		case nil:
			return "", nil
		case string:
			return v, nil
		default:
			return "", fmt.Errorf("parameter %s: %T, want a string", name, v)
		}
	}
	p, err := str("path")
	if err != nil {
		return nil, err
	}
	if p == "" {
		return nil, errors.New("parameter path (the module directory) is empty")
	}
	if sp.image, err = str("image"); err != nil {
		return nil, err
	}
	switch {
	case r.jobs != nil && sp.image == "":
		return nil, errors.New("parameter image is empty: the runner's commands run as Kubernetes Jobs, in an image holding terraform and the module")
	case r.jobs != nil:
		// A path in the image, relative to its working directory.
		sp.path = p
	default:
		// A relative path is relative to the server's working directory.
		if sp.path, err = filepath.Abs(p); err != nil {
			return nil, fmt.Errorf("parameter path: %w", err)
		}
	}
	if sp.rawInit, err = str("extraInitArgs"); err != nil {
		return nil, err
	}
	if sp.initArgs, err = parseInitArgs(sp.rawInit); err != nil {
		return nil, err
	}
	sp.runner = sp.TerraformRunner
	if sp.runner == nil {
		sp.runner = r.runner
	}
	return sp, nil
}

// instanceLocked returns key's instance, creating it. r.mu is held.
func (r *Runtime) instanceLocked(key runtimes.InstanceKey) (*instance, error) {
	if in := r.insts[key]; in != nil {
		return in, nil
	}
	elems := make([]string, 0, 4)
	elems = append(elems, r.root)
	for _, n := range []string{key.Application, key.Service, key.ReleaseChannel} {
		e, err := pathElem(n)
		if err != nil {
			return nil, fmt.Errorf("instance %s: %w", key, err)
		}
		elems = append(elems, e)
	}
	in := &instance{key: key, dir: filepath.Join(elems...)}
	r.insts[key] = in
	return in, nil
}

// use returns key's instance for a Fetch or Apply.
func (r *Runtime) use(key runtimes.InstanceKey) (*instance, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, fmt.Errorf("terraform runtime %s is closed", r.name)
	}
	in, err := r.instanceLocked(key)
	if err != nil {
		return nil, err
	}
	in.lastUsed = r.now()
	return in, nil
}

// targetKey identifies what a target asks for: version, objects and env.
func targetKey(t runtimes.Target) string {
	parts := []string{t.Version}
	for _, o := range t.Objects {
		parts = append(parts, string(o))
	}
	for _, k := range slices.Sorted(maps.Keys(t.Env)) {
		parts = append(parts, k, t.Env[k])
	}
	return hashStrings(parts...)
}

// Fetch plans the instance: converged when the plan has no changes, else
// drifted (the version last applied has changed) or not converged (another
// version, or nothing, was applied). The first Fetch of a target plans
// synchronously; later ones return the result of the last plan, which
// background polls refresh (see the package documentation).
func (r *Runtime) Fetch(ctx context.Context, t runtimes.Target) (runtimes.State, error) {
	if err := ctx.Err(); err != nil {
		return runtimes.State{}, err
	}
	sp, err := r.parseSpec(t)
	if err != nil {
		return runtimes.State{}, fmt.Errorf("terraform runtime %s: %s: %w", r.name, t.InstanceKey, err)
	}
	in, err := r.use(t.InstanceKey)
	if err != nil {
		return runtimes.State{}, err
	}
	tk := targetKey(t)
	if st, ok := r.cachedState(in, tk); ok {
		return st, nil
	}
	in.cmd.Lock()
	defer in.cmd.Unlock()
	if st, ok := r.cachedState(in, tk); ok {
		return st, nil
	}
	st, _, err := r.refresh(ctx, in, t, sp)
	if err != nil {
		return runtimes.State{}, fmt.Errorf("terraform runtime %s: %s: %w", r.name, t.InstanceKey, err)
	}
	return st, nil
}

// cachedState is the cached state of in for target key tk, if any. While an
// apply runs and nothing is cached, it is "applying" rather than a wait for
// the apply to finish.
func (r *Runtime) cachedState(in *instance, tk string) (runtimes.State, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if in.cached && in.cacheKey == tk {
		return in.state, true
	}
	if in.applying > 0 {
		v := readApplied(in.dir)
		return runtimes.State{Version: v, Message: "terraform apply in progress"}, true
	}
	return runtimes.State{}, false
}

// refresh prepares and plans t, caches the state, schedules the next poll
// and reports whether the state changed. in.cmd is held.
func (r *Runtime) refresh(ctx context.Context, in *instance, t runtimes.Target, sp *spec) (runtimes.State, bool, error) {
	if r.jobs != nil {
		st, err := r.jobs.plan(ctx, r, in, t, sp)
		return st, r.store(in, t, sp, st, err), err
	}
	p, err := r.prepare(ctx, in, t, sp)
	if err != nil {
		return runtimes.State{}, r.store(in, t, sp, runtimes.State{}, err), err
	}
	st, err := r.plan(ctx, in, t, sp, p)
	return st, r.store(in, t, sp, st, err), err
}

// store caches the outcome of a plan of t, schedules the next poll and
// reports whether the state changed from the one cached for t.
func (r *Runtime) store(in *instance, t runtimes.Target, sp *spec, st runtimes.State, err error) bool {
	tk := targetKey(t)
	r.mu.Lock()
	defer r.mu.Unlock()
	had := in.cached && in.cacheKey == tk
	prev := in.state
	in.target, in.spec = t, sp
	if err != nil {
		in.cached = false
	} else {
		in.cached, in.cacheKey, in.state = true, tk, st
	}
	poll := sp.runner.PollInterval.Or(DefaultPollInterval)
	switch {
	case err == nil && st.Converged && sp.runner.DisableDriftDetection:
		r.stopPollLocked(in)
	case err == nil && st.Converged:
		r.schedulePollLocked(in, sp.runner.SteadyStatePollInterval.Or(DefaultSteadyStatePollInterval))
	default:
		r.schedulePollLocked(in, poll)
	}
	if err != nil {
		return had
	}
	return !had || !sameState(prev, st)
}

func sameState(a, b runtimes.State) bool {
	return a.Version == b.Version && a.Converged == b.Converged && a.Failed == b.Failed &&
		a.Drifted == b.Drifted && a.Message == b.Message && slices.Equal(a.Objects, b.Objects)
}

// prepared is an instance's working directory made ready for t.
type prepared struct {
	module     string // <dir>/module
	moduleHash string
	env        map[string]string // full environment
	overlay    string            // hash of what drover adds to its environment
	didInit    bool
}

// prepare syncs the module into the working directory, sets the
// environment, runs the preRun commands and runs terraform init when the
// module, the init flags or the binary changed since the last successful
// init. in.cmd is held.
func (r *Runtime) prepare(ctx context.Context, in *instance, t runtimes.Target, sp *spec) (*prepared, error) {
	overlay, err := overlayEnv(t, sp.runner)
	if err != nil {
		return nil, err
	}
	if sp.initArgs.extra != "" {
		overlay["TF_CLI_ARGS_init"] = strings.TrimSpace(overlay["TF_CLI_ARGS_init"] + " " + sp.initArgs.extra)
	}
	p := &prepared{module: filepath.Join(in.dir, moduleDirName), env: fullEnv(overlay)}
	in.rd = redact.New(rawSecrets(t, sp.runner))
	var ov []string
	for _, k := range slices.Sorted(maps.Keys(overlay)) {
		ov = append(ov, k, overlay[k])
	}
	p.overlay = hashStrings(ov...)
	if err := os.MkdirAll(in.dir, 0o750); err != nil {
		return nil, err
	}
	if p.moduleHash, err = syncModule(sp.path, p.module, r.modules); err != nil {
		return nil, err
	}
	tf := in.tf
	if tf == nil {
		if tf, err = tfexec.NewTerraform(p.module, r.bin); err != nil {
			return nil, err
		}
	}
	if err := setEnv(tf, p.env); err != nil {
		return nil, err
	}
	if in.tf == nil {
		// tfexec asks for the version before some commands; ask now, so
		// its output does not land in a recorded command's.
		if _, _, err := tf.Version(ctx, false); err != nil {
			return nil, fmt.Errorf("%s version: %w", filepath.Base(r.bin), err)
		}
		in.tf = tf
	}
	envl := envList(p.env)
	for i, c := range sp.runner.PreRun {
		started := r.now()
		args := []string{"sh", "-c", c.Cmd}
		res := localexec.Run(ctx, localexec.Cmd{Args: args, Env: envl, Dir: p.module, MaxOutput: outputLimit,
			Tracker: r.tracker(in.key, kindPreRun, t.Version, in.rd.All(args))})
		o := redactOutcome(outcome{stdout: string(res.Stdout), stderr: string(res.Stderr), truncated: res.Truncated, exitCode: res.ExitCode, err: res.Err}, in.rd)
		if o.err == nil && o.exitCode != 0 {
			o.err = fmt.Errorf("exit status %d", o.exitCode)
		}
		r.record(ctx, in.key, kindPreRun, t.Version, args, started, o)
		if o.err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			msg := errorExcerpt(o.stderr)
			if msg == "" {
				msg = o.err.Error()
			}
			return nil, fmt.Errorf("preRun[%d] (%s) failed (exit code %d): %s", i, c.Cmd, o.exitCode, msg)
		}
	}
	stamp := hashStrings(r.bin, p.moduleHash, sp.rawInit, overlay["TF_CLI_ARGS_init"])
	stampPath := filepath.Join(in.dir, initStampName)
	if old, err := os.ReadFile(stampPath); err != nil || string(old) != stamp {
		if err := r.init(ctx, in, t, sp); err != nil {
			return nil, err
		}
		p.didInit = true
		if err := atomicfile.Write(stampPath, []byte(stamp), 0o640); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// tfCommand runs one tfexec command for in, capturing and recording its
// output. in.cmd is held.
func (r *Runtime) tfCommand(ctx context.Context, in *instance, kind, version string, args []string, fn func() (exit int, err error)) outcome {
	out, errOut := newTailBuffer(outputLimit), newTailBuffer(outputLimit)
	if kind == kindShow {
		// The JSON plan holds sensitive values in clear: not kept.
		in.tf.SetStdout(io.Discard)
	} else {
		in.tf.SetStdout(out)
	}
	in.tf.SetStderr(errOut)
	defer func() {
		in.tf.SetStdout(nil)
		in.tf.SetStderr(nil)
	}()
	started := r.now()
	exit, err := fn()
	if err != nil && exit == 0 {
		exit = exitCode(ctx, err)
	}
	o := redactOutcome(outcome{stdout: out.String(), stderr: errOut.String(), truncated: out.Truncated() || errOut.Truncated(), exitCode: exit, err: err}, in.rd)
	r.record(ctx, in.key, kind, version, append([]string{r.bin}, args...), started, o)
	return o
}

// commandError turns a failed command into an error for the caller.
func commandError(ctx context.Context, what string, o outcome) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%s: %w", what, ctx.Err())
	}
	msg := errorExcerpt(o.stderr)
	if msg == "" {
		msg, _, _ = strings.Cut(o.err.Error(), "\n")
	}
	return fmt.Errorf("%s failed (exit code %d): %s", what, o.exitCode, msg)
}

// init runs terraform init. in.cmd is held.
func (r *Runtime) init(ctx context.Context, in *instance, t runtimes.Target, sp *spec) error {
	args := append([]string{"init", "-input=false"}, sp.initArgs.words...)
	o := r.tfCommand(ctx, in, kindInit, t.Version, args, func() (int, error) {
		return 0, in.tf.Init(ctx, sp.initArgs.opts...)
	})
	if o.err != nil {
		_ = os.Remove(filepath.Join(in.dir, initStampName))
		return commandError(ctx, "terraform init", o)
	}
	return nil
}

// planKey identifies what a saved plan was made for.
func planKey(t runtimes.Target, p *prepared) string {
	return hashStrings(targetKey(t), p.moduleHash, p.overlay)
}

// plan runs terraform plan -detailed-exitcode, saving the plan, and returns
// the state it shows. in.cmd is held.
func (r *Runtime) plan(ctx context.Context, in *instance, t runtimes.Target, sp *spec, p *prepared) (runtimes.State, error) {
	planFile := filepath.Join(in.dir, planFileName)
	in.saved = nil
	args := []string{"plan", "-input=false", "-detailed-exitcode", "-out=" + planFile}
	run := func() outcome {
		return r.tfCommand(ctx, in, kindPlan, t.Version, args, func() (int, error) {
			changed, err := in.tf.Plan(ctx, tfexec.Out(planFile))
			if changed {
				return 2, nil
			}
			return 0, err
		})
	}
	o := run()
	if o.err != nil && !p.didInit && ctx.Err() == nil && needsInit(o.stderr) {
		// The working directory needs an init the stamp did not ask
		// for (its .terraform was removed, a lock file changed): init and
		// plan again, once.
		if err := r.init(ctx, in, t, sp); err != nil {
			return runtimes.State{}, err
		}
		p.didInit = true
		o = run()
	}
	if o.err != nil {
		_ = os.Remove(planFile)
		return runtimes.State{}, commandError(ctx, "terraform plan", o)
	}
	changed := o.exitCode == 2
	in.saved = &savedPlan{key: planKey(t, p), changed: changed, summary: planSummary(o.stdout)}
	return r.stateOf(in, t, sp, in.saved), nil
}

// needsInit reports whether terraform's stderr asks for terraform init.
func needsInit(stderr string) bool {
	return strings.Contains(stderr, "terraform init") || strings.Contains(stderr, "tofu init")
}

// stateOf is the state a plan of t shows.
func (r *Runtime) stateOf(in *instance, t runtimes.Target, sp *spec, sv *savedPlan) runtimes.State {
	obj := runtimes.Object{ObjectType: "terraformRunner", Name: sp.Runtime}
	if obj.Name == "" {
		obj.Name = r.name
	}
	if !sv.changed {
		// Nothing to change: t's version is what runs.
		if readApplied(in.dir) != t.Version {
			if err := atomicfile.Write(filepath.Join(in.dir, appliedFileName), []byte(t.Version), 0o640); err != nil {
				r.log.Warn("terraform runtime: cannot record the applied version", "runtime", r.name, "instance", in.key.String(), "error", err)
			}
		}
		obj.Version, obj.Status = t.Version, runtimes.ObjectSucceeded
		return runtimes.State{Version: t.Version, Converged: true, Objects: []runtimes.Object{obj}}
	}
	applied := readApplied(in.dir)
	obj.Version, obj.Status, obj.Message = applied, runtimes.ObjectPending, sv.summary
	return runtimes.State{
		Version: applied,
		// What drover applied for this version changed (or its inputs did).
		Drifted: applied == t.Version,
		Message: sv.summary,
		Objects: []runtimes.Object{obj},
	}
}

// planSummary picks the lines of terraform plan's output that say what it
// would do ("Plan: 1 to add, 0 to change, 0 to destroy.").
func planSummary(stdout string) string {
	var parts []string
	outputs := false
	for line := range strings.SplitSeq(stdout, "\n") {
		l := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(l, "Note: Objects have changed outside of"):
			parts = append(parts, strings.TrimSuffix(strings.TrimPrefix(l, "Note: "), ":")+".")
		case strings.HasPrefix(l, "Plan: "):
			parts = append(parts, l)
		case strings.HasPrefix(l, "Changes to Outputs:"):
			outputs = true
		}
	}
	if len(parts) == 0 || !strings.HasPrefix(parts[len(parts)-1], "Plan: ") {
		if outputs {
			parts = append(parts, "Plan: changes to outputs only.")
		} else {
			parts = append(parts, "Plan: changes pending.")
		}
	}
	return strings.Join(parts, " ")
}

// Apply applies the plan saved by the last fetch when it was made for the
// same target, module and environment, or else plans first; then it plans
// again to refresh the state and notifies watchers. A plan without changes
// is not applied. Errors are retryable, except a target that cannot work
// (no version, a malformed object).
func (r *Runtime) Apply(ctx context.Context, t runtimes.Target) (runtimes.ApplyResult, error) {
	if err := ctx.Err(); err != nil {
		return runtimes.ApplyResult{}, err
	}
	if t.Version == "" {
		return runtimes.ApplyResult{}, runtimes.Permanent(fmt.Errorf("terraform runtime %s: %s: target has no version", r.name, t.InstanceKey))
	}
	sp, err := r.parseSpec(t)
	if err != nil {
		return runtimes.ApplyResult{}, runtimes.Permanent(fmt.Errorf("terraform runtime %s: %s: %w", r.name, t.InstanceKey, err))
	}
	in, err := r.use(t.InstanceKey)
	if err != nil {
		return runtimes.ApplyResult{}, err
	}
	r.mu.Lock()
	in.applying++
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		in.applying--
		r.mu.Unlock()
	}()
	in.cmd.Lock()
	defer in.cmd.Unlock()
	res, err := r.apply(ctx, in, t, sp)
	if err != nil {
		return res, fmt.Errorf("terraform runtime %s: %s: %w", r.name, t.InstanceKey, err)
	}
	return res, nil
}

// apply does Apply's work. in.cmd is held.
func (r *Runtime) apply(ctx context.Context, in *instance, t runtimes.Target, sp *spec) (runtimes.ApplyResult, error) {
	if r.jobs != nil {
		return r.jobs.apply(ctx, r, in, t, sp)
	}
	p, err := r.prepare(ctx, in, t, sp)
	if err != nil {
		r.store(in, t, sp, runtimes.State{}, err)
		return runtimes.ApplyResult{}, err
	}
	planFile := filepath.Join(in.dir, planFileName)
	if in.saved == nil || in.saved.key != planKey(t, p) || !fileExists(planFile) {
		st, err := r.plan(ctx, in, t, sp, p)
		r.store(in, t, sp, st, err)
		if err != nil {
			return runtimes.ApplyResult{}, err
		}
	}
	changes := r.changes(ctx, in, t, sp, planFile)
	if !in.saved.changed {
		return runtimes.ApplyResult{Changes: changes}, nil
	}
	args := []string{"apply", "-input=false", planFile}
	o := r.tfCommand(ctx, in, kindApply, t.Version, args, func() (int, error) {
		return 0, in.tf.Apply(ctx, tfexec.DirOrPlan(planFile))
	})
	// A saved plan is applied at most once.
	in.saved = nil
	_ = os.Remove(planFile)
	if o.err != nil {
		r.store(in, t, sp, runtimes.State{}, o.err) // forget the state, poll soon
		r.watchers.Notify(in.key)
		if ctx.Err() == nil && (strings.Contains(o.stderr, "Saved plan is stale") || strings.Contains(o.stderr, "Error acquiring the state lock")) {
			return runtimes.ApplyResult{}, fmt.Errorf("terraform apply: %s (retrying plans again)", errorExcerpt(o.stderr))
		}
		return runtimes.ApplyResult{}, commandError(ctx, "terraform apply", o)
	}
	if err := atomicfile.Write(filepath.Join(in.dir, appliedFileName), []byte(t.Version), 0o640); err != nil {
		r.log.Warn("terraform runtime: cannot record the applied version", "runtime", r.name, "instance", in.key.String(), "error", err)
	}
	st, err := r.plan(ctx, in, t, sp, p)
	r.store(in, t, sp, st, err)
	if err != nil {
		r.log.Warn("terraform runtime: plan after apply failed", "runtime", r.name, "instance", in.key.String(), "version", t.Version, "error", err)
	}
	r.watchers.Notify(in.key)
	return runtimes.ApplyResult{Changes: changes}, nil
}

// changes lists what the saved plan changes, from terraform show -json.
// If show fails, the module as a whole counts as configured (or unchanged).
func (r *Runtime) changes(ctx context.Context, in *instance, t runtimes.Target, sp *spec, planFile string) []runtimes.Change {
	var plan *tfjson.Plan
	o := r.tfCommand(ctx, in, kindShow, t.Version, []string{"show", "-json", planFile}, func() (int, error) {
		var err error
		plan, err = in.tf.ShowPlanFile(ctx, planFile)
		return 0, err
	})
	if o.err != nil {
		r.log.Warn("terraform runtime: cannot read the plan", "runtime", r.name, "instance", in.key.String(), "error", commandError(ctx, "terraform show", o))
		a := runtimes.ActionUnchanged
		if in.saved.changed {
			a = runtimes.ActionConfigured
		}
		return []runtimes.Change{{Object: "module." + sp.Runtime, Action: a}}
	}
	var out []runtimes.Change
	for _, rc := range plan.ResourceChanges {
		if rc == nil || rc.Change == nil {
			continue
		}
		acts := rc.Change.Actions
		var a runtimes.Action
		switch {
		case acts.NoOp():
			a = runtimes.ActionUnchanged
		case acts.Create():
			a = runtimes.ActionCreated
		case acts.Update(), acts.Replace():
			a = runtimes.ActionConfigured
		case acts.Delete():
			a = runtimes.ActionDeleted
		case acts.Read():
			continue // a data source read: not something applied
		default:
			a = runtimes.ActionSkipped
		}
		// An address holds for_each keys, which may come from a raw secret
		// (a non-sensitive variable).
		out = append(out, runtimes.Change{Object: in.rd.Text(rc.Address), Action: a})
	}
	return out
}

// readApplied is the version of the last successful apply in dir ("" if none).
func readApplied(dir string) string {
	b, err := os.ReadFile(filepath.Join(dir, appliedFileName))
	if err != nil {
		return ""
	}
	return string(b)
}

// Close stops the polls, waits for running ones and, when the runtime
// made its own temporary data directory, removes it.
func (r *Runtime) Close() error {
	var err error
	r.closeOnce.Do(func() {
		r.mu.Lock()
		r.closed = true
		for _, in := range r.insts {
			r.stopPollLocked(in)
		}
		r.mu.Unlock()
		r.cancel()
		close(r.done)
		r.wg.Wait()
		if r.tempDir != "" {
			err = os.RemoveAll(r.tempDir)
		}
	})
	return err
}
