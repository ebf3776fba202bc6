package cli

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	apiv1 "github.com/drover-dev/drover/api/v1"
)

func newRunsCmd(g *globals) *cobra.Command {
	var (
		app, rc, kind, output string
		limit                 int
	)
	cmd := &cobra.Command{
		Use:   "runs SERVICE --app APP",
		Short: "List the commands runtimes ran for a service (fetch, apply, getInfo, plan, check)",
		Long: `Runs lists the commands custom runtimes and the Terraform runner ran for a
service, newest first, with their exit codes: their fetches, applies and
getInfo, and the runs of protections that run commands (kind check). drover
run ID prints one run's command and its separate stdout and stderr.`,
		Example: `  drover runs vm --app infra --release-channel staging --kind apply
  drover runs api --app shop --release-channel prod --kind check
  drover run 42`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := outputFormat(output, "text", "json"); err != nil {
				return err
			}
			if app == "" {
				return usageError(errors.New("--app is required"))
			}
			list, err := g.client().Runs(cmd.Context(), app, args[0], rc, kind, limit)
			if err != nil {
				return apiErr(err)
			}
			if output == "json" {
				return writeJSON(cmd.OutOrStdout(), list)
			}
			if len(list.Runs) == 0 {
				fmt.Fprintln(cmd.OutOrStdout(), "no runs")
				return nil
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tRELEASE CHANNEL\tKIND\tVERSION\tEXIT\tDURATION\tSTARTED\tCOMMAND")
			for _, r := range list.Runs {
				exit := strconv.Itoa(r.ExitCode)
				if r.Error != "" {
					exit += " (" + clean(r.Error) + ")"
				}
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, clean(r.ReleaseChannel), clean(r.Kind), clean(r.Version), exit,
					r.FinishedAt.Sub(r.StartedAt).Round(1e6), r.StartedAt.Local().Format("01-02 15:04:05"), clean(shorten(strings.Join(r.Command, " "), 60)))
			}
			return tw.Flush()
		},
	}
	f := cmd.Flags()
	f.StringVar(&app, "app", "", "application of the service (required)")
	f.StringVar(&rc, "release-channel", "", "only this release channel")
	f.StringVar(&kind, "kind", "", "only this kind: fetch, apply, getInfo, plan, init, check")
	f.IntVar(&limit, "limit", 50, "at most this many runs (0 = all kept)")
	f.StringVarP(&output, "output", "o", "text", "output format: text or json")
	return cmd
}

func newRunCmd(g *globals) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:     "run ID",
		Short:   "Show one runtime command run with its stdout and stderr",
		Example: `  drover run 42`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := outputFormat(output, "text", "json"); err != nil {
				return err
			}
			id, err := strconv.ParseInt(args[0], 10, 64)
			if err != nil {
				return usageErrorf("run id %q is not a number", args[0])
			}
			r, err := g.client().Run(cmd.Context(), id)
			if err != nil {
				return apiErr(err)
			}
			if output == "json" {
				return writeJSON(cmd.OutOrStdout(), r)
			}
			printRun(cmd.OutOrStdout(), r)
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	return cmd
}

func printRun(w io.Writer, r *apiv1.Run) {
	fmt.Fprintf(w, "run %d: %s of %s/%s in %s on %s (version %s)\n", r.ID, clean(r.Kind), clean(r.Application), clean(r.Service), clean(r.ReleaseChannel), clean(r.Runtime), clean(r.Version))
	fmt.Fprintf(w, "command:  %s\n", clean(strings.Join(r.Command, " ")))
	fmt.Fprintf(w, "exit:     %d", r.ExitCode)
	if r.Error != "" {
		fmt.Fprintf(w, " (%s)", clean(r.Error))
	}
	fmt.Fprintf(w, "\nstarted:  %s, took %s\n", r.StartedAt.Local().Format("2006-01-02 15:04:05"), r.FinishedAt.Sub(r.StartedAt).Round(1e6))
	if r.Truncated {
		fmt.Fprintln(w, "(output was truncated: the end is kept)")
	}
	for _, part := range []struct{ name, text string }{{"stdout", r.Stdout}, {"stderr", r.Stderr}} {
		fmt.Fprintf(w, "--- %s\n", part.name)
		if part.text != "" {
			fmt.Fprint(w, cleanText(part.text))
			if !strings.HasSuffix(part.text, "\n") {
				fmt.Fprintln(w)
			}
		}
	}
}

func shorten(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ") // one line in a table
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}
