package daemon

import (
	"context"
	"time"

	"github.com/drover-dev/drover/internal/runtimes/remote"
	"github.com/drover-dev/drover/internal/store"
)

// Timing of the servers' announcements to each other (shared stores).
const (
	// announceEvery is how often a server records that it is up and looks
	// for the others.
	announceEvery = 10 * time.Second
	// replicaLive is how recent an announcement must be for the server to
	// count as up.
	replicaLive = 3 * announceEvery
)

// announce, on a shared store, records every announceEvery that this
// server is up and where agents reach it (when it has such an address),
// and tells the hub which servers agents should also connect to, until
// ctx ends; then it removes its record.
func (n *Node) announce(ctx context.Context) {
	self := remote.Peer{Name: n.loop.Owner()}
	if n.agents != nil {
		self.URL = n.agents.Advertise
	}
	t := time.NewTicker(announceEvery)
	defer t.Stop()
	for {
		n.announceOnce(ctx, self)
		select {
		case <-ctx.Done():
			if self.URL != "" {
				rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
				if err := n.store.RemoveReplica(rctx, self.Name); err != nil {
					n.log.Warn("remove this server's announcement", "error", err)
				}
				cancel()
			}
			return
		case <-t.C:
		}
	}
}

func (n *Node) announceOnce(ctx context.Context, self remote.Peer) {
	ctx, cancel := context.WithTimeout(ctx, announceEvery)
	defer cancel()
	if self.URL != "" {
		if err := n.store.PutReplica(ctx, store.Replica{Name: self.Name, AgentURL: self.URL}); err != nil {
			n.log.Warn("announce this server to the others", "error", err)
		}
	}
	list, err := n.store.ListReplicas(ctx, replicaLive)
	if err != nil {
		n.log.Warn("list the servers sharing the store", "error", err)
		return
	}
	p := remote.Peers{Self: self}
	for _, r := range list {
		if r.Name != self.Name && r.AgentURL != "" && r.AgentURL != self.URL {
			p.Others = append(p.Others, remote.Peer{Name: r.Name, URL: r.AgentURL})
		}
	}
	n.hub.SetPeers(p)
}
