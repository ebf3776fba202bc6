// Package cli implements drover's command-line verbs that talk to a server
// (and validate and compile, which need none). Each verb is a cobra command
// built by a small constructor; the root command wires them together. The
// verbs that run a server (server, dev, bench) live in the composition root,
// internal/daemon, and come in through Main's and NewRoot's cmds.
package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/spf13/cobra"

	"github.com/drover-dev/drover/api/client"
	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/manifest"
	"github.com/drover-dev/drover/internal/version"
)

// ExitError carries a process exit code through cobra.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit code %d", e.Code)
	}
	return e.Err.Error()
}

func (e *ExitError) Unwrap() error { return e.Err }

// linkKustomize installs the kustomize renderer once (Main may run in parallel tests).
var linkKustomize sync.Once

// Main runs the CLI with args and returns the process exit code: exitOK,
// exitError, exitFailed or exitTimeout (wait), or exitUsage for every usage
// error, cobra's own (unknown command or flag, argument count) included.
// cmds are further verbs to add to the root (see NewRoot).
func Main(args []string, stdout, stderr io.Writer, cmds ...*cobra.Command) int {
	linkKustomize.Do(func() { config.RenderKustomize = manifest.RenderKustomizeDir })
	root := NewRoot(stdout, stderr, cmds...)
	root.SetArgs(args)
	// cobra adds help and completion when it executes; Find must see them.
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd(args...)
	if _, _, err := root.Find(args); err != nil {
		// An unknown command: cobra reports it before any command runs.
		fmt.Fprintf(stderr, "error: %v\nrun 'drover --help' for usage\n", err)
		return exitUsage
	}
	cmd, err := root.ExecuteC()
	if err == nil {
		return exitOK
	}
	if isUsage(err) {
		fmt.Fprintf(stderr, "error: %v\nrun '%s --help' for usage\n", err, cmd.CommandPath())
		return exitUsage
	}
	var exit *ExitError
	if errors.As(err, &exit) {
		if exit.Err != nil {
			fmt.Fprintln(stderr, cleanText(exit.Err.Error()))
		}
		return exit.Code
	}
	fmt.Fprintln(stderr, "error:", cleanText(err.Error()))
	return exitError
}

// NewRoot builds the root command with the API-client verbs and cmds (the
// server verbs of internal/daemon), whose errors it treats like its own: a
// usage error (UsageErrorf, a bad flag) exits 64, an ExitError its code.
func NewRoot(stdout, stderr io.Writer, cmds ...*cobra.Command) *cobra.Command {
	root := &cobra.Command{
		Use:   "drover",
		Short: "Intent-based continuous delivery",
		Long: `drover continuously drives every environment to what you declared: which
services run where, and under which conditions (release channel ordering,
approvals, protections). It reads Prodvana-format configs (*.pvn.yaml).`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version.Version,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	g := &globals{}
	root.PersistentFlags().StringVar(&g.server, "server", "", "drover server URL (env DROVER_SERVER; default: the current context's server (drover login), else "+client.DefaultServer+")")
	root.PersistentFlags().StringVar(&g.user, "user", defaultUser(), userFlagHelp)
	root.PersistentFlags().StringVar(&g.token, "token", "", "an API token, or the server's local token (env DROVER_TOKEN; default: the current context's, else the token a server started by this OS user recorded for --server)")
	root.PersistentFlags().StringVar(&g.tlsFingerprint, "tls-fingerprint", os.Getenv("DROVER_TLS_FINGERPRINT"), "pin an https server's certificate: sha256:HEX, as the server printed it (env DROVER_TLS_FINGERPRINT; default: the context's, or the one a server started by this OS user recorded)")
	root.PersistentFlags().StringVar(&g.caFile, "ca-file", os.Getenv("DROVER_CA_FILE"), "check an https server's certificate against this CA (PEM) instead of the system's (env DROVER_CA_FILE)")
	root.PersistentFlags().DurationVar(&g.requestTimeout, "request-timeout", client.DefaultTimeout, "give up on a request the server does not answer in this long (0 = never; event streams reconnect instead)")
	root.AddCommand(
		newValidateCmd(), newCompileCmd(),
		newApplyCmd(g), newPushCmd(g), newStatusCmd(g), newCompiledCmd(g), newWaitCmd(g),
		newApproveCmd(g, false), newApproveCmd(g, true), newBypassCmd(g), newFreezeCmd(g), newUnfreezeCmd(g), newFreezesCmd(g), newPreviewCmd(g),
		newChannelCmd(g, "pause", "Stop applying to a release channel (or all) until resumed", (*client.Client).Pause),
		newChannelCmd(g, "resume", "Let drover apply to a paused release channel (or all) again", (*client.Client).Resume),
		newChannelCmd(g, "rollback", "Roll a release channel (or all) back to its last converged version", (*client.Client).Rollback),
		newEventsCmd(g), newRunsCmd(g), newRunCmd(g), newRuntimesCmd(g),
		newTokensCmd(g), newSecretsCmd(g), newWhoAmICmd(g), newAuditCmd(g), newLoginCmd(g), newLogoutCmd(g), newSessionsCmd(g), newContextCmd(),
		newVersionCmd(),
	)
	root.AddCommand(cmds...)
	markUsageErrors(root)
	return root
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the drover version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintln(cmd.OutOrStdout(), "drover", version.Version)
			return nil
		},
	}
}
