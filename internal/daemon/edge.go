package daemon

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/drover-dev/drover/api/client"
	"github.com/drover-dev/drover/internal/atomicfile"
	"github.com/drover-dev/drover/internal/auth"
	"github.com/drover-dev/drover/internal/cli"
	"github.com/drover-dev/drover/internal/server"
	"github.com/drover-dev/drover/internal/store"
	"github.com/drover-dev/drover/internal/tlspin"
)

// edge sets up who may call a server bound to ln: its local token
// (created in the data directory at the first start), the record of it for
// the CLI of this OS user, the API tokens of st, and the names the server
// answers to. It keeps the local token in f.token for drover dev's own
// client.
func (f *serverFlags) edge(ln net.Listener, st store.Store, log *slog.Logger) (server.EdgeConfig, error) {
	names := slices.Clone(f.publicNames)
	if host, _, err := net.SplitHostPort(f.listen); err == nil && host != "" && net.ParseIP(host) == nil {
		names = append(names, f.listen) // a name --listen gave (localhost is always allowed)
	}
	if _, err := auth.NewHosts(ln.Addr(), names...); err != nil {
		return server.EdgeConfig{}, cli.UsageErrorf("invalid --public-name: %w", err)
	}
	token, err := auth.LoadOrCreateToken(f.data)
	if err != nil {
		return server.EdgeConfig{}, err
	}
	f.token = token
	if path, err := auth.RecordServerToken(ln.Addr().String(), token); err != nil {
		log.Warn("token not recorded for the cli", "error", err)
	} else {
		log.Info("token recorded for the cli", "path", path)
	}
	sso, err := f.oidc.config(log)
	if err != nil {
		return server.EdgeConfig{}, err
	}
	authn := auth.Chain{auth.NewTokenAuthenticator(token, auth.Local(auth.LocalName())), server.NewSessionAuthenticator(st, nil).WithLocalToken(token),
		server.NewTokenAuthenticator(st, nil)}
	return server.EdgeConfig{Auth: authn, PublicNames: names, ForbidSelfApproval: f.forbidSelfApproval,
		MutationRate: f.mutationRate, MutationBurst: f.mutationBurst, MaxStreams: f.maxStreams, SSO: sso}, nil
}

// bootstrap creates the first admin token of a store that never had one:
// the value of --admin-token-file or DROVER_ADMIN_TOKEN, else a new one,
// kept in f.adminToken to be shown once.
func (f *serverFlags) bootstrap(ctx context.Context, st store.Store, log *slog.Logger) error {
	token, given := os.Getenv("DROVER_ADMIN_TOKEN"), false
	if f.adminTokenFile != "" {
		b, err := os.ReadFile(f.adminTokenFile)
		if err != nil {
			return cli.UsageErrorf("--admin-token-file: %w", err)
		}
		token = string(b)
	}
	token = strings.TrimSpace(token)
	switch {
	case token == "":
		token = auth.NewToken()
	case len(token) < 20:
		return cli.UsageErrorf("the first admin token (--admin-token-file or DROVER_ADMIN_TOKEN) is %d characters long: use at least 20 random ones", len(token))
	default:
		given = true
	}
	made, err := server.Bootstrap(ctx, st, token)
	if err != nil {
		return fmt.Errorf("create the first admin token: %w", err)
	}
	if made {
		log.Info("first admin token created", "name", server.BootstrapTokenName, "given", given)
		if !given {
			f.keepAdminToken(token, log)
		}
	}
	return nil
}

// AdminTokenFile is the file of the data directory the first admin token
// is written to (mode 0600), when the server made it.
const AdminTokenFile = "admin-token"

// keepAdminToken writes the first admin token the server made to
// DATA/admin-token (mode 0600, beside the local token, which is as
// powerful) rather than to the terminal or a log collector; only when that
// fails is it kept in f.adminToken to be printed once.
func (f *serverFlags) keepAdminToken(token string, log *slog.Logger) {
	path := filepath.Join(f.data, AdminTokenFile)
	if err := atomicfile.Write(path, []byte(token+"\n"), 0o600); err != nil {
		log.Warn("first admin token not written to the data directory; printing it once instead", "path", path, "error", err)
		f.adminToken = token
		return
	}
	f.adminTokenPath = path
}

// adminTokenLines say where the first admin token is, or show it (once)
// when it could not be written; none when this start made none. A login
// line is added only for an address other machines reach: on this machine
// the CLI finds the local token by itself.
func (f *serverFlags) adminTokenLines(addr string) []string {
	var lines []string
	switch {
	case f.adminTokenPath != "":
		lines = append(lines, fmt.Sprintf("first admin token written to %s (mode 0600; the server keeps only its hash): move it somewhere safe", f.adminTokenPath))
	case f.adminToken != "":
		lines = append(lines, "first admin token (shown once; the server keeps only its hash):", "  "+f.adminToken)
	default:
		return nil
	}
	if !isLoopbackURL(addr) {
		lines = append(lines, fmt.Sprintf("sign in from another machine with: drover login %s --token-file FILE (FILE holding that token)", addr))
	}
	lines = append(lines, "give others their own: drover tokens create NAME --role ROLE[@APP[/CHANNEL]]")
	f.adminToken, f.adminTokenPath = "", ""
	return lines
}

// isLoopbackURL reports whether url (scheme://host:port) is a loopback
// address.
func isLoopbackURL(url string) bool {
	_, hostPort, _ := strings.Cut(url, "://")
	ap, err := netip.ParseAddrPort(hostPort)
	return err == nil && ap.Addr().Unmap().IsLoopback()
}

// banner tells people where the server is: lines on stdout with text
// logs; with JSON logs (--log-format json), log records, so that every line
// a log collector reads is JSON.
func (f *serverFlags) banner(stdout, stderr io.Writer, log *slog.Logger, addr string) {
	if f.jsonLogs() {
		// start logged the warning of an address other machines reach.
		log.Info("drover server listening", "url", addr, "data", f.data, "web_ui", addr+"/")
		if f.tlsFingerprint != "" {
			log.Info("api tls certificate", "fingerprint", "sha256:"+f.tlsFingerprint)
		}
		if f.adminTokenPath != "" {
			log.Info("first admin token written", "path", f.adminTokenPath)
			f.adminTokenPath = ""
		}
		if f.adminToken != "" {
			// It could not be written: the only place it can go.
			fmt.Fprintf(stdout, "first admin token (shown once; the server keeps only its hash): %s\n", f.adminToken)
			f.adminToken = ""
		}
		if a := f.agentsOpen; a != nil {
			log.Info("accepting agents", "addr", a.Listener.Addr().String(), "url", a.URL, "fingerprint", "sha256:"+a.Fingerprint)
		}
		return
	}
	warnExposure(stderr, addr)
	fmt.Fprintf(stdout, "drover server listening on %s (data in %s); web UI at %s/\n", addr, f.data, addr)
	if f.tlsFingerprint != "" {
		fmt.Fprintf(stdout, "TLS certificate sha256:%s (clients pin it: --tls-fingerprint sha256:%s)\n", f.tlsFingerprint, f.tlsFingerprint)
	}
	for _, l := range f.adminTokenLines(addr) {
		fmt.Fprintln(stdout, l)
	}
	if a := f.agentsOpen; a != nil {
		fmt.Fprintf(stdout, "accepting agents on %s (%s; certificate sha256:%s)\n", a.Listener.Addr(), a.URL, a.Fingerprint)
	}
}

// validateTLS refuses TLS flags that contradict each other.
func (f *serverFlags) validateTLS() error {
	switch {
	case (f.tlsCert == "") != (f.tlsKey == ""):
		return cli.UsageErrorf("--tls-cert and --tls-key go together")
	case f.insecure && (f.tlsCert != "" || f.tls):
		return cli.UsageErrorf("--insecure serves plain HTTP: it does not go with --tls or --tls-cert")
	}
	return nil
}

// apiTLSDir is where a server keeps the self-signed certificate of its
// API, in its data directory.
const apiTLSDir = "api-tls"

// apiTLS is the API listener's TLS config for a server bound to addr, nil
// for plain HTTP: TLS with --tls-cert, or with the data directory's
// self-signed certificate on an address other machines reach (or with
// --tls); plain HTTP on a loopback address, or anywhere with --insecure.
// It records the certificate's fingerprint for the CLI of this OS user,
// beside the local token, and keeps it in f.tlsFingerprint.
func (f *serverFlags) apiTLS(addr net.Addr, log *slog.Logger) (*tls.Config, error) {
	if err := f.validateTLS(); err != nil {
		return nil, err
	}
	if f.tlsCert == "" && !f.tls && (auth.IsLoopback(addr) || f.insecure) {
		return nil, nil
	}
	names := slices.Clone(f.publicNames)
	if host, _, err := net.SplitHostPort(addr.String()); err == nil {
		names = append(names, host)
	}
	cfg, fingerprint, err := serverTLS(f.tlsCert, f.tlsKey, filepath.Join(f.data, apiTLSDir), "drover api", names, log)
	if err != nil {
		return nil, fmt.Errorf("the API's certificate: %w", err)
	}
	f.tlsFingerprint = fingerprint
	if path, err := auth.RecordServerFingerprint(addr.String(), fingerprint); err != nil {
		log.Warn("certificate fingerprint not recorded for the cli", "error", err)
	} else {
		log.Info("certificate fingerprint recorded for the cli", "path", path)
	}
	return cfg, nil
}

// localClient is a client of the server start started at addr, with its
// local token and its certificate pinned when it serves TLS.
func (f *serverFlags) localClient(addr string) (*client.Client, error) {
	opts := []client.Option{client.WithToken(f.token)}
	if f.tlsFingerprint != "" {
		cfg, err := tlspin.Config(f.tlsFingerprint, "")
		if err != nil {
			return nil, err
		}
		opts = append(opts, client.WithTLSConfig(cfg))
	}
	return client.New(addr, opts...), nil
}

// warnExposure prints a warning to w when the server at url
// (http://host:port) is reachable from other machines over plain HTTP.
func warnExposure(w io.Writer, url string) {
	if !strings.HasPrefix(url, "http://") {
		return
	}
	if msg := exposureWarning(strings.TrimPrefix(url, "http://")); msg != "" {
		fmt.Fprintln(w, msg)
	}
}

// exposureWarning is the warning for a server listening on addr (host:port)
// over plain HTTP (--insecure), "" for a loopback address.
func exposureWarning(addr string) string {
	if ap, err := netip.ParseAddrPort(addr); err == nil && ap.Addr().Unmap().IsLoopback() {
		return ""
	}
	return fmt.Sprintf("warning: drover listens on %s over plain HTTP (--insecure), reachable from other machines: every request needs a credential, "+
		"but tokens and configs cross the network readable; drop --insecure to serve TLS (a self-signed certificate, or --tls-cert), "+
		"or listen on 127.0.0.1 behind a TLS proxy (with --public-name)", addr)
}
