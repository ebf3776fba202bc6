package cli

import (
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"

	"github.com/drover-dev/drover/api/client"
	apiv1 "github.com/drover-dev/drover/api/v1"
	"github.com/drover-dev/drover/internal/atomicfile"
	"github.com/drover-dev/drover/internal/auth"
	"github.com/drover-dev/drover/internal/tlspin"
)

// The CLI's own config file: the servers a user signed in to (drover
// login), each a context with its URL and credential, and the current one,
// as kubectl keeps clusters. It lives in $DROVER_CONFIG, else
// ConfigDir()/config.yaml, readable by its owner only (it holds tokens).

// cliConfig is the file's content.
type cliConfig struct {
	CurrentContext string       `yaml:"current-context,omitempty"`
	Contexts       []cliContext `yaml:"contexts"`
}

// cliContext is one server signed in to.
type cliContext struct {
	Name   string `yaml:"name"`
	Server string `yaml:"server"`
	Token  string `yaml:"token,omitempty"`
	// Fingerprint pins the server's certificate (hex SHA-256); CAFile
	// checks it against a CA of its own.
	Fingerprint string `yaml:"fingerprint,omitempty"`
	CAFile      string `yaml:"ca-file,omitempty"`
}

// configPath is the file's path.
func configPath() (string, error) {
	if p := os.Getenv("DROVER_CONFIG"); p != "" {
		return p, nil
	}
	dir, err := auth.ConfigDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "config.yaml"), nil
}

// loadConfig reads the file; a missing one is an empty config.
func loadConfig() (*cliConfig, string, error) {
	path, err := configPath()
	if err != nil {
		return nil, "", err
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return &cliConfig{}, path, nil
	}
	if err != nil {
		return nil, path, err
	}
	var c cliConfig
	if err := yaml.Unmarshal(b, &c); err != nil {
		return nil, path, fmt.Errorf("%s: %w", path, err)
	}
	return &c, path, nil
}

// save writes the file (0600, its directory 0700), atomically.
func (c *cliConfig) save(path string) error {
	b, err := yaml.Marshal(c)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return atomicfile.Write(path, b, 0o600)
}

// context returns the context named name.
func (c *cliConfig) context(name string) (*cliContext, bool) {
	for i := range c.Contexts {
		if c.Contexts[i].Name == name {
			return &c.Contexts[i], true
		}
	}
	return nil, false
}

// current is the current context, if any.
func (c *cliConfig) current() (*cliContext, bool) {
	if c.CurrentContext == "" {
		return nil, false
	}
	return c.context(c.CurrentContext)
}

// put adds or replaces ctx and makes it current.
func (c *cliConfig) put(ctx cliContext) {
	if cur, ok := c.context(ctx.Name); ok {
		*cur = ctx
	} else {
		c.Contexts = append(c.Contexts, ctx)
	}
	c.CurrentContext = ctx.Name
}

// contextName is the default name of a server's context: its host (and
// port, unless the scheme's own).
func contextName(server string) string {
	u, err := url.Parse(server)
	if err != nil || u.Host == "" {
		return server
	}
	return u.Host
}

func newLoginCmd(g *globals) *cobra.Command {
	var (
		tokenFile, name string
		ssoFlag         bool
	)
	cmd := &cobra.Command{
		Use:   "login SERVER",
		Short: "Sign in to a drover server and make it the current context",
		Long: `Login checks a credential against the server at SERVER (drover whoami) and
keeps both in the CLI's config file as a context, which becomes the current
one: later commands go to that server with that credential, unless --server,
--token, DROVER_SERVER or DROVER_TOKEN say otherwise.

The credential is an API token (drover tokens create), from --token-file,
--token or DROVER_TOKEN; or, with --sso (the default when no token is given
and the server has an OpenID provider), a session: login prints an address
and a code to enter there, in any browser; once you signed in at the
provider and allowed the device, the server gives the CLI a session, with
the roles your groups map to, until it expires (12 hours by default) or
drover logout ends it.

An https server's certificate is checked against --tls-fingerprint (the
sha256 a server with a self-signed certificate prints at its start), else
--ca-file, else the system's CAs; the context keeps what was used. The config
file is $DROVER_CONFIG, else config.yaml in drover's user config directory;
it is readable by you only, as it holds credentials.`,
		Example: `  drover login https://drover.example.com --sso
  drover login https://drover.internal:7420 --token-file ~/ci-token --tls-fingerprint sha256:3f1c...
  drover login https://drover.example.com --token-file ~/ci-token
  drover login http://127.0.0.1:7420 --name local --token drover_...`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			server := strings.TrimRight(args[0], "/")
			if u, err := url.Parse(server); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return usageErrorf("server %q: want http://HOST:PORT or https://HOST:PORT", args[0])
			}
			token := g.token
			if token == "" {
				token = os.Getenv("DROVER_TOKEN")
			}
			if tokenFile != "" {
				b, err := os.ReadFile(tokenFile)
				if err != nil {
					return usageError(fmt.Errorf("--token-file: %w", err))
				}
				token = strings.TrimSpace(string(b))
			}
			if ssoFlag && token != "" {
				return usageErrorf("--sso signs in through the server's OpenID provider: it does not go with a token")
			}
			pin := serverPin{fingerprint: g.tlsFingerprint, caFile: g.caFile}
			opts := []client.Option{client.WithTimeout(g.requestTimeout)}
			if strings.HasPrefix(server, "https://") {
				if pin.fingerprint == "" && pin.caFile == "" {
					pin.fingerprint, _ = auth.FindServerFingerprint(server) // a server of this OS user
				}
				cfg, err := tlspin.Config(pin.fingerprint, pin.caFile)
				if err != nil {
					return usageError(err)
				}
				opts = append(opts, client.WithTLSConfig(cfg))
			}
			var session *apiv1.SignInResult
			if token == "" {
				s, err := deviceSignIn(cmd, server, opts, ssoFlag, g.requestTimeout)
				if err != nil {
					return certificateHint(server, err)
				}
				session, token = s, s.Token
			}
			id, err := client.New(server, append(opts, client.WithToken(token))...).WhoAmI(cmd.Context())
			if err != nil {
				return certificateHint(server, err)
			}
			if pin.fingerprint != "" {
				pin.fingerprint, _ = tlspin.ParseFingerprint(pin.fingerprint)
			}
			conf, path, err := loadConfig()
			if err != nil {
				return err
			}
			if name == "" {
				name = contextName(server)
			}
			conf.put(cliContext{Name: name, Server: server, Token: token, Fingerprint: pin.fingerprint, CAFile: pin.caFile})
			if err := conf.save(path); err != nil {
				return fmt.Errorf("save %s: %w", path, err)
			}
			roles := strings.Join(id.Roles, ", ")
			if roles == "" {
				roles = "no role: ask an admin to map one of your groups (drover server --oidc-group)"
			}
			until := ""
			if session != nil {
				until = " until " + session.ExpiresAt.Local().Format(time.RFC1123)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "signed in to %s as %s (%s)%s; context %s is current (%s)\n",
				clean(server), clean(id.Name), clean(roles), until, clean(name), path)
			return nil
		},
	}
	cmd.Flags().StringVar(&tokenFile, "token-file", "", "read the API token from this file")
	cmd.Flags().StringVar(&name, "name", "", "the context's name (default: the server's host:port)")
	cmd.Flags().BoolVar(&ssoFlag, "sso", false, "sign in through the server's OpenID provider (the device flow: an address and a code to enter in a browser)")
	return cmd
}

// certificateHint explains a certificate no CA vouches for, with its
// fingerprint to pin; other errors are the API's.
func certificateHint(server string, err error) error {
	var unknown x509.UnknownAuthorityError
	if errors.As(err, &unknown) && unknown.Cert != nil {
		return fmt.Errorf("the certificate of %s is not signed by a CA this machine trusts (self-signed?): "+
			"its fingerprint is sha256:%s; if that is the one the server printed at its start, run again with --tls-fingerprint sha256:%s "+
			"(or --ca-file CA.pem)", server, tlspin.Fingerprint(unknown.Cert.Raw), tlspin.Fingerprint(unknown.Cert.Raw))
	}
	return apiErr(err)
}

func newContextCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "context",
		Short: "List the servers signed in to (contexts); use or forget one",
		Long: `Context lists the contexts of the CLI's config file (drover login adds them);
the current one is marked with *. drover context use NAME switches to
another, drover context delete NAME forgets one.`,
		Example: `  drover context
  drover context use prod
  drover context delete old`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			conf, path, err := loadConfig()
			if err != nil {
				return err
			}
			return printContexts(cmd.OutOrStdout(), conf, path)
		},
	}
	use := &cobra.Command{
		Use:   "use NAME",
		Short: "Make a context the current one",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			conf, path, err := loadConfig()
			if err != nil {
				return err
			}
			if _, ok := conf.context(args[0]); !ok {
				return usageErrorf("no context %q in %s: drover context lists them, drover login adds one", args[0], path)
			}
			conf.CurrentContext = args[0]
			if err := conf.save(path); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "context %s is current\n", clean(args[0]))
			return nil
		},
	}
	del := &cobra.Command{
		Use:   "delete NAME",
		Short: "Forget a context (and its credential)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			conf, path, err := loadConfig()
			if err != nil {
				return err
			}
			kept := conf.Contexts[:0]
			for _, c := range conf.Contexts {
				if c.Name != args[0] {
					kept = append(kept, c)
				}
			}
			if len(kept) == len(conf.Contexts) {
				return usageErrorf("no context %q in %s", args[0], path)
			}
			conf.Contexts = kept
			if conf.CurrentContext == args[0] {
				conf.CurrentContext = ""
			}
			if err := conf.save(path); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "context %s deleted\n", clean(args[0]))
			return nil
		},
	}
	cmd.AddCommand(use, del)
	return cmd
}

func printContexts(w io.Writer, conf *cliConfig, path string) error {
	if len(conf.Contexts) == 0 {
		fmt.Fprintf(w, "no contexts in %s: drover login SERVER adds one\n", path)
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CURRENT\tNAME\tSERVER")
	for _, c := range conf.Contexts {
		mark := ""
		if c.Name == conf.CurrentContext {
			mark = "*"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", mark, clean(c.Name), clean(c.Server))
	}
	return tw.Flush()
}
