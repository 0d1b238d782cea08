package directory

import (
	"slices"
	"time"

	"github.com/hoplite-go/hoplite/internal/outbox"
	"github.com/hoplite-go/hoplite/messages"
)

// LOST means that every member that held a complete copy died, was cut
// off or let it go, so two objects left with no readable copy are not
// lost (yet):
//
//   - One not born yet: its creator's copy went while the creator's node
//     lived (the Put's registration failed and withdrew it, and the
//     client may Put again; or a receiver named it a failed sender)
//     before any copy was whole. Its Gets keep waiting, to their
//     deadlines, for a Put of it. A withdrawal names the registration it
//     withdraws (UnpublishLocation.request_id), so one that crosses the
//     retried Put's registration leaves the retry's copy alone.
//     The creator's failure then ends the wait (creatorFailed).
//   - One in doubt: a receiver's partial copy was still streaming when
//     its upstream went, and may hold every byte already, its FetchDone
//     on the way (the reader's Get returned the object whole). Its Gets
//     and copies stay until no such copy is left (each completes,
//     locates again, aborts, or goes with its node) or LossGrace passes.

// DefaultLossGrace is TableConfig.LossGrace's default: many round trips
// of a loaded machine, for a FetchDone that crossed its sender's failure.
// A receiver whose copy is not whole locates again when its stream
// ends, which settles the doubt sooner. It is the floor of the grace
// that SetLossGrace scales with the members' measured round trip.
const DefaultLossGrace = time.Second

// LossGraceRoundTrips is how many member round trips a doubt lasts at
// least: the FetchDone it waits for is one message behind the failure,
// and a loaded machine or a slow network delays that message by many
// of them.
const LossGraceRoundTrips = 100

// LossGraceFor is the grace of a doubt while a member round trip takes
// roundTrip: LossGraceRoundTrips of them, and never less than floor.
func LossGraceFor(floor, roundTrip time.Duration) time.Duration {
	return max(floor, LossGraceRoundTrips*max(roundTrip, 0))
}

// SetLossGrace sets the grace of the doubts whose grace starts from now
// on (at a Tick): the shell's measure of how long a FetchDone that
// crossed its sender's failure may take now (LossGraceFor). It never
// goes below TableConfig.LossGrace, the floor.
func (t *LocationTable) SetLossGrace(d time.Duration) {
	t.lossGrace = max(t.cfg.LossGrace, d)
}

// lossDoubt is an object's doubt: err is its loss if the doubt ends in
// one, until when the grace ends (zero until a Tick stamps it).
type lossDoubt struct {
	err   *messages.Error
	until time.Time
}

// tickNow is a deadline long past: the table's Tick timer is armed for
// it so that the next Tick, which comes at once, tells the table the time a
// doubt's grace starts from (NodeFailed and Unpublish take no clock).
var tickNow = time.Unix(0, 1)

// settleLoss decides an unreadable e: not born yet (see unborn), in doubt
// (see mayComplete), or lost with err (a doubt's own error, if it was in
// doubt). It reports whether e is lost.
func (t *LocationTable) settleLoss(e *entry, err *messages.Error) ([]outbox.Send, bool) {
	switch {
	case e.withdrawn != nil && !e.whole:
		e.doubt = nil
		t.unborn(e)
		return nil, false
	case e.mayComplete():
		if e.doubt == nil {
			e.doubt = &lossDoubt{err: err}
			t.noteDeadline(tickNow)
		}
		return nil, false
	case e.doubt != nil:
		err = e.doubt.err
	}
	return t.markLost(e, err), true
}

// recheck settles e again after one of its copies changed, if it is in
// doubt or not born yet: a copy that may have been whole stopped
// streaming, or a copy of an unborn object went.
func (t *LocationTable) recheck(e *entry) []outbox.Send {
	if e.doubt == nil && e.withdrawn == nil {
		return nil
	}
	if !t.unreadable(e) {
		e.doubt = nil
		return nil
	}
	fx, _ := t.settleLoss(e, messages.Errorf(messages.ErrorCode_LOST,
		"object %q is lost: no complete copy remains; Put it again to re-create it", e.id))
	return fx
}

// born ends e's doubt and withdrawal: a creator's copy or a whole one is
// listed again.
func (e *entry) born(state messages.LocationState, creator bool) {
	if state == messages.LocationState_COMPLETE {
		e.whole = true
	}
	if state == messages.LocationState_COMPLETE || creator {
		e.doubt, e.withdrawn = nil, nil
	}
}

// withdraw notes that node's copy, about to go while its node lives, is
// a creator's that was never whole: its Put failed, or a receiver's
// stream from it ended (see unborn, and creatorFailed).
func (e *entry) withdraw(node string) {
	if l := e.locs[node]; l != nil && l.creator && l.state != messages.LocationState_COMPLETE {
		e.withdrawn = l.node
	}
}

// unborn keeps an object whose creator withdrew before any copy was
// whole: its waiters and the receivers' partial copies (the same bytes,
// which a Put again feeds: see create) stay. With no copy left the table
// forgets its size, so a Put of other bytes is no conflict, and the
// entry once nobody waits on it.
func (t *LocationTable) unborn(e *entry) {
	if len(e.locs) == 0 {
		e.known = false
		t.forgetIfIdle(e)
	}
}

// mayComplete reports whether a receiver's partial copy listed may be
// whole already: it was still streaming when a copy upstream of it went
// (the chain of its senders ends at a copy no longer listed, or at one
// the table never knew), perhaps after its last byte. A copy whose chain
// passes an unfed copy (one that located again: its stream ended short)
// cannot be.
func (e *entry) mayComplete() bool {
	for _, loc := range e.locs {
		if loc.state != messages.LocationState_PARTIAL || loc.creator || loc.fetchingFrom == "" {
			continue
		}
		for up, hops := loc, 0; hops <= len(e.locs); hops++ {
			next := e.locs[up.fetchingFrom]
			if next == nil {
				return true
			}
			if next.fetchingFrom == "" {
				break // unfed (or whole: then e is readable)
			}
			up = next
		}
	}
	return false
}

// doubtTick is Tick's part for e in doubt: the grace starts at the first
// Tick, and once it is over the object is lost. It reports whether e was.
func (t *LocationTable) doubtTick(e *entry, now time.Time) ([]outbox.Send, bool) {
	d := e.doubt
	switch {
	case !t.unreadable(e):
		e.doubt = nil
	case d.until.IsZero():
		d.until = now.Add(t.lossGrace)
		t.noteDeadline(d.until)
	case !now.Before(d.until):
		return t.markLost(e, d.err), true
	default:
		t.noteDeadline(d.until)
	}
	return nil, false
}

// creatorFailed settles e when node, which failed, is the creator that
// withdrew its copy (or was named a failed sender) before any copy was
// whole: no Put of it is under way any more, and the object is lost
// unless another copy can still be read. It reports whether e was lost.
func (t *LocationTable) creatorFailed(e *entry, node string, same func(*messages.NodeRef) bool) ([]outbox.Send, bool) {
	if w := e.withdrawn; w == nil || w.GetNodeId() != node || !same(w) {
		return nil, false
	}
	e.withdrawn = nil
	return t.markLostIfGone(e, node)
}

// Doubts are the ids in doubt (see settleLoss), in id order: what the
// table must hand its keeper when its shard moves away. No store node
// holds a whole copy of such an object to republish to the shard's next
// table, so without the handover that table would not know the object
// ever existed (a Delete of it answered NOT_FOUND after the creator's
// member was killed and rejoined, taking the shard back, within the
// grace). Carried as lost ids, they are taken only if no copy of them is
// republished (takeLost): a receiver's copy that did complete is read.
func (t *LocationTable) Doubts() []string {
	var ids []string
	for id, e := range t.entries {
		if e.doubt != nil && t.unreadable(e) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}
