package barrieractor

import (
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/internal/barrier/replica"
	"github.com/hoplite-go/hoplite/messages"
)

// treeLeaf is where a label entered the barrier's tree, and who to
// answer.
type treeLeaf struct {
	leaf  int32
	reply string
}

// treeLeaves remembers, per label, the tree position an arrival entered
// at: at most the barrier's MaxParticipants labels (the policy takes no
// more).
type treeLeaves map[string]treeLeaf

// treeEnters takes the arrivals the tree's root combined, each as its
// participant's own BarrierEnter: the replica answers (and watches) the
// participant, not the host that carried it.
func (m *Manager) treeEnters(ctx actor.Context, now time.Time, msg *messages.BarrierEnters) {
	if m.leaves == nil {
		m.leaves = treeLeaves{}
	}
	max := int(m.cfg.Create.GetOptions().GetMaxParticipants())
	for _, a := range msg.GetArrivals() {
		from := replica.PeerPID(a.GetReply())
		if _, ok := m.leaves[a.GetLabel()]; !ok && len(m.leaves) < max && from != nil {
			m.leaves[a.GetLabel()] = treeLeaf{leaf: a.GetLeaf(), reply: from.String()}
		}
		m.step(ctx, now, replica.Enter{Req: &messages.BarrierEnter{Name: msg.GetName(), Label: a.GetLabel(), Host: a.GetHost(),
			RequestId: a.GetRequestId(), ToRank: msg.GetToRank()}, From: from})
	}
}

// treeOutcome is the outcome a send carries, addressed to where its
// label entered the tree, for the one BarrierReleases that takes the
// outcomes of a message's steps down the tree from the root's host (this
// manager's own host: the replica of rank 0 is on the root's member;
// nil: not an outcome of a label that came up the tree, or not to the
// participant that entered it). Only that replica sends outcomes down
// the tree: after a takeover the root's member may be the one that
// died, and a new primary answers each participant itself. An outcome
// the tree loses costs its participant a re-ask, which the primary
// answers straight.
func (m *Manager) treeOutcome(to any, msg any) *messages.BarrierOutcome {
	if len(m.leaves) == 0 || m.cfg.Create.GetRank() != 0 || len(m.cfg.Create.GetTree().GetHosts()) < 2 {
		return nil
	}
	a, ok := to.(replica.Ask)
	if !ok || a.PID == nil {
		return nil
	}
	var o *messages.BarrierOutcome
	switch r := msg.(type) {
	case *messages.BarrierFired:
		o = &messages.BarrierOutcome{Label: r.GetLabel(), Kind: messages.BarrierOutcomeKind_BARRIER_OUTCOME_FIRED, Reason: r.GetReason(), Epoch: r.GetEpoch()}
	case *messages.BarrierLateFire:
		o = &messages.BarrierOutcome{Label: r.GetLabel(), Kind: messages.BarrierOutcomeKind_BARRIER_OUTCOME_LATE_FIRE}
	case *messages.BarrierCatchUp:
		o = &messages.BarrierOutcome{Label: r.GetLabel(), Kind: messages.BarrierOutcomeKind_BARRIER_OUTCOME_CATCH_UP}
	default:
		return nil
	}
	l, ok := m.leaves[o.GetLabel()]
	if !ok || l.reply != a.PID.String() {
		return nil
	}
	o.Leaf, o.Reply = l.leaf, replica.Peer(a.PID)
	return o
}

// outcomeMessage is what a tree host sends a participant for its
// label's outcome: the message the manager would have sent.
func outcomeMessage(name string, o *messages.BarrierOutcome) (msg any, ok bool) {
	switch o.GetKind() {
	case messages.BarrierOutcomeKind_BARRIER_OUTCOME_FIRED:
		return &messages.BarrierFired{Name: name, Label: o.GetLabel(), Reason: o.GetReason(), Epoch: o.GetEpoch()}, true
	case messages.BarrierOutcomeKind_BARRIER_OUTCOME_LATE_FIRE:
		return &messages.BarrierLateFire{Name: name, Label: o.GetLabel()}, true
	case messages.BarrierOutcomeKind_BARRIER_OUTCOME_CATCH_UP:
		return &messages.BarrierCatchUp{Name: name, Label: o.GetLabel()}, true
	case messages.BarrierOutcomeKind_BARRIER_OUTCOME_TIMED_OUT:
		return &messages.BarrierTimedOut{Name: name, Label: o.GetLabel()}, true
	}
	return nil, false
}
