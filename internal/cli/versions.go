package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	apiv1 "github.com/drover-dev/drover/api/v1"
)

// versionLabel names a version as drover shows it: its id, then its
// display name in parentheses when it has one ("v-3f2a… (1.28)").
func versionLabel(version, displayName string) string {
	if displayName == "" || version == "" {
		return version
	}
	return version + " (" + displayName + ")"
}

func newRollbackCmd(g *globals) *cobra.Command {
	var app, rc, to, output, release string
	cmd := &cobra.Command{
		Use:   "rollback (SERVICE | --release ID) --app APP [--release-channel RC] [--to VERSION|DESIRED_STATE_ID]",
		Short: "Roll a release channel (or all) back to its last converged version, or one channel to an earlier version",
		Long: `Without --to, each release channel (or the one named) goes back to the version
it last ran converged, at once, and stays there until the next push.

With --to, the release channel named goes back to an earlier pushed version:
its id (v-...), its display name (an image tag or the bundleName, e.g. 1.27),
or the id of a desired state that holds it (drover versions lists them). The
rollback is a new desired state, gated like a push: the channel's manual
approvals, protections and freezes apply (the channels it depends on are not
waited for); every other channel stays where it is.

A rollback of one service of a release rolls back that service only; it then
names the services waiting for it in that channel (service.dependsOn). With
--release instead of a service, every service of the release whose desired
state is still the release's rolls back (in the channel named, or all).`,
		Example: `  drover rollback web --app quickstart --release-channel prod
  drover versions web --app quickstart
  drover rollback web --app quickstart --release-channel prod --to 1.27
  drover rollback web --app quickstart --release-channel prod --to ds-20261122t101500-3f9a2c1b -o json
  drover rollback --release rel-20261203t131500-9c2e11aa --app shop --release-channel staging`,
		Args: cobra.RangeArgs(0, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := outputFormat(output, "text", "json"); err != nil {
				return err
			}
			if app == "" {
				return usageError(errors.New("--app is required"))
			}
			switch {
			case release != "" && (len(args) > 0 || to != ""):
				return usageError(errors.New("--release rolls back every service of a release to its last converged version: give no SERVICE and no --to"))
			case release != "":
				return rollbackRelease(cmd, g, app, release, rc, output)
			case len(args) == 0:
				return usageError(errors.New("give the SERVICE to roll back, or --release ID"))
			}
			if to != "" && rc == "" {
				return usageError(errors.New("--to needs --release-channel: a rollback to a chosen version moves one release channel"))
			}
			res, err := g.client().Rollback(cmd.Context(), app, args[0], apiv1.RollbackRequest{ReleaseChannel: rc, User: g.user, To: to})
			if err != nil {
				return apiErr(err)
			}
			w := cmd.OutOrStdout()
			waiting := dependantsWaiting(cmd, g, app, args[0], res.Rollbacks)
			if output == "json" {
				return writeJSON(w, rollbackResult{DesiredStateID: res.DesiredStateID, Rollbacks: res.Rollbacks, DependantsWaiting: waiting})
			}
			for _, r := range res.Rollbacks {
				fmt.Fprintf(w, "%s: rolling back to %s (desired state %s)\n", clean(r.ReleaseChannel), clean(versionLabel(r.Version, r.DisplayName)), clean(r.DesiredStateID))
			}
			printStatus(w, &res.ServiceStatus)
			for _, d := range waiting {
				fmt.Fprintf(w, "waits for %s: %s in %s (%s)\n", clean(args[0]), clean(d.Service), clean(d.ReleaseChannel), clean(d.Status))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&app, "app", "", "application of the service (required)")
	cmd.Flags().StringVar(&rc, "release-channel", "", "one release channel (default: all; required with --to)")
	cmd.Flags().StringVar(&to, "to", "", "roll back to this earlier version: a version id, a display name or a desired state id (see drover versions)")
	cmd.Flags().StringVar(&release, "release", "", "roll back every service of this release (drover release list)")
	addOutputFlag(cmd, &output, "text", "json")
	return cmd
}

// rollbackResult is what rollback -o json prints.
type rollbackResult struct {
	// DesiredStateID is the service's active desired state afterwards (a
	// new one with --to).
	DesiredStateID string                 `json:"desiredStateId"`
	Rollbacks      []apiv1.RollbackTarget `json:"rollbacks"`
	// DependantsWaiting are the channels of other services that wait for
	// the service rolled back (service.dependsOn) and have not received
	// what they wait to receive.
	DependantsWaiting []apiv1.BlockingLink `json:"dependantsWaiting,omitempty"`
}

// dependantsWaiting lists the channels of the application's services that
// depend on svc in a channel rolled back and have not received their
// version (a failure to list them is not the rollback's: none are named).
func dependantsWaiting(cmd *cobra.Command, g *globals, app, svc string, rolled []apiv1.RollbackTarget) []apiv1.BlockingLink {
	list, err := g.client().ListServices(cmd.Context())
	if err != nil {
		return nil
	}
	back := map[string]bool{}
	for _, r := range rolled {
		back[r.ReleaseChannel] = true
	}
	var out []apiv1.BlockingLink
	for _, st := range list.Services {
		if st.Application != app || st.Service == svc {
			continue
		}
		for _, ch := range st.ReleaseChannels {
			for _, d := range ch.ServiceDependsOn {
				if d.Service == svc && back[d.ReleaseChannel] && ch.TargetVersion != ch.DesiredVersion {
					out = append(out, apiv1.BlockingLink{Service: st.Service, ReleaseChannel: ch.Name, Status: ch.Status, Reason: ch.Reason, Message: ch.Message})
				}
			}
		}
	}
	return out
}

// releaseRollback is what rollback --release prints with -o json.
type releaseRollback struct {
	Release string                  `json:"release"`
	Results []releaseRollbackResult `json:"results"`
}

// releaseRollbackResult is one service's rollback of a release.
type releaseRollbackResult struct {
	Service   string                 `json:"service"`
	Rollbacks []apiv1.RollbackTarget `json:"rollbacks,omitempty"`
	Error     string                 `json:"error,omitempty"`
}

// rollbackRelease rolls back every service of a release still on the
// release's desired state, in channel rc (or all).
func rollbackRelease(cmd *cobra.Command, g *globals, app, id, rc, output string) error {
	c := g.client()
	rel, err := c.GetRelease(cmd.Context(), app, id)
	if err != nil {
		return apiErr(err)
	}
	out := releaseRollback{Release: id}
	done := 0
	for _, m := range rel.Services {
		r := releaseRollbackResult{Service: m.Service}
		st, err := c.Status(cmd.Context(), app, m.Service)
		switch {
		case err != nil:
			r.Error = apiErr(err).Error()
		case st.DesiredStateID != m.DesiredStateID:
			r.Error = "a later push (desired state " + st.DesiredStateID + ") replaced the release's: not rolled back"
		default:
			res, err := c.Rollback(cmd.Context(), app, m.Service, apiv1.RollbackRequest{ReleaseChannel: rc, User: g.user})
			if err != nil {
				r.Error = apiErr(err).Error()
			} else {
				r.Rollbacks = res.Rollbacks
				done++
			}
		}
		out.Results = append(out.Results, r)
	}
	w := cmd.OutOrStdout()
	if output == "json" {
		err = writeJSON(w, out)
	} else {
		for _, r := range out.Results {
			if r.Error != "" {
				fmt.Fprintf(w, "%s: %s\n", clean(r.Service), clean(strings.TrimPrefix(r.Error, "error: ")))
				continue
			}
			for _, t := range r.Rollbacks {
				fmt.Fprintf(w, "%s: %s rolling back to %s\n", clean(r.Service), clean(t.ReleaseChannel), clean(versionLabel(t.Version, t.DisplayName)))
			}
		}
	}
	if done == 0 {
		return errors.Join(err, &ExitError{Code: exitError, Err: fmt.Errorf("error: no service of release %s was rolled back", id)})
	}
	return err
}

func newVersionsCmd(g *globals) *cobra.Command {
	var app, output string
	var limit int
	cmd := &cobra.Command{
		Use:   "versions SERVICE --app APP",
		Short: "List a service's pushed versions: display name, who pushed them when, where they run and ran",
		Long: `Lists a service's desired states, newest first: the version each holds, its
display name (the bundleName, else the dockerImage parameters' tags), who
pushed it and when, and per release channel whether it runs there now (*) or
ran there before (+). These are the choices of drover rollback --to.`,
		Example: `  drover versions web --app quickstart
  drover versions web --app quickstart -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := outputFormat(output, "text", "json"); err != nil {
				return err
			}
			if app == "" {
				return usageError(errors.New("--app is required"))
			}
			list, err := g.client().Versions(cmd.Context(), app, args[0], limit)
			if err != nil {
				return apiErr(err)
			}
			if output == "json" {
				return writeJSON(cmd.OutOrStdout(), list)
			}
			printVersions(cmd.OutOrStdout(), list)
			return nil
		},
	}
	cmd.Flags().StringVar(&app, "app", "", "application of the service (required)")
	cmd.Flags().IntVar(&limit, "limit", 20, "at most this many versions (the server keeps at most 200 in a listing)")
	addOutputFlag(cmd, &output, "text", "json")
	return cmd
}

// printVersions prints a versions listing as a table.
func printVersions(w io.Writer, list *apiv1.VersionList) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "DESIRED STATE\tVERSION\tNAME\tPUSHED\tBY\tRELEASE CHANNELS")
	for _, v := range list.Versions {
		name := v.DisplayName
		if name == "" {
			name = "-"
		}
		var chs []string
		for _, c := range v.ReleaseChannels {
			mark := ""
			switch {
			case c.Running:
				mark = "*"
			case c.Ran:
				mark = "+"
			}
			what := c.Name + mark
			if c.Version != v.Version {
				// A rollback's channel holds another version.
				what += "=" + versionLabel(c.Version, c.DisplayName)
			}
			chs = append(chs, what)
		}
		var notes []string
		if v.Active {
			notes = append(notes, "active")
		}
		if v.Rollback {
			notes = append(notes, "rollback")
		}
		if v.Pruned {
			notes = append(notes, "pruned")
		}
		channels := strings.Join(chs, " ")
		if len(notes) > 0 {
			channels += " (" + strings.Join(notes, ", ") + ")"
		}
		by := v.CreatedBy
		if by == "" {
			by = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", clean(v.DesiredStateID), clean(v.Version), clean(name),
			v.CreatedAt.Local().Format("2006-01-02 15:04:05"), clean(by), clean(channels))
	}
	_ = tw.Flush()
	fmt.Fprintln(w, "* runs there now, + ran there before; roll back with drover rollback SERVICE --app APP --release-channel RC --to VERSION")
}
