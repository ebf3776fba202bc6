package terraform

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/hashicorp/terraform-exec/tfexec"
	tfjson "github.com/hashicorp/terraform-json"

	"github.com/drover-dev/drover/internal/atomicfile"
	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/runtimes"
	"github.com/drover-dev/drover/internal/runtimes/iacrun"
	"github.com/drover-dev/drover/internal/runtimes/redact"
)

// Defaults of the runner's poll intervals (Prodvana's terraformRunner).
const (
	DefaultPollInterval            = iacrun.DefaultPollInterval
	DefaultSteadyStatePollInterval = iacrun.DefaultSteadyStatePollInterval
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
	moduleDirName   = "module"               // the copy of the module; terraform runs here
	planFileName    = "plan.tfplan"          // the last plan
	initStampName   = "init.stamp"           // what the last successful init was for
	appliedFileName = iacrun.AppliedFileName // the version of the last successful apply
)

var (
	_ runtimes.Runtime = (*Runtime)(nil)
	_ runtimes.Watcher = (*Runtime)(nil)
	_ runtimes.Closer  = (*Runtime)(nil)
)

// Runtime runs terraform for the services of one terraformRunner runtime.
// It is safe for concurrent use; commands of one instance run one at a time.
type Runtime struct {
	*iacrun.Base[tfInstance, *spec]
	bin     string
	runner  *config.TerraformRunner // the runtime's own config, used when a target carries none
	jobs    *jobRunner              // runs the commands as Kubernetes Jobs; nil: on this host
	modules iacrun.Limits           // where modules on this host may be, and how much is copied
}

// instance is one service instance's working directory and cached state.
type instance = iacrun.Instance[tfInstance, *spec]

// tfInstance is what the runtime keeps of an instance, guarded by its Cmd.
type tfInstance struct {
	tf    *tfexec.Terraform
	saved *savedPlan // what plan.tfplan holds, nil when unknown
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
	roots, err := iacrun.DefaultRoots(ModuleRootFlag)
	if err != nil {
		return nil, fmt.Errorf("terraform module roots: %w", err)
	}
	return roots, nil
}

// ResolveModuleRoots makes dirs (the values of ModuleRootFlag) absolute
// with their symbolic links resolved, and checks that each is a directory.
func ResolveModuleRoots(dirs []string) ([]string, error) {
	return iacrun.ResolveRoots(dirs, ModuleRootFlag)
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
	exclude, err := iacrun.ExcludeDirs(dataDir, r.TempDir)
	if err != nil {
		return err
	}
	r.modules = moduleLimits(roots, exclude)
	r.modules.MaxBytes, r.modules.MaxEntries = s.MaxModuleBytes, s.MaxModuleEntries
	return nil
}

// build builds the runtime of cfg (a terraformRunner) running bin.
func build(cfg *config.Runtime, opts runtimes.Options, bin string) (*Runtime, error) {
	b, err := iacrun.NewBase[tfInstance, *spec](cfg.Name, "terraform", opts)
	if err != nil {
		return nil, err
	}
	r := &Runtime{Base: b, bin: bin, runner: cfg.TerraformRunner}
	b.Parse, b.Refresh, b.Update = r.parseSpec, r.refresh, r.apply
	return r, nil
}

// findBinary finds the terraform binary to run.
func findBinary() (string, error) {
	return iacrun.FindBinary(BinaryEnv, ErrNoBinary, "terraform", "tofu")
}

// Binary is the terraform (or OpenTofu) binary the runtime runs.
func (r *Runtime) Binary() string { return r.bin }

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

// refresh prepares and plans t, caches the state, schedules the next poll
// and reports whether the state changed. in.Cmd is held.
func (r *Runtime) refresh(ctx context.Context, in *instance, t runtimes.Target, sp *spec) (runtimes.State, bool, error) {
	if r.jobs != nil {
		st, err := jobPlan(ctx, r.jobs, r, in, t, sp)
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
	return r.Store(in, t, sp, sp.runner, st, err)
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
// init. in.Cmd is held.
func (r *Runtime) prepare(ctx context.Context, in *instance, t runtimes.Target, sp *spec) (*prepared, error) {
	overlay, err := overlayEnv(t, sp.runner)
	if err != nil {
		return nil, err
	}
	if sp.initArgs.extra != "" {
		overlay["TF_CLI_ARGS_init"] = strings.TrimSpace(overlay["TF_CLI_ARGS_init"] + " " + sp.initArgs.extra)
	}
	p := &prepared{module: filepath.Join(in.Dir, moduleDirName), env: fullEnv(overlay)}
	in.RD = redact.New(iacrun.RawSecrets(t, sp.runner))
	p.overlay = iacrun.EnvHash(overlay)
	if err := os.MkdirAll(in.Dir, 0o750); err != nil {
		return nil, err
	}
	if p.moduleHash, err = iacrun.Sync(sp.path, p.module, r.modules); err != nil {
		return nil, err
	}
	tf := in.X.tf
	if tf == nil {
		if tf, err = tfexec.NewTerraform(p.module, r.bin); err != nil {
			return nil, err
		}
	}
	if err := setEnv(tf, p.env); err != nil {
		return nil, err
	}
	if in.X.tf == nil {
		// tfexec asks for the version before some commands; ask now, so
		// its output does not land in a recorded command's.
		if _, _, err := tf.Version(ctx, false); err != nil {
			return nil, fmt.Errorf("%s version: %w", filepath.Base(r.bin), err)
		}
		in.X.tf = tf
	}
	if err := r.PreRun(ctx, in, kindPreRun, t.Version, sp.runner.PreRun, iacrun.EnvList(p.env), p.module, errorExcerpt); err != nil {
		return nil, err
	}
	stamp := iacrun.HashStrings(r.bin, p.moduleHash, sp.rawInit, overlay["TF_CLI_ARGS_init"])
	stampPath := filepath.Join(in.Dir, initStampName)
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
// output. in.Cmd is held.
func (r *Runtime) tfCommand(ctx context.Context, in *instance, kind, version string, args []string, fn func() (exit int, err error)) iacrun.Outcome {
	out, errOut := iacrun.NewTailBuffer(iacrun.OutputLimit), iacrun.NewTailBuffer(iacrun.OutputLimit)
	if kind == kindShow {
		// The JSON plan holds sensitive values in clear: not kept.
		in.X.tf.SetStdout(io.Discard)
	} else {
		in.X.tf.SetStdout(out)
	}
	in.X.tf.SetStderr(errOut)
	defer func() {
		in.X.tf.SetStdout(nil)
		in.X.tf.SetStderr(nil)
	}()
	started := r.Now()
	exit, err := fn()
	if err != nil && exit == 0 {
		exit = iacrun.ExitCode(ctx, err)
	}
	o := iacrun.Outcome{Stdout: out.String(), Stderr: errOut.String(), Truncated: out.Truncated() || errOut.Truncated(), ExitCode: exit, Err: err,
		Result: kind == kindPlan && exit == 2}.Redact(in.RD)
	r.Record(ctx, in.Key, kind, version, append([]string{r.bin}, args...), started, o)
	return o
}

// commandError turns a failed command into an error for the caller.
func commandError(ctx context.Context, what string, o iacrun.Outcome) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%s: %w", what, ctx.Err())
	}
	msg := errorExcerpt(o.Stderr)
	if msg == "" {
		msg, _, _ = strings.Cut(o.Err.Error(), "\n")
	}
	return fmt.Errorf("%s failed (exit code %d): %s", what, o.ExitCode, msg)
}

// init runs terraform init. in.Cmd is held.
func (r *Runtime) init(ctx context.Context, in *instance, t runtimes.Target, sp *spec) error {
	args := append([]string{"init", "-input=false"}, sp.initArgs.words...)
	o := r.tfCommand(ctx, in, kindInit, t.Version, args, func() (int, error) {
		return 0, in.X.tf.Init(ctx, sp.initArgs.opts...)
	})
	if o.Err != nil {
		_ = os.Remove(filepath.Join(in.Dir, initStampName))
		return commandError(ctx, "terraform init", o)
	}
	return nil
}

// planKey identifies what a saved plan was made for.
func planKey(t runtimes.Target, p *prepared) string {
	return iacrun.HashStrings(iacrun.TargetKey(t), p.moduleHash, p.overlay)
}

// plan runs terraform plan -detailed-exitcode, saving the plan, and returns
// the state it shows. in.Cmd is held.
func (r *Runtime) plan(ctx context.Context, in *instance, t runtimes.Target, sp *spec, p *prepared) (runtimes.State, error) {
	planFile := filepath.Join(in.Dir, planFileName)
	in.X.saved = nil
	args := []string{"plan", "-input=false", "-detailed-exitcode", "-out=" + planFile}
	run := func() iacrun.Outcome {
		return r.tfCommand(ctx, in, kindPlan, t.Version, args, func() (int, error) {
			changed, err := in.X.tf.Plan(ctx, tfexec.Out(planFile))
			if changed {
				return 2, nil
			}
			return 0, err
		})
	}
	o := run()
	if o.Err != nil && !p.didInit && ctx.Err() == nil && needsInit(o.Stderr) {
		// The working directory needs an init the stamp did not ask
		// for (its .terraform was removed, a lock file changed): init and
		// plan again, once.
		if err := r.init(ctx, in, t, sp); err != nil {
			return runtimes.State{}, err
		}
		p.didInit = true
		o = run()
	}
	if o.Err != nil {
		_ = os.Remove(planFile)
		return runtimes.State{}, commandError(ctx, "terraform plan", o)
	}
	changed := o.ExitCode == 2
	in.X.saved = &savedPlan{key: planKey(t, p), changed: changed, summary: planSummary(o.Stdout)}
	return r.stateOf(in, t, sp, in.X.saved), nil
}

// needsInit reports whether terraform's stderr asks for terraform init.
func needsInit(stderr string) bool {
	return strings.Contains(stderr, "terraform init") || strings.Contains(stderr, "tofu init")
}

// stateOf is the state a plan of t shows.
func (r *Runtime) stateOf(in *instance, t runtimes.Target, sp *spec, sv *savedPlan) runtimes.State {
	obj := runtimes.Object{ObjectType: "terraformRunner", Name: sp.Runtime}
	if obj.Name == "" {
		obj.Name = r.Name
	}
	return r.StateOf(in, t, obj, sv.changed, sv.summary)
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

// apply does Apply's work. in.Cmd is held.
func (r *Runtime) apply(ctx context.Context, in *instance, t runtimes.Target, sp *spec) (runtimes.ApplyResult, error) {
	if r.jobs != nil {
		return jobApply(ctx, r.jobs, r, in, t, sp)
	}
	p, err := r.prepare(ctx, in, t, sp)
	if err != nil {
		r.store(in, t, sp, runtimes.State{}, err)
		return runtimes.ApplyResult{}, err
	}
	planFile := filepath.Join(in.Dir, planFileName)
	if in.X.saved == nil || in.X.saved.key != planKey(t, p) || !iacrun.FileExists(planFile) {
		st, err := r.plan(ctx, in, t, sp, p)
		r.store(in, t, sp, st, err)
		if err != nil {
			return runtimes.ApplyResult{}, err
		}
	}
	changes := r.changes(ctx, in, t, sp, planFile)
	if !in.X.saved.changed {
		return runtimes.ApplyResult{Changes: changes}, nil
	}
	args := []string{"apply", "-input=false", planFile}
	o := r.tfCommand(ctx, in, kindApply, t.Version, args, func() (int, error) {
		return 0, in.X.tf.Apply(ctx, tfexec.DirOrPlan(planFile))
	})
	// A saved plan is applied at most once.
	in.X.saved = nil
	_ = os.Remove(planFile)
	if o.Err != nil {
		r.store(in, t, sp, runtimes.State{}, o.Err) // forget the state, poll soon
		r.Notify(in.Key)
		if ctx.Err() == nil && (strings.Contains(o.Stderr, "Saved plan is stale") || strings.Contains(o.Stderr, "Error acquiring the state lock")) {
			return runtimes.ApplyResult{}, fmt.Errorf("terraform apply: %s (retrying plans again)", errorExcerpt(o.Stderr))
		}
		return runtimes.ApplyResult{}, commandError(ctx, "terraform apply", o)
	}
	r.WriteApplied(in, t.Version)
	st, err := r.plan(ctx, in, t, sp, p)
	r.store(in, t, sp, st, err)
	if err != nil {
		r.Log.Warn("terraform runtime: plan after apply failed", "runtime", r.Name, "instance", in.Key.String(), "version", t.Version, "error", err)
	}
	r.Notify(in.Key)
	return runtimes.ApplyResult{Changes: changes}, nil
}

// changes lists what the saved plan changes, from terraform show -json.
// If show fails, the module as a whole counts as configured (or unchanged).
func (r *Runtime) changes(ctx context.Context, in *instance, t runtimes.Target, sp *spec, planFile string) []runtimes.Change {
	var plan *tfjson.Plan
	o := r.tfCommand(ctx, in, kindShow, t.Version, []string{"show", "-json", planFile}, func() (int, error) {
		var err error
		plan, err = in.X.tf.ShowPlanFile(ctx, planFile)
		return 0, err
	})
	if o.Err != nil {
		r.Log.Warn("terraform runtime: cannot read the plan", "runtime", r.Name, "instance", in.Key.String(), "error", commandError(ctx, "terraform show", o))
		a := runtimes.ActionUnchanged
		if in.X.saved.changed {
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
		out = append(out, runtimes.Change{Object: in.RD.Text(rc.Address), Action: a})
	}
	return out
}
