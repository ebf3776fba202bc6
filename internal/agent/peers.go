package agent

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/drover-dev/drover/internal/runtimes/remote"
)

// peerPool keeps a connection to each server the main server (--server)
// names as sharing its store, besides the main connection, so that every
// server reaches the agent (none has to hand services over to another for
// want of it). The servers announce themselves (drover server
// --agent-advertise-url); the main server's list decides: a peer it no
// longer names is disconnected. Peer connections serve the same runtimes
// as the main one and outlive it: when the main server stops, the others
// still reach the agent.
type peerPool struct {
	a  *agent
	wg sync.WaitGroup

	mu     sync.Mutex
	conns  map[string]*peerConn // by URL
	main   string               // the main connection's server, as it named itself
	closed bool                 // wait was called: no new connection
}

type peerConn struct {
	name   string
	cancel context.CancelFunc
}

// update reconciles the peer connections with what the main server said;
// ctx bounds them (the agent's run).
func (p *peerPool) update(ctx context.Context, ps remote.Peers) {
	want := map[string]remote.Peer{}
	for _, o := range ps.Others {
		if o.URL == "" || o.URL == ps.Self.URL || o.URL == p.a.cfg.Server {
			continue
		}
		want[o.URL] = o
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if ctx.Err() != nil || p.closed {
		return
	}
	p.main = ps.Self.Name
	for url, c := range p.conns {
		if _, ok := want[url]; !ok {
			p.a.log.Info("disconnecting from a server the main server no longer names", "server", url, "replica", c.name)
			c.cancel()
			delete(p.conns, url)
		}
	}
	for url, peer := range want {
		if p.conns[url] != nil {
			continue
		}
		cctx, cancel := context.WithCancel(ctx)
		c := &peerConn{name: peer.Name, cancel: cancel}
		p.conns[url] = c
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.serve(cctx, peer)
			p.forget(url, c)
		}()
	}
}

// forget removes c, ended by itself (refused), so a later update may
// start it again.
func (p *peerPool) forget(url string, c *peerConn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conns[url] == c {
		c.cancel()
		delete(p.conns, url)
	}
}

// heard handles what a peer's server says of itself: a peer that turns
// out to be the main connection's server (reached by another address) is
// dropped, else the server would have two sessions of the agent, each
// replacing the other.
func (p *peerPool) heard(url string, ps remote.Peers) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.conns[url]
	if c == nil || ps.Self.Name == "" || ps.Self.Name != p.main {
		return
	}
	p.a.log.Info("a server named as another is the main connection's; disconnecting from it", "server", url, "replica", ps.Self.Name)
	c.cancel()
	delete(p.conns, url)
}

// wait waits for the peer connections to end (once the agent's run ended).
func (p *peerPool) wait() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.wg.Wait()
}

// serve connects to peer and serves its calls until ctx ends, reconnecting
// with backoff.
func (p *peerPool) serve(ctx context.Context, peer remote.Peer) {
	a := p.a
	backoff := time.Second
	for {
		started := time.Now()
		err := p.session(ctx, peer)
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, remote.ErrRefused) {
			// The main connection hears the same and stops the agent.
			a.log.Warn("a server sharing the main server's store refused this agent", "server", peer.URL, "error", err)
			return
		}
		if time.Since(started) > time.Minute {
			backoff = time.Second
		}
		wait := backoff/2 + rand.N(backoff/2+1) //nolint:gosec // jitter, not security
		a.log.Warn("not connected to a server sharing the main server's store; retrying", "server", peer.URL, "error", err, "in", wait.Round(time.Millisecond))
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		backoff = min(2*backoff, a.cfg.MaxBackoff)
	}
}

// session connects to peer once and serves until the connection ends.
func (p *peerPool) session(ctx context.Context, peer remote.Peer) error {
	a := p.a
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	s, err := remote.Dial(dctx, a.dialConfig(peer.URL))
	cancel()
	if err != nil {
		return err
	}
	defer func() { _ = s.Close() }()
	sink := remote.NewRunSink(s)
	a.runs.set(peer.URL, sink)
	defer a.runs.unset(peer.URL, sink)
	a.log.Info("connected to a server sharing the main server's store", "server", peer.URL, "replica", peer.Name)
	return remote.ServeSession(ctx, s, a.hello, a.build, func(ps remote.Peers) { p.heard(peer.URL, ps) }, a.log)
}
