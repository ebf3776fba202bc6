package cli

import (
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	apiv1 "github.com/drover-dev/drover/api/v1"
)

func newCompiledCmd(g *globals) *cobra.Command {
	var app, rc, id, output string
	cmd := &cobra.Command{
		Use:   "compiled SERVICE --app APP",
		Short: "Show the compiled config a push stored, per release channel",
		Long: `Compiled prints what the server converges a service to in each release channel:
the runtime, the gates (dependencies, approvals, protections), the environment
and the objects the runtime applies, as the push compiled them. Secret values
are redacted. It reads the active desired state unless --desired-state names
an earlier one (drover compile renders configs locally, without a server).`,
		Example: `  drover compiled web --app quickstart
  drover compiled web --app quickstart --release-channel prod -o yaml
  drover compiled web --app quickstart --desired-state ds-20261126-... -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := outputFormat(output, "text", "yaml", "json"); err != nil {
				return err
			}
			if app == "" {
				return usageError(errors.New("--app is required"))
			}
			out, err := g.client().Compiled(cmd.Context(), app, args[0], id, rc)
			if err != nil {
				return apiErr(err)
			}
			switch output {
			case "json":
				return writeJSON(cmd.OutOrStdout(), out)
			case "yaml":
				return writeYAML(cmd.OutOrStdout(), out)
			}
			printCompiled(cmd.OutOrStdout(), out)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&app, "app", "", "application of the service")
	f.StringVar(&rc, "release-channel", "", "only this release channel")
	f.StringVar(&id, "desired-state", "", "this desired state (default: the active one)")
	f.StringVarP(&output, "output", "o", "text", "output format: text, yaml or json")
	return cmd
}

// printCompiled writes each channel's settings as comments, then its
// objects as a YAML stream.
func printCompiled(w io.Writer, c *apiv1.CompiledService) {
	state := "active"
	if !c.Active {
		state = "not active"
	}
	fmt.Fprintf(w, "# %s/%s %s (desired state %s, %s)\n", c.Application, c.Service, c.Version, c.DesiredStateID, state)
	for _, ch := range c.ReleaseChannels {
		fmt.Fprintf(w, "\n# release channel %s: runtime %s", ch.Name, ch.Runtime)
		if ch.RuntimeKind != "" {
			fmt.Fprintf(w, " (%s)", ch.RuntimeKind)
		}
		if ch.Namespace != "" {
			fmt.Fprintf(w, ", namespace %s", ch.Namespace)
		}
		fmt.Fprintln(w)
		line := func(k, v string) {
			if v != "" {
				fmt.Fprintf(w, "#   %s: %s\n", k, v)
			}
		}
		line("group", ch.Group)
		line("after", strings.Join(ch.DependsOn, ", "))
		var gates []string
		for _, a := range ch.Approvals {
			g := fmt.Sprintf("%d approver(s)", a.MinApprovers)
			if a.Topic != "" {
				g += " (" + a.Topic + ")"
			}
			gates = append(gates, g)
		}
		if ch.EveryAction {
			gates = append(gates, "an approval before each apply that heals drift")
		}
		line("approvals", strings.Join(gates, "; "))
		var checks []string
		for _, k := range ch.Checks {
			name := k.Name
			if k.Attachment != "" && k.Attachment != k.Name {
				name = k.Attachment + " (" + k.Name + ")"
			}
			checks = append(checks, fmt.Sprintf("%s %s in %s", k.Kind, name, k.Phase))
		}
		line("checks", strings.Join(checks, "; "))
		if ch.AutoRollback {
			line("rollback", "automatic on failure")
		}
		line("progress deadline", ch.ProgressDeadline)
		line("convergence grace", ch.ConvergenceGrace)
		keys := make([]string, 0, len(ch.Env))
		for k := range ch.Env {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			line("env "+k, ch.Env[k])
		}
		for _, o := range ch.Objects {
			fmt.Fprintf(w, "---\n# %s\n%s", o.Object, o.YAML)
			if !strings.HasSuffix(o.YAML, "\n") {
				fmt.Fprintln(w)
			}
		}
	}
}
