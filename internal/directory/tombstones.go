package directory

import (
	"github.com/hoplite-go/hoplite/internal/outbox"
	"github.com/hoplite-go/hoplite/messages"
)

// A deleted id stays deleted: the table remembers the last
// TombstoneLimit of them, and a shard that started over learns them back
// from the store nodes (ApplyTombstones).

// Delete removes the entry and every copy, and remembers the id as deleted.
func (t *LocationTable) Delete(req *messages.DeleteObject, replyTo any) outbox.Box {
	return outbox.Box{Sends: t.deleteObject(req, replyTo)}
}

func (t *LocationTable) deleteObject(req *messages.DeleteObject, replyTo any) []outbox.Send {
	id := req.GetObjectId()
	reply := &messages.DeleteObjectReply{ObjectId: id, RequestId: req.GetRequestId()}
	if err := ValidateObjectID(id, t.cfg.MaxObjectIDLen); err != nil {
		reply.Error = err
		return []outbox.Send{{To: replyTo, Msg: reply}}
	}
	if _, gone := t.tombstones[id]; gone {
		return []outbox.Send{{To: replyTo, Msg: reply}} // deleting twice is harmless
	}
	if _, ok := t.lost[id]; ok {
		// Deleting a lost object is how its owner says it will not come
		// back: later Gets see DELETED rather than LOST.
		delete(t.lost, id)
		t.addTombstone(id)
		return []outbox.Send{{To: replyTo, Msg: reply}}
	}
	e := t.entries[id]
	if (e == nil || !e.known) && t.cfg.Amnesic {
		var out []outbox.Send
		if e != nil {
			out = t.deleteEntry(e)
		}
		t.addTombstone(id)
		return append(out, outbox.Send{To: replyTo, Msg: reply})
	}
	if e == nil || !e.known {
		reply.Error = messages.Errorf(messages.ErrorCode_NOT_FOUND, "object %q does not exist", id)
		return []outbox.Send{{To: replyTo, Msg: reply}}
	}
	for _, loc := range t.sortedLocations(e) {
		reply.Dropped = append(reply.Dropped, loc.node)
	}
	out := t.deleteEntry(e)
	t.addTombstone(id)
	return append(out, outbox.Send{To: replyTo, Msg: reply})
}

// deleteEntry ends an entry as deleted: every copy is dropped, parked
// requests fail with DELETED and subscribers hear that it is gone.
func (t *LocationTable) deleteEntry(e *entry) []outbox.Send {
	var out []outbox.Send
	for _, loc := range t.sortedLocations(e) {
		out = append(out, outbox.Send{To: loc.node, Msg: deletedDrop(e.id)})
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

// ApplyTombstones takes back deletions this table missed: a shard that
// restarted or moved starts empty, and the store nodes send it the ids
// they saw deleted. Each is handled as a Delete would have been, even if
// copies of it were republished first: a node that held a copy when the
// Delete happened may have missed its DropObject, and a deleted id is
// never reused.
func (t *LocationTable) ApplyTombstones(req *messages.Tombstones) outbox.Box {
	var out []outbox.Send
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
	return outbox.Box{Sends: out}
}

func (t *LocationTable) addTombstone(id string) {
	t.tombstones[id] = struct{}{}
	t.tombOrder = append(t.tombOrder, id)
	if len(t.tombOrder) > t.cfg.TombstoneLimit {
		delete(t.tombstones, t.tombOrder[0])
		t.tombOrder[0] = ""
		t.tombOrder = t.tombOrder[1:]
	}
}
