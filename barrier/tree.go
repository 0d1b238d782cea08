package barrier

import (
	"github.com/hoplite-go/hoplite/internal/barrier/replica"
	"github.com/hoplite-go/hoplite/internal/barrier/tree"
	"github.com/hoplite-go/hoplite/messages"
)

// treeShape is a new barrier's combining tree of fan-out k: every live
// member's barrier host in placement order, so that the root (position
// 0) is on the primary's member; nil with a single member, where the
// tree would only add a hop, or k = 0. Participants' Enters combine up it and their outcomes
// come down it (package internal/barrier/tree).
func treeShape(placed []MemberHost, replicas []*messages.BarrierPeer, wire *messages.BarrierOptions, k int) *messages.BarrierTreeShape {
	if len(placed) < 2 || k == 0 {
		return nil
	}
	if k < 0 { // not given: a tree only where it pays
		if len(placed) < TreeFromMembers {
			return nil
		}
		k = tree.DefaultFanout
	}
	o, err := policyOptions(wire)
	if err != nil {
		return nil
	}
	t := &messages.BarrierTreeShape{Fanout: int32(k), Hold: tree.ModeFor(o) == tree.Hold,
		Max: int32(o.MaxParticipants), Replicas: replicas}
	for _, h := range placed {
		t.Hosts = append(t.Hosts, replica.Peer(h.PID))
	}
	return t
}
