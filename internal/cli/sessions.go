package cli

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/drover-dev/drover/api/client"
	apiv1 "github.com/drover-dev/drover/api/v1"
)

// devicePollTimeout bounds one poll of a device sign-in: the server asks
// the provider for about 20 seconds before it answers pending.
const devicePollTimeout = time.Minute

// deviceSignIn signs the person at the keyboard in through server's
// OpenID provider (the device flow, run by the server): it prints where to
// go and the code to enter, and polls until the sign-in ends. asked says
// --sso was given (else the server's lack of a provider is a usage error
// that asks for a token).
func deviceSignIn(cmd *cobra.Command, server string, opts []client.Option, asked bool, timeout time.Duration) (*apiv1.SignInResult, error) {
	ctx := cmd.Context()
	c := client.New(server, opts...)
	info, err := c.SignInInfo(ctx)
	if err != nil {
		return nil, err
	}
	if info.OIDC == nil {
		if asked {
			return nil, &ExitError{Code: 1, Err: fmt.Errorf("error: %s signs no one in through an OpenID provider: sign in with an API token (--token-file FILE)", server)}
		}
		return nil, usageErrorf("no credential: pass --token-file FILE or --token TOKEN (an API token: drover tokens create); %s has no OpenID provider for --sso", server)
	}
	d, err := c.StartDeviceSignIn(ctx)
	if err != nil {
		return nil, err
	}
	errw := cmd.ErrOrStderr()
	fmt.Fprintf(errw, "To sign in to %s through %s, open\n  %s\nand enter the code\n  %s\n", server, clean(info.OIDC.Issuer),
		clean(d.VerificationURI), clean(d.UserCode))
	if d.VerificationURIComplete != "" {
		fmt.Fprintf(errw, "(or open %s, which has the code)\n", clean(d.VerificationURIComplete))
	}
	if !d.ExpiresAt.IsZero() {
		fmt.Fprintf(errw, "waiting for the sign-in (the code expires at %s)...\n", d.ExpiresAt.Local().Format("15:04:05"))
	} else {
		fmt.Fprintln(errw, "waiting for the sign-in...")
	}
	poll := client.New(server, append(opts, client.WithTimeout(max(timeout, devicePollTimeout)))...)
	for {
		res, err := poll.PollDeviceSignIn(ctx, apiv1.DeviceTokenRequest{DeviceCode: d.DeviceCode, Interval: d.Interval})
		if err != nil {
			return nil, err
		}
		if res.Status == "signed_in" && res.Token != "" {
			return res, nil
		}
		if res.Status != "pending" {
			return nil, fmt.Errorf("the server answered the sign-in with status %q", res.Status)
		}
		if !d.ExpiresAt.IsZero() && time.Now().After(d.ExpiresAt) {
			return nil, &ExitError{Code: 1, Err: errors.New("error: the sign-in code expired: run drover login again")}
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
}

func newLogoutCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "logout",
		Short: "End your session and forget the current context's credential",
		Long: `Logout ends the session the current credential is (drover login --sso), on
the server, at once; then it removes the credential from the current context
of the CLI's config file (the context keeps its server and certificate, so
drover login signs in again). An API token is only forgotten: it stays valid
until an admin revokes it (drover tokens revoke).`,
		Example: `  drover logout`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			w := cmd.OutOrStdout()
			res, err := g.client().SignOut(cmd.Context())
			var ce *client.Error
			switch {
			case errors.As(err, &ce) && errors.Is(err, apiv1.CodeUnauthenticated):
				// Ended already (expired, revoked): forget it all the same.
				fmt.Fprintf(cmd.ErrOrStderr(), "the server refused the credential (%s): nothing to end there\n", clean(ce.Message))
			case err != nil:
				// The server cannot be asked: the session lasts until it
				// expires, but this machine no longer holds it.
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: the session could not be ended on the server: %v\n", apiErr(err))
			case res.SignedOut:
				fmt.Fprintln(w, "session ended")
			default:
				fmt.Fprintln(w, "the credential is not a session: nothing ended on the server")
			}
			conf, path, err := loadConfig()
			if err != nil {
				return err
			}
			if cur, ok := conf.current(); ok && cur.Token != "" && g.token == "" {
				cur.Token = ""
				if err := conf.save(path); err != nil {
					return fmt.Errorf("save %s: %w", path, err)
				}
				fmt.Fprintf(w, "credential of context %s forgotten (%s)\n", clean(cur.Name), path)
			}
			return nil
		},
	}
}

func newSessionsCmd(g *globals) *cobra.Command {
	cmd := newSessionsListCmd(g, "sessions")
	cmd.Short = "List people's sessions (OpenID sign-ins); end one, or all of a person's"
	cmd.AddCommand(newSessionsListCmd(g, "list"), newSessionsRevokeCmd(g))
	return cmd
}

func newSessionsListCmd(g *globals, use string) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   use,
		Short: "List people's sessions (OpenID sign-ins)",
		Long: `Sessions lists the sign-ins through the server's OpenID provider: who, with
which roles (from their groups at sign-in), how (device: drover login --sso;
browser), from where, and their state (active, expired, revoked). Ended
sessions stay listed for a day. Needs the admin role on every application.`,
		Example: `  drover sessions
  drover sessions -o json
  drover sessions revoke 12
  drover sessions revoke --identity ann@example.com`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := outputFormat(output, "text", "json"); err != nil {
				return err
			}
			list, err := g.client().ListSessions(cmd.Context())
			if err != nil {
				return apiErr(err)
			}
			if output == "json" {
				return writeJSON(cmd.OutOrStdout(), list)
			}
			return printSessions(cmd.OutOrStdout(), list, time.Now())
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	return cmd
}

func printSessions(w io.Writer, list *apiv1.SessionList, now time.Time) error {
	if len(list.Sessions) == 0 {
		fmt.Fprintln(w, "no sessions")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tIDENTITY\tROLES\tVIA\tSTATE\tSIGNED IN\tLAST USED\tEXPIRES")
	for _, s := range list.Sessions {
		last := "never"
		if !s.LastUsedAt.IsZero() {
			last = ago(now, s.LastUsedAt)
		}
		state := s.State
		if s.State == "revoked" && s.RevokedBy != "" {
			state += " by " + s.RevokedBy
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.ID, clean(s.Identity), clean(strings.Join(s.Roles, ",")), clean(s.Via),
			clean(state), s.CreatedAt.UTC().Format(time.RFC3339), last, s.ExpiresAt.UTC().Format(time.RFC3339))
	}
	return tw.Flush()
}

func newSessionsRevokeCmd(g *globals) *cobra.Command {
	var (
		output, identity string
	)
	cmd := &cobra.Command{
		Use:   "revoke [ID] [--identity NAME]",
		Short: "End a session, or every session of a person, at once",
		Long: `Revoke ends the session numbered ID (drover sessions lists them), or with
--identity every session of that person: every server sharing the store
refuses them from the next request on. The person may sign in again; to keep
someone out, remove them from their groups at the provider too.`,
		Example: `  drover sessions revoke 12
  drover sessions revoke --identity ann@example.com`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := outputFormat(output, "text", "json"); err != nil {
				return err
			}
			var req apiv1.RevokeSessionsRequest
			switch {
			case len(args) == 1 && identity != "":
				return usageErrorf("give a session ID or --identity, not both")
			case len(args) == 1:
				id, err := strconv.ParseInt(args[0], 10, 64)
				if err != nil || id <= 0 {
					return usageErrorf("session %q: want the number drover sessions shows", args[0])
				}
				req.ID = id
			case identity != "":
				req.Identity = identity
			default:
				return usageErrorf("give a session ID or --identity NAME")
			}
			res, err := g.client().RevokeSessions(cmd.Context(), req)
			if err != nil {
				return apiErr(err)
			}
			if output == "json" {
				return writeJSON(cmd.OutOrStdout(), res)
			}
			if req.ID != 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "session %d ended\n", req.ID)
			} else {
				fmt.Fprintf(cmd.OutOrStdout(), "%d session(s) of %s ended\n", res.Revoked, clean(identity))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&identity, "identity", "", "end every session of this person")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	return cmd
}
