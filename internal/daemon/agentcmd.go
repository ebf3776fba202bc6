package daemon

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/drover-dev/drover/internal/agent"
	"github.com/drover-dev/drover/internal/cli"
	"github.com/drover-dev/drover/internal/runtimehost/builtin"
	"github.com/drover-dev/drover/internal/runtimes/remote"
)

func newAgentCmd() *cobra.Command {
	var (
		cfg                                               agent.Config
		tokenFile, logLevel, mode, serverFlag, healthAddr string
		logFormat                                         string
		moduleRoots                                       []string
	)
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Serve a linked runtime from inside its network, dialing out to the server",
		Long: `Agent serves a runtime linked with drover runtimes link. It dials out to the
server's agent address over TLS (--server, as link printed it), proves itself
with the join token, and keeps the connection open, reconnecting with backoff
when it is lost. The server sends it the calls of its runtime (fetch, apply,
watch, ...); the agent does the work with its own credentials, which never
leave it: nothing it can reach is reachable from the server but through the
calls on the connection it opened.

--mode kubernetes (the default in a cluster, or with --kubeconfig) serves a
Kubernetes runtime with the in-cluster service account or the kubeconfig.
It also runs the commands of custom runtimes and runners that name the
linked runtime as their proxyRuntime, as Kubernetes Jobs in the cluster (in the proxyRuntime's
containerOrchestration.k8s.namespace, else drover-proxy-runtime-<runtime>).
--mode commands (the default elsewhere) runs the commands of custom
runtimes and the Terraform and Pulumi runners that name the linked runtime
as their proxyRuntime, on this host; their programs (Terraform modules,
Pulumi programs) must lie in a --program-root directory (default: the
agent's working directory).

The server's certificate is checked against --fingerprint (printed by link;
a self-signed server certificate is then fine) or else against --ca-file or
the system's roots. The agent stops (exit 1) when the server refuses its
token: the runtime was unlinked or its token rotated.`,
		Example: `  drover agent --server https://drover.example.com:7421 --fingerprint sha256:3f… --token-file /etc/drover/token --kubeconfig ~/.kube/config
  drover agent --server https://10.0.0.5:7421 --fingerprint sha256:3f… --token-file prod-eu.token --mode commands`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := (&serverFlags{logLevel: logLevel, logFormat: logFormat}).logger(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			cfg.Server = serverFlag
			if cfg.Server == "" {
				return cli.UsageErrorf("--server is required: the server's agent address, as drover runtimes link printed it")
			}
			if tokenFile != "" {
				if cfg.Token != "" {
					return cli.UsageErrorf("give --token or --token-file, not both")
				}
				b, err := os.ReadFile(tokenFile)
				if err != nil {
					return fmt.Errorf("--token-file: %w", err)
				}
				cfg.Token = strings.TrimSpace(string(b))
			}
			if cfg.Token == "" {
				cfg.Token = os.Getenv("DROVER_AGENT_TOKEN")
			}
			if cfg.Token == "" {
				return cli.UsageErrorf("no join token: give --token, --token-file or DROVER_AGENT_TOKEN (drover runtimes link printed it)")
			}
			if cfg.Fingerprint != "" {
				if _, err := agent.ParseFingerprint(cfg.Fingerprint); err != nil {
					return cli.UsageErrorf("invalid --fingerprint: %v", err)
				}
			}
			switch mode {
			case "":
				mode = remote.ModeCommands
				if cfg.Kubeconfig != "" || os.Getenv("KUBERNETES_SERVICE_HOST") != "" {
					mode = remote.ModeKubernetes
				}
			case remote.ModeKubernetes, remote.ModeCommands:
			default:
				return cli.UsageErrorf("invalid --mode %q: use kubernetes or commands", mode)
			}
			if mode == remote.ModeCommands && (cfg.Kubeconfig != "" || cfg.Context != "") {
				return cli.UsageErrorf("--kubeconfig and --context serve a Kubernetes runtime: use them with --mode kubernetes")
			}
			cfg.Mode = mode
			if healthAddr != "" {
				ln, err := net.Listen("tcp", healthAddr)
				if err != nil {
					return fmt.Errorf("--health-listen: %w", err)
				}
				cfg.Health = ln
			}
			if cfg.Registry, err = runtimeRegistry(moduleRoots, log); err != nil {
				return err
			}
			cfg.Jobs = builtin.Jobs()
			cfg.Log = log
			ctx, cancel := cli.SignalContext(cmd.Context())
			defer cancel()
			log.Info("drover agent starting", "server", cfg.Server, "mode", cfg.Mode)
			err = agent.Run(ctx, cfg)
			if errors.Is(err, remote.ErrRefused) {
				return fmt.Errorf("%w (link the runtime again, or rotate its token, and start the agent with the new one)", err)
			}
			return err
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&serverFlag, "server", os.Getenv("DROVER_AGENT_SERVER"), "the server's agent address, https://HOST:PORT (env DROVER_AGENT_SERVER)")
	fl.StringVar(&cfg.Token, "token", "", "the join token (prefer --token-file or DROVER_AGENT_TOKEN: arguments are visible to other users)")
	fl.StringVar(&tokenFile, "token-file", "", "a file holding the join token")
	fl.StringVar(&cfg.Fingerprint, "fingerprint", os.Getenv("DROVER_AGENT_FINGERPRINT"), "pin the server's certificate: sha256:<hex>, as drover runtimes link printed it (env DROVER_AGENT_FINGERPRINT)")
	fl.StringVar(&cfg.CAFile, "ca-file", "", "CA certificates (PEM) to check the server's certificate against, instead of the system's")
	fl.StringVar(&mode, "mode", "", "what to serve: kubernetes or commands (default: kubernetes in a cluster or with --kubeconfig, else commands)")
	fl.StringVar(&cfg.Kubeconfig, "kubeconfig", "", "kubeconfig of the cluster to serve (default in a cluster: its service account)")
	fl.StringVar(&cfg.Context, "context", "", "kubeconfig context (default: the current one)")
	fl.StringVar(&cfg.DataDir, "data", "", "a directory runtimes may keep state in (default: none)")
	registerLogFlags(cmd, &logLevel, &logFormat)
	registerProgramRoots(fl, &moduleRoots, "with --mode commands: ")
	fl.StringVar(&healthAddr, "health-listen", "", "serve probes on this address: /livez, and /healthz (503 when not connected to the server for 2 minutes); e.g. :8080")
	return cmd
}
