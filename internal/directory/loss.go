package directory

import (
	"slices"

	"github.com/hoplite-go/hoplite/internal/outbox"
	"github.com/hoplite-go/hoplite/messages"
)

// An object is lost when no copy that can be read whole is left (its
// last one went with a node's failure or an eviction, or a rebuilt shard
// learnt the object only from partial copies): its Gets fail with LOST at once instead of waiting
// for their deadlines, and the table remembers the loss (bounded like
// the tombstones) until a whole copy turns up or the id is Put again.

type lostMark struct {
	err *messages.Error
	seq uint64
	// epoch is the lost entry's: a whole copy of it that the loss did not
	// drop holds those contents (see FetchDone).
	epoch uint64
	// droppedFrom are the nodes whose partial copies the loss dropped: a
	// Delete of the lost id names them to its caller (see deleteObject),
	// for one may have completed as the drop crossed it and kept its copy.
	droppedFrom []*messages.NodeRef
}

// lostRef is one entry of the lost FIFO; seq tells whether the id was
// lost again (and re-marked) since.
type lostRef struct {
	id  string
	seq uint64
}

// onReportLost removes a node's copy on its owner's word (a member leaving)
// and answers whether the object is now lost.
func (t *LocationTable) onReportLost(req *messages.ReportLost, replyTo any) outbox.Box {
	return outbox.Box{Sends: t.reportLost(req, replyTo)}
}

func (t *LocationTable) reportLost(req *messages.ReportLost, replyTo any) []outbox.Send {
	id := req.GetObjectId()
	reply := &messages.ReportLostReply{ObjectId: id}
	if err := t.check(id); err != nil || !nodeOK(req.GetNode()) {
		if err == nil {
			err = messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "report lost %q without a node", id)
		}
		reply.Error = err
		return []outbox.Send{{To: replyTo, Msg: reply}}
	}
	if _, ok := t.lost[id]; ok {
		reply.Lost = true
		return []outbox.Send{{To: replyTo, Msg: reply}}
	}
	e := t.entries[id]
	if e == nil || e.locs[req.GetNode().GetNodeId()] == nil {
		reply.Error = messages.Errorf(messages.ErrorCode_NOT_FOUND, "node %s holds no copy of %q here", req.GetNode().GetNodeId(), id)
		return []outbox.Send{{To: replyTo, Msg: reply}}
	}
	node := req.GetNode().GetNodeId()
	out := t.removeLocation(e, node)
	fx, lost := t.markLostIfGone(e, node)
	reply.Lost = lost
	if !lost {
		fx = t.serveWaiters(e)
	}
	out = append(out, fx...)
	return append(out, outbox.Send{To: replyTo, Msg: reply})
}

// onNodeFailed forgets every copy on a failed node and every request it had
// parked. Receivers it was serving find out from their own sessions and
// locate again (naming it as failed); senders it was fetching from are free.
func (t *LocationTable) onNodeFailed(node string) outbox.Box {
	return outbox.Box{Sends: t.nodeFailed(node, func(*messages.NodeRef) bool { return true })}
}

// onIncarnationFailed is NodeFailed for the incarnation of node at address
// only: the copies and requests of another incarnation of the id (at
// another address) stay, for it is not the one that failed.
func (t *LocationTable) onIncarnationFailed(node, address string) outbox.Box {
	return outbox.Box{Sends: t.nodeFailed(node, func(n *messages.NodeRef) bool { return n.GetAddress() == address })}
}

func (t *LocationTable) nodeFailed(node string, same func(*messages.NodeRef) bool) []outbox.Send {
	var out []outbox.Send
	for _, e := range t.entries {
		e.waiters = slices.DeleteFunc(e.waiters, func(w *waiter) bool {
			return w.kind == waitLocate && w.receiver.GetNodeId() == node && same(w.receiver)
		})
		if e.locs[node] != nil && same(e.locs[node].node) {
			out = append(out, t.removeLocation(e, node)...)
			if fx, lost := t.markLostIfGone(e, node); lost {
				out = append(out, fx...)
				continue
			}
			out = append(out, t.serveWaiters(e)...)
		} else if fx, lost := t.creatorFailed(e, node, same); lost {
			out = append(out, fx...)
			continue
		}
		t.forgetIfIdle(e)
	}
	return out
}

// endLoss ends id's loss: a whole copy of it reported itself after it
// was marked lost. It may be one the loss dropped, whose completion
// crossed the drop: its node keeps a whole copy that a loss's drop reaches
// (the drop frees only what can never complete), so the copy is there to
// be read, and the object is not lost after all.
func (t *LocationTable) endLoss(id string) {
	delete(t.lost, id)
}

// markLostIfGone ends an object that can no longer be read: no inline
// bytes, no complete copy and no creator's copy (which completes from its
// Put) remain after node's copy went, and no Reduce is producing it. Its
// waiters fail with LOST, partial copies (which can never complete) are
// dropped, and the id is remembered as lost. One not born yet, or in
// doubt, is not lost (see settleLoss).
func (t *LocationTable) markLostIfGone(e *entry, node string) ([]outbox.Send, bool) {
	if !t.unreadable(e) {
		e.doubt = nil
		return nil, false
	}
	return t.settleLoss(e, messages.Errorf(messages.ErrorCode_LOST,
		"object %q is lost: no complete copy remains (the last was on %s, which failed or let it go); Put it again to re-create it", e.id, node))
}

// unreadable reports whether e is an object nobody can read any more: no
// inline bytes, no complete copy and no creator's copy are listed, and no
// Reduce is producing it.
func (t *LocationTable) unreadable(e *entry) bool {
	return e.known && !e.hasInline && !e.target.reserved() && !e.hasSource()
}

// onRepublished is the shell's word that every store node alive when the
// table began has republished what it holds, or failed (see
// internal/actors/shardactor): a copy the table does not list exists nowhere. An
// object it knows only from partial copies (a rebuilt shard learns them
// from receivers whose sender died before the shard started over) can
// never be read whole: it is lost, its parked Gets fail with LOST instead
// of waiting for their deadlines, and its partial copies are dropped
// (unless one may be whole already, or it is not born yet: settleLoss).
// The losses earlier tables of the shard passed on are taken first
// (carried.go), then the Deletes held until now are answered.
func (t *LocationTable) onRepublished() outbox.Box {
	// The losses an earlier table of the shard passed on, then the
	// Deletes: a Delete of such an id deletes a lost object (it
	// succeeds), and a copy a Delete drops is deleted, not lost.
	out := t.takeCarriedLost()
	out = append(out, t.releaseDeletes()...)
	var ids []string
	for id, e := range t.entries {
		if t.unreadable(e) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		fx, _ := t.settleLoss(t.entries[id], messages.Errorf(messages.ErrorCode_LOST,
			"object %q is lost: no complete copy remains (every store node has republished its copies to this directory shard, which started over, and none is whole); Put it again to re-create it", id))
		out = append(out, fx...)
	}
	return outbox.Box{Sends: out}
}

// markLost ends e as lost with err (see markLostIfGone).
func (t *LocationTable) markLost(e *entry, err *messages.Error) []outbox.Send {
	var out []outbox.Send
	for _, w := range e.waiters {
		out = append(out, w.fail(e.id, err))
	}
	out = append(out, t.withdrawInline(e)...)
	var droppedFrom []*messages.NodeRef
	for _, loc := range t.sortedLocations(e) {
		out = append(out, outbox.Send{To: loc.node, Msg: &messages.DropObject{ObjectId: e.id, Reason: err}})
		droppedFrom = append(droppedFrom, loc.node)
		// Subscribers hear that the copy left, as removeLocation tells
		// them: a Reduce coordinator kept a dropped partial copy as a
		// source location, which no longer exists anywhere.
		out = append(out, e.notify(loc.node, messages.LocationState_LOCATION_STATE_UNSPECIFIED)...)
	}
	delete(t.entries, e.id)
	if len(e.subscribers) > 0 {
		// Subscribers (Reduce coordinators) stay: a new Put of the id is
		// a new source for them. They hear that no copy is left: one
		// that never got a location of it (it subscribed late, or the
		// copy died before its location reached it) would otherwise
		// wait for it until its deadline.
		t.entries[e.id] = &entry{id: e.id, locs: map[string]*location{}, subscribers: e.subscribers, epoch: e.epoch}
		for _, s := range e.subscribers {
			out = append(out, outbox.Send{To: s.to, Msg: lostUpdate(e.id, err)})
		}
	}
	// Kept beyond this table: no store node holds a copy to tell the
	// shard's next table of the object.
	out = append(out, t.keep(&messages.Tombstones{LostIds: []string{e.id}})...)
	t.lostSeq++
	t.lost[e.id] = lostMark{err: err, seq: t.lostSeq, epoch: e.epoch, droppedFrom: droppedFrom}
	t.lostOrder = append(t.lostOrder, lostRef{id: e.id, seq: t.lostSeq})
	if len(t.lostOrder) > t.cfg.TombstoneLimit {
		if old := t.lostOrder[0]; t.lost[old.id].seq == old.seq {
			delete(t.lost, old.id)
		}
		t.lostOrder = t.lostOrder[1:]
	}
	return out
}
