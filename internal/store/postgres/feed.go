package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/drover-dev/drover/internal/store"
)

// notifyChannel is the LISTEN/NOTIFY channel of the store's changes. Its
// payloads: "e" (events appended), "t" (tasks enqueued), "r" (runtime
// configs or linked runtimes changed), "f" (a freeze was made or lifted) and "s<application>\x1f<service>" (a
// service changed outside a lease).
// PostgreSQL delivers a transaction's notifications at its commit, once
// each, and never those of a transaction rolled back.
const notifyChannel = "drover_changes"

// notify queues a notification of payload in tx.
func notify(ctx context.Context, tx pgx.Tx, payload string) error {
	if _, err := tx.Exec(ctx, "SELECT pg_notify($1, $2)", notifyChannel, payload); err != nil {
		return fmt.Errorf("notify: %w", err)
	}
	return nil
}

// notifyRuntimes tells the listeners, after a committed change of a linked
// runtime, that runtimes changed. A notification lost here is made up for
// by the agents' heartbeats (5 s) and the next config change.
func (s *Store) notifyRuntimes(ctx context.Context) {
	_, _ = s.pool.Exec(ctx, "SELECT pg_notify($1, 'r')", notifyChannel)
}

// notifyService tells the listeners that a request changed a service.
func notifyService(ctx context.Context, tx pgx.Tx, application, service string) error {
	return notify(ctx, tx, "s"+application+"\x1f"+service)
}

// parseChange reads a notification's payload ("" = not one of ours).
func parseChange(payload string) (store.Change, bool) {
	switch {
	case payload == "e":
		return store.Change{Events: true}, true
	case payload == "t":
		return store.Change{Tasks: true}, true
	case payload == "r":
		return store.Change{Runtimes: true}, true
	case payload == "f":
		return store.Change{Freezes: true}, true
	case strings.HasPrefix(payload, "s"):
		app, svc, ok := strings.Cut(payload[1:], "\x1f")
		return store.Change{Application: app, Service: svc}, ok && app != "" && svc != ""
	}
	return store.Change{}, false
}

// listenPing is how long the feed waits for a notification before it
// checks its connection with a ping.
var listenPing = 15 * time.Second

// listenRetry is the pause before listening again after the connection was
// lost.
const listenRetry = time.Second

// Listen implements store.Feed with LISTEN on a connection of its own.
func (s *Store) Listen(ctx context.Context, fn func(store.Change)) error {
	for first := true; ; first = false {
		err := s.listenOnce(ctx, fn, !first)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		s.log.Warn("store change feed lost; listening again", "error", err, "retry_in", listenRetry)
		t := time.NewTimer(listenRetry)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// listenOnce listens on one connection until it fails or ctx ends; lost
// says an earlier connection was lost (fn hears so once this one listens).
func (s *Store) listenOnce(ctx context.Context, fn func(store.Change), lost bool) error {
	pooled, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	// The connection LISTENs: it leaves the pool and is closed at the end.
	conn := pooled.Hijack()
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+notifyChannel); err != nil {
		return err
	}
	if lost {
		fn(store.Change{Lost: true})
	}
	for {
		// Wait a while at a time, then ping: a connection that died without
		// a word (a half-open TCP connection) is found within a ping.
		wctx, cancel := context.WithTimeout(ctx, listenPing)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		switch {
		case err == nil:
			if c, ok := parseChange(n.Payload); ok {
				fn(c)
			}
		case ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded):
			pctx, cancel := context.WithTimeout(ctx, listenPing)
			err := conn.Ping(pctx)
			cancel()
			if err != nil {
				return fmt.Errorf("ping: %w", err)
			}
		default:
			return err
		}
	}
}
