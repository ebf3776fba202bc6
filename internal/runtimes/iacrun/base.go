package iacrun

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sync"
	"time"

	"github.com/drover-dev/drover/internal/atomicfile"
	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/runtimes"
	"github.com/drover-dev/drover/internal/runtimes/localexec"
	"github.com/drover-dev/drover/internal/runtimes/redact"
)

// Defaults of a runner's poll intervals (Prodvana's terraformRunner).
const (
	DefaultPollInterval            = 5 * time.Minute
	DefaultSteadyStatePollInterval = time.Hour
)

// minIdle is the least time an instance nobody fetches or applies keeps
// being polled.
const minIdle = time.Hour

// AppliedFileName is the file of an instance's directory holding the
// version of the last successful apply.
const AppliedFileName = "applied-version"

// Instance is one service instance of a Base: its working directory, the
// tool's state X (guarded by Cmd) and the cached state of its last plan.
type Instance[X, S any] struct {
	Key runtimes.InstanceKey
	Dir string // <root>/<app>/<service>/<rc>

	// Cmd serializes the instance's commands; X and RD are guarded by it.
	Cmd sync.Mutex
	X   X
	// RD hides the raw secrets the commands get from their recorded output
	// and errors.
	RD *redact.Redactor

	// Guarded by Base.mu.
	target   runtimes.Target // the target of the last fetch or apply, re-planned by polls
	spec     S
	policy   *config.TerraformRunner
	hasSpec  bool
	cached   bool
	cacheKey string
	state    runtimes.State
	applying int
	timer    *time.Timer
	pollGen  uint64
	lastUsed time.Time
}

// Base is what the infrastructure-as-code runtimes (terraformRunner,
// pulumiRunner) share: per instance a working directory, a cache of the
// state its last plan showed, background polls that plan again, watchers
// notified when a state changed, and the record of the commands run. X is
// the tool's per-instance state, S a target's decoded object.
type Base[X, S any] struct {
	Name  string // the runtime's name
	Tool  string // "terraform", "pulumi": in messages
	Root  string // <DataDir>/<tool>/<runtime>, absolute
	Now   func() time.Time
	Runs  runtimes.RunRecorder
	Procs runtimes.ProcessRecorder
	Log   *slog.Logger
	// TempDir is Root's temporary parent when Options.DataDir is "",
	// removed by Close.
	TempDir string
	// Ctx is the context of background polls; Close cancels it.
	Ctx context.Context
	// Parse decodes a target's object (an error is the target's fault).
	Parse func(t runtimes.Target) (S, error)
	// Refresh plans t (whose decoded object is sp) for in, caches the
	// state (Store) and reports whether it changed; Fetch and polls call it
	// with in.Cmd held.
	Refresh func(ctx context.Context, in *Instance[X, S], t runtimes.Target, sp S) (runtimes.State, bool, error)
	// Update applies t for in (Apply's work), with in.Cmd held.
	Update func(ctx context.Context, in *Instance[X, S], t runtimes.Target, sp S) (runtimes.ApplyResult, error)
	// ApplyingMessage is the state's message while an apply runs and
	// nothing is cached.
	ApplyingMessage string

	cancel context.CancelFunc

	mu     sync.Mutex
	insts  map[runtimes.InstanceKey]*Instance[X, S]
	closed bool
	wg     sync.WaitGroup // running polls

	watchers  runtimes.Notifier
	done      chan struct{} // closed by Close
	closeOnce sync.Once
}

// NewBase makes the Base of the runtime name of tool: its working
// directories under <opts.DataDir>/<tool>/<name>/ (a temporary directory,
// removed by Close, when opts.DataDir is "").
func NewBase[X, S any](name, tool string, opts runtimes.Options) (*Base[X, S], error) {
	elem, err := PathElem(name)
	if err != nil {
		return nil, fmt.Errorf("runtime %s: %w", name, err)
	}
	b := &Base[X, S]{
		Name:            name,
		Tool:            tool,
		Now:             opts.Now,
		Runs:            opts.Runs,
		Procs:           opts.Processes,
		Log:             opts.Log,
		ApplyingMessage: tool + " apply in progress",
		insts:           map[runtimes.InstanceKey]*Instance[X, S]{},
		done:            make(chan struct{}),
	}
	if b.Now == nil {
		b.Now = time.Now
	}
	if b.Log == nil {
		b.Log = slog.New(slog.DiscardHandler)
	}
	base := opts.DataDir
	if base == "" {
		if base, err = os.MkdirTemp("", "drover-"+tool+"-"); err != nil {
			return nil, fmt.Errorf("runtime %s: %w", name, err)
		}
		b.TempDir = base
	}
	// The tool runs in a copy below the working directory and is given
	// paths in it: they must not be relative.
	if base, err = filepath.Abs(base); err != nil {
		return nil, fmt.Errorf("runtime %s: %w", name, err)
	}
	b.Root = filepath.Join(base, tool, elem)
	if err := os.MkdirAll(b.Root, 0o750); err != nil {
		return nil, fmt.Errorf("runtime %s: %w", name, err)
	}
	b.Ctx, b.cancel = context.WithCancel(context.Background()) //nolint:gosec // G118: Close calls b.cancel
	return b, nil
}

var safeElem = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// PathElem checks that name can be one directory name.
func PathElem(name string) (string, error) {
	if !safeElem.MatchString(name) || name == "." || name == ".." {
		return "", fmt.Errorf("name %q cannot be used as a directory name", name)
	}
	return name, nil
}

// TargetKey identifies what a target asks for: version, objects and env.
func TargetKey(t runtimes.Target) string {
	parts := []string{t.Version}
	for _, o := range t.Objects {
		parts = append(parts, string(o))
	}
	for _, k := range slices.Sorted(maps.Keys(t.Env)) {
		parts = append(parts, k, t.Env[k])
	}
	return HashStrings(parts...)
}

// Use returns key's instance for a Fetch or Apply, creating it.
func (b *Base[X, S]) Use(key runtimes.InstanceKey) (*Instance[X, S], error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, fmt.Errorf("%s runtime %s is closed", b.Tool, b.Name)
	}
	in := b.insts[key]
	if in == nil {
		elems := make([]string, 0, 4)
		elems = append(elems, b.Root)
		for _, n := range []string{key.Application, key.Service, key.ReleaseChannel} {
			e, err := PathElem(n)
			if err != nil {
				return nil, fmt.Errorf("instance %s: %w", key, err)
			}
			elems = append(elems, e)
		}
		in = &Instance[X, S]{Key: key, Dir: filepath.Join(elems...)}
		b.insts[key] = in
	}
	in.lastUsed = b.Now()
	return in, nil
}

// Cached is the cached state of in for target t, if any. While an apply
// runs and nothing is cached, it is "applying" rather than a wait for the
// apply to finish.
func (b *Base[X, S]) Cached(in *Instance[X, S], t runtimes.Target) (runtimes.State, bool) {
	tk := TargetKey(t)
	b.mu.Lock()
	defer b.mu.Unlock()
	if in.cached && in.cacheKey == tk {
		return in.state, true
	}
	if in.applying > 0 {
		return runtimes.State{Version: ReadApplied(in.Dir), Message: b.ApplyingMessage}, true
	}
	return runtimes.State{}, false
}

// Applying marks an apply of in as running until the returned function is
// called.
func (b *Base[X, S]) Applying(in *Instance[X, S]) (end func()) {
	b.mu.Lock()
	in.applying++
	b.mu.Unlock()
	return func() {
		b.mu.Lock()
		in.applying--
		b.mu.Unlock()
	}
}

// Store caches the outcome of a plan of t (sp its decoded object, runner
// the runner's config: the poll intervals), schedules the next poll and
// reports whether the state changed from the one cached for t. An error
// is not cached: the next Fetch plans again.
func (b *Base[X, S]) Store(in *Instance[X, S], t runtimes.Target, sp S, runner *config.TerraformRunner, st runtimes.State, err error) bool {
	tk := TargetKey(t)
	b.mu.Lock()
	defer b.mu.Unlock()
	had := in.cached && in.cacheKey == tk
	prev := in.state
	in.target, in.spec, in.policy, in.hasSpec = t, sp, runner, true
	if err != nil {
		in.cached = false
	} else {
		in.cached, in.cacheKey, in.state = true, tk, st
	}
	switch {
	case err == nil && st.Converged && runner.DisableDriftDetection:
		b.stopPollLocked(in)
	case err == nil && st.Converged:
		b.schedulePollLocked(in, runner.SteadyStatePollInterval.Or(DefaultSteadyStatePollInterval))
	default:
		b.schedulePollLocked(in, runner.PollInterval.Or(DefaultPollInterval))
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

// schedulePollLocked (re)arms in's poll to run after d. b.mu is held.
func (b *Base[X, S]) schedulePollLocked(in *Instance[X, S], d time.Duration) {
	if b.closed {
		return
	}
	b.stopPollLocked(in)
	gen := in.pollGen
	key := in.Key
	in.timer = time.AfterFunc(d, func() { b.poll(key, gen) })
}

// stopPollLocked cancels in's pending poll. b.mu is held.
func (b *Base[X, S]) stopPollLocked(in *Instance[X, S]) {
	in.pollGen++
	if in.timer != nil {
		in.timer.Stop()
		in.timer = nil
	}
}

// poll plans key's last target again, in the background, and notifies
// watchers when its state changed. gen tells whether this poll is still
// the one scheduled: any plan in between reschedules.
func (b *Base[X, S]) poll(key runtimes.InstanceKey, gen uint64) {
	b.mu.Lock()
	in := b.insts[key]
	if b.closed || in == nil || in.pollGen != gen || !in.hasSpec {
		b.mu.Unlock()
		return
	}
	idle := max(3*in.policy.SteadyStatePollInterval.Or(DefaultSteadyStatePollInterval), minIdle)
	if b.Now().Sub(in.lastUsed) > idle {
		// Nobody asks about this instance any more (its service or
		// channel is gone): stop polling; a later Fetch plans afresh.
		in.timer = nil
		in.cached = false
		b.mu.Unlock()
		return
	}
	b.wg.Add(1)
	b.mu.Unlock()
	defer b.wg.Done()

	in.Cmd.Lock()
	defer in.Cmd.Unlock()
	b.mu.Lock()
	if b.closed || in.pollGen != gen {
		// A fetch or an apply planned meanwhile and scheduled anew.
		b.mu.Unlock()
		return
	}
	t, sp := in.target, in.spec
	b.mu.Unlock()
	_, changed, err := b.Refresh(b.Ctx, in, t, sp)
	if b.Ctx.Err() != nil {
		return
	}
	if err != nil {
		b.Log.Warn("iac runtime: poll failed", "tool", b.Tool, "runtime", b.Name, "instance", key.String(), "version", t.Version, "error", err)
	}
	if changed {
		b.watchers.Notify(key)
	}
}

// Notify tells watchers that key's state may have changed.
func (b *Base[X, S]) Notify(key runtimes.InstanceKey) { b.watchers.Notify(key) }

// Watch calls notify with the key of each instance whose state may have
// changed: after every apply, and when a background poll finds a different
// state. It returns nil when ctx ends or the runtime is closed.
func (b *Base[X, S]) Watch(ctx context.Context, notify func(runtimes.InstanceKey)) error {
	return b.watchers.Watch(ctx, b.done, notify)
}

// Close stops the polls, waits for running ones and, when the runtime
// made its own temporary data directory, removes it.
func (b *Base[X, S]) Close() error {
	var err error
	b.closeOnce.Do(func() {
		b.mu.Lock()
		b.closed = true
		for _, in := range b.insts {
			b.stopPollLocked(in)
		}
		b.mu.Unlock()
		b.cancel()
		close(b.done)
		b.wg.Wait()
		if b.TempDir != "" {
			err = os.RemoveAll(b.TempDir)
		}
	})
	return err
}

// ReadApplied is the version of the last successful apply in dir ("" if
// none).
func ReadApplied(dir string) string {
	b, err := os.ReadFile(filepath.Join(dir, AppliedFileName))
	if err != nil {
		return ""
	}
	return string(b)
}

// WriteApplied records version as the one of in's last successful apply
// (a failure is logged: the next plan shows what runs).
func (b *Base[X, S]) WriteApplied(in *Instance[X, S], version string) {
	if ReadApplied(in.Dir) == version {
		return
	}
	if err := atomicfile.Write(filepath.Join(in.Dir, AppliedFileName), []byte(version), 0o640); err != nil {
		b.Log.Warn("iac runtime: cannot record the applied version", "tool", b.Tool, "runtime", b.Name, "instance", in.Key.String(), "error", err)
	}
}

// Record reports one command to Options.Runs.
func (b *Base[X, S]) Record(ctx context.Context, key runtimes.InstanceKey, kind, version string, cmd []string, started time.Time, o Outcome) {
	if b.Runs == nil {
		return
	}
	run := runtimes.Run{
		InstanceKey: key,
		Runtime:     b.Name,
		Kind:        kind,
		Version:     version,
		Command:     cmd,
		ExitCode:    o.ExitCode,
		StartedAt:   started,
		FinishedAt:  b.Now(),
		Stdout:      o.Stdout,
		Stderr:      o.Stderr,
		Truncated:   o.Truncated,
	}
	if o.ExitCode != 0 && !o.Result {
		run.Error = runError(ctx, o.Err)
	}
	// Record even when ctx ended: the run happened.
	if rerr := b.Runs.RecordRun(context.WithoutCancel(ctx), run); rerr != nil {
		b.Log.Warn("iac runtime: cannot record run", "tool", b.Tool, "runtime", b.Name, "instance", key.String(), "kind", kind, "error", rerr)
	}
}

// Tracker records the process group of a command with the runtime's
// ProcessRecorder while it runs, so that a server restarted after a crash
// ends what the command left running before applying again (nil without a
// recorder), as custom runtimes do.
func (b *Base[X, S]) Tracker(key runtimes.InstanceKey, kind, version string, argv []string) localexec.Tracker {
	if b.Procs == nil {
		return nil
	}
	p := runtimes.Process{InstanceKey: key, Runtime: b.Name, Kind: kind, Version: version, Command: argv}
	return localexec.RecordFunc(func(ctx context.Context, handle []byte) (func(), error) {
		p.Handle = handle
		return b.Procs.AddProcess(ctx, p)
	})
}

// Cmd is one command Exec runs.
type Cmd struct {
	Kind, Version string
	Argv, Env     []string
	Dir           string
	// FullStdout is how much of stdout the Outcome keeps, for a caller
	// that parses it (0: OutputLimit); the run records the last
	// OutputLimit bytes.
	FullStdout int
	// Result says which non-zero exit codes are a result (nil: none).
	Result func(exit int) bool
}

// Exec runs c through localexec (its own process group, killed when ctx
// ends, recorded with the ProcessRecorder) and records it as a run; the
// outcome is redacted with in.RD. A non-zero exit is an Outcome.Err.
func (b *Base[X, S]) Exec(ctx context.Context, in *Instance[X, S], c Cmd) Outcome {
	started := b.Now()
	shown := in.RD.All(c.Argv)
	limit := max(c.FullStdout, OutputLimit)
	res := localexec.Run(ctx, localexec.Cmd{Args: c.Argv, Env: c.Env, Dir: c.Dir, MaxOutput: limit,
		Tracker: b.Tracker(in.Key, c.Kind, c.Version, shown)})
	o := Outcome{Stdout: string(res.Stdout), Stderr: string(res.Stderr), Truncated: res.Truncated, ExitCode: res.ExitCode, Err: res.Err}.Redact(in.RD)
	if len(o.Stderr) > OutputLimit {
		o.Stderr, o.Truncated = tail(o.Stderr, OutputLimit), true
	}
	if o.Err == nil && o.ExitCode != 0 {
		o.Err = fmt.Errorf("exit status %d", o.ExitCode)
	}
	o.Result = o.ExitCode != 0 && c.Result != nil && c.Result(o.ExitCode)
	rec := o
	if len(rec.Stdout) > OutputLimit {
		rec.Stdout, rec.Truncated = tail(rec.Stdout, OutputLimit), true
	}
	b.Record(ctx, in.Key, c.Kind, c.Version, shown, started, rec)
	return o
}

// tail is the last n bytes of s, from a character boundary.
func tail(s string, n int) string {
	b := NewTailBuffer(n)
	_, _ = b.Write([]byte(s))
	return b.String()
}

// PreRun runs the runner's preRun commands with sh -c in dir, in order,
// recorded as runs of kind; excerpt picks a failed command's message from
// its stderr.
func (b *Base[X, S]) PreRun(ctx context.Context, in *Instance[X, S], kind, version string, cmds []config.RunnerCommand, env []string, dir string, excerpt func(string) string) error {
	for i, c := range cmds {
		o := b.Exec(ctx, in, Cmd{Kind: kind, Version: version, Argv: []string{"sh", "-c", c.Cmd}, Env: env, Dir: dir})
		if o.Err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			msg := excerpt(o.Stderr)
			if msg == "" {
				msg = o.Err.Error()
			}
			return fmt.Errorf("preRun[%d] (%s) failed (exit code %d): %s", i, c.Cmd, o.ExitCode, msg)
		}
	}
	return nil
}

// Forget drops key's cached state: its next Fetch plans again.
func (b *Base[X, S]) Forget(key runtimes.InstanceKey) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if in := b.insts[key]; in != nil {
		in.cached = false
	}
}

// Watchers is how many Watch calls are running (for tests that must not
// miss a notification).
func (b *Base[X, S]) Watchers() int { return b.watchers.Watchers() }

// Lookup is key's instance, nil when it has none.
func (b *Base[X, S]) Lookup(key runtimes.InstanceKey) *Instance[X, S] {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.insts[key]
}
