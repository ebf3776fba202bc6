package daemon

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strings"

	"github.com/drover-dev/drover/internal/auth"
	"github.com/drover-dev/drover/internal/cli"
	"github.com/drover-dev/drover/internal/server"
)

// edge sets up who may call a server bound to ln: its token (created in the
// data directory at the first start), the record of it for the CLI of this
// OS user, and the names the server answers to. It keeps the token in
// f.token for drover dev's own client.
func (f *serverFlags) edge(ln net.Listener, log *slog.Logger) (server.EdgeConfig, error) {
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
	return server.EdgeConfig{Auth: auth.NewTokenAuthenticator(token, auth.LocalIdentity), PublicNames: names}, nil
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
