package cli

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	apiv1 "github.com/drover-dev/drover/api/v1"
)

func newBypassCmd(g *globals) *cobra.Command {
	var app, rc, protection, comment, desired, output string
	cmd := &cobra.Command{
		Use:   "bypass SERVICE --app APP --release-channel RC --protection NAME [--desired-state ID] [--comment WHY]",
		Short: "Let a protection of a release channel pass for one desired state, on your word",
		Long: `Bypass lets one protection attachment (or delivery extension) of a release channel
pass, in every lifecycle phase it is attached for, for one desired state: the one given
with --desired-state, or else the one drover status shows now. It is recorded as
MANUALLY_BYPASSED in the event history with who bypassed it and why (--comment), and
holds until the next push. A protection drover does not evaluate yet can be bypassed
too, which lets a channel held by it deploy.`,
		Example: `  drover bypass web --app quickstart --release-channel prod --protection office-hours --comment "hotfix for INC-42"`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := outputFormat(output, "text", "json"); err != nil {
				return err
			}
			if app == "" || rc == "" || protection == "" {
				return usageError(errors.New("--app, --release-channel and --protection are required"))
			}
			user, err := g.userField()
			if err != nil {
				return err
			}
			req := apiv1.BypassRequest{ReleaseChannel: rc, Protection: protection, User: user, Comment: comment}
			c := g.client()
			if req.DesiredStateID, req.Version, err = desiredStateOf(cmd.Context(), c, app, args[0], desired); err != nil {
				return err
			}
			st, err := c.Bypass(cmd.Context(), app, args[0], req)
			if err != nil {
				return apiErr(err)
			}
			w := cmd.OutOrStdout()
			if output == "json" {
				return writeJSON(w, answerResult{Action: "bypassed", Application: app, Service: args[0], ReleaseChannel: rc, Protection: protection,
					DesiredStateID: req.DesiredStateID, Version: req.Version, User: user, Status: st})
			}
			what := req.Version
			if what == "" {
				what = req.DesiredStateID
			}
			fmt.Fprintf(w, "bypassed %s of %s/%s/%s at %s as %s\n", clean(protection), clean(app), clean(args[0]), clean(rc), clean(what), clean(user))
			printStatus(w, st)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&app, "app", "", "application of the service (required)")
	f.StringVar(&rc, "release-channel", "", "release channel whose protection to bypass (required)")
	f.StringVar(&protection, "protection", "", "the protection attachment (or protection, or extension) to bypass (required)")
	f.StringVar(&desired, "desired-state", "", "the desired state the bypass is for: an id (ds-...) or version (v-...) from drover status (default: the one status shows now)")
	f.StringVar(&comment, "comment", "", "why, kept in the event history")
	addOutputFlag(cmd, &output, "text", "json")
	return cmd
}
