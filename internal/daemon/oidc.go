package daemon

import (
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/drover-dev/drover/internal/auth"
	"github.com/drover-dev/drover/internal/cli"
	"github.com/drover-dev/drover/internal/server"
	"github.com/drover-dev/drover/internal/sso"
)

// oidcFlags sign people in through an OpenID provider.
type oidcFlags struct {
	issuer, clientID, clientSecretFile             string
	deviceClientID, deviceClientSecretFile, caFile string
	redirectURL, nameClaim, groupsClaim, everyone  string
	scopes, groups                                 []string
	sessionTTL                                     time.Duration
}

func (o *oidcFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&o.issuer, "oidc-issuer", os.Getenv("DROVER_OIDC_ISSUER"), "sign people in through this OpenID provider (its issuer URL; env DROVER_OIDC_ISSUER): drover login --sso, and /v1/auth/login in a browser")
	fl.StringVar(&o.clientID, "oidc-client-id", os.Getenv("DROVER_OIDC_CLIENT_ID"), "drover's client id at the provider (env DROVER_OIDC_CLIENT_ID); register SERVER/v1/auth/callback as its redirect URI")
	fl.StringVar(&o.clientSecretFile, "oidc-client-secret-file", "", "a file holding the client's secret (env DROVER_OIDC_CLIENT_SECRET holds the same; none: a public client)")
	fl.StringVar(&o.deviceClientID, "oidc-device-client-id", "", "the client id of the device sign-in (drover login --sso), for providers that register it apart (default: --oidc-client-id)")
	fl.StringVar(&o.deviceClientSecretFile, "oidc-device-client-secret-file", "", "a file holding --oidc-device-client-id's secret")
	fl.StringSliceVar(&o.scopes, "oidc-scopes", nil, "scopes asked of the provider (default openid,profile,email; add groups where the provider needs it for the groups claim)")
	fl.StringVar(&o.nameClaim, "oidc-name-claim", sso.DefaultNameClaim, "the claim that names a person in events, approvals and the audit log; email counts only with email_verified true; sub names people by the provider's subject; a sign-in without it fails")
	fl.StringVar(&o.groupsClaim, "oidc-groups-claim", sso.DefaultGroupsClaim, "the claim that lists a person's groups")
	fl.StringArrayVar(&o.groups, "oidc-group", nil, "GROUP=ROLE[@APP[/CHANNEL]][,...]: the roles a group's members hold, e.g. release-managers=approver@shop; repeatable")
	fl.StringVar(&o.everyone, "oidc-default-roles", "", "ROLE[@APP[/CHANNEL]][,...]: roles every signed-in person holds (default: none; a person without a mapped group can only ask who they are)")
	fl.DurationVar(&o.sessionTTL, "oidc-session-ttl", server.DefaultSessionTTL, "how long a sign-in lasts before the person signs in again")
	fl.StringVar(&o.redirectURL, "oidc-redirect-url", "", "the browser callback registered at the provider (default: the address the browser used, with /v1/auth/callback)")
	fl.StringVar(&o.caFile, "oidc-ca-file", "", "CA certificates (PEM) that sign the provider's certificate, besides the system's")
}

// config builds the server's SSO from the flags: nil without --oidc-issuer.
func (o *oidcFlags) config(log *slog.Logger) (*server.SSOConfig, error) {
	if o.issuer == "" {
		if o.clientID != "" || len(o.groups) > 0 || o.everyone != "" || o.deviceClientID != "" || o.redirectURL != "" {
			return nil, cli.UsageErrorf("the --oidc-* flags need --oidc-issuer")
		}
		return nil, nil
	}
	secret, err := readSecret(o.clientSecretFile, "DROVER_OIDC_CLIENT_SECRET", "--oidc-client-secret-file")
	if err != nil {
		return nil, err
	}
	deviceSecret, err := readSecret(o.deviceClientSecretFile, "", "--oidc-device-client-secret-file")
	if err != nil {
		return nil, err
	}
	cfg := sso.Config{Issuer: o.issuer, ClientID: o.clientID, ClientSecret: secret, DeviceClientID: o.deviceClientID,
		DeviceClientSecret: deviceSecret, Scopes: o.scopes, NameClaim: o.nameClaim, GroupsClaim: o.groupsClaim,
		Groups: map[string][]auth.Binding{}}
	for _, g := range o.groups {
		name, bs, err := sso.ParseGroup(g)
		if err != nil {
			return nil, cli.UsageErrorf("--oidc-group: %w", err)
		}
		cfg.Groups[name] = append(cfg.Groups[name], bs...)
	}
	if o.everyone != "" {
		if cfg.Everyone, err = sso.ParseBindings(o.everyone); err != nil {
			return nil, cli.UsageErrorf("--oidc-default-roles: %w", err)
		}
	}
	if o.sessionTTL < time.Minute {
		return nil, cli.UsageErrorf("invalid --oidc-session-ttl %v: at least 1m", o.sessionTTL)
	}
	if o.redirectURL != "" {
		if u, err := url.Parse(o.redirectURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return nil, cli.UsageErrorf("invalid --oidc-redirect-url %q: want https://HOST/v1/auth/callback", o.redirectURL)
		}
	}
	if o.caFile != "" {
		pem, err := os.ReadFile(o.caFile)
		if err != nil {
			return nil, cli.UsageErrorf("--oidc-ca-file: %w", err)
		}
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, cli.UsageErrorf("--oidc-ca-file %s holds no PEM certificate", o.caFile)
		}
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		cfg.HTTPClient = &http.Client{Transport: tr, Timeout: 30 * time.Second}
	} else {
		cfg.HTTPClient = &http.Client{Timeout: 30 * time.Second}
	}
	rp, err := sso.New(cfg)
	if err != nil {
		return nil, cli.UsageErrorf("%w", err)
	}
	if u, _ := url.Parse(o.issuer); u.Scheme == "http" && !loopbackHost(u.Hostname()) {
		log.Warn("the OpenID provider is reached over plain HTTP", "issuer", o.issuer)
	}
	log.Info("people sign in through an OpenID provider", "issuer", o.issuer, "groups_mapped", len(cfg.Groups))
	return &server.SSOConfig{RP: rp, SessionTTL: o.sessionTTL, RedirectURL: o.redirectURL}, nil
}

// readSecret reads a secret from file, else from the environment variable
// env ("" = none); "" when neither is set.
func readSecret(file, env, flag string) (string, error) {
	if file == "" {
		if env == "" {
			return "", nil
		}
		return strings.TrimSpace(os.Getenv(env)), nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", cli.UsageErrorf("%s: %w", flag, err)
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "", cli.UsageErrorf("%s %s is empty", flag, file)
	}
	return s, nil
}

func loopbackHost(h string) bool {
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}
