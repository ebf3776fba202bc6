package custom

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/manifest"
	"github.com/drover-dev/drover/internal/runtimes"
	"github.com/drover-dev/drover/internal/runtimes/redact"
)

// Defaults from Prodvana's documentation.
const (
	DefaultApplyTimeout            = 30 * time.Minute
	DefaultFetchTimeout            = 5 * time.Minute
	DefaultPollInterval            = 30 * time.Second
	DefaultSteadyStatePollInterval = 5 * time.Minute
	DefaultGetInfoInterval         = 5 * time.Minute
	DefaultGetInfoRetryBase        = 30 * time.Second
	DefaultGetInfoRetryMax         = 10 * time.Minute
)

// Command kinds, as recorded in runtimes.Run.Kind.
const (
	kindApply   = "apply"
	kindFetch   = "fetch"
	kindGetInfo = "getInfo"
)

// hostEnv are the only variables of drover's own environment a command
// inherits.
var hostEnv = []string{"PATH", "HOME", "TMPDIR", "LANG"}

// object is the compiled custom runtime object (compiler.CustomRuntimeObject).
type object struct {
	Kind    string                `json:"kind"`
	Runtime string                `json:"runtime"`
	Custom  *config.CustomRuntime `json:"custom"`
	// Secrets are the raw secret parameters, by name: the commands hold
	// customspec.SecretMarker(name) where the value goes.
	Secrets map[string]config.EnvValue `json:"secrets,omitempty"`
}

// spec is a target's custom runtime config, decoded.
type spec struct {
	custom  *config.CustomRuntime
	applyID string
	// identity changes whenever what fetch is asked changes: version,
	// applyId, rendered commands, environment.
	identity string
}

func (s *spec) structured() bool {
	return s.custom.Fetch != nil && s.custom.Fetch.FetchMode == config.FetchModeStructuredOutput
}

func (s *spec) pollInterval() time.Duration {
	if f := s.custom.Fetch; f != nil {
		return f.PollInterval.Or(DefaultPollInterval)
	}
	return DefaultPollInterval
}

func (s *spec) steadyInterval() time.Duration {
	if f := s.custom.Fetch; f != nil {
		return f.SteadyStatePollInterval.Or(DefaultSteadyStatePollInterval)
	}
	return DefaultSteadyStatePollInterval
}

func (s *spec) infoInterval() time.Duration {
	if g := s.custom.GetInfo; g != nil {
		return g.PollInterval.Or(DefaultGetInfoInterval)
	}
	return DefaultGetInfoInterval
}

// idleAfter is how long an instance nobody fetches keeps its pollers.
func (s *spec) idleAfter() time.Duration {
	d := DefaultSteadyStatePollInterval
	if s.custom.Fetch != nil {
		d = s.steadyInterval()
	}
	if s.custom.GetInfo != nil {
		d = max(d, s.infoInterval())
	}
	// The engine fetches a converged instance only every few minutes (its
	// steady-state poll), and the poller's own fetches do not count as use;
	// keep polling well past that, or drift would go unseen.
	return max(3*d, minIdleAfter)
}

// minIdleAfter is the least time a poller keeps running without the engine
// asking about its instance.
const minIdleAfter = time.Hour

// fetchDelay is when to fetch again after a result.
func (s *spec) fetchDelay(st runtimes.State, err error, failures int, version string) time.Duration {
	poll, steady := s.pollInterval(), s.steadyInterval()
	switch {
	case err != nil:
		var rp *config.RetryPolicy
		if s.custom.Fetch != nil {
			rp = s.custom.Fetch.RetryPolicy
		}
		return backoff(rp, poll, max(poll, steady), failures)
	case st.Version == version && st.Converged && !st.Drifted && !st.Failed:
		return steady
	}
	return poll
}

func (s *spec) infoDelay(failures int) time.Duration {
	if failures == 0 {
		return s.infoInterval()
	}
	var rp *config.RetryPolicy
	if s.custom.GetInfo != nil {
		rp = s.custom.GetInfo.RetryPolicy
	}
	return backoff(rp, DefaultGetInfoRetryBase, DefaultGetInfoRetryMax, failures)
}

// backoff is the delay after the failures-th consecutive failure:
// exponential from the policy's base interval to its max interval.
func backoff(rp *config.RetryPolicy, base, ceiling time.Duration, failures int) time.Duration {
	if rp != nil {
		base = rp.BaseInterval.Or(base)
		ceiling = rp.MaxInterval.Or(max(ceiling, base))
	}
	if base <= 0 {
		base = time.Second
	}
	d := base
	for i := 1; i < failures && d < ceiling; i++ {
		d *= 2
	}
	return min(d, max(ceiling, base))
}

// parse decodes the target's custom runtime object.
func (r *Runtime) parse(t *runtimes.Target) (*spec, error) {
	if len(t.Objects) != 1 {
		return nil, r.permanent(t, "the target has %d objects, want one custom runtime object", len(t.Objects))
	}
	var obj object
	if err := json.Unmarshal(t.Objects[0], &obj); err != nil {
		return nil, r.permanent(t, "invalid custom runtime object: %v", err)
	}
	if obj.Kind != "" && obj.Kind != "custom" {
		return nil, r.permanent(t, "the target is a %s object, not a custom runtime one", obj.Kind)
	}
	if obj.Runtime != "" && obj.Runtime != r.name {
		return nil, r.permanent(t, "the target is for runtime %s", obj.Runtime)
	}
	if obj.Custom == nil {
		return nil, r.permanent(t, "the custom runtime object has no custom config")
	}
	sp := &spec{custom: obj.Custom, applyID: obj.Custom.ApplyID}
	h := sha256.New()
	for _, s := range []string{t.Version, sp.applyID, string(t.Objects[0])} {
		fmt.Fprintf(h, "%d:%s", len(s), s)
	}
	keys := make([]string, 0, len(t.Env))
	for k := range t.Env {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(h, "%d:%s%d:%s", len(k), k, len(t.Env[k]), t.Env[k])
	}
	sp.identity = hex.EncodeToString(h.Sum(nil))
	return sp, nil
}

func (r *Runtime) permanent(t *runtimes.Target, format string, args ...any) error {
	return runtimes.Permanent(fmt.Errorf("custom runtime %s: %s: %s", r.name, t.InstanceKey, fmt.Sprintf(format, args...)))
}

// command is one command ready to run.
type command struct {
	kind string
	// argv is what runs: a process's argv, or a container's command and args
	// (argv[:nEntry] is the container's command, the entrypoint).
	argv []string
	// env holds the variables with values, KEY=VALUE, sorted.
	env []string
	// dir is the working directory ("" in a container: its image's).
	dir     string
	timeout time.Duration
	// secrets are values (raw secrets) to hide from recorded output; rd
	// hides them (built once they are all known).
	secrets []string
	rd      *redact.Redactor
	// rendered are the env names whose values come from the compiled
	// command (program and command env): only there, in argv and in a Job
	// manifest are secret parameter markers replaced (withSecrets).
	rendered map[string]bool

	// A command run as a Job (jobExecutor) has these too.
	image          string
	nEntry         int
	serviceAccount string
	// secretEnv are the variables whose values come from Secrets of the
	// Job's namespace (kubernetesSecret).
	secretEnv map[string]config.KubernetesSecret
	// manifest is a kubernetesConfig's one object, a Job, until job is
	// decoded from it.
	manifest manifest.Object
	job      *batchv1.Job
}

// build prepares the kind command of target from its config, for the
// runtime's executor.
func (r *Runtime) build(kind string, t *runtimes.Target, tc *config.TaskConfig, kc *config.KubernetesConfig, cmdEnv map[string]config.EnvValue, timeout time.Duration) (*command, error) {
	return r.exec.build(kind, t, tc, kc, cmdEnv, timeout)
}

// buildLocal prepares the kind command of target from its task config, to
// run on this host.
func (r *Runtime) buildLocal(kind string, t *runtimes.Target, tc *config.TaskConfig, kc *config.KubernetesConfig, cmdEnv map[string]config.EnvValue, timeout time.Duration) (*command, error) {
	if kc != nil {
		return nil, r.permanent(t, "%s: kubernetesConfig commands run as Kubernetes Jobs, not supported yet; use taskConfig", kind)
	}
	if tc == nil || tc.Program == nil {
		return nil, r.permanent(t, "%s: taskConfig.program is required", kind)
	}
	p := tc.Program
	argv := append(slices.Clone(p.Entrypoint), p.Cmd...)
	if len(argv) == 0 || argv[0] == "" {
		return nil, r.permanent(t, "%s: taskConfig.program has no entrypoint or cmd to run", kind)
	}
	c := &command{kind: kind, argv: argv, timeout: timeout}
	if err := r.environ(c, t, p.Env, cmdEnv, false); err != nil {
		return nil, err
	}
	c.withSecrets(t)
	c.rd = redact.New(c.secrets)
	dir, err := r.instanceDir(t.InstanceKey)
	if err != nil {
		return nil, fmt.Errorf("custom runtime %s: %s: %s: working directory: %w", r.name, t.InstanceKey, kind, err)
	}
	switch wd := p.WorkingDirectory; {
	case wd == "":
	case filepath.IsAbs(wd):
		dir = wd
	default:
		dir = filepath.Join(dir, wd)
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return nil, fmt.Errorf("custom runtime %s: %s: %s: working directory: %w", r.name, t.InstanceKey, kind, err)
		}
	}
	c.dir = dir
	return c, nil
}

// environ sets c's environment: PATH, HOME, TMPDIR and LANG from drover's
// environment (not in a Job: its image has its own), then the target's env,
// the program's env, the command's env (apply.env, fetch.env, getInfo.env),
// and the PVN_* and DROVER_* variables, each overriding the ones before.
// It sets c.rendered to the names whose values are the program's or the
// command's plain env values, and c.secrets to their raw secrets. In a Job
// (inJob), kubernetesSecret values come from the Job's namespace.
func (r *Runtime) environ(c *command, t *runtimes.Target, progEnv, cmdEnv map[string]config.EnvValue, inJob bool) error {
	kind := c.kind
	m := map[string]string{}
	refs := map[string]config.KubernetesSecret{}
	rendered := map[string]bool{}
	var secrets []string
	if !inJob {
		for _, k := range hostEnv {
			if v, ok := os.LookupEnv(k); ok {
				m[k] = v
			}
		}
	}
	for k, v := range t.Env {
		m[k] = v
	}
	for _, src := range []struct {
		field string
		env   map[string]config.EnvValue
	}{{kind + ".taskConfig.program.env", progEnv}, {kind + ".env", cmdEnv}} {
		for k, v := range src.env {
			switch {
			case v.Secret != nil:
				// The server resolves references when a service is
				// pushed: one that arrives here was stored unresolved.
				return r.permanent(t, "%s.%s: secret %s (version %q) arrived unresolved: the server resolves secret{key, version} at push; push the service again", src.field, k, v.Secret.Key, v.Secret.Version)
			case v.KubernetesSecret != nil && inJob:
				refs[k] = *v.KubernetesSecret
				delete(m, k)
				delete(rendered, k)
				continue
			case v.KubernetesSecret != nil:
				return r.permanent(t, "%s.%s: kubernetesSecret is not supported yet by drover's local runner (commands do not run in Kubernetes)", src.field, k)
			case v.RawSecret != "":
				m[k] = v.RawSecret
				secrets = append(secrets, v.RawSecret)
				rendered[k] = true // compiled like value: may hold a secret parameter's marker
			default:
				m[k] = v.Value
				rendered[k] = true
			}
			delete(refs, k)
		}
	}
	k := t.InstanceKey
	vars := map[string]string{
		"SERVICE":            k.Service,
		"SERVICE_ID":         k.Application + "/" + k.Service,
		"APPLICATION":        k.Application,
		"APPLICATION_ID":     k.Application,
		"RELEASE_CHANNEL":    k.ReleaseChannel,
		"RELEASE_CHANNEL_ID": k.Application + "/" + k.ReleaseChannel,
		"SERVICE_VERSION":    t.Version,
	}
	if t.DesiredStateID != "" {
		vars["DESIRED_STATE_ID"] = t.DesiredStateID
	}
	for name, v := range vars {
		for _, n := range []string{"PVN_" + name, "DROVER_" + name} {
			m[n] = v
			delete(rendered, n)
			delete(refs, n)
		}
	}
	env := make([]string, 0, len(m))
	for k, v := range m {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return r.permanent(t, "%s: invalid environment variable name %q", kind, k)
		}
		env = append(env, k+"="+v)
	}
	for k := range refs {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return r.permanent(t, "%s: invalid environment variable name %q", kind, k)
		}
	}
	slices.Sort(env)
	c.env, c.secrets, c.rendered = env, secrets, rendered
	if len(refs) > 0 {
		c.secretEnv = refs
	}
	return nil
}

// instanceDir is the instance's working directory, created if needed:
// <DataDir>/custom/<runtime>/<application>/<service>/<release channel>.
func (r *Runtime) instanceDir(k runtimes.InstanceKey) (string, error) {
	if r.baseDir == "" {
		return "", errors.New("the runtime is closed")
	}
	dir := filepath.Join(r.baseDir, safeName(k.Application), safeName(k.Service), safeName(k.ReleaseChannel))
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return "", err
	}
	return dir, nil
}

// statePath is where the instance's last successful apply is kept.
func (r *Runtime) statePath(k runtimes.InstanceKey) string {
	if !r.persist {
		return ""
	}
	return filepath.Join(r.baseDir, safeName(k.Application), safeName(k.Service), safeName(k.ReleaseChannel)+".applied.json")
}

// safeName makes a name usable as one path element. Config names are DNS
// labels already; anything else is escaped so it cannot leave the tree.
func safeName(s string) string {
	ok := s != "" && s != "." && s != ".."
	for i := 0; ok && i < len(s); i++ {
		c := s[i]
		ok = c == '-' || c == '_' || c == '.' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
	}
	if ok && !strings.HasSuffix(s, ".applied.json") {
		return s
	}
	var b strings.Builder
	b.WriteByte('%')
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-' || c == '_' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}
