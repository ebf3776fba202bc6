package cli

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/drover-dev/drover/api/client"
	apiv1 "github.com/drover-dev/drover/api/v1"
)

func newTokensCmd(g *globals) *cobra.Command {
	cmd := newTokensListCmd(g, "tokens")
	cmd.Short = "List, create and revoke API tokens (the identities of people and robots)"
	cmd.AddCommand(newTokensListCmd(g, "list"), newTokensCreateCmd(g), newTokensRevokeCmd(g))
	return cmd
}

func newTokensCreateCmd(g *globals) *cobra.Command {
	var (
		output, expires string
		roles           []string
	)
	cmd := &cobra.Command{
		Use:   "create NAME --role ROLE[@APP[/CHANNEL]]...",
		Short: "Create an API token and print it once",
		Long: `Create makes an API token: a credential that acts as the identity NAME, with
the roles given. The server keeps only the token's hash; the token is printed
once. Approvals, pushes and every other action taken with it are recorded
under NAME, and minApprovers counts distinct names.

Roles (--role, repeatable):
  viewer    see services, statuses, events, runs, configs, freezes
  deployer  viewer, and push, pause, resume, roll back
  approver  viewer, and approve or reject
  admin     everything: configs, runtimes, tokens, freezes, bypasses, audit

ROLE alone holds on every application; ROLE@APP on one; ROLE@APP/CHANNEL on
one release channel of one (for approve, pause, resume, rollback, bypass).
Creating tokens needs the admin role on every application.`,
		Example: `  drover tokens create ci --role deployer@shop
  drover tokens create alice --role approver@shop/prod --role viewer
  drover tokens create release-bot --role deployer --expires 720h -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := outputFormat(output, "text", "json"); err != nil {
				return err
			}
			if len(roles) == 0 {
				return usageErrorf("--role is required: ROLE, ROLE@APPLICATION or ROLE@APPLICATION/RELEASE_CHANNEL (roles: viewer, deployer, approver, admin)")
			}
			req := apiv1.CreateTokenRequest{Name: args[0], Roles: roles}
			if expires != "" {
				at, err := parseTimeOrDuration("--expires", expires, time.Now(), 1)
				if err != nil {
					return usageError(err)
				}
				req.ExpiresAt = at
			}
			resp, err := g.client().CreateToken(cmd.Context(), req)
			if err != nil {
				return apiErr(err)
			}
			w := cmd.OutOrStdout()
			if output == "json" {
				return writeJSON(w, resp)
			}
			fmt.Fprintf(w, "token %s created (roles %s%s); shown once, the server keeps only its hash:\n%s\n",
				clean(resp.Info.Name), clean(strings.Join(resp.Info.Roles, ", ")), expiresText(resp.Info.ExpiresAt), resp.Token)
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&roles, "role", nil, "a role binding: ROLE, ROLE@APP or ROLE@APP/CHANNEL (repeatable)")
	cmd.Flags().StringVar(&expires, "expires", "", "end the token by itself: an RFC 3339 time or a duration from now (720h); default: never")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	return cmd
}

func expiresText(at time.Time) string {
	if at.IsZero() {
		return ""
	}
	return ", expires " + at.UTC().Format(time.RFC3339)
}

func newTokensListCmd(g *globals, use string) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   use,
		Short: "List the API tokens (never their values)",
		Long: `Lists every API token with its roles, its state (active, expired, revoked),
who created it and when it was last used (to the minute). Needs the admin
role on every application.`,
		Example: `  drover tokens
  drover tokens list -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := outputFormat(output, "text", "json"); err != nil {
				return err
			}
			list, err := g.client().ListTokens(cmd.Context())
			if err != nil {
				return apiErr(err)
			}
			if output == "json" {
				return writeJSON(cmd.OutOrStdout(), list)
			}
			return printTokens(cmd.OutOrStdout(), list, time.Now())
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	return cmd
}

func printTokens(w io.Writer, list *apiv1.TokenList, now time.Time) error {
	if len(list.Tokens) == 0 {
		fmt.Fprintln(w, "no API tokens")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tROLES\tSTATE\tCREATED\tBY\tLAST USED\tEXPIRES")
	for _, t := range list.Tokens {
		last, exp := "never", "never"
		if !t.LastUsedAt.IsZero() {
			last = ago(now, t.LastUsedAt)
		}
		if !t.ExpiresAt.IsZero() {
			exp = t.ExpiresAt.UTC().Format(time.RFC3339)
		}
		state := t.State
		if t.State == "revoked" && t.RevokedBy != "" {
			state += " by " + t.RevokedBy
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", clean(t.Name), clean(strings.Join(t.Roles, ",")), clean(state),
			t.CreatedAt.UTC().Format(time.RFC3339), clean(t.CreatedBy), last, exp)
	}
	return tw.Flush()
}

func newTokensRevokeCmd(g *globals) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "revoke NAME",
		Short: "Revoke an API token: requests with it are refused at once",
		Long: `Revoke ends the API token named NAME: every server sharing the store refuses
it from the next request on. The record stays (drover tokens list shows it
revoked); the name may be given to a new token.`,
		Example: `  drover tokens revoke ci`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := outputFormat(output, "text", "json"); err != nil {
				return err
			}
			info, err := g.client().RevokeToken(cmd.Context(), args[0])
			if err != nil {
				return apiErr(err)
			}
			if output == "json" {
				return writeJSON(cmd.OutOrStdout(), info)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "token %s revoked\n", clean(info.Name))
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	return cmd
}

func newWhoAmICmd(g *globals) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "whoami",
		Short: "Show the identity your credential acts as, and its roles",
		Example: `  drover whoami
  drover whoami -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := outputFormat(output, "text", "json"); err != nil {
				return err
			}
			id, err := g.client().WhoAmI(cmd.Context())
			if err != nil {
				return apiErr(err)
			}
			if output == "json" {
				return writeJSON(cmd.OutOrStdout(), id)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s (%s): %s\n", clean(id.Name), clean(id.Kind), clean(strings.Join(id.Roles, ", ")))
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	return cmd
}

func newAuditCmd(g *globals) *cobra.Command {
	var (
		output, app, identity, since string
		limit                        int
	)
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Show the audit log: every change asked of the server, allowed or refused",
		Long: `Audit lists the requests that changed something, or tried to, oldest first:
when, who (and how they authenticated), from which address, what (the API
route, the application, service and release channel or object), and how it
ended (ok, or the refusal's code and message). Records are kept forever.

It shows the records of the applications you hold the admin role on (those
of no application, such as tokens and runtimes, to admins of every one).`,
		Example: `  drover audit --app shop --since 24h
  drover audit --identity ci -o json
  drover audit --since 2026-11-01T00:00:00Z --limit 1000`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := outputFormat(output, "text", "json"); err != nil {
				return err
			}
			if limit < 1 {
				return usageErrorf("invalid --limit %d: must be at least 1", limit)
			}
			q := client.AuditQuery{Application: app, Identity: identity}
			if since != "" {
				t, err := parseSince(since, time.Now())
				if err != nil {
					return usageError(err)
				}
				q.Since = t
			}
			var records []apiv1.AuditRecord
			c := g.client()
			for len(records) < limit {
				q.Limit = min(limit-len(records), 5000)
				page, err := c.Audit(cmd.Context(), q)
				if err != nil {
					return apiErr(err)
				}
				records = append(records, page.Records...)
				if page.Next == 0 {
					break
				}
				q.After = page.Next
			}
			if output == "json" {
				return writeJSON(cmd.OutOrStdout(), apiv1.AuditList{Records: records})
			}
			return printAudit(cmd.OutOrStdout(), records)
		},
	}
	cmd.Flags().StringVar(&app, "app", "", "only this application's records")
	cmd.Flags().StringVar(&identity, "identity", "", "only this identity's records")
	cmd.Flags().StringVar(&since, "since", "", "only records since: an RFC 3339 time or a duration before now (24h)")
	cmd.Flags().IntVar(&limit, "limit", 500, "at most this many records")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	return cmd
}

// parseSince reads --since: an RFC 3339 time, or a duration before now.
func parseSince(s string, now time.Time) (time.Time, error) {
	return parseTimeOrDuration("--since", s, now, -1)
}

func printAudit(w io.Writer, records []apiv1.AuditRecord) error {
	if len(records) == 0 {
		fmt.Fprintln(w, "no audit records")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tIDENTITY\tSOURCE\tACTION\tON\tOUTCOME")
	for _, r := range records {
		on := r.Application
		if r.Service != "" {
			on += "/" + r.Service
		}
		if r.ReleaseChannel != "" {
			on += " (" + r.ReleaseChannel + ")"
		}
		if r.Target != "" {
			on = strings.TrimSpace(on + " " + r.Target)
		}
		outcome := r.Outcome
		if r.Message != "" {
			outcome += ": " + r.Message
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Time.UTC().Format(time.RFC3339), clean(r.Identity), clean(r.Source),
			clean(r.Action), clean(on), clean(outcome))
	}
	return tw.Flush()
}
