package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	apiv1 "github.com/drover-dev/drover/api/v1"
)

// waitFlags are the flags of drover wait and of drover push --wait.
type waitFlags struct {
	timeout time.Duration
	// throughApprovals keeps waiting while a channel waits for a person's
	// approval (--wait-for-approval), as CI that approves elsewhere wants.
	throughApprovals bool
}

func (f *waitFlags) register(cmd *cobra.Command, prefix string) {
	cmd.Flags().DurationVar(&f.timeout, "timeout", 30*time.Minute, prefix+"give up after this long (exit 3)")
	cmd.Flags().BoolVar(&f.throughApprovals, "wait-for-approval", false, prefix+"keep waiting while a release channel waits for a manual approval (by default drover returns then, exit 4, printing the drover approve command)")
}

// Results of a wait, in its JSON (-o json) and in what it prints.
const (
	waitConverged = "converged"
	waitReplaced  = "replaced"
	waitFailed    = "failed"
	waitApproval  = "waiting_for_approval"
	waitTimeout   = "timeout"
)

// waitResult is what drover wait -o json (and push --wait -o json) prints
// when it returns.
type waitResult struct {
	Application    string `json:"application"`
	Service        string `json:"service"`
	DesiredStateID string `json:"desiredStateId"`
	DesiredVersion string `json:"desiredVersion,omitempty"`
	// Result is converged, replaced, failed, waiting_for_approval or
	// timeout (exit 0, 0, 2, 4, 3).
	Result string `json:"result"`
	// ReplacedBy is the desired state that replaced the one waited for.
	ReplacedBy string `json:"replacedBy,omitempty"`
	// Approvals are the approvals the rollout waits for, each with the
	// command that gives it.
	Approvals []pendingApproval `json:"approvals,omitempty"`
	// Status is the service's status when the wait returned.
	Status *apiv1.ServiceStatus `json:"status,omitempty"`
}

// pendingApproval is a manual approval a release channel waits for.
type pendingApproval struct {
	ReleaseChannel string `json:"releaseChannel"`
	Topic          string `json:"topic,omitempty"`
	Command        string `json:"command"`
}

func newWaitCmd(g *globals) *cobra.Command {
	var (
		app, output string
		wf          waitFlags
	)
	cmd := &cobra.Command{
		Use:   "wait SERVICE --app APP",
		Short: "Follow a rollout until every release channel converged, or a person must act",
		Long: `Wait prints each release channel's progress as it changes and returns when
the rollout is over, or when its next step is a person's: 0 when every channel
converged (or the desired state was replaced by a newer push), 2 when a
channel failed or was rolled back, 4 when the rollout can go on only once
someone approves a release channel (it prints the drover approve command for
each; --wait-for-approval keeps waiting instead), 3 on timeout, 1 on other
errors, 64 on usage errors. With -o json it prints one JSON object when it
returns (the result, the approvals awaited and the final status) instead of
the progress.`,
		Example: `  drover wait web --app quickstart --timeout 10m
  drover wait web --app quickstart --wait-for-approval -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := outputFormat(output, "text", "json"); err != nil {
				return err
			}
			if app == "" {
				return usageError(errors.New("--app is required"))
			}
			res, err := waitFor(cmd.Context(), g, cmd.OutOrStdout(), output, app, args[0], "", wf)
			if output == "json" && res != nil {
				return errors.Join(writeJSON(cmd.OutOrStdout(), res), err)
			}
			return err
		},
	}
	cmd.Flags().StringVar(&app, "app", "", "application of the service (required)")
	wf.register(cmd, "")
	addOutputFlag(cmd, &output, "text", "json")
	return cmd
}

// waitFor follows a service until its rollout ends, or until it waits for
// a person (unless wf.throughApprovals); dsID pins the desired state to
// wait for ("" = the active one). It prints progress to w unless output is
// json, and returns what it found (nil when it could not look) with the
// error that carries the exit code.
func waitFor(ctx context.Context, g *globals, w io.Writer, output, app, svc, dsID string, wf waitFlags) (*waitResult, error) {
	c := g.client()
	ctx, cancel := context.WithTimeout(ctx, wf.timeout)
	defer cancel()
	if output == "json" {
		w = io.Discard
	}
	var res *waitResult
	last := map[string]string{}
	announced := false
	check := func() (bool, error) {
		st, err := c.Status(ctx, app, svc)
		if err != nil {
			return false, apiErr(err)
		}
		if dsID == "" {
			dsID = st.DesiredStateID
		}
		res = &waitResult{Application: app, Service: svc, DesiredStateID: dsID, DesiredVersion: st.DesiredVersion, Status: st}
		if !announced {
			announced = true
			fmt.Fprintf(w, "waiting for %s/%s to converge in every release channel (%s)%s; at most %s\n", clean(app), clean(svc),
				clean(channelNames(st)), untilPerson(wf), wf.timeout)
		}
		if st.DesiredStateID != dsID {
			res.Result, res.ReplacedBy = waitReplaced, st.DesiredStateID
			fmt.Fprintf(w, "desired state %s was replaced by %s\n", clean(dsID), clean(st.DesiredStateID))
			return true, nil
		}
		for _, ch := range st.ReleaseChannels {
			line := clean(ch.Status + ": " + ch.Message)
			if last[ch.Name] != line {
				last[ch.Name] = line
				fmt.Fprintf(w, "%s  %-14s %s\n", time.Now().Format("15:04:05"), clean(ch.Name), line)
			}
		}
		switch st.Status {
		case "CONVERGED":
			res.Result = waitConverged
			fmt.Fprintf(w, "%s/%s converged: every release channel runs %s\n", clean(app), clean(svc), clean(st.DesiredVersion))
			return true, nil
		case "FAILED", "ROLLED_BACK":
			res.Result = waitFailed
			return true, &ExitError{Code: exitFailed, Err: fmt.Errorf("%s/%s %s", app, svc, strings.ToLower(strings.ReplaceAll(st.Status, "_", " ")))}
		}
		if wf.throughApprovals || !waitsForPerson(st) {
			return false, nil
		}
		res.Result = waitApproval
		res.Approvals = pendingApprovals(g, st)
		for _, a := range res.Approvals {
			fmt.Fprintf(w, "%s waits for a manual approval; give it with:\n  %s\n", clean(a.ReleaseChannel), clean(a.Command))
		}
		return true, &ExitError{Code: exitApproval, Err: fmt.Errorf("%s/%s waits for a manual approval (of %s); drover wait %s --app %s follows the rest once given",
			app, svc, approvalChannels(res.Approvals), svc, app)}
	}
	done, err := check()
	if !done && err == nil {
		err = c.Watch(ctx, app, svc, 0, func(apiv1.Event) error {
			done, err := check()
			if err != nil {
				return err
			}
			if done {
				return errDone
			}
			return nil
		})
		if errors.Is(err, errDone) {
			err = nil
		}
	}
	err = waitTimedOut(ctx, err, wf.timeout, app, svc)
	var exit *ExitError
	if res != nil && errors.As(err, &exit) && exit.Code == exitTimeout {
		res.Result = waitTimeout
	}
	return res, err
}

var errDone = errors.New("done")

// untilPerson says when a wait with wf returns before convergence.
func untilPerson(wf waitFlags) string {
	if wf.throughApprovals {
		return ", through manual approvals"
	}
	return ", or until one waits for a manual approval"
}

// channelNames lists st's release channels.
func channelNames(st *apiv1.ServiceStatus) string {
	names := make([]string, 0, len(st.ReleaseChannels))
	for _, ch := range st.ReleaseChannels {
		names = append(names, ch.Name)
	}
	return strings.Join(names, ", ")
}

// waitsForPerson reports whether st's rollout can go on only once someone
// approves: a channel waits for its manual approval, and none is moving
// (converging, pending, rolling back, or held by a gate that passes on its
// own). Channels that wait for another channel wait for that one.
func waitsForPerson(st *apiv1.ServiceStatus) bool {
	waiting := false
	for _, ch := range st.ReleaseChannels {
		switch {
		case ch.Status == "WAITING_MANUAL_APPROVAL":
			waiting = true
		case ch.Status == "CONVERGED", ch.Status == "FAILED", ch.Status == "REPLACED", ch.Status == "ROLLED_BACK", ch.Status == "FAILED_ROLLBACK":
		case ch.Status == "WAITING_PRECONDITIONS" && ch.Reason == "RELEASE_CHANNEL_DEPENDENCY_UNMET":
		default:
			return false
		}
	}
	return waiting
}

// pendingApprovals are the approvals st's channels wait for, each with the
// drover approve command that gives it (with --topic when the channel has
// several gates, --server when the wait was given one).
func pendingApprovals(g *globals, st *apiv1.ServiceStatus) []pendingApproval {
	var out []pendingApproval
	for _, ch := range st.ReleaseChannels {
		if ch.Status != "WAITING_MANUAL_APPROVAL" {
			continue
		}
		base := fmt.Sprintf("drover approve %s --app %s --release-channel %s", st.Service, st.Application, ch.Name)
		if g.server != "" {
			base += " --server " + g.server
		}
		var open []apiv1.ApprovalStatus
		for _, a := range ch.Approvals {
			if a.RejectedBy == "" && len(a.ApprovedBy) < a.MinApprovers {
				open = append(open, a)
			}
		}
		if len(open) == 0 || len(ch.Approvals) == 1 {
			out = append(out, pendingApproval{ReleaseChannel: ch.Name, Command: base})
			continue
		}
		for _, a := range open {
			out = append(out, pendingApproval{ReleaseChannel: ch.Name, Topic: a.Topic, Command: base + " --topic " + a.Topic})
		}
	}
	return out
}

// approvalChannels names the channels of approvals, once each.
func approvalChannels(approvals []pendingApproval) string {
	var names []string
	for _, a := range approvals {
		if len(names) == 0 || names[len(names)-1] != a.ReleaseChannel {
			names = append(names, a.ReleaseChannel)
		}
	}
	return strings.Join(names, ", ")
}
