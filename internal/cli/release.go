package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/drover-dev/drover/api/client"
	apiv1 "github.com/drover-dev/drover/api/v1"
	"github.com/drover-dev/drover/internal/config"
)

// globals are flags shared by every verb that talks to a server.
type globals struct {
	server string
	user   string
	// token, requestTimeout, tlsFingerprint and caFile: see connect.go.
	token          string
	requestTimeout time.Duration
	tlsFingerprint string
	caFile         string
}

// signalContext is cancelled on SIGINT/SIGTERM.
func signalContext(parent context.Context) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
}

// apiErr turns a server error into a CLI error with the right exit code.
func apiErr(err error) error {
	var ce *client.Error
	if errors.As(err, &ce) {
		msg := ce.Message
		for _, d := range ce.Details {
			msg += "\n" + formatDetail(d)
		}
		return &ExitError{Code: 1, Err: errors.New("error: " + msg)}
	}
	return err
}

func formatDetail(d apiv1.ConfigError) string {
	var b strings.Builder
	if d.File != "" {
		b.WriteString(d.File)
		if d.Line > 0 {
			fmt.Fprintf(&b, ":%d:%d", d.Line, max(d.Column, 1))
		}
		b.WriteString(": ")
	}
	if d.Field != "" && !strings.Contains(d.Message, d.Field+":") {
		b.WriteString(d.Field + ": ")
	}
	b.WriteString(d.Message)
	return b.String()
}

func newApplyCmd(g *globals) *cobra.Command {
	var (
		dryRun     bool
		allowPaths []string
		output     string
	)
	cmd := &cobra.Command{
		Use:   "apply PATH...",
		Short: "Send configs to the server (validated together; all or nothing)",
		Long: `Apply reads configs (*.pvn.yaml) like validate does, resolves their local file
references here, and sends them to the server, which validates them together
with what it already stores. If anything is invalid nothing changes and every
problem is listed with its file and line. A new version of a config is stored
only when its content changed. Local references are read as validate reads
them (--allow-path DIR or URL).

Applying a service config does not deploy it: drover push does.`,
		Example: `  drover apply examples/quickstart/...
  drover apply runtimes/ apps/... --dry-run`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := outputFormat(output, "text", "json"); err != nil {
				return err
			}
			sources, err := config.LoadWith(args, config.LoadOptions{AllowPaths: allowPaths})
			if err != nil {
				return located(err)
			}
			req := apiv1.ApplyConfigsRequest{DryRun: dryRun, User: g.user}
			bySource := map[string]*config.Source{}
			for _, src := range sources {
				body, err := json.Marshal(src.File)
				if err != nil {
					return err
				}
				req.Configs = append(req.Configs, apiv1.Config{Source: src.Path, Body: body})
				bySource[src.Path] = src
			}
			resp, err := g.client().ApplyConfigs(cmd.Context(), req)
			if err != nil {
				var ce *client.Error
				if errors.As(err, &ce) && len(ce.Details) > 0 {
					return &ExitError{Code: 1, Err: errors.New(relocate(ce.Details, bySource))}
				}
				return apiErr(err)
			}
			w := cmd.OutOrStdout()
			if output == "json" {
				return writeJSON(w, resp)
			}
			for _, r := range resp.Results {
				suffix := ""
				if dryRun {
					suffix = " (dry run)"
				}
				fmt.Fprintf(w, "%s/%s: %s (version %d)%s\n", clean(r.Kind), clean(r.Name), clean(r.Action), r.Version, suffix)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "validate on the server without storing anything")
	addAllowPathFlag(cmd.Flags(), &allowPaths)
	addOutputFlag(cmd, &output, "text", "json")
	return cmd
}

// relocate maps server-reported problems back to lines of the local files.
func relocate(details []apiv1.ConfigError, sources map[string]*config.Source) string {
	var l config.ErrorList
	for _, d := range details {
		e := &config.Error{File: d.File, Line: d.Line, Column: d.Column, Field: d.Field, Msg: d.Message}
		if src, ok := sources[d.File]; ok && d.Line == 0 && d.Field != "" {
			pos := src.Locate(d.Field)
			e.Line, e.Column = pos.Line, pos.Column
		}
		l = append(l, e)
	}
	return l.Err().Error()
}

func newPushCmd(g *globals) *cobra.Command {
	var (
		app, output      string
		params, rcParams []string
		wait, immediate  bool
		wf               waitFlags
	)
	cmd := &cobra.Command{
		Use:   "push SERVICE --app APP [--param NAME=VALUE]...",
		Short: "Compile the service's latest config and make it the desired state",
		Long: `Push compiles the service's latest applied config with the given parameter
values and sets the result as the service's desired state. The engine then
rolls it out to every release channel in order, as preconditions allow. A push
replaces any rollout still in progress.

With --wait it then follows the rollout as drover wait does, and returns as
wait does: once every channel converged (exit 0), a channel failed (2), a
channel waits for a person's manual approval (4, printing the drover approve
command; --wait-for-approval keeps waiting), or --timeout passed (3). With
-o json it prints the push (desired state, version, release channels) as one
JSON object, and with --wait the wait's result in it (wait).`,
		Example: `  drover push web --app quickstart --param image=1.27
  drover push web --app quickstart --param image=1.28 --wait
  drover push web --app quickstart --param image=1.28 -o json
  drover push api --app shop --param-by-release-channel staging=image=2.0-rc1`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := outputFormat(output, "text", "json"); err != nil {
				return err
			}
			if app == "" {
				return usageError(errors.New("--app is required"))
			}
			if !wait && (cmd.Flags().Changed("timeout") || wf.throughApprovals) {
				return usageError(errors.New("--timeout and --wait-for-approval go with --wait"))
			}
			req, err := pushRequest(g, params, rcParams)
			if err != nil {
				return err
			}
			req.Immediate = immediate
			c := g.client()
			resp, err := c.Push(cmd.Context(), app, args[0], req)
			if err != nil {
				return apiErr(err)
			}
			w := cmd.OutOrStdout()
			if output == "json" {
				out := pushResult{Application: app, Service: args[0], PushResponse: *resp}
				if st, err := c.Status(cmd.Context(), app, args[0]); err == nil && st.DesiredStateID == resp.DesiredStateID {
					for _, ch := range st.ReleaseChannels {
						out.ReleaseChannels = append(out.ReleaseChannels, ch.Name)
					}
				}
				if wait {
					out.Wait, err = waitFor(cmd.Context(), g, w, output, app, args[0], resp.DesiredStateID, wf)
				}
				return errors.Join(writeJSON(w, out), err)
			}
			name := resp.BundleVersion
			if resp.BundleName != "" {
				name = resp.BundleName + " (" + resp.BundleVersion + ")"
			}
			if resp.Queued {
				fmt.Fprintf(w, "queued %s %s in its release train: desired state %s becomes active once the rollout before it finished (drover status %s --app %s lists the queue; --immediate replaces at once)\n",
					clean(args[0]), clean(name), clean(resp.DesiredStateID), clean(args[0]), clean(app))
				if wait {
					return usageError(errors.New("--wait follows an active desired state: a queued push is not active yet"))
				}
				return nil
			}
			fmt.Fprintf(w, "pushed %s %s: desired state %s\n", clean(args[0]), clean(name), clean(resp.DesiredStateID))
			if resp.Replaced != "" {
				fmt.Fprintf(w, "replaces desired state %s\n", clean(resp.Replaced))
			}
			if !wait {
				return nil
			}
			_, err = waitFor(cmd.Context(), g, w, output, app, args[0], resp.DesiredStateID, wf)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&app, "app", "", "application of the service (required)")
	f.StringArrayVar(&params, "param", nil, "parameter value NAME=VALUE (repeatable)")
	f.StringArrayVar(&rcParams, "param-by-release-channel", nil, "parameter value for one release channel RC=NAME=VALUE (repeatable)")
	f.BoolVar(&wait, "wait", false, "follow the rollout until every release channel converged, or one waits for an approval (see drover wait)")
	f.BoolVar(&immediate, "immediate", false, "replace the rollout in flight at once, also for a service whose pushes queue (maestro.strategy RELEASE_TRAIN)")
	wf.register(cmd, "with --wait: ")
	addOutputFlag(cmd, &output, "text", "json")
	return cmd
}

// pushResult is what drover push -o json prints.
type pushResult struct {
	Application string `json:"application"`
	Service     string `json:"service"`
	apiv1.PushResponse
	// ReleaseChannels are the channels the desired state rolls out to, in
	// the order status lists them.
	ReleaseChannels []string `json:"releaseChannels,omitempty"`
	// Wait is the result of --wait.
	Wait *waitResult `json:"wait,omitempty"`
}

// pushRequest is the request of a push (or a preview of one) with the
// --param and --param-by-release-channel values given.
func pushRequest(g *globals, params, rcParams []string) (apiv1.PushRequest, error) {
	req := apiv1.PushRequest{User: g.user}
	pvs, err := parseParams(params, rcParams)
	if err != nil {
		return req, err
	}
	for _, pv := range pvs {
		req.Params = append(req.Params, apiv1.Param{Name: pv.Name, Value: pv.Value, ReleaseChannel: pv.ReleaseChannel})
	}
	return req, nil
}

func newStatusCmd(g *globals) *cobra.Command {
	var app, output string
	cmd := &cobra.Command{
		Use:   "status [SERVICE --app APP | --app APP]",
		Short: "Show per release channel what runs, what is coming, and why it waits",
		Long: `Status shows a service's release channels: what each runs, where it is heading,
and why it waits. A SERVICE needs its --app; with --app alone it shows every
pushed service of that application, and with neither every pushed service the
credential may read.`,
		Example: `  drover status web --app quickstart
  drover status --app quickstart
  drover status
  drover status web --app quickstart -o json`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := outputFormat(output, "text", "json"); err != nil {
				return err
			}
			c := g.client()
			var list []apiv1.ServiceStatus
			if len(args) == 1 {
				if app == "" {
					return usageError(errors.New("--app is required"))
				}
				st, err := c.Status(cmd.Context(), app, args[0])
				if err != nil {
					return apiErr(err)
				}
				if output == "json" {
					return writeJSON(cmd.OutOrStdout(), st)
				}
				list = []apiv1.ServiceStatus{*st}
			} else {
				all, err := c.ListServices(cmd.Context())
				if err != nil {
					return apiErr(err)
				}
				for _, s := range all.Services {
					if app == "" || s.Application == app {
						list = append(list, s)
					}
				}
				if output == "json" {
					return writeJSON(cmd.OutOrStdout(), apiv1.ServiceList{Services: append([]apiv1.ServiceStatus{}, list...)})
				}
				if len(list) == 0 {
					fmt.Fprintln(cmd.OutOrStdout(), "no services pushed yet")
					return nil
				}
			}
			for i, st := range list {
				if i > 0 {
					fmt.Fprintln(cmd.OutOrStdout())
				}
				printStatus(cmd.OutOrStdout(), &st)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&app, "app", "", "application (required with a SERVICE)")
	addOutputFlag(cmd, &output, "text", "json")
	return cmd
}

func printStatus(w io.Writer, st *apiv1.ServiceStatus) {
	fmt.Fprintf(w, "%s/%s  %s  (desired %s, desired state %s)\n", clean(st.Application), clean(st.Service), clean(st.Status), clean(versionLabel(st.DesiredVersion, st.DisplayName)), clean(st.DesiredStateID))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RELEASE CHANNEL\tSTATUS\tVERSION\tDESIRED\tMESSAGE")
	for _, c := range st.ReleaseChannels {
		version := versionLabel(c.Version, c.DisplayName)
		if version == "" {
			version = "-"
		}
		msg := c.Message
		// An engine error shows whatever the status (the last one planned).
		if c.Reason != "" && (c.Status != "CONVERGED" || c.Reason == "ENGINE_ERROR") {
			msg = c.Reason + ": " + msg
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", clean(c.Name), clean(c.Status), clean(version), clean(versionLabel(c.DesiredVersion, c.DesiredDisplayName)), clean(msg))
	}
	_ = tw.Flush()
	for _, c := range st.ReleaseChannels {
		for _, o := range c.Objects {
			fmt.Fprintf(w, "%s %s/%s: %s", clean(c.Name), clean(o.ObjectType), clean(o.Name), clean(strings.ToLower(o.Status)))
			if o.TargetReplicas > 0 || o.Replicas > 0 {
				fmt.Fprintf(w, ", %d/%d available", o.AvailableReplicas, o.TargetReplicas)
			}
			if o.Version != "" && o.Version != c.DesiredVersion {
				fmt.Fprintf(w, " (runs %s)", clean(o.Version))
			}
			if o.Message != "" {
				fmt.Fprintf(w, ": %s", clean(o.Message))
			}
			fmt.Fprintln(w)
		}
		for _, info := range c.Info {
			fmt.Fprintf(w, "%s %s: %s\n", clean(c.Name), clean(info.Name), clean(info.Text))
		}
		for _, chk := range c.Checks {
			name := chk.Name
			if chk.Attachment != "" && chk.Attachment != chk.Name {
				name = chk.Attachment + " (" + chk.Name + ")"
			}
			fmt.Fprintf(w, "%s %s %s, %s: %s", clean(c.Name), clean(strings.ToLower(chk.Kind)), clean(name), clean(chk.Phase), clean(chk.State))
			if chk.Message != "" {
				fmt.Fprintf(w, ": %s", clean(chk.Message))
			}
			var when []string
			if !chk.LastRun.IsZero() {
				when = append(when, fmt.Sprintf("last run %s, %d in all", chk.LastRun.Local().Format(time.TimeOnly), chk.Runs))
			}
			if !chk.NextChange.IsZero() && (chk.State == "failing" || chk.State == "pending" || chk.State == "passing") {
				when = append(when, "next "+chk.NextChange.Local().Format(time.DateTime))
			}
			if len(when) > 0 {
				fmt.Fprintf(w, " (%s)", strings.Join(when, "; "))
			}
			fmt.Fprintln(w)
		}
		if c.ObserveError != "" {
			fmt.Fprintf(w, "%s: fetch failing since %s: %s\n", clean(c.Name), c.ObservedAt.Local().Format(time.DateTime), clean(c.ObserveError))
		}
	}
	for i, q := range st.Queued {
		fmt.Fprintf(w, "queued %d: %s (desired state %s), pushed by %s at %s\n", i+1, clean(versionLabel(q.Version, q.DisplayName)), clean(q.DesiredStateID),
			clean(q.CreatedBy), q.CreatedAt.Local().Format(time.DateTime))
	}
}

func newChannelCmd(g *globals, verb, short string, call func(*client.Client, context.Context, string, string, apiv1.ChannelRequest) (*apiv1.ServiceStatus, error)) *cobra.Command {
	var app, rc, output string
	cmd := &cobra.Command{
		Use:     verb + " SERVICE --app APP [--release-channel RC]",
		Short:   short,
		Example: fmt.Sprintf("  drover %s web --app quickstart --release-channel prod", verb),
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := outputFormat(output, "text", "json"); err != nil {
				return err
			}
			if app == "" {
				return usageError(errors.New("--app is required"))
			}
			st, err := call(g.client(), cmd.Context(), app, args[0], apiv1.ChannelRequest{ReleaseChannel: rc, User: g.user})
			if err != nil {
				return apiErr(err)
			}
			if output == "json" {
				return writeJSON(cmd.OutOrStdout(), st)
			}
			printStatus(cmd.OutOrStdout(), st)
			return nil
		},
	}
	cmd.Flags().StringVar(&app, "app", "", "application of the service (required)")
	cmd.Flags().StringVar(&rc, "release-channel", "", "one release channel (default: all)")
	addOutputFlag(cmd, &output, "text", "json")
	return cmd
}

func newEventsCmd(g *globals) *cobra.Command {
	var (
		app, output string
		follow      bool
		limit       int
		types       []string
	)
	cmd := &cobra.Command{
		Use:   "events SERVICE --app APP",
		Short: "Show a service's history: pushes, approvals, applies, failures, rollbacks",
		Example: `  drover events web --app quickstart
  drover events web --app quickstart --follow
  drover events web --app quickstart --type failed,rollback`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := outputFormat(output, "text", "json"); err != nil {
				return err
			}
			if app == "" {
				return usageError(errors.New("--app is required"))
			}
			c := g.client()
			w := cmd.OutOrStdout()
			printEvent := func(e apiv1.Event) error {
				if output == "json" {
					return json.NewEncoder(w).Encode(e)
				}
				actor := ""
				if e.Actor != "" && e.Actor != "engine" {
					actor = " [" + clean(e.Actor) + "]"
				}
				fmt.Fprintf(w, "%s  %-17s %s%s\n", e.Time.Local().Format("2006-01-02 15:04:05"), clean(e.Type), clean(e.Message), actor)
				return nil
			}
			list, err := c.Events(cmd.Context(), app, args[0], 0, limit, types...)
			if err != nil {
				return apiErr(err)
			}
			var last int64
			for _, e := range list.Events {
				if err := printEvent(e); err != nil {
					return err
				}
				last = e.Seq
			}
			if !follow {
				return nil
			}
			ctx, cancel := signalContext(cmd.Context())
			defer cancel()
			err = c.WatchTypes(ctx, app, args[0], last, types, printEvent)
			if errors.Is(err, context.Canceled) {
				return nil
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&app, "app", "", "application of the service (required)")
	f.BoolVarP(&follow, "follow", "f", false, "keep printing new events")
	f.IntVar(&limit, "limit", 0, "show at most this many past events (0 = all)")
	f.StringSliceVar(&types, "type", nil, "show only events of these types (repeat the flag or separate with commas), e.g. failed,rollback")
	f.StringVarP(&output, "output", "o", "text", "output format: text or json (one event per line)")
	return cmd
}
