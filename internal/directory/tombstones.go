package directory

import (
	"slices"

	"github.com/hoplite-go/hoplite/internal/outbox"
	"github.com/hoplite-go/hoplite/messages"
)

// A deleted id stays deleted: the table remembers the last
// TombstoneLimit of them, and a shard that started over learns them back
// from the store nodes (ApplyTombstones).

// onDelete removes the entry and every copy, and remembers the id as deleted.
func (t *LocationTable) onDelete(req *messages.DeleteObject, replyTo any) outbox.Box {
	return outbox.Box{Sends: t.deleteObject(req, replyTo, nil, false)}
}

// onDeleteNaming is Delete in a table not yet told Republished whose owner
// knows which store nodes have not republished: pending. Their copies
// are the only ones the table may not list yet, so rather than wait for
// the slowest of them (a node that holds a Reduce's target whole waits
// for its commit before it says it has republished, up to seconds) the
// Delete is answered now, naming them beside the holders listed: its
// caller asks each to drop its copy and answers once each has, and a copy
// republished later meets the tombstone. Only a Delete of an id the table
// does not know, in a table that did not start over, still waits: whether
// to answer NOT_FOUND is not known before every node has republished.
func (t *LocationTable) onDeleteNaming(req *messages.DeleteObject, replyTo any, pending []*messages.NodeRef) outbox.Box {
	return outbox.Box{Sends: t.deleteObject(req, replyTo, pending, true)}
}

// withPending is dropped and, after it, those of pending it does not name.
func withPending(dropped, pending []*messages.NodeRef) []*messages.NodeRef {
	for _, p := range pending {
		if !slices.ContainsFunc(dropped, func(n *messages.NodeRef) bool { return n.GetNodeId() == p.GetNodeId() }) {
			dropped = append(dropped, p)
		}
	}
	return dropped
}

// deleteObject is Delete; named says pending are the store nodes that
// have not republished (DeleteNaming), else the Delete waits for them all.
func (t *LocationTable) deleteObject(req *messages.DeleteObject, replyTo any, pending []*messages.NodeRef, named bool) []outbox.Send {
	id := req.GetObjectId()
	reply := &messages.DeleteObjectReply{ObjectId: id, RequestId: req.GetRequestId()}
	if err := ValidateObjectID(id, t.cfg.MaxObjectIDLen); err != nil {
		reply.Error = err
		return []outbox.Send{{To: replyTo, Msg: reply}}
	}
	if _, gone := t.tombstones[id]; gone {
		// Deleting twice is harmless, but the second answer must not
		// overtake the first's drops: a Delete that answered OK here
		// while a holder's drop was still on its way let a Get on that
		// holder read its copy after the answer. The nodes are named
		// again, and this Delete's caller asks them too (a node whose
		// copy is gone answers at once).
		reply.Dropped = withPending(slices.Clone(t.deletedFrom[id]), pending)
		return []outbox.Send{{To: replyTo, Msg: reply}}
	}
	e := t.entries[id]
	_, lost := t.lost[id]
	unknown := (e == nil || !e.known) && !lost
	if (t.amnesic || t.cfg.AwaitRepublish) && !t.republished && (!named || (unknown && !t.amnesic)) {
		// Copies this table does not list yet may still be republished:
		// answered now, the Delete would not reach them, and a Get on
		// their nodes would read them until their republication met the
		// tombstone. It waits for Republished.
		if len(t.parkedDeletes) >= MaxParkedDeletes {
			reply.Error = messages.Errorf(messages.ErrorCode_RESOURCE_EXHAUSTED,
				"this directory shard started and holds %d Deletes (its bound) until the store nodes have republished; retry later", len(t.parkedDeletes))
			return []outbox.Send{{To: replyTo, Msg: reply}}
		}
		t.parkedDeletes = append(t.parkedDeletes, parkedDelete{req: req, replyTo: replyTo})
		return nil
	}
	if l, ok := t.lost[id]; ok {
		// Deleting a lost object is how its owner says it will not come
		// back: later Gets see DELETED rather than LOST. The copies the
		// loss dropped are named, as a Delete's are: one may be whole
		// (its report crossed the loss), and its drop may still be on
		// its way.
		delete(t.lost, id)
		var out []outbox.Send
		reply.Dropped = withPending(slices.Clone(l.droppedFrom), pending)
		if len(l.droppedFrom) > 0 {
			t.deletedFrom[id] = l.droppedFrom
		} else {
			// No store node holds a copy to remember the deletion by.
			out = t.keep(&messages.Tombstones{ObjectIds: []string{id}})
		}
		t.addTombstone(id)
		return append(out, outbox.Send{To: replyTo, Msg: reply})
	}
	if (e == nil || !e.known) && t.amnesic {
		var out []outbox.Send
		if e != nil {
			out = t.deleteEntry(e)
		}
		t.addTombstone(id)
		out = append(out, t.keep(&messages.Tombstones{ObjectIds: []string{id}})...)
		reply.Dropped = slices.Clone(pending)
		return append(out, outbox.Send{To: replyTo, Msg: reply})
	}
	if e == nil || !e.known {
		reply.Error = messages.Errorf(messages.ErrorCode_NOT_FOUND, "object %q does not exist", id)
		return []outbox.Send{{To: replyTo, Msg: reply}}
	}
	for _, loc := range t.sortedLocations(e) {
		reply.Dropped = append(reply.Dropped, loc.node)
	}
	reply.Dropped = withPending(reply.Dropped, pending)
	out := t.deleteEntry(e)
	t.addTombstone(id)
	return append(out, outbox.Send{To: replyTo, Msg: reply})
}

// deleteEntry ends an entry as deleted: every copy is dropped, parked
// requests fail with DELETED and subscribers hear that it is gone.
func (t *LocationTable) deleteEntry(e *entry) []outbox.Send {
	// First, before any answer of this step can leave: a Get that starts
	// once the Delete is answered must not find the bytes, and every
	// copy the index's answers made is dropped with the others.
	out := t.withdrawInline(e)
	var holders []*messages.NodeRef
	for _, loc := range t.sortedLocations(e) {
		out = append(out, outbox.Send{To: loc.node, Msg: deletedDrop(e.id)})
		holders = append(holders, loc.node)
	}
	if len(holders) > 0 {
		t.deletedFrom[e.id] = holders
	}
	gone := messages.Errorf(messages.ErrorCode_DELETED, "object %q was deleted", e.id)
	for _, w := range e.waiters {
		out = append(out, w.fail(e.id, gone))
	}
	for _, s := range e.subscribers {
		out = append(out, outbox.Send{To: s.to, Msg: &messages.LocationUpdate{ObjectId: e.id, Size: e.size, Deleted: true}})
		if ids := t.subsOf[s.key]; ids != nil {
			delete(ids, e.id)
			if len(ids) == 0 {
				delete(t.subsOf, s.key)
			}
		}
	}
	delete(t.entries, e.id)
	return out
}

// deletedDrop frees a copy of a deleted object. The reason says DELETED
// explicitly: store nodes remember such ids for rebuilt shards, and must
// not remember a copy dropped for another cause (a size that disagrees
// with the directory's), whose DropObject carries no reason.
func deletedDrop(id string) *messages.DropObject {
	return &messages.DropObject{ObjectId: id, Reason: messages.Errorf(messages.ErrorCode_DELETED, "object %q was deleted", id)}
}

// onApplyTombstones takes back deletions this table missed: a shard that
// restarted or moved starts empty, and the store nodes send it the ids
// they saw deleted. Each is handled as a Delete would have been, even if
// copies of it were republished first: a node that held a copy when the
// Delete happened may have missed its DropObject, and a deleted id is
// never reused.
//
// The ids an earlier table of the shard marked lost (lost_ids) are taken
// once every store node has republished (see carried.go), and an earlier
// table's amnesia (amnesic) at once: the Deletes it holds until then are
// answered as an amnesic table answers them.
func (t *LocationTable) onApplyTombstones(req *messages.Tombstones) outbox.Box {
	var out []outbox.Send
	if req.GetAmnesic() {
		t.amnesic, t.carry.forgot = true, true
	}
	for _, id := range req.GetObjectIds() {
		if ValidateObjectID(id, t.cfg.MaxObjectIDLen) != nil {
			continue
		}
		if _, gone := t.tombstones[id]; gone {
			continue // every store node that saw the Delete sends it
		}
		delete(t.lost, id)
		if e := t.entries[id]; e != nil {
			out = append(out, t.deleteEntry(e)...)
		}
		t.addTombstone(id)
	}
	out = append(out, t.carryLost(req.GetLostIds())...)
	return outbox.Box{Sends: out}
}

func (t *LocationTable) addTombstone(id string) {
	t.tombstones[id] = struct{}{}
	t.tombOrder = append(t.tombOrder, id)
	if len(t.tombOrder) > t.cfg.TombstoneLimit {
		delete(t.tombstones, t.tombOrder[0])
		delete(t.deletedFrom, t.tombOrder[0])
		t.tombOrder[0] = ""
		t.tombOrder = t.tombOrder[1:]
	}
}

// MaxParkedDeletes bounds the Deletes a table that started over (or
// awaits the republication) holds until every store node has
// republished.
const MaxParkedDeletes = 4096

// parkedDelete is a Delete that waits for the store nodes' republication.
type parkedDelete struct {
	req     *messages.DeleteObject
	replyTo any
}

// deletedCopy answers a copy of the deleted id on node that reached the
// table after the Delete (a republication, a fetch's completion): the
// node drops it, and a later Delete of the id asks it too.
func (t *LocationTable) deletedCopy(id string, node *messages.NodeRef) []outbox.Send {
	if !slices.ContainsFunc(t.deletedFrom[id], func(n *messages.NodeRef) bool { return sameIncarnation(n, node) }) &&
		len(t.deletedFrom[id]) < maxDeletedFrom {
		t.deletedFrom[id] = append(t.deletedFrom[id], node)
	}
	return []outbox.Send{{To: node, Msg: deletedDrop(id)}}
}

// maxDeletedFrom bounds the nodes remembered for one deleted id past the
// ones that held it when it was deleted.
const maxDeletedFrom = 256

// releaseDeletes answers the parked Deletes (the store nodes have
// republished: every copy is listed).
func (t *LocationTable) releaseDeletes() []outbox.Send {
	t.republished = true
	parked := t.parkedDeletes
	t.parkedDeletes = nil
	var out []outbox.Send
	for _, d := range parked {
		out = append(out, t.deleteObject(d.req, d.replyTo, nil, false)...)
	}
	return out
}
