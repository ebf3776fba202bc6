package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/drover-dev/drover/internal/cli"

	"github.com/drover-dev/drover/api/client"
	apiv1 "github.com/drover-dev/drover/api/v1"
	"github.com/drover-dev/drover/examples"
	"github.com/drover-dev/drover/internal/auth"
	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/datadir"
	"github.com/drover-dev/drover/internal/engine"
	"github.com/drover-dev/drover/internal/metrics"
	"github.com/drover-dev/drover/internal/runtimehost"
	"github.com/drover-dev/drover/internal/runtimehost/builtin"
	"github.com/drover-dev/drover/internal/server"
	"github.com/drover-dev/drover/internal/store"
	"github.com/drover-dev/drover/internal/store/postgres"
	"github.com/drover-dev/drover/internal/store/sqlite"
)

// serverFlags are the flags of drover server and drover dev.
type serverFlags struct {
	data, listen, logLevel string
	// logFormat is text (logfmt) or json (one JSON object a line).
	logFormat string
	// database is a PostgreSQL URL shared by several servers ("" = the
	// data directory's embedded SQLite database).
	database          string
	settings          engine.Settings
	workers           int
	keepDesiredStates int
	// eventRetention is how long events are kept (0: for good), and
	// eventArchive where older ones are archived before they are deleted.
	eventRetention time.Duration
	eventArchive   string
	publicNames    []string // see serve_edge.go
	token          string   // set by start
	shutdownGrace  time.Duration
	apiOnly        bool
	// forbidSelfApproval bars pushers from approving their own pushes.
	forbidSelfApproval bool
	// tlsCert and tlsKey are the API's certificate; tls serves it with the
	// self-signed one on a loopback address too; insecure allows plain
	// HTTP on another. tlsFingerprint is the API certificate's, set by
	// start when it serves TLS.
	tlsCert, tlsKey, tlsFingerprint string
	tls, insecure                   bool
	// mutationRate, mutationBurst and maxStreams limit each identity.
	mutationRate              float64
	mutationBurst, maxStreams int
	// secretsKeyFile holds the keyring that seals secret values at rest.
	secretsKeyFile string
	// adminTokenFile holds the first admin token of a new store;
	// adminToken is the one start generated, to show once, when it could
	// not be written to adminTokenPath (DATA/admin-token).
	adminTokenFile, adminToken, adminTokenPath string
	// leaseTTL is how long a service stays leased to a server that stopped
	// renewing it (a task claim lasts twice as long).
	leaseTTL time.Duration
	// agentListen is where agents connect over TLS ("" = nowhere);
	// agentURL what links tell them to dial; agentCert and agentKey the
	// listener's certificate (default: a self-signed one in the data dir).
	agentListen, agentURL, agentCert, agentKey string
	// agentAdvertise is this server's own address for agents, announced
	// to the others sharing its database ("" = the default, see agents).
	agentAdvertise string
	// agentsOpen is the agent listener start opened (nil: none).
	agentsOpen *AgentsConfig
	// oidc signs people in through an OpenID provider.
	oidc oidcFlags
	// terraformModuleRoots are the directories terraformRunner modules may
	// be in (none given: the working directory).
	terraformModuleRoots []string
	// externalURL is where people reach this server (links in
	// notifications); notifyAttempts and notifyBackoff bound the retries
	// of a delivery.
	externalURL    string
	notifyAttempts int
	notifyBackoff  time.Duration
	notifyKeep     time.Duration
	// slackAPIURL is Slack's Web API; slackUsers the file mapping Slack
	// users to identities.
	slackAPIURL, slackUsers string
}

func (f *serverFlags) register(cmd *cobra.Command, defaultData string) {
	fl := cmd.Flags()
	fl.StringVar(&f.data, "data", defaultData, "data directory (the embedded database and runtime state)")
	fl.StringVar(&f.database, "database", os.Getenv("DROVER_DATABASE"), "a PostgreSQL URL (postgres://user@host/db) to keep the state in instead of the data directory's embedded database; several servers may share one (env DROVER_DATABASE)")
	fl.StringVar(&f.listen, "listen", "127.0.0.1:7420", "address to serve the API on")
	fl.StringVar(&f.secretsKeyFile, "secrets-key-file", "", "the keyring that encrypts configs and desired states (secret values) at rest: base64 keys, one per line, the first seals (env DROVER_SECRETS_KEY holds the same text; default: DATA/secrets.key, made at the first start; required with --database)")
	fl.StringVar(&f.adminTokenFile, "admin-token-file", "", "on the first start of a new store, make the first admin token this file's content (default: a new one, printed once; env DROVER_ADMIN_TOKEN)")
	fl.StringVar(&f.tlsCert, "tls-cert", "", "serve the API over TLS with this certificate (PEM; with --tls-key)")
	fl.StringVar(&f.tlsKey, "tls-key", "", "the private key of --tls-cert (PEM)")
	fl.BoolVar(&f.tls, "tls", false, "serve the API over TLS on a loopback address too (with --tls-cert, or a self-signed certificate kept in the data directory); other addresses always use TLS")
	fl.BoolVar(&f.insecure, "insecure", false, "allow serving the API over plain HTTP on an address other machines reach (tokens and configs cross the network readable)")
	fl.Float64Var(&f.mutationRate, "rate-limit", server.DefaultMutationRate, "changes (POSTs) one identity may send per second on average; the local token is not limited")
	fl.IntVar(&f.mutationBurst, "rate-burst", server.DefaultMutationBurst, "changes one identity may send at once, beyond --rate-limit")
	fl.IntVar(&f.maxStreams, "max-streams", server.DefaultMaxStreams, "event streams (drover events --follow, drover wait) one identity may hold open at once")
	fl.BoolVar(&f.forbidSelfApproval, "forbid-self-approval", false, "refuse an approval from the identity that pushed the desired state (someone else must approve)")
	registerLogFlags(cmd, &f.logLevel, &f.logFormat)
	f.settings = engine.DefaultSettings()
	fl.DurationVar(&f.settings.PollInterval, "poll-interval", f.settings.PollInterval, "fetch interval while converging (runtimes that push changes are seen sooner; at least 100ms)")
	fl.DurationVar(&f.settings.SteadyPollInterval, "steady-poll-interval", f.settings.SteadyPollInterval, "fetch interval once converged, to catch drift (at least 100ms)")
	fl.DurationVar(&f.settings.ProgressDeadline, "progress-deadline", f.settings.ProgressDeadline, "fail a rollout that has not converged in this long (service progressDeadline overrides)")
	fl.IntVar(&f.settings.MaxApplyAttempts, "apply-attempts", f.settings.MaxApplyAttempts, "apply attempts before a release channel fails")
	fl.IntVar(&f.workers, "workers", engine.DefaultWorkers(), "services reconciled in parallel (4 per CPU, at least 8, unless set)")
	fl.DurationVar(&f.eventRetention, "event-retention", 0, "how long events (the history) are kept, e.g. 2160h for 90 days; older ones are written to --event-archive, then deleted, once an hour (0, the default, keeps them all)")
	fl.StringVar(&f.eventArchive, "event-archive", "", "directory the events older than --event-retention are archived in, one JSON event per line (default DATA/events-archive)")
	fl.IntVar(&f.keepDesiredStates, "keep-desired-states", store.DefaultKeepSuperseded, "superseded desired states per service that keep their compiled copy, besides those rollback and status need (-1 keeps all)")
	fl.StringArrayVar(&f.publicNames, "public-name", nil, "a further host name (or host:port) clients use for this server, e.g. behind a proxy; repeatable")
	fl.DurationVar(&f.leaseTTL, "lease-ttl", 15*time.Second, "with --database: how long a server that died keeps its services before another server takes them over (an apply it claimed, twice as long); at least 1s")
	fl.StringVar(&f.agentListen, "agent-listen", "", "accept agents (drover agent) over TLS on this address, e.g. 0.0.0.0:7421 (default: no agents)")
	fl.StringVar(&f.agentURL, "agent-url", "", "the address agents dial, as printed by drover runtimes link (default: https:// and the --agent-listen address)")
	fl.StringVar(&f.agentCert, "agent-tls-cert", "", "certificate (PEM) of the agent listener (default: a self-signed one created in --data; agents pin its fingerprint)")
	fl.StringVar(&f.agentKey, "agent-tls-key", "", "private key (PEM) of --agent-tls-cert")
	fl.StringVar(&f.agentAdvertise, "agent-advertise-url", "", "with --database: this server's own address for agents, https://HOST:PORT; agents connected to any server also connect here, so every server reaches every agent (default: https:// and the --agent-listen address when it names a host and --agent-url is not set; \"none\" announces nothing)")
	f.oidc.register(cmd)
	registerProgramRoots(fl, &f.terraformModuleRoots, "")
	fl.StringVar(&f.externalURL, "external-url", "", "the address people reach this server's web UI at, for the links in notifications and the source of their CloudEvents (default: the --listen address)")
	fl.IntVar(&f.notifyAttempts, "notify-max-attempts", 20, "attempts to deliver a notification before it is dead (drover notifications retry sends it again)")
	fl.DurationVar(&f.notifyBackoff, "notify-max-backoff", 30*time.Second, "the longest wait between two attempts to deliver a notification (the first retry comes after a second, each next one after twice as long)")
	fl.DurationVar(&f.notifyKeep, "notify-keep-delivered", 30*24*time.Hour, "how long delivered notifications stay listed in the outbox (dead and pending ones stay until delivered or retried)")
	fl.StringVar(&f.slackUsers, "slack-users", "", "a YAML file mapping Slack users to the drover identities (and roles) their Approve and Reject clicks act as: users: [{slack: U0123ABCD, team: T0123ABCD, identity: alice, roles: [approver@shop]}] (default: none; clicks are refused)")
	fl.StringVar(&f.slackAPIURL, "slack-api-url", "", "Slack's Web API address (default https://slack.com/api/; an emulation's for tests)")
	fl.DurationVar(&f.shutdownGrace, "shutdown-grace", 30*time.Second, "on Ctrl-C or SIGTERM, how long applies in flight may still finish before they are stopped (a second signal stops at once)")
}

// registerLogFlags adds --log-level and --log-format (of server, dev and
// agent).
func registerLogFlags(cmd *cobra.Command, level, format *string) {
	cmd.Flags().StringVar(level, "log-level", "info", "log level: debug, info, warn, error")
	cmd.Flags().StringVar(format, "log-format", "text", "log format: text (key=value pairs) or json (one JSON object a line, for a log collector; the start-up lines people read become log records too)")
}

func (f *serverFlags) logger(w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(f.logLevel)); err != nil {
		return nil, cli.UsageErrorf("invalid --log-level %q: use debug, info, warn or error", f.logLevel)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch f.logFormat {
	case "", "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, cli.UsageErrorf("invalid --log-format %q: use text or json", f.logFormat)
}

// jsonLogs reports whether the logs are JSON (--log-format json).
func (f *serverFlags) jsonLogs() bool { return f.logFormat == "json" }

// MinServerPollInterval is the shortest --poll-interval and
// --steady-poll-interval a server accepts (B7): shorter ones would keep a core
// busy fetching. Configs have a higher floor (config.MinPollInterval), since
// anyone who may apply a config sets those; the flags are the operator's.
const MinServerPollInterval = 100 * time.Millisecond

// validate refuses flag values the engine cannot run with.
func (f *serverFlags) validate() error {
	switch {
	case f.shutdownGrace < 0:
		return cli.UsageErrorf("invalid --shutdown-grace %v: must not be negative", f.shutdownGrace)
	case f.settings.PollInterval < MinServerPollInterval:
		return cli.UsageErrorf("invalid --poll-interval %v: must be at least %v", f.settings.PollInterval, MinServerPollInterval)
	case f.settings.SteadyPollInterval < MinServerPollInterval:
		return cli.UsageErrorf("invalid --steady-poll-interval %v: must be at least %v", f.settings.SteadyPollInterval, MinServerPollInterval)
	case f.settings.ProgressDeadline <= 0:
		return cli.UsageErrorf("invalid --progress-deadline %v: must be positive", f.settings.ProgressDeadline)
	case f.settings.MaxApplyAttempts < 1:
		return cli.UsageErrorf("invalid --apply-attempts %d: must be at least 1", f.settings.MaxApplyAttempts)
	case f.workers < 1:
		return cli.UsageErrorf("invalid --workers %d: must be at least 1", f.workers)
	case f.mutationRate < 0 || f.mutationBurst < 0 || f.maxStreams < 0:
		return cli.UsageErrorf("invalid --rate-limit %g, --rate-burst %d or --max-streams %d: none may be negative", f.mutationRate, f.mutationBurst, f.maxStreams)
	case f.validateTLS() != nil:
		return f.validateTLS()
	case f.leaseTTL < time.Second:
		return cli.UsageErrorf("invalid --lease-ttl %v: must be at least 1s", f.leaseTTL)
	case f.eventRetention != 0 && f.eventRetention < time.Hour:
		return cli.UsageErrorf("invalid --event-retention %v: must be at least 1h (or 0 to keep every event)", f.eventRetention)
	case f.notifyAttempts < 0:
		return cli.UsageErrorf("invalid --notify-max-attempts %d: must be at least 1", f.notifyAttempts)
	case f.notifyBackoff != 0 && f.notifyBackoff < time.Second:
		return cli.UsageErrorf("invalid --notify-max-backoff %v: must be at least 1s", f.notifyBackoff)
	case f.externalURL != "" && !isHTTPURL(f.externalURL):
		return cli.UsageErrorf("invalid --external-url %q: give an http:// or https:// URL", f.externalURL)
	case f.slackAPIURL != "" && !isHTTPURL(f.slackAPIURL):
		return cli.UsageErrorf("invalid --slack-api-url %q: give an http:// or https:// URL", f.slackAPIURL)
	case f.slackUsers != "" && server.CheckSlackUsers(f.slackUsers) != nil:
		return cli.UsageErrorf("invalid --slack-users: %v", server.CheckSlackUsers(f.slackUsers))
	}
	return nil
}

// start opens the store, listens, and runs the server in the background. The
// returned function stops it and waits.
func (f *serverFlags) start(ctx context.Context, log *slog.Logger) (addr string, stop func() error, err error) {
	if err := f.validate(); err != nil {
		return "", nil, err
	}
	registry, err := runtimeRegistry(f.terraformModuleRoots, log)
	if err != nil {
		return "", nil, err
	}
	lock, st, procs, kind, err := f.openStore(ctx, log)
	if err != nil {
		return "", nil, err
	}
	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		_ = st.Close()
		_ = lock.Release()
		return "", nil, fmt.Errorf("listen on %s: %w (is another drover running? choose another address with --listen)", f.listen, err)
	}
	if err := lock.SetListen(ln.Addr().String()); err != nil {
		log.Warn("record listen address in lock file failed", "error", err)
	}
	edge, err := f.edge(ln, st, log)
	scheme := "http"
	if err == nil {
		// The server wraps its listener in TLS after bounding its
		// connections (server.EdgeConfig.TLS).
		if edge.TLS, err = f.apiTLS(ln.Addr(), log); err == nil && edge.TLS != nil {
			scheme = "https"
		}
	}
	if err != nil {
		_, _ = ln.Close(), st.Close()
		_ = lock.Release()
		return "", nil, err
	}
	if !auth.IsLoopback(ln.Addr()) {
		log.Warn("api reachable from other machines", "addr", ln.Addr().String(), "tls", scheme == "https")
	}
	if f.apiOnly {
		log.Warn("api only: the engine and the runtimes do not run; nothing converges until a server runs without --api-only")
	}
	agents, err := f.agents(log)
	if err == nil {
		// Last of what may fail: the first admin token of a new store is
		// made only when the server will serve (and print it).
		err = f.bootstrap(ctx, st, log)
	}
	if err != nil {
		if agents != nil {
			_ = agents.Listener.Close()
		}
		_, _ = ln.Close(), st.Close()
		_ = lock.Release()
		return "", nil, err
	}
	f.agentsOpen = agents
	m := metrics.New()
	m.Instances(func(ctx context.Context) ([]store.Instance, error) { return st.ListInstances(ctx, "", "") }, 15*time.Second)
	edge.Metrics = m
	ui := f.externalURL
	if ui == "" {
		ui = scheme + "://" + ln.Addr().String()
	}
	notifyCfg := server.NotifyConfig{UIURL: ui, MaxAttempts: f.notifyAttempts, MaxBackoff: f.notifyBackoff, KeepDelivered: f.notifyKeep, Observer: m.Notifications(st.CountDeliveries),
		Slack: server.SlackConfig{APIURL: f.slackAPIURL, UsersFile: f.slackUsers}}
	node := New(Config{Metrics: m, Store: st, DataDir: f.data, Registry: registry, Settings: f.settings, Log: log, Workers: f.workers, Edge: edge, ShutdownGrace: f.shutdownGrace, APIOnly: f.apiOnly,
		StoreKind: kind, Shared: kind == "postgres", LeaseTTL: f.leaseTTL, Processes: procs, Agents: agents,
		EventRetention: f.eventRetention, EventArchive: f.archiveDir(), Notify: notifyCfg})
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- node.Run(ctx, ln) }()
	return scheme + "://" + ln.Addr().String(), func() error {
		cancel()
		err := <-done
		if cerr := st.Close(); err == nil {
			err = cerr
		}
		_ = lock.Release()
		return err
	}, nil
}

// agents opens the agent listener of --agent-listen (nil: none).
func (f *serverFlags) agents(log *slog.Logger) (*AgentsConfig, error) {
	if f.agentListen == "" {
		if f.agentURL != "" || f.agentCert != "" || f.agentKey != "" || f.agentAdvertise != "" {
			return nil, cli.UsageErrorf("--agent-url, --agent-advertise-url, --agent-tls-cert and --agent-tls-key need --agent-listen")
		}
		return nil, nil
	}
	if f.apiOnly {
		return nil, cli.UsageErrorf("--agent-listen: a server with --api-only runs no runtime, so it serves no agent")
	}
	names := append([]string(nil), f.publicNames...)
	if f.agentURL != "" {
		u, err := url.Parse(f.agentURL)
		if err != nil || u.Scheme != "https" || u.Host == "" {
			return nil, cli.UsageErrorf("invalid --agent-url %q: want https://HOST:PORT", f.agentURL)
		}
		names = append(names, u.Hostname())
	}
	ln, fingerprint, err := agentListener(f.agentListen, f.agentCert, f.agentKey, f.data, names, log)
	if err != nil {
		return nil, err
	}
	u := f.agentURL
	if u == "" {
		u = "https://" + ln.Addr().String()
	}
	advertise := f.agentAdvertise
	switch {
	case f.database == "":
		if advertise != "" {
			_ = ln.Close()
			return nil, cli.UsageErrorf("--agent-advertise-url is for servers sharing a database: use it with --database")
		}
	case advertise == "none":
		advertise = ""
	case advertise != "":
		if v, err := url.Parse(advertise); err != nil || v.Scheme != "https" || v.Host == "" || v.Port() == "" {
			_ = ln.Close()
			return nil, cli.UsageErrorf("invalid --agent-advertise-url %q: want https://HOST:PORT", advertise)
		}
	case f.agentURL == "":
		// The listener's own address, when it names one host.
		if host, _, err := net.SplitHostPort(ln.Addr().String()); err == nil && !net.ParseIP(host).IsUnspecified() {
			advertise = u
		}
	}
	return &AgentsConfig{Listener: ln, URL: u, Fingerprint: fingerprint, Advertise: advertise}, nil
}

// closingStore is a store the server closes when it stops.
type closingStore interface {
	store.Store
	Close() error
}

// openStore takes the data directory's lock and opens the store: the
// PostgreSQL database of --database, else the directory's SQLite database.
// kind is "postgres" or "sqlite". With PostgreSQL, the records of the
// commands this server runs stay in the data directory (procs, a small
// SQLite database closed with st): they describe this host's processes.
func (f *serverFlags) openStore(ctx context.Context, log *slog.Logger) (lock *datadir.Lock, st closingStore, procs ProcessRecords, kind string, err error) {
	lock, err = lockDataDir(f.data, log)
	if err != nil {
		return nil, nil, nil, "", err
	}
	// The keyring may be made in the directory: after its lock, which
	// decides the directory's mode from what it held.
	keys, err := f.keyring(log)
	if err != nil {
		_ = lock.Release()
		return nil, nil, nil, "", err
	}
	if f.database == "" {
		st, err := sqlite.Open(ctx, filepath.Join(f.data, "drover.db"), sqlite.KeepSuperseded(f.keepDesiredStates), sqlite.WithSealer(keys))
		if err != nil {
			_ = lock.Release()
			return nil, nil, nil, "", err
		}
		return lock, st, nil, "sqlite", nil
	}
	local, err := sqlite.Open(ctx, filepath.Join(f.data, "local.db"))
	if err != nil {
		_ = lock.Release()
		return nil, nil, nil, "", fmt.Errorf("open the data directory's process records: %w", err)
	}
	pg, err := postgres.Open(ctx, f.database, postgres.KeepSuperseded(f.keepDesiredStates), postgres.Logger(log), postgres.WithSealer(keys))
	if err != nil {
		_ = local.Close()
		_ = lock.Release()
		return nil, nil, nil, "", fmt.Errorf("open the PostgreSQL store: %w", err)
	}
	log.Info("store: PostgreSQL", "database", redactURL(f.database))
	return lock, withLocal{Store: pg, local: local}, local, "postgres", nil
}

// withLocal is a shared store and the data directory's own database,
// closed together.
type withLocal struct {
	*postgres.Store
	local *sqlite.Store
}

func (w withLocal) Close() error {
	return errors.Join(w.Store.Close(), w.local.Close())
}

// programRootUsage describes --program-root (and its older name
// --terraform-module-root), of drover server and drover agent.
const programRootUsage = "a directory the programs of runner services (a terraformRunner's module, a pulumiRunner's program: the service's path) may be in, symbolic links resolved; repeatable (default: the working directory, none when it is /)"

// registerProgramRoots adds --program-root and its older name
// --terraform-module-root, both appending to roots (prefix goes before
// the usage).
func registerProgramRoots(fl *pflag.FlagSet, roots *[]string, prefix string) {
	fl.Var(appendValue{roots}, "program-root", prefix+programRootUsage)
	fl.Var(appendValue{roots}, "terraform-module-root", "the older name of --program-root")
}

// appendValue is a repeatable string flag that appends to a slice shared
// by several names.
type appendValue struct{ s *[]string }

func (v appendValue) String() string {
	if v.s == nil {
		return ""
	}
	return strings.Join(*v.s, ",")
}

func (v appendValue) Set(s string) error { *v.s = append(*v.s, s); return nil }

func (v appendValue) Type() string { return "stringArray" }

// runtimeRegistry is the built-in runtime kinds, the runners' with the
// program roots of --program-root (none given: the working directory).
func runtimeRegistry(programRoots []string, log *slog.Logger) (runtimehost.Registry, error) {
	reg, err := builtin.RegistryWith(builtin.Settings{ProgramRoots: programRoots})
	if err != nil {
		return nil, cli.UsageErrorf("%v", err)
	}
	log.Debug("program roots", "given", programRoots)
	return reg, nil
}

func defaultDataDir(name string) string {
	base := os.Getenv("XDG_DATA_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return filepath.Join(".", "drover-"+name)
		}
		base = filepath.Join(home, ".local", "share")
	}
	return filepath.Join(base, "drover", name)
}

func newServerCmd() *cobra.Command {
	var f serverFlags
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run the drover server: the API and the convergence engine",
		Long: `Server runs the API and the convergence engine in one process, on an embedded
SQLite database in --data. It binds to 127.0.0.1 unless told otherwise. Stop it
with Ctrl-C (or SIGTERM): applies in flight may finish for --shutdown-grace,
then are stopped and recorded as interrupted; a second Ctrl-C stops at once.
It can also be killed at any moment and restarted: nothing acknowledged is
lost, what the killed server's commands left running is ended (custom runtime
commands and Terraform preRun commands; not what terraform itself started: see
docs/custom-runtimes.md), and rollouts continue where they stopped (an
interrupted apply runs again).

With --database postgres://… (or DROVER_DATABASE) the state is kept in
PostgreSQL instead, and several servers (each with its own --data for runtime
state) may share one database: services are leased to one server at a time
and an apply is claimed by one, so nothing is applied twice, and a server
that dies hands its work over once its leases expire.

With --api-only it serves the API alone: no engine, no runtime, no backend
call. Status, events and runs show what the engine last recorded (people's
requests never reach a runtime, with or without the flag); what is pushed,
approved or paused is recorded and acted on once a server runs without it.`,
		Example: `  drover server --data /var/lib/drover --listen 127.0.0.1:7420
  drover server --data /var/lib/drover --database postgres://drover@db.internal/drover
  drover server --data /var/lib/drover --api-only   # inspect while backends are unreachable`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := f.logger(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			ctx, cancel := cli.SignalContext(cmd.Context())
			defer cancel()
			addr, stop, err := f.start(ctx, log)
			if err != nil {
				return err
			}
			f.banner(cmd.OutOrStdout(), cmd.ErrOrStderr(), log, addr)
			<-ctx.Done()
			cancel() // a second signal now stops drover at once
			return stop()
		},
	}
	f.register(cmd, defaultDataDir("server"))
	cmd.Flags().BoolVar(&f.apiOnly, "api-only", false, "serve the API without the engine or any runtime: nothing converges, no backend is called")
	return cmd
}

func newDevCmd() *cobra.Command {
	var (
		f     serverFlags
		image string
	)
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run a server with the quickstart applied and a first version pushed",
		Long: `Dev starts a server (like drover server) on a data directory of its own,
applies the quickstart example (two fake runtimes, staging and prod, one
service), pushes a first version, and prints the rollout as it happens: staging
converges, prod waits for staging and for your approval. Run the printed
commands in another terminal. Ctrl-C stops it; run it again to continue.`,
		Example: `  drover dev
  drover dev --listen 127.0.0.1:7421 --data /tmp/drover-dev`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			logFile, err := os.OpenFile(filepath.Join(ensureDir(f.data), "server.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
			if err != nil {
				return err
			}
			defer func() { _ = logFile.Close() }()
			log, err := f.logger(logFile)
			if err != nil {
				return err
			}
			ctx, cancel := cli.SignalContext(cmd.Context())
			defer cancel()
			addr, stop, err := f.start(ctx, log)
			if err != nil {
				return err
			}
			warnExposure(cmd.ErrOrStderr(), addr)
			out := cmd.OutOrStdout()
			for _, l := range f.adminTokenLines(addr) {
				fmt.Fprintln(out, l)
			}
			c, err := f.localClient(addr)
			if err == nil {
				err = devSetup(ctx, out, c, addr, f.data, image, cliCommand())
			}
			if err == nil {
				<-ctx.Done()
			}
			cancel() // a second signal now stops drover at once
			serr := stop()
			if err != nil && !errors.Is(err, context.Canceled) {
				return err
			}
			return serr
		},
	}
	f.register(cmd, defaultDataDir("dev"))
	cmd.Flags().StringVar(&image, "image", "1.27", "image tag of the first push")
	return cmd
}

func ensureDir(dir string) string {
	_ = os.MkdirAll(dir, 0o700)
	return dir
}

// devSetup applies the embedded quickstart, pushes it once (or says what
// an earlier run left), and follows events; drover is how the commands it
// prints start the CLI (see cliCommand).
func devSetup(ctx context.Context, w io.Writer, c *client.Client, addr, data, image, drover string) error {
	dir := filepath.Join(data, "quickstart")
	if err := extract(examples.Quickstart, "quickstart", dir); err != nil {
		return fmt.Errorf("write the quickstart to %s: %w", dir, err)
	}
	fmt.Fprintf(w, "drover dev: server on %s, data in %s, log in %s\n", addr, data, filepath.Join(data, "server.log"))
	fmt.Fprintf(w, "drover dev: web UI at %s/ (sign in with the local token: %s)\n", addr, filepath.Join(data, "token"))
	sources, err := config.Load([]string{dir + "/..."})
	if err != nil {
		return err
	}
	req := apiv1.ApplyConfigsRequest{}
	for _, src := range sources {
		body, err := json.Marshal(src.File)
		if err != nil {
			return err
		}
		req.Configs = append(req.Configs, apiv1.Config{Source: src.Path, Body: body})
	}
	resp, err := c.ApplyConfigs(ctx, req)
	if err != nil {
		return cli.APIError(err)
	}
	var applied []string
	for _, r := range resp.Results {
		applied = append(applied, fmt.Sprintf("%s/%s %s", r.Kind, r.Name, r.Action))
	}
	fmt.Fprintf(w, "applied %s: %s\n", dir, strings.Join(applied, ", "))
	var from int64
	st, err := c.Status(ctx, "quickstart", "web")
	switch {
	case client.IsNotFound(err):
		push, err := c.Push(ctx, "quickstart", "web", apiv1.PushRequest{Params: []apiv1.Param{{Name: "image", Value: image}}})
		if err != nil {
			return cli.APIError(err)
		}
		fmt.Fprintf(w, "pushed web with image=%s: version %s, desired state %s\n", image, push.BundleVersion, push.DesiredStateID)
		fmt.Fprintln(w, "\nstaging converges now; prod waits until staging runs the version and someone approves.")
	case err != nil:
		return cli.APIError(err)
	default:
		fmt.Fprint(w, resumed(st))
		if evs, err := c.Events(ctx, "quickstart", "web", 0, 0); err == nil && len(evs.Events) > 0 {
			from = evs.Events[len(evs.Events)-1].Seq
		}
	}
	fmt.Fprint(w, nextSteps(drover, addr))
	err = c.Watch(ctx, "quickstart", "", from, func(e apiv1.Event) error {
		rc := e.ReleaseChannel
		if rc == "" {
			rc = "-"
		}
		fmt.Fprintf(w, "%s  %-17s %-8s %s\n", e.Time.Local().Format("15:04:05"), cli.Clean(e.Type), cli.Clean(rc), cli.Clean(e.Message))
		return nil
	})
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// resumed says what an earlier run of drover dev left: the service's
// desired state and each release channel's status, as drover status shows
// them.
func resumed(st *apiv1.ServiceStatus) string {
	var b strings.Builder
	fmt.Fprintf(&b, "web was pushed in an earlier run (version %s, desired state %s); resuming: quickstart/web is %s\n",
		cli.Clean(st.DesiredVersion), cli.Clean(st.DesiredStateID), cli.Clean(st.Status))
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	for _, ch := range st.ReleaseChannels {
		running := ch.Version
		if running == "" {
			running = "nothing yet"
		}
		msg := ch.Message
		if ch.Reason != "" && ch.Status != "CONVERGED" {
			msg = ch.Reason + ": " + msg
		}
		fmt.Fprintf(tw, "  %s\t%s\truns %s\t%s\n", cli.Clean(ch.Name), cli.Clean(ch.Status), cli.Clean(running), cli.Clean(msg))
	}
	_ = tw.Flush()
	return b.String()
}

// nextSteps are the commands drover dev suggests, started as drover (with
// --server when addr is not the default).
func nextSteps(drover, addr string) string {
	server := ""
	if addr != client.DefaultServer {
		server = " --server " + addr
	}
	var b strings.Builder
	if strings.HasPrefix(drover, "go run") {
		b.WriteString("\ndrover runs from go run, so the commands below do too (from this directory); to start them quicker,\n" +
			"build it once, go build -o bin/drover ./cmd/drover, and use bin/drover instead of go run ./cmd/drover.\n")
	}
	fmt.Fprintf(&b, `
In another terminal:
  %[2]s status web --app quickstart%[1]s
  %[2]s approve web --app quickstart --release-channel prod%[1]s
  %[2]s wait web --app quickstart%[1]s
  %[2]s push web --app quickstart --param image=1.28 --wait%[1]s
  %[2]s events web --app quickstart%[1]s
Ctrl-C stops the server; drover dev again continues where it stopped.

`, server, drover)
	return b.String()
}

// cliCommand is how this process's user starts the drover CLI: "go run
// ./cmd/drover" when the binary is one go run built (in a go-build
// directory), the path it was started by when it has one (bin/drover),
// else drover (found on PATH).
func cliCommand() string {
	exe, err := os.Executable()
	if err == nil && isGoRunBinary(exe) {
		return "go run ./cmd/drover"
	}
	if arg := os.Args[0]; strings.ContainsRune(arg, filepath.Separator) && !isGoRunBinary(arg) {
		return arg
	}
	return "drover"
}

// isGoRunBinary reports whether path is an executable go run built: in a
// go-build work directory (…/go-build123/b001/exe/drover) or the build
// cache's (…/go-build/…/exe/drover).
func isGoRunBinary(path string) bool {
	p := filepath.ToSlash(path)
	return strings.Contains(p, "/go-build") && strings.Contains(p, "/exe/")
}

// extract copies the embedded directory root of fsys into dir.
func extract(fsys fs.FS, root, dir string) error {
	return fs.WalkDir(fsys, root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		target := filepath.Join(dir, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o750)
		}
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o600)
	})
}

// Commands are the verbs that open a store in this process: drover server,
// drover dev, drover bench and drover admin, for the CLI's root (cli.Main).
func Commands() []*cobra.Command {
	return []*cobra.Command{newServerCmd(), newDevCmd(), newBenchCmd(), newAdminCmd(), newAgentCmd()}
}

// redactURL is a database URL without its password, for logs.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "(a connection string)"
	}
	if q := u.Query(); q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}

// archiveDir is where event retention archives events.
func (f *serverFlags) archiveDir() string {
	if f.eventArchive != "" {
		return f.eventArchive
	}
	return filepath.Join(f.data, "events-archive")
}

// isHTTPURL reports whether raw is an http or https URL with a host.
func isHTTPURL(raw string) bool {
	u, err := url.Parse(raw)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}
