package cluster

import (
	"context"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/barrier"
	"github.com/hoplite-go/hoplite/internal/actors/barrieractor"
	"github.com/hoplite-go/hoplite/internal/barrier/participant"
	"github.com/hoplite-go/hoplite/messages"
)

// barrierHostOf is the barrier host of the incarnation whose store node
// is store.
func barrierHostOf(store *messages.NodeRef) *actor.PID {
	return memberPID(store.GetAddress(), rootOf(store), barriersName)
}

// barrierHost is this member's barrier host.
func (m *Member) barrierHost() *actor.PID { return barrierHostOf(m.ref) }

// ParticipantProps is a barrier handle's participant actor
// (barrier.Cluster).
func (m *Member) ParticipantProps(cfg participant.Config) *actor.Props {
	return barrieractor.NewParticipantProps(cfg)
}

// BarrierHosts lists the barrier hosts of the members live in this
// member's view (barrier.Cluster).
func (m *Member) BarrierHosts(context.Context) ([]barrier.MemberHost, error) {
	live := *m.live.Load()
	out := make([]barrier.MemberHost, 0, len(live))
	for _, id := range live {
		if pid := m.peerPID(id, barriersName); pid != nil {
			out = append(out, barrier.MemberHost{Member: id, PID: pid})
		}
	}
	return out, nil
}
