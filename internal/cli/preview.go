package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	apiv1 "github.com/drover-dev/drover/api/v1"
)

func newPreviewCmd(g *globals) *cobra.Command {
	var (
		app, output      string
		params, rcParams []string
		noDiff           bool
	)
	cmd := &cobra.Command{
		Use:   "preview SERVICE --app APP [--param NAME=VALUE]...",
		Short: "Show what a push would change in every release channel, and what stands in the way",
		Long: `Preview compiles the service's latest applied config with the given parameter
values, as drover push would, and shows for every release channel what would change
against what was last applied there: each object created, changed or deleted with a
unified diff of its YAML (Kubernetes manifests; a custom runtime's commands and
parameters), the environment variables added, changed or removed (names only), and
the gates the rollout would wait for (dependencies, protections with their outcome now,
extensions, approvals, freezes). Secrets are redacted. Nothing is pushed or applied.`,
		Example: `  drover preview web --app quickstart --param image=1.28
  drover preview api --app shop --param image=2.0 -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := outputFormat(output, "text", "json"); err != nil {
				return err
			}
			if app == "" {
				return usageError(errors.New("--app is required"))
			}
			req, err := pushRequest(g, params, rcParams)
			if err != nil {
				return err
			}
			p, err := g.client().Preview(cmd.Context(), app, args[0], req)
			if err != nil {
				return apiErr(err)
			}
			if output == "json" {
				return writeJSON(cmd.OutOrStdout(), p)
			}
			printPreview(cmd.OutOrStdout(), p, !noDiff)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&app, "app", "", "application of the service (required)")
	f.StringArrayVar(&params, "param", nil, "parameter value NAME=VALUE (repeatable)")
	f.StringArrayVar(&rcParams, "param-by-release-channel", nil, "parameter value for one release channel RC=NAME=VALUE (repeatable)")
	f.BoolVar(&noDiff, "no-diff", false, "list the objects that change without their diffs")
	f.StringVarP(&output, "output", "o", "text", "output format: text or json")
	return cmd
}

func printPreview(w io.Writer, p *apiv1.PreviewResponse, diffs bool) {
	name := p.BundleVersion
	if p.BundleName != "" {
		name = p.BundleName + " (" + p.BundleVersion + ")"
	}
	fmt.Fprintf(w, "a push would roll out %s (nothing was pushed)\n", clean(name))
	for _, c := range p.Channels {
		from := c.From
		if from == "" {
			from = "nothing yet"
		}
		fmt.Fprintf(w, "\n%s (%s): %s -> %s", clean(c.Name), clean(c.Runtime), clean(from), clean(c.To))
		if c.Unchanged {
			fmt.Fprint(w, ": no change to its objects or environment")
		}
		fmt.Fprintln(w)
		if c.Note != "" {
			fmt.Fprintf(w, "  note: %s\n", clean(c.Note))
		}
		for _, pc := range c.Params {
			fmt.Fprintf(w, "  parameter %s: %s -> %s\n", clean(pc.Name), clean(orDefault(pc.From)), clean(orDefault(pc.To)))
		}
		for _, o := range c.Objects {
			if o.Action == "unchanged" {
				continue
			}
			fmt.Fprintf(w, "  %s %s\n", clean(o.Action), clean(o.Object))
			if diffs && o.Diff != "" {
				for _, line := range strings.Split(strings.TrimRight(o.Diff, "\n"), "\n") {
					fmt.Fprintf(w, "    %s\n", clean(line))
				}
			}
		}
		if c.Plan != "" {
			fmt.Fprintf(w, "  terraform plan: %s\n", clean(c.Plan))
		}
		if len(c.Env) > 0 {
			fmt.Fprintf(w, "  env: %s\n", clean(strings.Join(c.Env, " ")))
		}
		for _, g := range c.Gates {
			fmt.Fprintf(w, "  waits for %s\n", clean(g))
		}
	}
}

// orDefault is a parameter value as people read it: "" is the config's
// default.
func orDefault(v string) string {
	if v == "" {
		return "(default)"
	}
	return v
}
