package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/drover-dev/drover/api/client"
	apiv1 "github.com/drover-dev/drover/api/v1"
)

func newApproveCmd(g *globals, reject bool) *cobra.Command {
	var app, rc, topic, comment, desired, output, release string
	verb, short := "approve", "Approve a release channel's pending manual approval"
	if reject {
		verb, short = "reject", "Reject a release channel's pending manual approval (the channel fails)"
	}
	cmd := &cobra.Command{
		Use:   verb + " (SERVICE | --release ID) --app APP --release-channel RC [--desired-state ID]",
		Short: short,
		Long: fmt.Sprintf(`%[1]s answers a manual approval of one desired state: the one given with
--desired-state (an id ds-... or a version v-..., as drover status shows them),
or else the one drover status shows now, which is printed first. If another
push replaced it before the answer arrives, the server refuses (exit 1) and
nothing is recorded: look again and answer what you see.

A release channel may be answered before the rollout reaches it; the answer
holds for that desired state only. A rejection fails the channel at once.
Each person counts once: user names are compared trimmed and case-folded.

With --release instead of a service, it answers every service of the release
(drover release create) waiting for an approval in the channel: one answer
per service, recorded on each; a sharedManualApproval is answered once, for
all of them.`, strings.ToUpper(verb[:1])+verb[1:]),
		Example: fmt.Sprintf(`  drover %[1]s web --app quickstart --release-channel prod
  drover %[1]s web --app quickstart --release-channel prod --desired-state ds-20261124t101500-3f9a2c1b
  drover %[1]s --release rel-20261203t131500-9c2e11aa --app shop --release-channel prod`, verb),
		Args: cobra.RangeArgs(0, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := outputFormat(output, "text", "json"); err != nil {
				return err
			}
			if app == "" || rc == "" {
				return usageError(errors.New("--app and --release-channel are required"))
			}
			switch {
			case release != "" && len(args) > 0:
				return usageError(errors.New("give a SERVICE or --release, not both"))
			case release == "" && len(args) == 0:
				return usageError(errors.New("give the SERVICE to " + verb + ", or --release ID"))
			case release != "" && (desired != "" || topic != ""):
				return usageError(errors.New("--desired-state and --topic go with a SERVICE, not --release"))
			}
			user, err := g.userField()
			if err != nil {
				return err
			}
			if release != "" {
				return answerRelease(cmd, g, app, release, apiv1.ReleaseApproveRequest{ReleaseChannel: rc, Reject: reject, User: user, Comment: comment}, output)
			}
			req := apiv1.ApproveRequest{ReleaseChannel: rc, Topic: topic, Reject: reject, User: user, Comment: comment}
			c := g.client()
			w := cmd.OutOrStdout()
			if req.DesiredStateID, req.Version, err = desiredStateOf(cmd.Context(), c, app, args[0], desired); err != nil {
				return err
			}
			what := req.Version
			switch {
			case req.DesiredStateID != "" && req.Version != "":
				what = req.Version + " (desired state " + req.DesiredStateID + ")"
			case req.DesiredStateID != "":
				what = "desired state " + req.DesiredStateID
			}
			if output != "json" {
				fmt.Fprintf(w, "%s %s of %s/%s at %s\n", strings.TrimSuffix(verb, "e")+"ing", clean(rc), clean(app), clean(args[0]), clean(what))
			}
			st, err := c.Approve(cmd.Context(), app, args[0], req)
			if err != nil {
				return apiErr(err)
			}
			past := "approved"
			if reject {
				past = "rejected"
			}
			if user == "" {
				// Recorded under the credential's identity: name it.
				if id, err := c.WhoAmI(cmd.Context()); err == nil {
					user = id.Name
				}
			}
			if output == "json" {
				return writeJSON(w, answerResult{Action: past, Application: app, Service: args[0], ReleaseChannel: rc, Topic: topic,
					DesiredStateID: req.DesiredStateID, Version: req.Version, User: user, Status: st})
			}
			fmt.Fprintf(w, "%s %s of %s/%s as %s\n", past, clean(rc), clean(app), clean(args[0]), clean(user))
			printStatus(w, st)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&app, "app", "", "application of the service (required)")
	f.StringVar(&rc, "release-channel", "", "release channel waiting for approval (required)")
	f.StringVar(&desired, "desired-state", "", "the desired state answered: an id (ds-...) or version (v-...) from drover status (default: the one status shows now)")
	f.StringVar(&topic, "topic", "", "which approval, when the channel has several")
	f.StringVar(&release, "release", "", "answer every service of this release waiting in the channel (drover release list)")
	f.StringVar(&comment, "comment", "", "a note kept with the approval")
	addOutputFlag(cmd, &output, "text", "json")
	return cmd
}

// answerRelease answers every service of a release waiting in a channel.
func answerRelease(cmd *cobra.Command, g *globals, app, id string, req apiv1.ReleaseApproveRequest, output string) error {
	c := g.client()
	resp, err := c.ApproveRelease(cmd.Context(), app, id, req)
	if err != nil {
		return apiErr(err)
	}
	w := cmd.OutOrStdout()
	if output == "json" {
		return writeJSON(w, resp)
	}
	past := "approved"
	if req.Reject {
		past = "rejected"
	}
	for _, r := range resp.Results {
		switch {
		case len(r.Topics) > 0:
			fmt.Fprintf(w, "%s: %s %s\n", clean(r.Service), past, clean(strings.Join(r.Topics, ", ")))
		default:
			fmt.Fprintf(w, "%s: not answered: %s\n", clean(r.Service), clean(r.Error))
		}
	}
	if rel, err := c.GetRelease(cmd.Context(), app, id); err == nil {
		printRelease(w, rel)
	}
	return nil
}

// answerResult is what approve, reject and bypass print with -o json.
type answerResult struct {
	// Action is approved, rejected or bypassed.
	Action         string `json:"action"`
	Application    string `json:"application"`
	Service        string `json:"service"`
	ReleaseChannel string `json:"releaseChannel"`
	Topic          string `json:"topic,omitempty"`
	Protection     string `json:"protection,omitempty"`
	// DesiredStateID and Version name the desired state answered, as sent
	// (one of them may be empty).
	DesiredStateID string `json:"desiredStateId,omitempty"`
	Version        string `json:"version,omitempty"`
	// User is the identity the answer is recorded under.
	User string `json:"user,omitempty"`
	// Status is the service's status after the answer.
	Status *apiv1.ServiceStatus `json:"status"`
}

// desiredStateOf names the desired state an answer (approve, reject,
// bypass) is for: --desired-state as an id (ds-...) or a version (v-...),
// or else the one drover status shows now.
func desiredStateOf(ctx context.Context, c *client.Client, app, svc, desired string) (id, version string, err error) {
	switch {
	case strings.HasPrefix(desired, "v-"):
		return "", desired, nil
	case desired != "":
		return desired, "", nil
	}
	st, err := c.Status(ctx, app, svc)
	if err != nil {
		return "", "", apiErr(err)
	}
	return st.DesiredStateID, st.DesiredVersion, nil
}
