package storeproto

import (
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/hoplite-go/hoplite/internal/directory"
	"github.com/hoplite-go/hoplite/internal/outbox"
	"github.com/hoplite-go/hoplite/messages"
)

// DeleteRequest is what a Deletion needs to know about one Delete.
type DeleteRequest struct {
	// ID names the deletion in its timer.
	ID       uint64
	ObjectID string
	// Self is this node: its own copy is dropped in place, not asked for.
	Self      *messages.NodeRef
	Requester any // who hears the DeleteReply; nil for a tell
	Deadline  time.Time
}

type deletePhase int

const (
	deleteIdle deletePhase = iota
	deleteAsking
	deleteDropping
	deleteDone
)

// Deletion is the protocol of one Delete as a pure step machine: the
// object's shard deletes the entry (DeleteObject) and names the nodes
// that held copies; the shard tells them to drop, but its messages and a
// later Get at one of those nodes travel different paths, so the Delete
// also asks each of them to drop its copy and answers only once each has
// (read-your-writes across nodes). A node that fails has no copy to
// serve anyway; one that has not answered by the deadline may still
// serve its copy to a Get that begins after the answer (a loaded or cut
// off member, whose drop is still on its way), so the Delete then fails
// TIMEOUT rather than succeed: the shard deleted the entry, and the
// copies go as their drops arrive.
//
// Sends go to directory.ShardOf(object) and to *messages.NodeRef (a store node);
// the shell routes their answers back as Reply, Dropped and Failed.
type Deletion struct {
	req     DeleteRequest
	phase   deletePhase
	waiting map[string]bool // nodes asked to drop, by node id
}

// DeleteStep is what the shell does after a step, in this order: note
// the deletion, drop the local copy, deliver the sends, arm the timers,
// and forget the Delete when Done.
type DeleteStep struct {
	outbox.Box
	// NoteDeleted remembers the deletion in this node's store, for
	// directory shards that restart or move.
	NoteDeleted bool
	// DropLocal, if not nil, removes this node's copy with this reason.
	DropLocal *messages.Error
	// DropHeld, if not nil, removes the copy this node held when the
	// Delete started, if it still holds that one, with this reason: the
	// shard deleted the object without naming this node, whose record of
	// that copy may still be on its way to the shard (a FetchDone or a
	// publication on the actors' remote, which a DeleteObject on the data
	// plane can overtake). That copy is of the deleted object all the
	// same, so a Get here after the answer reads nothing; a copy made
	// since (a Put of the id meanwhile) is another object, and stays.
	DropHeld *messages.Error
	// Done: the requester has its answer; Err is it (for logs).
	Done bool
	Err  *messages.Error
}

// DeleteDeadline is the timer message of a deletion's deadline.
type DeleteDeadline struct{ ID uint64 }

// IgnoreDeadLetterLogging: a Delete's deadline may fire after its node
// stopped, which is expected (Proto.Actor does not log such dead letters).
func (DeleteDeadline) IgnoreDeadLetterLogging() {}

// NewDeletion returns the deletion of req, not started.
func NewDeletion(req DeleteRequest) *Deletion {
	return &Deletion{req: req, waiting: map[string]bool{}}
}

// Request is what the deletion was made with.
func (d *Deletion) Request() DeleteRequest { return d.req }

// onStart asks the shard and arms the deadline.
func (d *Deletion) onStart() DeleteStep {
	var s DeleteStep
	if d.phase != deleteIdle {
		return s
	}
	d.phase = deleteAsking
	s.Send(directory.ShardOf(d.req.ObjectID), &messages.DeleteObject{ObjectId: d.req.ObjectID})
	s.After(d.req.Deadline, DeleteDeadline{ID: d.req.ID})
	return s
}

// onReply takes the shard's answer: an error ends the Delete with it;
// otherwise every node that held a copy is asked to drop it.
func (d *Deletion) onReply(r *messages.DeleteObjectReply) DeleteStep {
	var s DeleteStep
	if d.phase != deleteAsking {
		return s
	}
	if e := r.GetError(); e != nil {
		d.finish(&s, e)
		return s
	}
	s.NoteDeleted = true
	reason := messages.Errorf(messages.ErrorCode_DELETED, "object %q was deleted", d.req.ObjectID)
	for _, node := range r.GetDropped() {
		id := node.GetNodeId()
		if id == d.req.Self.GetNodeId() {
			s.DropLocal = reason
			continue
		}
		if d.waiting[id] {
			continue
		}
		d.waiting[id] = true
		s.Send(node, &messages.DropObject{ObjectId: d.req.ObjectID, Reason: reason})
	}
	if s.DropLocal == nil {
		s.DropHeld = reason
	}
	d.phase = deleteDropping
	d.maybeDone(&s)
	return s
}

// onDropped says node has dropped its copy, or failed (it has none to
// serve).
func (d *Deletion) onDropped(node string) DeleteStep {
	var s DeleteStep
	if d.phase != deleteDropping || !d.waiting[node] {
		return s
	}
	delete(d.waiting, node)
	d.maybeDone(&s)
	return s
}

// onFailed ends a Delete whose shard will not answer (it stopped).
func (d *Deletion) onFailed(err *messages.Error) DeleteStep {
	var s DeleteStep
	if d.phase == deleteAsking {
		d.finish(&s, err)
	}
	return s
}

// onDeadline is the deletion's timer: without the shard's answer, or with
// nodes that have not said they dropped their copies, the Delete fails
// with TIMEOUT (see Deletion).
func (d *Deletion) onDeadline() DeleteStep {
	var s DeleteStep
	switch d.phase {
	case deleteAsking:
		d.finish(&s, messages.Errorf(messages.ErrorCode_TIMEOUT, "no reply from the directory shard of %q before the deadline", d.req.ObjectID))
	case deleteDropping:
		left := slices.Sorted(maps.Keys(d.waiting))
		d.finish(&s, messages.Errorf(messages.ErrorCode_TIMEOUT,
			"%q is deleted at its directory shard, but %s did not confirm dropping a copy before the deadline (a Get there may still read it until the drop arrives)",
			d.req.ObjectID, strings.Join(left, ", ")))
	}
	return s
}

func (d *Deletion) maybeDone(s *DeleteStep) {
	if len(d.waiting) == 0 {
		d.finish(s, nil)
	}
}

func (d *Deletion) finish(s *DeleteStep, err *messages.Error) {
	d.phase = deleteDone
	s.Done, s.Err = true, err
	s.Send(d.req.Requester, &messages.DeleteReply{ObjectId: d.req.ObjectID, Error: err})
}
