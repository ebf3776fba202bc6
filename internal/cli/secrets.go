package cli

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	apiv1 "github.com/drover-dev/drover/api/v1"
)

// maxSecretInput bounds what secrets set reads (the server refuses more
// than 64 KiB).
const maxSecretInput = 64<<10 + 2

func newSecretsCmd(g *globals) *cobra.Command {
	cmd := newSecretsListCmd(g, "secrets")
	cmd.Short = "Set, list and delete the secrets drover keeps (referenced as secret{key, version})"
	cmd.Long = `drover keeps secrets as Prodvana does: each "secrets set KEY" makes a new
version of KEY, named KEY-0, KEY-1, ..., and configs reference one version:

  env:
    DB_PASSWORD:
      secret: {key: db-password, version: db-password-0}

A push resolves each reference with the version's value, which reaches the
service's commands and containers and is redacted from runs, events and
every answer of the API. Values are sealed at rest with the server's keyring
(drover admin reseal re-seals them with a new key). Listing shows keys,
versions, who set them and when, never values.`
	cmd.AddCommand(newSecretsSetCmd(g), newSecretsListCmd(g, "list"), newSecretsDeleteCmd(g))
	return cmd
}

func newSecretsSetCmd(g *globals) *cobra.Command {
	var (
		output, file string
		stdin        bool
	)
	cmd := &cobra.Command{
		Use:   "set KEY (--from-stdin | --from-file FILE)",
		Short: "Make a new version of a secret, from stdin or a file",
		Long: `Set makes a new version of secret KEY (KEY-0 for the first, then KEY-1, ...)
and prints its name, which configs reference as secret{key, version}. The value
is read from stdin (--from-stdin) or a file (--from-file), never from the
command line, where shell history and process lists would keep it; one
trailing newline (what echo and most editors add) is dropped. An empty value
is refused. Versions never change: set the key again to change the value, then
reference the new version and push.

Setting secrets needs the deployer or admin role on every application.`,
		Example: `  printf %s "$DB_PASSWORD" | drover secrets set db-password --from-stdin
  drover secrets set tls-key --from-file ./tls.key
  drover secrets set api-token --from-stdin -o json < token.txt`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := outputFormat(output, "text", "json"); err != nil {
				return err
			}
			var (
				r    io.Reader
				from string
			)
			switch {
			case stdin == (file != ""):
				return usageErrorf("give the value with exactly one of --from-stdin and --from-file FILE (never on the command line)")
			case stdin:
				r, from = cmd.InOrStdin(), "stdin"
			default:
				f, err := os.Open(file)
				if err != nil {
					return usageErrorf("--from-file: %v", err)
				}
				defer func() { _ = f.Close() }()
				r, from = f, file
			}
			b, err := io.ReadAll(io.LimitReader(r, maxSecretInput+1))
			if err != nil {
				return fmt.Errorf("read the value from %s: %w", from, err)
			}
			if len(b) > maxSecretInput {
				return usageErrorf("the value from %s is larger than 64 KiB", from)
			}
			b = bytes.TrimSuffix(b, []byte("\n"))
			b = bytes.TrimSuffix(b, []byte("\r"))
			if len(b) == 0 {
				return usageErrorf("the value from %s is empty: nothing was set", from)
			}
			v, err := g.client().SetSecret(cmd.Context(), args[0], string(b))
			if err != nil {
				return apiErr(err)
			}
			if output == "json" {
				return writeJSON(cmd.OutOrStdout(), v)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "secret %s set: version %s (reference it as secret: {key: %s, version: %s})\n",
				clean(v.Key), clean(v.Version), clean(v.Key), clean(v.Version))
			return nil
		},
	}
	cmd.Flags().BoolVar(&stdin, "from-stdin", false, "read the value from stdin")
	cmd.Flags().StringVar(&file, "from-file", "", "read the value from FILE")
	addOutputFlag(cmd, &output, "text", "json")
	return cmd
}

func newSecretsListCmd(g *globals, use string) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   use,
		Short: "List the secrets' keys and versions (never their values)",
		Long: `Lists every secret's versions, oldest first, with who set each and when.
Values are never shown. Needs a role on every application (viewer is enough).`,
		Example: `  drover secrets
  drover secrets list -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := outputFormat(output, "text", "json"); err != nil {
				return err
			}
			list, err := g.client().ListSecrets(cmd.Context())
			if err != nil {
				return apiErr(err)
			}
			if output == "json" {
				return writeJSON(cmd.OutOrStdout(), list)
			}
			return printSecrets(cmd.OutOrStdout(), list)
		},
	}
	addOutputFlag(cmd, &output, "text", "json")
	return cmd
}

func printSecrets(w io.Writer, list *apiv1.SecretList) error {
	if len(list.Secrets) == 0 {
		fmt.Fprintln(w, "no secrets (drover secrets set KEY --from-stdin makes one)")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tVERSION\tCREATED\tBY")
	for _, s := range list.Secrets {
		for _, v := range s.Versions {
			name := v.Version
			if name == s.Latest {
				name += " (latest)"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", clean(s.Key), clean(name), v.CreatedAt.UTC().Format(time.RFC3339), clean(v.CreatedBy))
		}
	}
	return tw.Flush()
}

func newSecretsDeleteCmd(g *globals) *cobra.Command {
	var output, version string
	cmd := &cobra.Command{
		Use:   "delete KEY [--version KEY-N]",
		Short: "Delete a secret (every version), or one version",
		Long: `Delete erases every version of secret KEY, or only the version --version names
(KEY-N). A deleted version's name is never given again: a config that still
references it is refused at the next push, naming the field and the key, and
never gets another value. What was pushed before keeps running with the value
it was pushed with.

Deleting secrets needs the deployer or admin role on every application.`,
		Example: `  drover secrets delete db-password --version db-password-0
  drover secrets delete old-token
  drover secrets delete old-token -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := outputFormat(output, "text", "json"); err != nil {
				return err
			}
			resp, err := g.client().DeleteSecret(cmd.Context(), args[0], version)
			if err != nil {
				return apiErr(err)
			}
			if output == "json" {
				return writeJSON(cmd.OutOrStdout(), resp)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "secret %s: deleted %s\n", clean(resp.Key), clean(strings.Join(resp.Deleted, ", ")))
			return nil
		},
	}
	cmd.Flags().StringVar(&version, "version", "", "delete only this version (KEY-N); default: every version")
	addOutputFlag(cmd, &output, "text", "json")
	return cmd
}
