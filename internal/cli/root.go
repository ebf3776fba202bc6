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
	"github.com/spf13/pflag"

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
	linkKustomize.Do(func() {
		config.RenderKustomize = manifest.RenderKustomizeDir
		config.KustomizeLocalRefs = manifest.KustomizeLocalRefs
	})
	root := NewRoot(stdout, stderr, cmds...)
	root.SetArgs(args)
	// cobra adds help and completion when it executes; Find must see them.
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd(args...)
	// Completion scripts ask cobra's hidden __complete command, which cobra
	// adds only as it executes: Find would call it unknown.
	if _, _, err := root.Find(args); err != nil && !isCompletionRequest(args) {
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
		Version:       version.Info().String(),
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
		newApplyCmd(g), newPushCmd(g), newReleaseCmd(g), newStatusCmd(g), newCompiledCmd(g), newWaitCmd(g),
		newApproveCmd(g, false), newApproveCmd(g, true), newBypassCmd(g), newFreezeCmd(g), newUnfreezeCmd(g), newFreezesCmd(g), newPreviewCmd(g),
		newChannelCmd(g, "pause", "Stop applying to a release channel (or all) until resumed", (*client.Client).Pause),
		newChannelCmd(g, "resume", "Let drover apply to a paused release channel (or all) again", (*client.Client).Resume),
		newRollbackCmd(g), newVersionsCmd(g),
		newEventsCmd(g), newRunsCmd(g), newRunCmd(g), newRuntimesCmd(g),
		newTokensCmd(g), newSecretsCmd(g), newNotificationsCmd(g), newWhoAmICmd(g), newAuditCmd(g), newLoginCmd(g), newLogoutCmd(g), newSessionsCmd(g), newContextCmd(),
		newVersionCmd(),
	)
	root.AddCommand(cmds...)
	markUsageErrors(root)
	addCompletions(root, g)
	for _, c := range root.Commands() {
		if c.Annotations[localAnnotation] != "" {
			hideConnectionFlags(c)
		}
	}
	return root
}

// localAnnotation marks a command that reads only local files and never
// talks to a server (validate, compile, version): its help leaves out the
// server-connection flags.
const localAnnotation = "drover.local"

// connectionFlags are the root's flags that say how to reach a server.
var connectionFlags = []string{"server", "user", "token", "tls-fingerprint", "ca-file", "request-timeout"}

// hideConnectionFlags leaves the server-connection flags out of c's help
// (they are still accepted, as on every command).
func hideConnectionFlags(c *cobra.Command) {
	c.SetHelpFunc(func(cmd *cobra.Command, args []string) {
		root := cmd.Root()
		var hidden []*pflag.Flag
		for _, name := range connectionFlags {
			if f := root.PersistentFlags().Lookup(name); f != nil && !f.Hidden {
				f.Hidden = true
				hidden = append(hidden, f)
			}
		}
		defer func() {
			for _, f := range hidden {
				f.Hidden = false
			}
		}()
		c.SetHelpFunc(nil)
		defer hideConnectionFlags(c)
		cmd.HelpFunc()(cmd, args)
	})
}

// isCompletionRequest reports whether args ask for shell completions (what
// the scripts of drover completion run).
func isCompletionRequest(args []string) bool {
	return len(args) > 0 && (args[0] == cobra.ShellCompRequestCmd || args[0] == cobra.ShellCompNoDescRequestCmd)
}

func newVersionCmd() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:         "version",
		Short:       "Print the drover version, the commit it was built from and the Go toolchain",
		Annotations: map[string]string{localAnnotation: "true"},
		Args:        cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := outputFormat(output, "text", "json"); err != nil {
				return err
			}
			info := version.Info()
			if output == "json" {
				return writeJSON(cmd.OutOrStdout(), info)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "drover %s %s %s\n", info, info.GoVersion, info.Platform)
			return nil
		},
	}
	addOutputFlag(cmd, &output, "text", "json")
	return cmd
}
