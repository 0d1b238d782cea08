package member

import (
	"context"

	"github.com/hoplite-go/hoplite/barrier"
	"github.com/hoplite-go/hoplite/messages"
	"github.com/hoplite-go/hoplite/storenode"
)

// The tests reach a member's store node and barriers as an application
// does through package cluster, whose Member and Local add these to the
// member's: a client of the store node, and the live barrier hosts as
// package barrier takes them. They are the facade's methods, declared
// here for the tests of this package only (package cluster imports this
// one, so these tests cannot use it).

// Client is the Go API of this member's store node.
func (m *Member) Client() *storenode.Client {
	return storenode.NewClient(m.system.Root, m.StoreNode(), m.cfg.DefaultTimeout)
}

// ClientOf is a client of another member's store node, through this
// member's actor system.
func (m *Member) ClientOf(node *messages.NodeRef) *storenode.Client {
	return storenode.NewClient(m.system.Root, node.PID(), m.cfg.DefaultTimeout)
}

// BarrierHosts lists the barrier hosts of the members live in this
// member's view (barrier.Cluster).
func (m *Member) BarrierHosts(context.Context) ([]barrier.MemberHost, error) {
	return barrierHosts(m.LiveBarrierHosts()), nil
}

// Client is the Go API of node i, in node i's own actor system.
func (l *Local) Client(i int) *storenode.Client { return l.Member(i).Client() }

// BarrierHosts lists the barrier hosts of the live members
// (barrier.Cluster).
func (l *Local) BarrierHosts(context.Context) ([]barrier.MemberHost, error) {
	return barrierHosts(l.LiveBarrierHosts()), nil
}

func barrierHosts(hosts []BarrierHost) []barrier.MemberHost {
	out := make([]barrier.MemberHost, len(hosts))
	for i, h := range hosts {
		out[i] = barrier.MemberHost{Member: h.Member, PID: h.PID}
	}
	return out
}
