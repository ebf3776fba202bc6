package cli

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/drover-dev/drover/api/client"
	"github.com/drover-dev/drover/internal/auth"
	"github.com/drover-dev/drover/internal/tlspin"
)

// client returns an API client for the server and credential resolve
// finds. Without a credential, requests go without one and the server's
// refusal says how to get one. A recorded token is sent only when the
// process listening on the address is the user's own (S1, Linux): if
// another user's holds it, every request fails saying so.
func (g *globals) client() *client.Client {
	return g.clientChecked(auth.CheckListenerOwner)
}

// clientChecked is client with the check of the listener's owner.
func (g *globals) clientChecked(checkListener func(serverURL string) error) *client.Client {
	server, token, pin, err := g.resolve(checkListener)
	opts := []client.Option{client.WithToken(token), client.WithTimeout(g.requestTimeout)}
	if err == nil && strings.HasPrefix(server, "https://") {
		var cfg *tls.Config
		if cfg, err = tlspin.Config(pin.fingerprint, pin.caFile); err == nil {
			opts = append(opts, client.WithTLSConfig(cfg))
		}
	}
	if err != nil {
		opts = append(opts, client.WithError(err))
	}
	return client.New(server, opts...)
}

// serverPin is how the CLI checks an https server's certificate.
type serverPin struct{ fingerprint, caFile string }

// resolve finds the server: --server, else DROVER_SERVER, else the current
// context's (drover login), else the default; its credential: --token,
// else DROVER_TOKEN, else the context's when the server is the context's,
// else the token a server started by this OS user recorded for the
// address; and how to check its certificate: --tls-fingerprint or
// --ca-file (or their variables), else the context's, else the fingerprint
// recorded for the address, else the system's roots.
func (g *globals) resolve(checkListener func(serverURL string) error) (server, token string, pin serverPin, err error) {
	server, token, err = g.resolveServer(checkListener)
	pin = serverPin{fingerprint: g.tlsFingerprint, caFile: g.caFile}
	if pin.fingerprint != "" || pin.caFile != "" || !strings.HasPrefix(server, "https://") {
		return server, token, pin, err
	}
	if cur := g.context(); cur != nil && sameServer(cur.Server, server) && (cur.Fingerprint != "" || cur.CAFile != "") {
		return server, token, serverPin{fingerprint: cur.Fingerprint, caFile: cur.CAFile}, err
	}
	if fp, ferr := auth.FindServerFingerprint(server); ferr == nil {
		pin.fingerprint = fp
	}
	return server, token, pin, err
}

// context is the current context, if the CLI config has one.
func (g *globals) context() *cliContext {
	conf, _, err := loadConfig()
	if err != nil {
		return nil
	}
	cur, _ := conf.current()
	return cur
}

// sameServer reports whether two server URLs are one (a trailing slash
// aside).
func sameServer(a, b string) bool { return strings.TrimRight(a, "/") == strings.TrimRight(b, "/") }

// resolveServer is resolve's server and credential.
func (g *globals) resolveServer(checkListener func(serverURL string) error) (server, token string, err error) {
	server = g.server
	if server == "" {
		server = os.Getenv("DROVER_SERVER")
	}
	var cur *cliContext
	if conf, path, cerr := loadConfig(); cerr != nil {
		err = fmt.Errorf("read the CLI config %s: %w", path, cerr)
	} else if c, ok := conf.current(); ok {
		cur = c
	}
	if server == "" && cur != nil {
		server = cur.Server
	}
	if server == "" {
		server = client.DefaultServer
	}
	g.server = server
	if err != nil {
		return server, "", err
	}
	switch {
	case g.token != "":
		return server, g.token, nil
	case os.Getenv("DROVER_TOKEN") != "":
		return server, os.Getenv("DROVER_TOKEN"), nil
	case cur != nil && cur.Token != "" && sameServer(cur.Server, server):
		return server, cur.Token, nil
	}
	if t, _, ferr := auth.FindServerToken(server); ferr == nil {
		if err := checkListener(server); err != nil {
			return server, "", err
		}
		return server, t, nil
	}
	// No usable record: no token; the server's refusal says how to get one.
	return server, "", nil
}

// waitTimedOut turns err into the timeout exit (3) when the wait's own
// deadline (ctx) has passed, whatever the request was doing then: a server
// that does not answer makes wait time out, not fail.
func waitTimedOut(ctx context.Context, err error, timeout time.Duration, app, svc string) error {
	var exit *ExitError
	if errors.As(err, &exit) && exit.Code == exitFailed {
		return err // the rollout failed: that outcome stands
	}
	if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return &ExitError{Code: 3, Err: fmt.Errorf("timed out after %s waiting for %s/%s", timeout, app, svc)}
	}
	return err
}
