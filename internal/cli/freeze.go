package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	apiv1 "github.com/drover-dev/drover/api/v1"
)

func newFreezeCmd(g *globals) *cobra.Command {
	var (
		app, rc, until, reason, output string
		noHeal                         bool
	)
	cmd := &cobra.Command{
		Use:   "freeze --reason TEXT [--app APP] [--release-channel NAME|QUERY] [--until TIME] [--no-heal]",
		Short: "Stop the line: hold every new rollout in a scope until unfrozen",
		Long: `Freeze holds every new rollout of the release channels in its scope: all of them,
one application's (--app), or the channels a name or label query selects
(--release-channel prod, --release-channel "@group=production"). Rollouts already under
way finish; drift healing of what runs goes on unless --no-heal. Each held channel
shows BLOCKED (FROZEN) with who froze it, since when and why; the freeze is recorded in
the event history, and lasts until drover unfreeze or --until (an RFC 3339 time, or a
duration from now such as 72h). Freezes are drover's own.`,
		Example: `  drover freeze --reason "holiday freeze" --until 2027-01-04T08:00:00Z
  drover freeze --app shop --release-channel prod --reason "INC-42: payments degraded" --no-heal
  drover unfreeze --app shop --release-channel prod`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := outputFormat(output, "text", "json"); err != nil {
				return err
			}
			if strings.TrimSpace(reason) == "" {
				return usageError(errors.New("--reason is required: it is shown on every release channel the freeze holds"))
			}
			user, err := g.userField()
			if err != nil {
				return err
			}
			req := apiv1.FreezeRequest{Application: app, ReleaseChannel: rc, Reason: reason, NoHeal: noHeal, User: user}
			if until != "" {
				if req.Until, err = parseUntil(until, time.Now()); err != nil {
					return usageError(err)
				}
			}
			f, err := g.client().Freeze(cmd.Context(), req)
			if err != nil {
				return apiErr(err)
			}
			if output == "json" {
				return writeJSON(cmd.OutOrStdout(), f)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "froze %s as %s: %s\n", clean(scopeText(f.Application, f.ReleaseChannel)), clean(f.ID), clean(f.Reason))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&reason, "reason", "", "why, shown on every held channel (required)")
	f.StringVar(&app, "app", "", "only this application (default: every one)")
	f.StringVar(&rc, "release-channel", "", "only these release channels: a name or a label query (default: every one)")
	f.StringVar(&until, "until", "", "end by itself then: an RFC 3339 time or a duration from now (default: until drover unfreeze)")
	f.BoolVar(&noHeal, "no-heal", false, "hold drift healing too")
	f.StringVarP(&output, "output", "o", "text", "output format: text or json")
	return cmd
}

func newUnfreezeCmd(g *globals) *cobra.Command {
	var app, rc, comment, output string
	cmd := &cobra.Command{
		Use:   "unfreeze [ID] [--app APP] [--release-channel NAME|QUERY] [--comment TEXT]",
		Short: "Lift freezes: one by id, or those of exactly a scope",
		Long: `Unfreeze lifts the freeze with ID (drover freezes lists them), or every freeze in
force whose scope is exactly --app and --release-channel (none of them: the freezes of
everything). Held release channels start their rollouts at once. The lift is recorded
in the event history with who lifted it and why (--comment).`,
		Example: `  drover unfreeze frz-3c0ffee1d2a4
  drover unfreeze --app shop --release-channel prod --comment "INC-42 resolved"`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := outputFormat(output, "text", "json"); err != nil {
				return err
			}
			user, err := g.userField()
			if err != nil {
				return err
			}
			req := apiv1.UnfreezeRequest{Application: app, ReleaseChannel: rc, User: user, Comment: comment}
			if len(args) == 1 {
				if app != "" || rc != "" {
					return usageError(errors.New("give an ID or a scope (--app, --release-channel), not both"))
				}
				req.ID = args[0]
			}
			out, err := g.client().Unfreeze(cmd.Context(), req)
			if err != nil {
				return apiErr(err)
			}
			if output == "json" {
				return writeJSON(cmd.OutOrStdout(), out)
			}
			for _, f := range out.Freezes {
				fmt.Fprintf(cmd.OutOrStdout(), "lifted %s (%s, by %s: %s)\n", clean(f.ID), clean(scopeText(f.Application, f.ReleaseChannel)), clean(f.CreatedBy), clean(f.Reason))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&app, "app", "", "the scope's application")
	f.StringVar(&rc, "release-channel", "", "the scope's release channels, as given to drover freeze")
	f.StringVar(&comment, "comment", "", "why, kept in the event history")
	f.StringVarP(&output, "output", "o", "text", "output format: text or json")
	return cmd
}

func newFreezesCmd(g *globals) *cobra.Command {
	var (
		all    bool
		output string
	)
	cmd := &cobra.Command{
		Use:   "freezes [--all]",
		Short: "List the freezes in force (--all: with those lifted or ended)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := outputFormat(output, "text", "json"); err != nil {
				return err
			}
			list, err := g.client().Freezes(cmd.Context(), all)
			if err != nil {
				return apiErr(err)
			}
			if output == "json" {
				return writeJSON(cmd.OutOrStdout(), list)
			}
			printFreezes(cmd.OutOrStdout(), list.Freezes)
			return nil
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "include freezes lifted or ended")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	return cmd
}

func printFreezes(w io.Writer, list []apiv1.Freeze) {
	if len(list) == 0 {
		fmt.Fprintln(w, "nothing is frozen")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSCOPE\tBY\tSINCE\tUNTIL\tSTATE\tREASON")
	for _, f := range list {
		untilText := "unfreeze"
		if !f.Until.IsZero() {
			untilText = f.Until.Local().Format(time.DateTime)
		}
		state := "in force"
		switch {
		case !f.LiftedAt.IsZero():
			state = "lifted by " + f.LiftedBy
		case !f.Active:
			state = "ended"
		case f.NoHeal:
			state += ", no healing"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", clean(f.ID), clean(scopeText(f.Application, f.ReleaseChannel)), clean(f.CreatedBy),
			f.CreatedAt.Local().Format(time.DateTime), untilText, clean(state), clean(f.Reason))
	}
	_ = tw.Flush()
}

// scopeText says what a freeze holds.
func scopeText(app, rc string) string {
	switch {
	case app == "" && rc == "":
		return "everything"
	case rc == "":
		return "app " + app
	case app == "":
		return "channels " + rc
	}
	return "app " + app + ", channels " + rc
}

// parseUntil reads --until: an RFC 3339 time, or a duration from now.
func parseUntil(s string, now time.Time) (time.Time, error) {
	return parseTimeOrDuration("--until", s, now, 1)
}

// parseTimeOrDuration reads flag's value s: an RFC 3339 time, or a positive
// duration from now, after it (sign 1) or before it (sign -1).
func parseTimeOrDuration(flag, s string, now time.Time, sign time.Duration) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return time.Time{}, fmt.Errorf("%s %q is neither an RFC 3339 time (%s) nor a positive duration (72h)", flag, s, now.UTC().Truncate(time.Hour).Format(time.RFC3339))
	}
	return now.Add(sign * d), nil
}
