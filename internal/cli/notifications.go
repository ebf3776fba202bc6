package cli

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	apiv1 "github.com/drover-dev/drover/api/v1"
)

func newNotificationsCmd(g *globals) *cobra.Command {
	cmd := newNotificationsListCmd(g, "notifications")
	cmd.Short = "Send events to webhooks and Slack: targets, deliveries, retries"
	cmd.Long = `drover tells people and systems what happens: a service deployed, upgraded
or rolled back, a channel waiting for an approval, blocked or failed, a freeze
begun. Each event is written to an outbox in the same transaction as the event
itself and delivered at least once to every target whose filter matches it, in
order per service, retried with backoff until the target takes it; after the
most attempts a delivery is dead, and "drover notifications retry" sends it again.

Targets are webhooks (drover notifications add: signed CloudEvents, see
docs/notifications.md) and the Slack channels of applications
(notifications.slack{channel, errorChannel} in an application's config).

Without a subcommand, this lists the targets with the counts of their
deliveries; --failed lists the deliveries that failed instead.`
	cmd.AddCommand(newNotificationsListCmd(g, "list"), newNotificationsAddCmd(g), newNotificationsRemoveCmd(g),
		newNotificationsDeliveriesCmd(g, "deliveries"), newNotificationsRetryCmd(g))
	return cmd
}

func newNotificationsListCmd(g *globals, use string) *cobra.Command {
	var (
		output string
		failed bool
	)
	cmd := &cobra.Command{
		Use:   use,
		Short: "List the notification targets with the counts of their deliveries",
		Example: `  drover notifications
  drover notifications --failed
  drover notifications list -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := outputFormat(output, "text", "json"); err != nil {
				return err
			}
			if failed {
				return listDeliveries(cmd, g, "", []string{"failed"}, 0, output)
			}
			list, err := g.client().NotificationTargets(cmd.Context())
			if err != nil {
				return apiErr(err)
			}
			if output == "json" {
				return writeJSON(cmd.OutOrStdout(), list)
			}
			return printTargets(cmd.OutOrStdout(), list)
		},
	}
	cmd.Flags().BoolVar(&failed, "failed", false, "list the deliveries that failed (dead, or pending after a failed attempt)")
	addOutputFlag(cmd, &output, "text", "json")
	return cmd
}

func printTargets(w io.Writer, list *apiv1.NotificationTargetList) error {
	if len(list.Targets) == 0 {
		fmt.Fprintln(w, "no notification targets (drover notifications add NAME --url URL --secret-file FILE adds a webhook)")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tKIND\tTO\tEVENTS\tPENDING\tDELIVERED\tDEAD\tSOURCE")
	for _, t := range list.Targets {
		to := t.URL
		if t.Kind == "slack" {
			to = t.Channel
			if t.ErrorChannel != "" {
				to += " (errors: " + t.ErrorChannel + ")"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\n", clean(t.Name), clean(t.Kind), clean(to), clean(filterText(t.Filter)),
			t.Pending, t.Delivered, t.Dead, clean(t.Source))
	}
	return tw.Flush()
}

// filterText is a filter in one cell: "all", or its lists.
func filterText(f apiv1.NotificationFilter) string {
	var parts []string
	for _, l := range []struct {
		name string
		vals []string
	}{{"", f.Types}, {"app=", f.Applications}, {"service=", f.Services}, {"channel=", f.ReleaseChannels}, {"status=", f.Statuses}} {
		if len(l.vals) > 0 {
			parts = append(parts, l.name+strings.Join(l.vals, ","))
		}
	}
	if len(parts) == 0 {
		return "all"
	}
	return strings.Join(parts, " ")
}

func newNotificationsAddCmd(g *globals) *cobra.Command {
	var (
		output, url, secretFile string
		events, apps, services  []string
		channels, statuses      []string
	)
	cmd := &cobra.Command{
		Use:   "add NAME --url URL --secret-file FILE",
		Short: "Add (or replace) a webhook that receives signed CloudEvents",
		Long: `Add makes webhook NAME: every event its filter matches is POSTed to URL as a
CloudEvents 1.0 event in structured mode (application/cloudevents+json), with
CDEvents types for services deployed, upgraded and rolled back, and drover's own
for approval requests, blocked and failed channels and freezes. Each request
carries X-Drover-Signature: sha256=<hex HMAC-SHA256 of the body keyed with the
secret>, X-Drover-Delivery (the outbox row) and X-Drover-Attempt. The
CloudEvent id is the event's sequence number: the same on every retry.

The secret is read from --secret-file (at least 16 bytes; one trailing newline
is dropped), never from the command line; it is sealed at rest and never shown
again. Adding an existing name replaces the target (without --secret-file it
keeps its secret).

Filters: an empty one matches everything; each flag may be repeated or take a
comma-separated list. Event types: service.deployed, service.upgraded,
service.rolledback, approval.requested, channel.blocked, channel.failed,
freeze.started.

Adding targets needs the configure permission on every application.`,
		Example: `  drover notifications add ci --url https://ci.example.com/hooks/drover --secret-file ./hook.secret
  drover notifications add prod-approvals --url https://chat.example.com/in --secret-file s.txt \
      --events approval.requested,channel.failed --release-channel prod
  drover notifications add shop --url http://127.0.0.1:9000/ --secret-file s.txt --app shop -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := outputFormat(output, "text", "json"); err != nil {
				return err
			}
			if url == "" {
				return usageErrorf("--url is required: where the webhook's events are POSTed")
			}
			req := apiv1.PutNotificationTargetRequest{URL: url, Filter: apiv1.NotificationFilter{
				Types: splitList(events), Applications: splitList(apps), Services: splitList(services),
				ReleaseChannels: splitList(channels), Statuses: splitList(statuses)}}
			if secretFile != "" {
				b, err := os.ReadFile(secretFile)
				if err != nil {
					return usageErrorf("--secret-file: %v", err)
				}
				b = bytes.TrimSuffix(bytes.TrimSuffix(b, []byte("\n")), []byte("\r"))
				req.Secret = string(b)
			}
			t, err := g.client().SetWebhook(cmd.Context(), args[0], req)
			if err != nil {
				return apiErr(err)
			}
			if output == "json" {
				return writeJSON(cmd.OutOrStdout(), t)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "webhook %s: %s, events: %s\n", clean(t.Name), clean(t.URL), clean(filterText(t.Filter)))
			return nil
		},
	}
	cmd.Flags().StringVar(&url, "url", "", "where events are POSTed (http:// or https://)")
	cmd.Flags().StringVar(&secretFile, "secret-file", "", "read the signing secret from FILE (required for a new webhook)")
	cmd.Flags().StringSliceVar(&events, "events", nil, "only these notification types")
	cmd.Flags().StringSliceVar(&apps, "app", nil, "only these applications")
	cmd.Flags().StringSliceVar(&services, "service", nil, "only these services")
	cmd.Flags().StringSliceVar(&channels, "release-channel", nil, "only these release channels")
	cmd.Flags().StringSliceVar(&statuses, "status", nil, "only notifications of channels in these statuses (CONVERGED, FAILED, WAITING_MANUAL_APPROVAL, BLOCKED)")
	addOutputFlag(cmd, &output, "text", "json")
	return cmd
}

// splitList drops empty entries ("--app a," is "a").
func splitList(vals []string) []string {
	var out []string
	for _, v := range vals {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

func newNotificationsRemoveCmd(g *globals) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:     "remove NAME",
		Aliases: []string{"rm", "delete"},
		Short:   "Remove a webhook and the deliveries it has not received",
		Example: `  drover notifications remove ci`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := outputFormat(output, "text", "json"); err != nil {
				return err
			}
			resp, err := g.client().DeleteNotificationTarget(cmd.Context(), args[0])
			if err != nil {
				return apiErr(err)
			}
			if output == "json" {
				return writeJSON(cmd.OutOrStdout(), resp)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "notification target %s removed\n", clean(resp.Name))
			return nil
		},
	}
	addOutputFlag(cmd, &output, "text", "json")
	return cmd
}

func newNotificationsDeliveriesCmd(g *globals, use string) *cobra.Command {
	var (
		output, target string
		states         []string
		failed         bool
		before         int64
	)
	cmd := &cobra.Command{
		Use:   use,
		Short: "List the outbox: deliveries, newest first, with their state and last error",
		Example: `  drover notifications deliveries
  drover notifications deliveries --target ci --state dead
  drover notifications deliveries --failed -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := outputFormat(output, "text", "json"); err != nil {
				return err
			}
			if failed {
				states = append(states, "failed")
			}
			return listDeliveries(cmd, g, target, states, before, output)
		},
	}
	cmd.Flags().StringVar(&target, "target", "", "only this target's deliveries")
	cmd.Flags().StringSliceVar(&states, "state", nil, "only deliveries in these states (pending, delivered, dead)")
	cmd.Flags().BoolVar(&failed, "failed", false, "only deliveries that failed (dead, or pending after a failed attempt)")
	cmd.Flags().Int64Var(&before, "before", 0, "only deliveries older than this id (the next page)")
	addOutputFlag(cmd, &output, "text", "json")
	return cmd
}

func listDeliveries(cmd *cobra.Command, g *globals, target string, states []string, before int64, output string) error {
	list, err := g.client().Deliveries(cmd.Context(), target, states, before, 0)
	if err != nil {
		return apiErr(err)
	}
	if output == "json" {
		return writeJSON(cmd.OutOrStdout(), list)
	}
	w := cmd.OutOrStdout()
	if len(list.Deliveries) == 0 {
		fmt.Fprintln(w, "no deliveries")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tTARGET\tTYPE\tWHERE\tSTATE\tATTEMPTS\tWHEN\tERROR")
	for _, d := range list.Deliveries {
		where := strings.Trim(d.Application+"/"+d.Service+"/"+d.ReleaseChannel, "/")
		when := d.CreatedAt
		state := d.State
		switch {
		case d.State == "delivered":
			when = d.DeliveredAt
		case d.State == "pending" && !d.NextAttemptAt.IsZero():
			state += " (next " + d.NextAttemptAt.UTC().Format(time.TimeOnly) + ")"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", d.ID, clean(d.Target), clean(d.Type), clean(where), clean(state), d.Attempts,
			when.UTC().Format(time.RFC3339), clean(d.LastError))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if list.Next > 0 {
		fmt.Fprintf(w, "more: drover notifications deliveries --before %d\n", list.Next)
	}
	return nil
}

func newNotificationsRetryCmd(g *globals) *cobra.Command {
	var (
		output, target string
	)
	cmd := &cobra.Command{
		Use:   "retry [ID...] [--target NAME]",
		Short: "Send dead deliveries again: by id, of a target, or all",
		Long: `Retry makes dead deliveries pending again, their attempts counted from zero:
those given by id, those of --target, or with neither every dead delivery.
Needs the configure permission on every application.`,
		Example: `  drover notifications retry --target ci
  drover notifications retry 42 43`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := outputFormat(output, "text", "json"); err != nil {
				return err
			}
			req := apiv1.RetryDeliveriesRequest{Target: target}
			for _, a := range args {
				id, err := strconv.ParseInt(a, 10, 64)
				if err != nil || id < 1 {
					return usageErrorf("delivery id %q: give the ids drover notifications --failed lists", a)
				}
				req.IDs = append(req.IDs, id)
			}
			resp, err := g.client().RetryDeliveries(cmd.Context(), req)
			if err != nil {
				return apiErr(err)
			}
			if output == "json" {
				return writeJSON(cmd.OutOrStdout(), resp)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%d deliveries pending again\n", resp.Retried)
			return nil
		},
	}
	cmd.Flags().StringVar(&target, "target", "", "only this target's dead deliveries")
	addOutputFlag(cmd, &output, "text", "json")
	return cmd
}
