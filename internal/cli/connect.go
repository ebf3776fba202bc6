package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"os"

	"github.com/drover-dev/drover/api/client"
	"github.com/drover-dev/drover/internal/auth"
)

// client returns an API client for --server with its credential: --token,
// else DROVER_TOKEN, else the token a server started by this OS user
// recorded for that address. Without any, requests go without one and the
// server's refusal says how to get one. A recorded token is sent only when
// the process listening on the address is the user's own (S1, Linux): if
// another user's holds it, every request fails saying so.
func (g *globals) client() *client.Client {
	return g.clientChecked(auth.CheckListenerOwner)
}

// clientChecked is client with the check of the listener's owner.
func (g *globals) clientChecked(checkListener func(serverURL string) error) *client.Client {
	token, err := g.resolveToken(checkListener)
	opts := []client.Option{client.WithToken(token), client.WithTimeout(g.requestTimeout)}
	if err != nil {
		opts = append(opts, client.WithError(err))
	}
	return client.New(g.server, opts...)
}

func (g *globals) resolveToken(checkListener func(serverURL string) error) (string, error) {
	if g.token != "" {
		return g.token, nil
	}
	if t := os.Getenv("DROVER_TOKEN"); t != "" {
		return t, nil
	}
	if t, _, err := auth.FindServerToken(g.server); err == nil {
		if err := checkListener(g.server); err != nil {
			return "", err
		}
		return t, nil
	}
	// No usable record: no token; the server's refusal says how to get one.
	return "", nil
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
