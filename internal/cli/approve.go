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
	var app, rc, topic, comment, desired, output string
	verb, short := "approve", "Approve a release channel's pending manual approval"
	if reject {
		verb, short = "reject", "Reject a release channel's pending manual approval (the channel fails)"
	}
	cmd := &cobra.Command{
		Use:   verb + " SERVICE --app APP --release-channel RC [--desired-state ID]",
		Short: short,
		Long: fmt.Sprintf(`%[1]s answers a manual approval of one desired state: the one given with
--desired-state (an id ds-... or a version v-..., as drover status shows them),
or else the one drover status shows now, which is printed first. If another
push replaced it before the answer arrives, the server refuses (exit 1) and
nothing is recorded: look again and answer what you see.

A release channel may be answered before the rollout reaches it; the answer
holds for that desired state only. A rejection fails the channel at once.
Each person counts once: user names are compared trimmed and case-folded.`, strings.ToUpper(verb[:1])+verb[1:]),
		Example: fmt.Sprintf(`  drover %[1]s web --app quickstart --release-channel prod
  drover %[1]s web --app quickstart --release-channel prod --desired-state ds-20261124t101500-3f9a2c1b`, verb),
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := outputFormat(output, "text", "json"); err != nil {
				return err
			}
			if app == "" || rc == "" {
				return usageError(errors.New("--app and --release-channel are required"))
			}
			user, err := g.userField()
			if err != nil {
				return err
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
	f.StringVar(&comment, "comment", "", "a note kept with the approval")
	addOutputFlag(cmd, &output, "text", "json")
	return cmd
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
