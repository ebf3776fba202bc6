package cli

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	apiv1 "github.com/drover-dev/drover/api/v1"
)

func newRuntimesCmd(g *globals) *cobra.Command {
	var (
		output string
		wide   bool
	)
	cmd := &cobra.Command{
		Use:   "runtimes",
		Short: "List the configured runtimes and what their clusters reported",
		Long: `Runtimes lists the configured runtimes. For a Kubernetes runtime it shows the
cluster's version and how many API versions it serves, as drover last asked
it (at start, after configs are applied, and every 10 minutes): pushes render
Helm charts against them (.Capabilities), unless the runtime's config sets
kubernetes.kubeVersion. --wide lists the API versions.`,
		Example: `  drover runtimes
  drover runtimes -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := outputFormat(output, "text", "json"); err != nil {
				return err
			}
			list, err := g.client().Runtimes(cmd.Context())
			if err != nil {
				return apiErr(err)
			}
			if output == "json" {
				return writeJSON(cmd.OutOrStdout(), list)
			}
			return printRuntimes(cmd.OutOrStdout(), list, wide, time.Now())
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	cmd.Flags().BoolVar(&wide, "wide", false, "list each runtime's API versions")
	return cmd
}

func printRuntimes(w io.Writer, list *apiv1.RuntimeList, wide bool, now time.Time) error {
	if len(list.Runtimes) == 0 {
		fmt.Fprintln(w, "no runtimes configured")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tKIND\tKUBERNETES\tAPI VERSIONS\tREPORTED")
	for _, r := range list.Runtimes {
		version, apis, when := "-", "-", "-"
		if !r.ObservedAt.IsZero() {
			version = orDash(clean(r.KubeVersion))
			apis = fmt.Sprint(len(r.APIVersions))
			when = now.Sub(r.ObservedAt).Round(time.Second).String() + " ago"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", clean(r.Name), orDash(clean(r.Kind)), version, apis, when)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if wide {
		for _, r := range list.Runtimes {
			if len(r.APIVersions) == 0 {
				continue
			}
			fmt.Fprintf(w, "\n%s:\n", clean(r.Name))
			for _, v := range r.APIVersions {
				fmt.Fprintf(w, "  %s\n", clean(v))
			}
		}
	}
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
