package storeactor

import (
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/messages"
)

// heldCommitWait bounds how long a republication waits for the commit of
// a Reduce's target this node holds whole (see heldRepublish). A commit in
// flight arrives within a message's delay; one that never comes (the
// coordinator died before sending it) costs the rebuilt shard this much
// before it hears RepublishDone, well inside its own wait for the store
// nodes (internal/actors/shardactor.DefaultRepublishWait).
const heldCommitWait = 2 * time.Second

// maxLateCommits bounds StoreNode.lateCommit. Past it a late commit is
// not published again, and the shard learns the result from the next
// republication.
const maxLateCommits = 4096

// heldRepublish is a republication to a rebuilt directory shard that
// waits, before RepublishDone, for the commit of the Reduce targets this
// node holds whole. A rebuilt shard's coordinators died with its old
// incarnation, but one of them may have sent its root's commit just
// before: published as it stood (PARTIAL, its run named), the copy was
// dropped by the new shard as the dead run's, the commit completed it
// anyway, and the new shard learned the result only from the copies
// read from it, which name no run; the call's next attempt then met its
// own result as a foreign object and failed CONFLICT (chaos seed 78 under
// load). Held until the commit, the copy is published complete, with its
// run and sources, before the shard starts any Reduce.
//
// It also waits for the hand-over of the shards its member still hosts
// (see handover.go): shards names them, count is the request's shard
// count, and handover is that wait's timer.
type heldRepublish struct {
	asker    *actor.PID
	ids      map[string]bool // held copies not published to asker yet
	timer    *time.Timer
	shards   map[int32]bool
	count    int
	handover *time.Timer
}

// heldRepublishDue ends a heldRepublish's wait.
type heldRepublishDue struct{ h *heldRepublish }

// maxHeldRepublish bounds the republications held at once. Each asker
// holds at most one (a repeat joins it), and a shard asks a store node
// again only when it proved alive after a suspicion, so a handful are
// held at a time; the bound is for askers from the network that are
// not shards. Past it a request is answered at once, as a held one
// whose waits ran out is.
const maxHeldRepublish = 1024

// hold starts a heldRepublish for the held-whole copies ids and the
// shards still hosted here (of a request for count shards), or adds them
// to the one asker's earlier request holds: its waits keep their
// deadlines, and one RepublishDone answers both.
func (n *StoreNode) hold(ctx actor.Context, asker *actor.PID, ids []string, shards []int32, count int) {
	var h *heldRepublish
	for _, old := range n.held {
		if old.asker.Equal(asker) && old.count == count {
			h = old
			break
		}
	}
	full := h == nil && len(n.held) >= maxHeldRepublish
	if h == nil {
		h = &heldRepublish{asker: asker, ids: map[string]bool{}, shards: map[int32]bool{}, count: count}
		if !full {
			n.held = append(n.held, h)
		}
	}
	for _, id := range ids {
		h.ids[id] = true
	}
	for _, s := range shards {
		h.shards[s] = true
	}
	if full {
		n.giveUp(ctx, h)
		ctx.Send(asker, &messages.RepublishDone{Node: n.cfg.Self})
		return
	}
	system, self := ctx.ActorSystem(), ctx.Self()
	if len(ids) > 0 && h.timer == nil {
		h.timer = time.AfterFunc(heldCommitWait, func() { system.Root.Send(self, &heldRepublishDue{h: h}) })
	}
	if len(shards) > 0 && h.handover == nil {
		h.handover = time.AfterFunc(n.cfg.handoverWait(), func() { system.Root.Send(self, &handoverDue{h: h}) })
	}
}

// settleHeld publishes id to every republication waiting for it, now
// that its copy is committed, dropped or rewound (whatever Publication
// says of it now), and ends the republications that wait for nothing
// more.
func (n *StoreNode) settleHeld(ctx actor.Context, id string) {
	if n.lateCommit[id] {
		// Published PARTIAL after its wait ran out, and committed after
		// all: the shard's current home learns the result now.
		delete(n.lateCommit, id)
		if o := n.cfg.Store.Lookup(id); o != nil {
			if pub, ok := o.Publication(n.cfg.Self); ok && pub.GetState() == messages.LocationState_COMPLETE {
				ctx.Send(n.cfg.ShardFor(id), pub)
			}
		}
	}
	for _, h := range n.held {
		if !h.ids[id] {
			continue
		}
		if o := n.cfg.Store.Lookup(id); o != nil && o.HeldWhole() {
			continue // still awaiting its commit
		}
		delete(h.ids, id)
		n.publishTo(ctx, h.asker, id)
	}
	n.endHeld(ctx, false)
}

// heldDue ends h's wait: what it still waits for is published as it
// stands, and a commit that arrives later publishes it again.
func (n *StoreNode) heldDue(ctx actor.Context, m *heldRepublishDue) {
	m.h.timer = nil // ids a repeated request adds get a wait of their own
	for id := range m.h.ids {
		n.publishTo(ctx, m.h.asker, id)
		if n.lateCommit == nil {
			n.lateCommit = map[string]bool{}
		}
		if len(n.lateCommit) < maxLateCommits {
			n.lateCommit[id] = true
		}
		delete(m.h.ids, id)
	}
	n.endHeld(ctx, false)
}

// endHeld sends RepublishDone for every republication that waits for
// nothing more, or for all of them if all is set (the actor is stopping
// or restarting: its state goes, and the shards must not wait for it).
func (n *StoreNode) endHeld(ctx actor.Context, all bool) {
	kept := n.held[:0]
	for _, h := range n.held {
		if all {
			n.giveUp(ctx, h)
		}
		if len(h.ids) > 0 || len(h.shards) > 0 {
			kept = append(kept, h)
			continue
		}
		if h.timer != nil {
			h.timer.Stop()
		}
		if h.handover != nil {
			h.handover.Stop()
		}
		ctx.Send(h.asker, &messages.RepublishDone{Node: n.cfg.Self})
	}
	clear(n.held[len(kept):])
	n.held = kept
	if all {
		clear(n.lateCommit)
	}
}

// giveUp ends h's waits at once: its copies are published as they stand
// and its asker is told to be amnesic for the shards still hosted here.
func (n *StoreNode) giveUp(ctx actor.Context, h *heldRepublish) {
	for id := range h.ids {
		n.publishTo(ctx, h.asker, id)
	}
	clear(h.ids)
	n.handoverMissed(ctx, h)
}

// publishTo sends to the copy of id this node holds, if it has one to
// offer.
func (n *StoreNode) publishTo(ctx actor.Context, to *actor.PID, id string) {
	if o := n.cfg.Store.Lookup(id); o != nil {
		if pub, ok := o.Publication(n.cfg.Self); ok {
			ctx.Send(to, pub)
		}
	}
}
