package daemon

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"

	"github.com/drover-dev/drover/internal/auth"
	"github.com/drover-dev/drover/internal/cli"
	"github.com/drover-dev/drover/internal/server"
	"github.com/drover-dev/drover/internal/store"
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
	authn := auth.Chain{auth.NewTokenAuthenticator(token, auth.Local(auth.LocalName())), server.NewTokenAuthenticator(st, nil)}
	return server.EdgeConfig{Auth: authn, PublicNames: names, ForbidSelfApproval: f.forbidSelfApproval}, nil
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
			f.adminToken = token
		}
	}
	return nil
}

// printAdminToken shows the first admin token, once, if this start made it.
func (f *serverFlags) printAdminToken(w io.Writer, addr string) {
	if f.adminToken == "" {
		return
	}
	fmt.Fprintf(w, "first admin token (shown once; the server keeps only its hash):\n  %s\n"+
		"sign in from another machine with: drover login %s --token-file FILE\n"+
		"and give others their own: drover tokens create NAME --role ROLE[@APP[/CHANNEL]]\n", f.adminToken, addr)
	f.adminToken = ""
}

// warnExposure prints a warning to w when the server at url
// (http://host:port) is reachable from other machines.
func warnExposure(w io.Writer, url string) {
	if msg := exposureWarning(strings.TrimPrefix(url, "http://")); msg != "" {
		fmt.Fprintln(w, msg)
	}
}

// exposureWarning is the warning for a server listening on addr (host:port),
// "" for a loopback address.
func exposureWarning(addr string) string {
	if ap, err := netip.ParseAddrPort(addr); err == nil && ap.Addr().Unmap().IsLoopback() {
		return ""
	}
	return fmt.Sprintf("warning: drover listens on %s, reachable from other machines: every request needs the server's token, "+
		"but traffic is plain HTTP (no TLS), so the token and your configs cross the network readable; "+
		"listen on 127.0.0.1 and put a TLS proxy in front (with --public-name) to serve others", addr)
}
