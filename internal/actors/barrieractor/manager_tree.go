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
func (m *Manager) treeEnters(now time.Time, msg *messages.BarrierEnters) replica.Effects {
	var e replica.Effects
	if m.leaves == nil {
		m.leaves = treeLeaves{}
	}
	max := int(m.cfg.Create.GetOptions().GetMaxParticipants())
	for _, a := range msg.GetArrivals() {
		from := replica.PeerPID(a.GetReply())
		if _, ok := m.leaves[a.GetLabel()]; !ok && len(m.leaves) < max && from != nil {
			m.leaves[a.GetLabel()] = treeLeaf{leaf: a.GetLeaf(), reply: from.String()}
		}
		e = merge(e, m.core.Step(now, replica.Enter{Req: &messages.BarrierEnter{Name: msg.GetName(), Label: a.GetLabel(), Host: a.GetHost(),
			RequestId: a.GetRequestId(), ToRank: msg.GetToRank()}, From: from}))
	}
	return e
}

// treeOutcomes takes out of e the outcomes of labels that came up the
// tree and sends them down it instead, in one BarrierReleases to the
// root's host (this manager's own host: the replica of rank 0 is on the
// root's member). Only that replica does: after a takeover the root's
// member may be the one that died, and a new primary answers each
// participant itself. An outcome the tree loses costs its participant a
// re-ask, which the primary answers straight.
func (m *Manager) treeOutcomes(ctx actor.Context, e *replica.Effects) {
	if len(m.leaves) == 0 || m.cfg.Create.GetRank() != 0 || len(m.cfg.Create.GetTree().GetHosts()) < 2 {
		return
	}
	var outs []*messages.BarrierOutcome
	kept := e.Sends[:0]
	for _, s := range e.Sends {
		if o := m.treeOutcome(s.To, s.Msg); o != nil {
			outs = append(outs, o)
			continue
		}
		kept = append(kept, s)
	}
	e.Sends = kept
	if len(outs) > 0 {
		ctx.Send(ctx.Parent(), &messages.BarrierReleases{Name: m.cfg.Create.GetName(), From: -1, Outcomes: outs})
	}
}

// treeOutcome is the outcome a send carries, addressed to where its
// label entered the tree (nil: not an outcome of a label that came up
// the tree, or not to the participant that entered it).
func (m *Manager) treeOutcome(to any, msg any) *messages.BarrierOutcome {
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
