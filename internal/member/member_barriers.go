package member

import (
	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/internal/actors/barrieractor"
	"github.com/hoplite-go/hoplite/internal/barrier/participant"
	"github.com/hoplite-go/hoplite/messages"
)

// BarrierHostOf is the barrier host of the incarnation whose store node
// is store.
func BarrierHostOf(store *messages.NodeRef) *actor.PID {
	return memberPID(store.GetAddress(), RootOf(store), barriersName)
}

// barrierHost is this member's barrier host.
func (m *Member) barrierHost() *actor.PID { return BarrierHostOf(m.ref) }

// ParticipantProps is a barrier handle's participant actor
// (barrier.Cluster).
func (m *Member) ParticipantProps(cfg participant.Config) *actor.Props {
	return barrieractor.NewParticipantProps(cfg)
}

// BarrierHost is a live member's barrier host: the member's id and its
// incarnation's host actor.
type BarrierHost struct {
	Member string
	PID    *actor.PID
}

// LiveBarrierHosts lists the barrier hosts of the members live in this
// member's view (what barrier.Cluster's BarrierHosts answers).
func (m *Member) LiveBarrierHosts() []BarrierHost {
	live := *m.live.Load()
	out := make([]BarrierHost, 0, len(live))
	for _, id := range live {
		if pid := m.peerPID(id, barriersName); pid != nil {
			out = append(out, BarrierHost{Member: id, PID: pid})
		}
	}
	return out
}
