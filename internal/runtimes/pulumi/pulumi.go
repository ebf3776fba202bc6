package pulumi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"gopkg.in/yaml.v3"

	"github.com/drover-dev/drover/internal/atomicfile"
	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/runtimes"
	"github.com/drover-dev/drover/internal/runtimes/iacrun"
	"github.com/drover-dev/drover/internal/runtimes/redact"
)

// Kind is the kind of the runtime and of the object the compiler gives
// each target.
const Kind = config.KindPulumiRunner

// Defaults of the runner's poll intervals (Prodvana's pulumiRunner, as
// terraformRunner's).
const (
	DefaultPollInterval            = iacrun.DefaultPollInterval
	DefaultSteadyStatePollInterval = iacrun.DefaultSteadyStatePollInterval
)

// BinaryEnv names the environment variable that selects the pulumi binary.
const BinaryEnv = "DROVER_PULUMI_BIN"

// ProgramRootFlag is the flag of drover server and drover agent that allows
// a directory for program paths; errors name it.
const ProgramRootFlag = "--program-root"

const (
	// The kinds of the runs reported to Options.Runs: what each command
	// does.
	kindPreRun, kindStack, kindConfig = "preRun", "stack", "config"
	kindPreview, kindUp, kindOutput   = "preview", "up", "output"

	// The files in an instance's working directory.
	programDirName  = "program"      // the copy of the program; pulumi runs here
	planFileName    = "plan.json"    // the update plan of the last preview (--save-plan)
	configStampName = "config.stamp" // what the stack's config was last set to
	backendDirName  = "backend"      // <root>/backend/<app>/<service>: the default file backends
)

// ErrNoBinary is returned by New when no pulumi binary is found.
var ErrNoBinary = errors.New("pulumi not found: install the Pulumi CLI, or set " + BinaryEnv)

// fullStdout is how much of pulumi's JSON output is read (the recorded run
// keeps the end, iacrun.OutputLimit).
const fullStdout = 32 << 20

// Runtime runs pulumi for the services of one pulumiRunner runtime. It is
// safe for concurrent use; commands of one instance run one at a time.
type Runtime struct {
	*iacrun.Base[puInstance, *spec]
	bin      string
	runner   *config.PulumiRunner // the runtime's own config, used when a target carries none
	jobs     *iacrun.Jobs         // runs the commands as Kubernetes Jobs; nil: on this host
	programs iacrun.Limits        // where programs on this host may be, and how much is copied
}

var (
	_ runtimes.Runtime    = (*Runtime)(nil)
	_ runtimes.Watcher    = (*Runtime)(nil)
	_ runtimes.Closer     = (*Runtime)(nil)
	_ runtimes.InfoGetter = (*Runtime)(nil)
)

// instance is one service instance's working directory and cached state.
type instance = iacrun.Instance[puInstance, *spec]

// puInstance is what the runtime keeps of an instance, guarded by its Cmd
// (outputs by its own lock: Info reads them while commands run).
type puInstance struct {
	saved *savedPlan // what plan.json holds, nil when unknown
	// secretsSet is the hash of the secret config values last set (in
	// memory only; "": unknown).
	secretsSet string

	outMu   sync.Mutex
	outputs []runtimes.InfoOutput
}

// savedPlan describes plan.json.
type savedPlan struct {
	key     string // planKey of what it was made for
	changed bool
	summary string
	steps   []runtimes.Change // the changes the preview proposed
}

// spec is a target's compiled pulumiRunner object.
type spec struct {
	Kind          string                     `json:"kind"`
	Runtime       string                     `json:"runtime"`
	Path          string                     `json:"path"`
	Stack         string                     `json:"stack"`
	Image         string                     `json:"image"`
	CommandPrefix []string                   `json:"commandPrefix"`
	Config        map[string]string          `json:"config"`
	SecretConfig  map[string]config.EnvValue `json:"secretConfig"`
	PulumiRunner  *config.PulumiRunner       `json:"pulumiRunner"`

	path    string // absolute program path; as given (a path in the image) for Jobs
	secrets map[string]string
	runner  *config.PulumiRunner
}

// Settings are the host's rules for the programs of the pulumi runtimes it
// builds (drover server's and drover agent's ProgramRootFlag): the program
// roots, and how much of a program is copied.
type Settings = iacrun.Settings

// DefaultProgramRoots are the program roots when none is configured: the
// working directory of the process, so that a relative path works as
// documented; none when that is the file system's root.
func DefaultProgramRoots() ([]string, error) { return iacrun.DefaultRoots(ProgramRootFlag) }

// ResolveProgramRoots makes dirs (the values of ProgramRootFlag) absolute
// with their symbolic links resolved, and checks that each is a directory
// (NewWith does it too).
func ResolveProgramRoots(dirs []string) ([]string, error) {
	return iacrun.ResolveRoots(dirs, ProgramRootFlag)
}

// Factory builds a pulumi runtime; it is the runtimehost.Factory for kind
// "pulumiRunner", with the default program roots (DefaultProgramRoots).
func Factory(cfg *config.Runtime, opts runtimes.Options) (runtimes.Runtime, error) {
	return iacrun.FactoryOf(New)(cfg, opts)
}

// FactoryWith is Factory with the host's settings s (drover server and
// drover agent make s from their flags).
func FactoryWith(s Settings) iacrun.Factory {
	return iacrun.FactoryOf(func(cfg *config.Runtime, opts runtimes.Options) (*Runtime, error) {
		return NewWith(cfg, opts, s)
	})
}

// New builds the runtime cfg describes (cfg.PulumiRunner), with the
// default program roots. The binary is $DROVER_PULUMI_BIN, else pulumi on
// PATH; New fails with ErrNoBinary when there is none. Working directories
// live under <opts.DataDir>/pulumi/<runtime>/ (a temporary directory,
// removed by Close, when opts.DataDir is "").
func New(cfg *config.Runtime, opts runtimes.Options) (*Runtime, error) {
	roots, err := DefaultProgramRoots()
	if err == nil {
		return NewWith(cfg, opts, Settings{Roots: roots})
	}
	if cfg == nil {
		return nil, fmt.Errorf("pulumi runtime: %w", err)
	}
	return nil, fmt.Errorf("runtime %s: %w", cfg.Name, err)
}

// NewWith is New with the host's settings s.
func NewWith(cfg *config.Runtime, opts runtimes.Options, s Settings) (*Runtime, error) {
	r, err := build(cfg, opts, findBinary)
	if err != nil {
		return nil, err
	}
	lim, err := iacrun.HostLimits("program", ProgramRootFlag, s.Roots, s.MaxBytes, s.MaxEntries, opts.DataDir, r.TempDir)
	if err != nil {
		_ = r.Close()
		return nil, fmt.Errorf("runtime %s: %w", cfg.Name, err)
	}
	lim.Skip = map[string]bool{".git": true}
	r.programs = lim
	return r, nil
}

// build builds the runtime of cfg (a pulumiRunner) running the binary find
// finds.
func build(cfg *config.Runtime, opts runtimes.Options, find func() (string, error)) (*Runtime, error) {
	if err := checkConfig(cfg); err != nil {
		return nil, err
	}
	bin, err := find()
	if err != nil {
		return nil, fmt.Errorf("runtime %s: %w", cfg.Name, err)
	}
	b, err := iacrun.NewBase[puInstance, *spec](cfg.Name, "pulumi", opts)
	if err != nil {
		return nil, err
	}
	b.ApplyingMessage = "pulumi up in progress"
	if err := os.MkdirAll(filepath.Join(b.Root, backendDirName), 0o750); err != nil {
		_ = b.Close()
		return nil, fmt.Errorf("runtime %s: %w", cfg.Name, err)
	}
	r := &Runtime{Base: b, bin: bin, runner: cfg.PulumiRunner}
	b.Parse, b.Refresh, b.Update = r.parseSpec, r.refresh, r.apply
	return r, nil
}

// checkConfig checks that cfg is a pulumiRunner runtime.
func checkConfig(cfg *config.Runtime) error {
	switch {
	case cfg == nil:
		return errors.New("pulumi runtime: no config")
	case cfg.PulumiRunner == nil:
		return fmt.Errorf("runtime %s: not a pulumiRunner runtime", cfg.Name)
	}
	return nil
}

// findBinary finds the pulumi binary to run.
func findBinary() (string, error) { return iacrun.FindBinary(BinaryEnv, ErrNoBinary, "pulumi") }

// Binary is the pulumi binary the runtime runs.
func (r *Runtime) Binary() string { return r.bin }

// parseSpec reads the pulumiRunner object of t.
func (r *Runtime) parseSpec(t runtimes.Target) (*spec, error) {
	if len(t.Objects) != 1 {
		return nil, fmt.Errorf("target has %d objects, want one %s object", len(t.Objects), Kind)
	}
	sp := &spec{}
	if err := json.Unmarshal(t.Objects[0], sp); err != nil {
		return nil, fmt.Errorf("decode %s object: %w", Kind, err)
	}
	if sp.Kind != Kind {
		return nil, fmt.Errorf("object kind %q, want %s", sp.Kind, Kind)
	}
	if sp.Path == "" {
		return nil, errors.New("path (the program directory) is empty")
	}
	if sp.Stack == "" {
		return nil, errors.New("stack is empty")
	}
	var err error
	switch {
	case r.jobs != nil && sp.Image == "":
		return nil, errors.New("image is empty: the runner's commands run as Kubernetes Jobs, in an image holding pulumi and the program")
	case r.jobs != nil:
		// A path in the image, relative to its working directory.
		sp.path = sp.Path
	default:
		// A relative path is relative to the server's working directory.
		if sp.path, err = filepath.Abs(sp.Path); err != nil {
			return nil, fmt.Errorf("path: %w", err)
		}
	}
	sp.secrets = map[string]string{}
	for k, v := range sp.SecretConfig {
		switch {
		case v.Secret != nil:
			return nil, fmt.Errorf("secretConfig.%s: secret %s (version %q) arrived unresolved: the server resolves secret{key, version} at push; push the service again", k, v.Secret.Key, v.Secret.Version)
		case v.KubernetesSecret != nil:
			return nil, fmt.Errorf("secretConfig.%s: kubernetesSecret is not supported by the pulumi runner; use rawSecret or secret", k)
		case v.RawSecret != "":
			sp.secrets[k] = v.RawSecret
		default:
			sp.secrets[k] = v.Value
		}
	}
	sp.runner = sp.PulumiRunner
	if sp.runner == nil {
		sp.runner = r.runner
	}
	if sp.runner == nil {
		sp.runner = &config.PulumiRunner{}
	}
	return sp, nil
}

// rawSecrets are what the instance's commands must never show: the raw
// secrets of the env and the secret config values.
func rawSecrets(t runtimes.Target, sp *spec) []string {
	more := slices.Collect(maps.Values(sp.secrets))
	// pulumi's credentials are secrets even when given as plain values.
	for _, k := range credentialEnv {
		if v := t.Env[k]; v != "" {
			more = append(more, v)
		}
		if v := sp.runner.Env[k].Value; v != "" {
			more = append(more, v)
		}
	}
	return iacrun.RawSecrets(t, sp.runner, more...)
}

// credentialEnv are pulumi's variables that hold credentials.
var credentialEnv = []string{"PULUMI_CONFIG_PASSPHRASE", "PULUMI_ACCESS_TOKEN"}

// refresh prepares and previews t, caches the state, schedules the next
// poll and reports whether the state changed. in.Cmd is held.
func (r *Runtime) refresh(ctx context.Context, in *instance, t runtimes.Target, sp *spec) (runtimes.State, bool, error) {
	var st runtimes.State
	var err error
	if r.jobs != nil {
		st, err = r.jobPreview(ctx, in, t, sp)
	} else {
		var p *prepared
		if p, err = r.prepare(ctx, in, t, sp); err == nil {
			st, err = r.preview(ctx, in, t, sp, p)
		}
	}
	return st, r.Store(in, t, sp, sp.runner, st, err), err
}

// prepared is an instance's working directory made ready for t.
type prepared struct {
	program     string // <dir>/program
	programHash string
	env         []string // full environment
	overlay     string   // hash of the environment
	configEnv   string   // hash of the environment but the identity variables, secret values as names
	secretEnv   string   // hash of the secret values of that environment
}

// prepare syncs the program into the working directory, runs the preRun
// commands, and selects (creating) the stack and sets its config when
// they changed since the last time. in.Cmd is held.
func (r *Runtime) prepare(ctx context.Context, in *instance, t runtimes.Target, sp *spec) (*prepared, error) {
	env, err := r.env(t, sp)
	if err != nil {
		return nil, err
	}
	in.RD = redact.New(rawSecrets(t, sp))
	p := &prepared{program: filepath.Join(in.Dir, programDirName), env: iacrun.EnvList(env), overlay: iacrun.EnvHash(env)}
	// The stack's config does not depend on the version drover deploys.
	maps.DeleteFunc(env, func(k, _ string) bool { return strings.HasPrefix(k, "PVN_") || strings.HasPrefix(k, "DROVER_") })
	// What goes on disk (config.stamp) names the secret variables; the
	// hash of their values stays in memory.
	secret := rawSecrets(t, sp)
	var secretVals []string
	for _, k := range slices.Sorted(maps.Keys(env)) {
		if slices.Contains(secret, env[k]) && env[k] != "" {
			secretVals = append(secretVals, k, env[k])
			env[k] = "(secret " + k + ")"
		}
	}
	p.configEnv, p.secretEnv = iacrun.EnvHash(env), iacrun.HashStrings(secretVals...)
	if err := os.MkdirAll(in.Dir, 0o750); err != nil {
		return nil, err
	}
	lim := r.programs
	lim.Owned = map[string]bool{stackFile(sp.Stack): true}
	if p.programHash, err = iacrun.Sync(sp.path, p.program, lim); err != nil {
		return nil, err
	}
	if err := r.PreRun(ctx, in, kindPreRun, t.Version, sp.runner.PreRun, p.env, p.program, errorExcerpt); err != nil {
		return nil, err
	}
	if err := r.setConfig(ctx, in, t, sp, p); err != nil {
		return nil, err
	}
	return p, nil
}

// stackFile is the name of the stack's settings file in a program.
func stackFile(stack string) string {
	// A stack may be org/project/name: the file is named by its last part.
	return "Pulumi." + stack[strings.LastIndexByte(stack, '/')+1:] + ".yaml"
}

// env is the environment of t's commands: the allow-listed part of the
// process environment (iacrun.HostEnv and PULUMI_HOME), the overlay
// (target env, runner env, identity variables), the default file backend
// when no PULUMI_BACKEND_URL is given, and PULUMI_SKIP_UPDATE_CHECK=true
// unless set.
func (r *Runtime) env(t runtimes.Target, sp *spec) (map[string]string, error) {
	overlay, err := iacrun.Overlay(t, sp.runner, "pulumiRunner")
	if err != nil {
		return nil, err
	}
	env := iacrun.PassEnv("PULUMI_HOME")
	maps.Copy(env, overlay)
	if _, ok := env["PULUMI_BACKEND_URL"]; !ok {
		// One file backend per service: its channels' stacks side by side,
		// apart from another service's stacks of the same project.
		dir := filepath.Join(r.Root, backendDirName, t.Application, t.Service)
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return nil, fmt.Errorf("default backend: %w", err)
		}
		env["PULUMI_BACKEND_URL"] = "file://" + filepath.ToSlash(dir)
	}
	if _, ok := env["PULUMI_SKIP_UPDATE_CHECK"]; !ok {
		env["PULUMI_SKIP_UPDATE_CHECK"] = "true"
	}
	return env, nil
}

// command is argv of pulumi with args, after the object's commandPrefix.
func (r *Runtime) command(sp *spec, args ...string) []string {
	argv := append(slices.Clip(sp.CommandPrefix), r.bin)
	return append(argv, args...)
}

// configStamp is what config.stamp holds: what the stack's config was set
// to, and the keys drover set.
type configStamp struct {
	Stamp string   `json:"stamp"`
	Keys  []string `json:"keys"`
	// Source is the hash of the source's stack file last copied over the
	// copy's ("" for none).
	Source string `json:"source,omitempty"`
}

// maxStackFile caps the source's stack file drover reads.
const maxStackFile = 1 << 20

// stackSecretKeys are the stack file's settings of its secrets provider,
// which pulumi writes when it creates the stack; a source stack file that
// lacks them keeps the copy's, so what was encrypted stays readable.
var stackSecretKeys = []string{"secretsprovider", "encryptedkey", "encryptionsalt"}

// withSecretsProvider is source with the secrets-provider settings of
// current (the copy's stack file) that source does not set.
func withSecretsProvider(source, current []byte) ([]byte, error) {
	var cur map[string]any
	if err := yaml.Unmarshal(current, &cur); err != nil || len(cur) == 0 {
		return source, nil //nolint:nilerr // a copy that is not YAML has no provider to keep
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(source, &doc); err != nil {
		return nil, fmt.Errorf("the source's stack file: %w", err)
	}
	if len(doc.Content) == 0 {
		doc = yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{{Kind: yaml.MappingNode, Tag: "!!map"}}}
	}
	m := doc.Content[0]
	if m.Kind != yaml.MappingNode {
		return nil, errors.New("the source's stack file is not a mapping")
	}
	has := map[string]bool{}
	for i := 0; i+1 < len(m.Content); i += 2 {
		has[m.Content[i].Value] = true
	}
	changed := false
	for _, k := range stackSecretKeys {
		v, ok := cur[k].(string)
		if !ok || has[k] {
			continue
		}
		m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: k}, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v})
		changed = true
	}
	if !changed {
		return source, nil
	}
	return yaml.Marshal(&doc)
}

// setConfig selects the stack (creating it) and sets its config when the
// stack, its config, the source's stack file or the environment changed
// since the last time it succeeded. Plain values are set with config
// set-all --plaintext; each secret with config set --secret, reading the
// value from its standard input, never from its arguments. in.Cmd is held.
func (r *Runtime) setConfig(ctx context.Context, in *instance, t runtimes.Target, sp *spec, p *prepared) error {
	// The source's stack file is not copied by Sync (the copy's belongs
	// to the instance); it is read under the same checks.
	source, err := r.programs.ReadOwned(sp.path, stackFile(sp.Stack), maxStackFile)
	if err != nil {
		return err
	}
	sourceHash := ""
	if source != nil {
		sourceHash = iacrun.HashStrings(string(source))
	}
	// The stamp on disk has the secrets' keys and the names of the secret
	// env, not their values (a hash of a weak secret can be guessed):
	// their hash is kept in memory, so a restarted server sets the secrets
	// once more.
	parts := []string{sp.Stack, p.configEnv, sourceHash, "\x00config"}
	for _, k := range slices.Sorted(maps.Keys(sp.Config)) {
		parts = append(parts, k, sp.Config[k])
	}
	parts = append(parts, "\x00secrets")
	var values []string
	for _, k := range slices.Sorted(maps.Keys(sp.secrets)) {
		parts = append(parts, k)
		values = append(values, k, sp.secrets[k])
	}
	values = append(values, "\x00env", p.secretEnv)
	want, wantSecrets := iacrun.HashStrings(parts...), iacrun.HashStrings(values...)
	stampPath := filepath.Join(in.Dir, configStampName)
	var old configStamp
	if b, err := os.ReadFile(stampPath); err == nil {
		_ = json.Unmarshal(b, &old)
	}
	if old.Stamp == want && in.X.secretsSet == wantSecrets && iacrun.FileExists(filepath.Join(p.program, stackFile(sp.Stack))) {
		return nil
	}
	_ = os.Remove(stampPath)
	in.X.secretsSet = ""
	copied := false
	own := filepath.Join(p.program, stackFile(sp.Stack))
	if source != nil && (sourceHash != old.Source || !iacrun.FileExists(own)) {
		// The source's stack settings (keeping the secrets provider the
		// copy's stack was created with), then drover's config on top.
		current, _ := os.ReadFile(own)
		merged, err := withSecretsProvider(source, current)
		if err != nil {
			return fmt.Errorf("parameter path: %w", err)
		}
		if err := atomicfile.Write(own, merged, 0o640); err != nil {
			return err
		}
		copied = true
	}
	run := func(kind, what string, argv []string, env []string) error {
		o := r.Exec(ctx, in, iacrun.Cmd{Kind: kind, Version: t.Version, Argv: argv, Env: env, Dir: p.program})
		if o.Err != nil {
			return commandError(ctx, what, o)
		}
		return nil
	}
	if err := run(kindStack, "pulumi stack select", r.command(sp, "stack", "select", "--create", "--stack", sp.Stack, "--non-interactive"), p.env); err != nil {
		return err
	}
	keys := slices.Sorted(maps.Keys(sp.Config))
	keys = append(keys, slices.Sorted(maps.Keys(sp.secrets))...)
	var gone []string
	for _, k := range old.Keys {
		if !slices.Contains(keys, k) {
			gone = append(gone, k)
		}
	}
	if len(gone) > 0 && !copied {
		// Keys drover set for an earlier target (the source's stack file,
		// copied again, has none of them).
		args := append([]string{"config", "rm-all", "--stack", sp.Stack}, gone...)
		if err := run(kindConfig, "pulumi config rm-all", r.command(sp, args...), p.env); err != nil {
			return err
		}
	}
	if len(sp.Config) > 0 {
		args := []string{"config", "set-all", "--stack", sp.Stack}
		for _, k := range slices.Sorted(maps.Keys(sp.Config)) {
			args = append(args, "--plaintext", k+"="+sp.Config[k])
		}
		if err := run(kindConfig, "pulumi config set-all", r.command(sp, args...), p.env); err != nil {
			return err
		}
	}
	for _, k := range slices.Sorted(maps.Keys(sp.secrets)) {
		// The value reaches pulumi on its standard input, from the
		// environment of a shell that pipes it (printf is a built-in: the
		// value is in no process's arguments).
		argv := append([]string{"sh", "-c", `printf '%s' "$` + secretValueEnv + `" | exec "$@"`, "sh"},
			r.command(sp, "config", "set", "--secret", "--stack", sp.Stack, "--", k)...)
		env := append(slices.Clip(p.env), secretValueEnv+"="+sp.secrets[k])
		if err := run(kindConfig, "pulumi config set --secret "+k, argv, env); err != nil {
			return err
		}
	}
	b, err := json.Marshal(configStamp{Stamp: want, Keys: keys, Source: sourceHash})
	if err != nil {
		return err
	}
	if err := atomicfile.Write(stampPath, b, 0o640); err != nil {
		return err
	}
	in.X.secretsSet = wantSecrets
	return nil
}

// secretValueEnv carries a secret config value to the shell that pipes it
// into pulumi config set --secret.
const secretValueEnv = "DROVER_PULUMI_SECRET_VALUE" //nolint:gosec // G101: the name of a variable, not a credential

// planKey identifies what a saved plan was made for.
func planKey(t runtimes.Target, p *prepared) string {
	return iacrun.HashStrings(iacrun.TargetKey(t), p.programHash, p.overlay)
}

// preview runs pulumi preview --refresh --json, saving the update plan, and
// returns the state it shows. in.Cmd is held.
func (r *Runtime) preview(ctx context.Context, in *instance, t runtimes.Target, sp *spec, p *prepared) (runtimes.State, error) {
	planFile := filepath.Join(in.Dir, planFileName)
	in.X.saved = nil
	_ = os.Remove(planFile)
	argv := r.command(sp, "preview", "--stack", sp.Stack, "--refresh", "--json", "--non-interactive", "--save-plan", planFile)
	o := r.Exec(ctx, in, iacrun.Cmd{Kind: kindPreview, Version: t.Version, Argv: argv, Env: p.env, Dir: p.program, FullStdout: fullStdout})
	res, perr := parsePreview(o.Stdout)
	if o.Err != nil {
		_ = os.Remove(planFile)
		if strings.Contains(o.Stderr, "no stack named") || strings.Contains(res.errors(), "no stack named") {
			// The stack was removed behind drover's back: create it again
			// next time.
			_ = os.Remove(filepath.Join(in.Dir, configStampName))
		}
		return runtimes.State{}, previewError(ctx, "pulumi preview", o, res)
	}
	if perr != nil {
		_ = os.Remove(planFile)
		return runtimes.State{}, fmt.Errorf("pulumi preview: cannot read its JSON output: %w", perr)
	}
	in.X.saved = &savedPlan{key: planKey(t, p), changed: res.changed(), summary: res.summary(), steps: res.changes(in.RD)}
	st := r.stateOf(in, t, sp, in.X.saved)
	if st.Converged && r.outputs(in) == nil {
		r.readOutputs(ctx, in, t, sp, p)
	}
	return st, nil
}

// stateOf is the state a preview of t shows.
func (r *Runtime) stateOf(in *instance, t runtimes.Target, sp *spec, sv *savedPlan) runtimes.State {
	return r.StateOf(in, t, runtimes.Object{ObjectType: Kind, Name: sp.Stack}, sv.changed, sv.summary)
}

// apply does Apply's work. in.Cmd is held.
func (r *Runtime) apply(ctx context.Context, in *instance, t runtimes.Target, sp *spec) (runtimes.ApplyResult, error) {
	if r.jobs != nil {
		return r.jobUp(ctx, in, t, sp)
	}
	return r.up(ctx, in, t, sp)
}

// up does Apply's work on this host. in.Cmd is held.
func (r *Runtime) up(ctx context.Context, in *instance, t runtimes.Target, sp *spec) (runtimes.ApplyResult, error) {
	p, err := r.prepare(ctx, in, t, sp)
	if err != nil {
		r.Store(in, t, sp, sp.runner, runtimes.State{}, err)
		return runtimes.ApplyResult{}, err
	}
	planFile := filepath.Join(in.Dir, planFileName)
	if in.X.saved == nil || in.X.saved.key != planKey(t, p) || !iacrun.FileExists(planFile) {
		st, err := r.preview(ctx, in, t, sp, p)
		r.Store(in, t, sp, sp.runner, st, err)
		if err != nil {
			return runtimes.ApplyResult{}, err
		}
	}
	saved := in.X.saved
	if !saved.changed {
		return runtimes.ApplyResult{Changes: saved.steps}, nil
	}
	argv := r.command(sp, "up", "--yes", "--stack", sp.Stack, "--json", "--non-interactive", "--skip-preview", "--refresh", "--plan", planFile)
	o := r.Exec(ctx, in, iacrun.Cmd{Kind: kindUp, Version: t.Version, Argv: argv, Env: p.env, Dir: p.program, FullStdout: fullStdout})
	// A saved plan is applied at most once.
	in.X.saved = nil
	_ = os.Remove(planFile)
	ev := parseEvents(o.Stdout, in.RD)
	if o.Err != nil || ev.failed {
		err := upError(ctx, o, ev)
		r.Store(in, t, sp, sp.runner, runtimes.State{}, err) // forget the state, poll soon
		r.Notify(in.Key)
		return runtimes.ApplyResult{Changes: ev.changes}, err
	}
	r.WriteApplied(in, t.Version)
	r.readOutputs(ctx, in, t, sp, p)
	changes := ev.changes
	if len(changes) == 0 {
		changes = saved.steps
	}
	st, err := r.preview(ctx, in, t, sp, p)
	r.Store(in, t, sp, sp.runner, st, err)
	if err != nil {
		r.Log.Warn("pulumi runtime: preview after up failed", "runtime", r.Name, "instance", in.Key.String(), "version", t.Version, "error", err)
	}
	r.Notify(in.Key)
	return runtimes.ApplyResult{Changes: changes}, nil
}

// readOutputs reads the stack's outputs (pulumi stack output --json;
// secret outputs stay "[secret]") for Info. A failure is logged. in.Cmd
// is held.
func (r *Runtime) readOutputs(ctx context.Context, in *instance, t runtimes.Target, sp *spec, p *prepared) {
	argv := r.command(sp, "stack", "output", "--json", "--stack", sp.Stack, "--non-interactive")
	o := r.Exec(ctx, in, iacrun.Cmd{Kind: kindOutput, Version: t.Version, Argv: argv, Env: p.env, Dir: p.program, FullStdout: fullStdout})
	var outs map[string]json.RawMessage
	err := o.Err
	if err == nil {
		err = json.Unmarshal([]byte(o.Stdout), &outs)
	}
	if err != nil {
		r.Log.Warn("pulumi runtime: cannot read the stack's outputs", "runtime", r.Name, "instance", in.Key.String(), "error", in.RD.Text(err.Error()))
		return
	}
	info := make([]runtimes.InfoOutput, 0, len(outs))
	for _, k := range slices.Sorted(maps.Keys(outs)) {
		text := string(outs[k])
		var s string
		if json.Unmarshal(outs[k], &s) == nil {
			text = s
		}
		info = append(info, runtimes.InfoOutput{Name: k, Text: in.RD.Text(text)})
	}
	in.X.outMu.Lock()
	in.X.outputs = info
	in.X.outMu.Unlock()
}

// outputs are in's last read outputs (nil: none read yet).
func (r *Runtime) outputs(in *instance) []runtimes.InfoOutput {
	in.X.outMu.Lock()
	defer in.X.outMu.Unlock()
	return in.X.outputs
}

// Info returns what people read of the instance: the stack's outputs as
// last read (after an up, or the first preview that found the stack
// converged), one per output, its value as JSON (a string as it is);
// secret outputs are "[secret]".
func (r *Runtime) Info(_ context.Context, key runtimes.InstanceKey) ([]runtimes.InfoOutput, error) {
	in := r.Lookup(key)
	if in == nil {
		return nil, nil
	}
	return slices.Clone(r.outputs(in)), nil
}
