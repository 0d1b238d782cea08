package directory

import (
	"cmp"
	"slices"

	"github.com/hoplite-go/hoplite/internal/outbox"
	"github.com/hoplite-go/hoplite/messages"
)

// A location is one node's copy of an object, partial or complete: a
// creator's (Create), a receiver's (the claim a Locate answer makes, then
// FetchDone), or one a store node republished (Publish). This file holds
// how copies come and go; which copy a receiver is sent to is waiters.go.

// location is one copy of an object on a node.
type location struct {
	node    *messages.NodeRef
	state   messages.LocationState
	creator bool
	order   uint64 // publication order: ties are broken oldest first
	// servingTo is the receiver this copy is sending to; a serving copy is
	// not offered to anyone else, which is what makes a broadcast a tree.
	servingTo string
	// fetchingFrom is the sender of a partial copy that is still arriving:
	// the upstream chain that failover follows to refuse cycles.
	fetchingFrom string
	// chosen copies were fetched from the sender TableConfig.Senders
	// chose: they claimed nothing and are never offered.
	chosen bool
	// unoffered: a creator's copy offered to nobody until it is complete
	// (CreateObject.unoffered).
	unoffered bool
	// attempt is the receiver's Locate attempt that claimed fetchingFrom
	// (see FetchAborted.attempt).
	attempt uint64
	// registration is the CreateObject.request_id that made this the
	// creator's copy, or that its republication named
	// (PublishLocation.registration); 0: none known.
	// A Put's withdrawal names it (UnpublishLocation.request_id).
	registration uint64
}

// sameIncarnation reports whether two references name one incarnation of
// a node: its id at the same actor system address. An id may come back at
// another address (embedded clusters in one process name their members
// alike), and the copies of one incarnation are not the other's.
func sameIncarnation(a, b *messages.NodeRef) bool {
	return a.GetNodeId() == b.GetNodeId() && a.GetAddress() == b.GetAddress()
}

// supersede drops e's record of node's id when another incarnation left
// it: node, which creates or locates now, is the id's live incarnation,
// and the record's copy went with the other one. Kept, the record would
// name the other incarnation's address, and this one's own completion
// would be turned away as another incarnation's (FetchDone). It reports
// whether a record went.
func (t *LocationTable) supersede(e *entry, node *messages.NodeRef) ([]outbox.Send, bool) {
	loc := e.locs[node.GetNodeId()]
	if loc == nil || sameIncarnation(loc.node, node) {
		return nil, false
	}
	return t.removeLocation(e, node.GetNodeId()), true
}

// hasSource reports whether a copy listed can be read whole: a complete
// one, or a creator's (it completes from its Put).
func (e *entry) hasSource() bool {
	for _, loc := range e.locs {
		if loc.state == messages.LocationState_COMPLETE || loc.creator {
			return true
		}
	}
	return false
}

// hasSourceBut reports whether a copy other than node's can be read
// whole (see hasSource).
func (e *entry) hasSourceBut(node string) bool {
	for id, loc := range e.locs {
		if id != node && (loc.state == messages.LocationState_COMPLETE || loc.creator) {
			return true
		}
	}
	return false
}

// onCreate registers an object for its creator (a Put).
func (t *LocationTable) onCreate(req *messages.CreateObject, replyTo any) outbox.Box {
	var out []outbox.Send
	if e := t.entries[req.GetObjectId()]; e != nil && nodeOK(req.GetCreator()) {
		out, _ = t.supersede(e, req.GetCreator())
	}
	return outbox.Box{Sends: append(out, t.create(req, replyTo)...)}
}

func (t *LocationTable) create(req *messages.CreateObject, replyTo any) []outbox.Send {
	id := req.GetObjectId()
	reply := func(err *messages.Error, existed bool) []outbox.Send {
		return []outbox.Send{{To: replyTo, Msg: &messages.CreateObjectReply{ObjectId: id, Error: err, Existed: existed, RequestId: req.GetRequestId()}}}
	}
	recorded := func(out []outbox.Send) []outbox.Send {
		out[0].Msg.(*messages.CreateObjectReply).RecordedComplete = true
		return out
	}
	if err := t.check(id); err != nil {
		return reply(err, false)
	}
	if !nodeOK(req.GetCreator()) || req.GetSize() < 0 {
		return reply(messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "create %q: missing creator or negative size", id), false)
	}
	if req.GetHasInline() && int64(len(req.GetInlineData())) != req.GetSize() {
		return reply(messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "create %q: inline data of %d bytes for size %d", id, len(req.GetInlineData()), req.GetSize()), false)
	}
	e := t.entry(id)
	if err := e.target.refuseCreate(id, req, t.reservedHere(req.GetReduceId())); err != nil {
		return reply(err, false)
	}
	delete(t.lost, id) // a lost object may be created again
	var stale []outbox.Send
	if e.known && req.GetReduceId() != "" {
		// The Reduce lost its root before it finished (or every whole
		// copy of what it finished is gone) and re-creates the target
		// elsewhere: every copy of the old epoch holds other contents than
		// the new target will. They are dropped with RESET (a Get waiting
		// on one asks again and gets the new epoch).
		reset := messages.Errorf(messages.ErrorCode_RESET, "the Reduce producing %q re-creates it", id)
		for nid, loc := range e.locs {
			t.endTransfer(e, nid, true)
			if nid == req.GetCreator().GetNodeId() {
				// The new root replaced its own stale copy before it asked;
				// a drop sent there now would hit the new one.
				continue
			}
			stale = append(stale, outbox.Send{To: loc.node, Msg: &messages.DropObject{ObjectId: id, Reason: reset}})
		}
		clear(e.locs)
		e.known = false
	}
	if e.known && len(e.locs) == 0 && !e.hasInline {
		// Every copy is gone (a creator that failed before it finished, or
		// whose node died): the object can be created again.
		e.known = false
	}
	sameBytes := false // the copies left hold this Put's bytes
	if e.known && !e.hasInline && !e.hasSource() && e.size == req.GetSize() && e.fingerprint == req.GetFingerprint() {
		// Only receivers' partial copies are left, and nothing can finish
		// them: their creator's copy went (its Put failed, or a receiver
		// named it a failed sender) before a whole copy existed. Answered
		// "existed", this Put dropped its copy, the only source of these
		// bytes, and succeeded: every later Get waited for a sender until
		// its deadline (chaos seed 91128467: a Put retried after its first
		// CreateObject went to a shard's dead host, while the rebuilt shard
		// had the first attempt's republished copy, which a receiver
		// claimed and then reported failed). This Put is the creator
		// again; the partial copies hold the same bytes, and their parked
		// receivers take it as their sender.
		e.known, sameBytes = false, true
	}
	if e.known && e.withdrawn != nil && !e.whole && !e.hasSource() {
		// The partial copies left are of a Put that failed before any copy
		// was whole (see unborn), and this Put has other bytes: they are
		// dropped, and the id is created anew.
		reset := messages.Errorf(messages.ErrorCode_RESET, "the Put that made this copy of %q failed, and the id was Put again with other contents", id)
		for nid, loc := range e.locs {
			t.endTransfer(e, nid, true)
			if nid != req.GetCreator().GetNodeId() {
				stale = append(stale, outbox.Send{To: loc.node, Msg: &messages.DropObject{ObjectId: id, Reason: reset}})
			}
		}
		clear(e.locs)
		e.known = false
	}
	if e.known {
		if own := e.locs[req.GetCreator().GetNodeId()]; own != nil && own.creator &&
			e.size == req.GetSize() && e.fingerprint == req.GetFingerprint() {
			// The creator's own republication (a shard started) got here
			// before its CreateObject: this is that Put, not a second one.
			// Or the Put's earlier attempt registered this copy, and its
			// withdrawal is still on its way: this registration is the one
			// that stands.
			own.registration = req.GetRequestId()
			return append(reply(nil, false), t.serveWaiters(e)...)
		}
		if e.size == req.GetSize() && e.fingerprint == req.GetFingerprint() {
			return reply(nil, true)
		}
		return reply(messages.Errorf(messages.ErrorCode_CONFLICT,
			"object %q already exists with different contents (size %d, new size %d)", id, e.size, req.GetSize()), false)
	}
	e.known, e.size, e.fingerprint = true, req.GetSize(), req.GetFingerprint()
	e.withdrawn, e.doubt = nil, nil
	e.target.created(req)
	if !sameBytes {
		e.whole = false
		// Whatever copies of the id went before held other contents (a
		// Reduce's earlier root, a released target, a lost object Put
		// again): a report of one of them is stale (see FetchDone).
		e.epoch = t.newEpoch()
	}
	if req.GetHasInline() && req.GetSize() < t.cfg.InlineLimit {
		e.hasInline, e.inline = true, req.GetInlineData()
		t.publishInline(e, req.GetUnoffered())
	}
	out := append(reply(nil, false), stale...)
	if req.GetUnoffered() {
		// Recorded, so that the copy counts (a failure of its node, the
		// Reduce's release), but announced to nobody until it is complete.
		loc := &location{node: req.GetCreator(), state: messages.LocationState_PARTIAL, creator: true, unoffered: true,
			registration: req.GetRequestId()}
		e.seq++
		loc.order = e.seq
		e.locs[req.GetCreator().GetNodeId()] = loc
		return out
	}
	state := messages.LocationState_PARTIAL
	if completeAtCreate(req, e) {
		// The creator copies the bytes in as it gets this answer, and
		// this table holds them already: what its COMPLETE publication
		// would record, recorded now (one message per Put fewer). Until
		// the copy-in, a receiver sent to the creator streams from the
		// copy as it fills, as from a fast Get's copy that an inline
		// answer recorded (inlineReply).
		state = messages.LocationState_COMPLETE
		out = recorded(out)
	}
	out = append(out, t.setLocation(e, req.GetCreator(), state, true)...)
	e.locs[req.GetCreator().GetNodeId()].registration = req.GetRequestId()
	return append(out, t.serveWaiters(e)...)
}

// completeAtCreate reports whether the creator's copy of req is recorded
// COMPLETE at its registration (CreateObject.complete): a plain inline
// object's, whose bytes e now holds, offered from the start and no
// Reduce's target.
func completeAtCreate(req *messages.CreateObject, e *entry) bool {
	return req.GetComplete() && e.hasInline && !req.GetUnoffered() && req.GetReduceId() == "" && e.target.none()
}

// onPublish records a copy's state on a node (PARTIAL when a copy starts,
// COMPLETE when it is whole). A publication for a deleted object answers
// with DropObject so the stale copy is freed.
func (t *LocationTable) onPublish(req *messages.PublishLocation) outbox.Box {
	return outbox.Box{Sends: t.publish(req)}
}

func (t *LocationTable) publish(req *messages.PublishLocation) []outbox.Send {
	id := req.GetObjectId()
	if !nodeOK(req.GetNode()) || ValidateObjectID(id, t.cfg.MaxObjectIDLen) != nil || req.GetSize() < 0 {
		// From a peer that is no store node, or a broken one: a size
		// learned from it is handed to every receiver to allocate, and
		// refuses every real Put of the id as a conflict.
		return nil
	}
	if _, gone := t.tombstones[id]; gone {
		return t.deletedCopy(id, req.GetNode())
	}
	if t.refusesCommit(req) {
		return nil
	}
	if e := t.entries[id]; e != nil && e.locs[req.GetNode().GetNodeId()] != nil && !sameIncarnation(e.locs[req.GetNode().GetNodeId()].node, req.GetNode()) {
		// Another incarnation of the node (its id at another address)
		// created or located this object since: its record is not about
		// this copy (see FetchDone).
		return nil
	}
	if l, ok := t.lost[id]; ok {
		if req.GetState() != messages.LocationState_COMPLETE && !req.GetCreator() {
			// A receiver's partial copy of a lost object is dropped (its
			// node keeps one that completed meanwhile, and its FetchDone
			// ends the loss). A creator's completes from its Put, which
			// re-creates the id as its CreateObject would: dropped, the Put answered
			// LOST (a Put retried after its first attempt's shard died,
			// whose copy the rebuilt shard learned from its republication
			// after it found the object lost).
			return []outbox.Send{{To: req.GetNode(), Msg: &messages.DropObject{ObjectId: id, Reason: l.err}}}
		}
		t.endLoss(id)
	}
	if drop := t.orphanRoot(req); drop != nil {
		return drop
	}
	if drop := t.orphanCopy(req); drop != nil {
		return drop
	}
	e := t.entry(id)
	if !e.known {
		// A republication after a shard restart carries what we lost.
		e.known, e.size, e.fingerprint = true, req.GetSize(), req.GetFingerprint()
	} else if e.size != req.GetSize() {
		return []outbox.Send{{To: req.GetNode(), Msg: &messages.DropObject{ObjectId: id}}}
	}
	state := req.GetState()
	if state != messages.LocationState_PARTIAL && state != messages.LocationState_COMPLETE {
		return nil
	}
	committed := e.target.published(req)
	var out []outbox.Send
	if !e.target.none() {
		out = t.withdrawInline(e) // a Reduce's, as the publication says
	}
	if committed {
		e.fingerprint = req.GetFingerprint()
	}
	node := req.GetNode().GetNodeId()
	known := e.locs[node] != nil
	out = append(out, t.setLocation(e, req.GetNode(), state, req.GetCreator())...)
	if r := req.GetRegistration(); r != 0 && req.GetCreator() {
		// A creator's copy republished before its Put's CreateObject came
		// here: a withdrawal of an earlier registration of the copy that
		// comes after it must find the registration that stands.
		e.locs[node].registration = r
	}
	if committed {
		out = append(out, t.markReaders(e, id, node)...)
	}
	if !known && state == messages.LocationState_PARTIAL && !req.GetCreator() {
		// A fetch in progress that this table did not hand its sender (it
		// is republished after the shard restarted or moved): where its
		// bytes come from is unknown, so no receiver is offered a chain
		// through it until it completes or locates again. Offering it
		// formed a real cycle (the fetch simulation, seed 8750: a receiver
		// streaming from a republished copy whose upstream was a Locate
		// answered before the restart, which the asker's stream fed).
		e.locs[node].fetchingFrom = unknownUpstream
	}
	return append(out, t.serveWaiters(e)...)
}

// markReaders tells the receivers whose copies of a Reduce's target
// completed before its commit reached this table (the root's copy, root)
// which run committed it and what it reduces, as FetchDone tells the ones
// that complete after. A reader's FetchDone and the root's commit come
// from two nodes in either order; unmarked, a reader's copy said nothing
// of the run, and a shard rebuilt after the root's and the coordinator's
// members died knew the target from it without its call: the call's next
// attempt failed CONFLICT (chaos soak, loaded machine). When those members
// die before any mark is sent, see reduceTarget.readFrom.
func (t *LocationTable) markReaders(e *entry, id, root string) []outbox.Send {
	run, reduced := e.target.marks()
	if run == "" {
		return nil
	}
	var out []outbox.Send
	for _, l := range t.sortedLocations(e) {
		if l.node.GetNodeId() == root || l.creator || l.state != messages.LocationState_COMPLETE {
			continue
		}
		out = append(out, outbox.Send{To: l.node, Msg: &messages.ReduceCommit{ReduceId: run, TargetId: id,
			ReducedIds: reduced, MarkOnly: true}})
	}
	return out
}

// unknownUpstream is the fetchingFrom of a partial copy whose sender the
// table does not know; it names no location, so upstreamContains treats
// every chain through it as possibly containing the receiver.
const unknownUpstream = "\x00unknown"

// onUnpublish removes a node's copy (evicted, or a fetch given up), or
// withdraws a Put's registration that failed (request_id set).
func (t *LocationTable) onUnpublish(req *messages.UnpublishLocation) outbox.Box {
	e := t.entries[req.GetObjectId()]
	if e == nil || !nodeOK(req.GetNode()) {
		return outbox.Box{}
	}
	node := req.GetNode().GetNodeId()
	loc := e.locs[node]
	if loc == nil {
		// No copy of node's is listed (a receiver named it failed, or it
		// went with its node): nothing changes. Taken for a copy going,
		// it made an object lost whose creator's copy a receiver had
		// named failed, as the creator's Put withdrew it.
		return outbox.Box{}
	}
	if r := req.GetRequestId(); r != 0 && loc.registration != 0 && loc.registration != r {
		// The withdrawal of an earlier registration that crossed the
		// Put's next one (its retry): the copy listed is the retry's.
		// Taken, it withdrew a copy that is being filled or is whole, and
		// an object whose only copy it was became lost.
		return outbox.Box{}
	}
	e.withdraw(node)
	out := t.removeLocation(e, node)
	if fx, lost := t.markLostIfGone(e, node); lost {
		return outbox.Box{Sends: append(out, fx...)}
	}
	return outbox.Box{Sends: append(out, t.serveWaiters(e)...)}
}

// onFetchDone marks the receiver complete and frees its sender. A copy
// fetched under an epoch this table issued and no longer has (a Reduce
// created its target again, or a failed one released it, since the
// Locate) holds other contents than the entry: it is not recorded, and a
// receiver this table lists no copy of is told to drop it (one it lists
// fetches anew, its old copy gone). A copy fetched under an epoch of an
// earlier incarnation of the table (the shard started over since the
// Locate) teaches the table the object, as a republication would, even
// an id it has no entry for.
func (t *LocationTable) onFetchDone(req *messages.FetchDone) outbox.Box {
	return outbox.Box{Sends: t.fetchDone(req)}
}

func (t *LocationTable) fetchDone(req *messages.FetchDone) []outbox.Send {
	id := req.GetObjectId()
	if ValidateObjectID(id, t.cfg.MaxObjectIDLen) != nil || req.GetSize() < 0 {
		return nil // as in publish; an invalid id would be an entry nothing can name
	}
	if _, gone := t.tombstones[id]; gone && nodeOK(req.GetReceiver()) {
		return t.deletedCopy(id, req.GetReceiver())
	}
	if !nodeOK(req.GetReceiver()) {
		return nil
	}
	rid, ep := req.GetReceiver().GetNodeId(), req.GetEpoch()
	if e := t.entries[id]; e != nil && e.locs[rid] != nil && !sameIncarnation(e.locs[rid].node, req.GetReceiver()) {
		// A transfer of another incarnation of the node (its id at
		// another address): the copy this table records is the other
		// incarnation's, and this completion says nothing about it.
		return nil
	}
	if l, ok := t.lost[id]; ok {
		if t.ownEpoch(ep) && ep != l.epoch {
			return t.staleCopy(t.entries[id], req)
		}
		// As in Publish: a whole copy ends the loss, even one whose
		// completion crossed the loss's drop (its node keeps it).
		t.endLoss(id)
		if e := t.entry(id); !e.known { // the loss left no entry unless there are subscribers
			e.epoch = l.epoch // the copy holds what was lost
		}
	}
	e := t.entries[id]
	switch {
	case t.ownEpoch(ep) && (e == nil || e.epoch != ep):
		return t.staleCopy(e, req)
	case e == nil:
		// Rebuilt since the fetch began, and the sender's republication
		// (if it lives) has not come: the copy is the first word of the
		// object. Ignored, it was a whole copy no Delete reached, and a
		// subscriber that located the object before heard LOST.
		e = t.entry(id)
	}
	out := t.endTransfer(e, rid, false)
	if !e.known {
		// Rebuilt since the fetch began, and this is the first word of
		// the object: learn it from the copy, as from a republication.
		e.known, e.size, e.fingerprint = true, req.GetSize(), req.GetFingerprint()
	} else if e.size != req.GetSize() {
		return append(out, outbox.Send{To: req.GetReceiver(), Msg: &messages.DropObject{ObjectId: id}})
	}
	out = append(out, t.setLocation(e, req.GetReceiver(), messages.LocationState_COMPLETE, false)...)
	if run, reduced := e.target.marks(); run != "" && req.GetRun() == "" {
		// A reader answered before the Reduce's commit (it streamed from
		// the root, whose last byte waited for the commit) recorded no
		// run: its copy must say it too (see LocateReply.produced_by).
		out = append(out, outbox.Send{To: req.GetReceiver(), Msg: &messages.ReduceCommit{ReduceId: run, TargetId: id,
			ReducedIds: reduced, MarkOnly: true}})
	}
	return append(out, t.serveWaiters(e)...)
}

// staleCopy answers the FetchDone of a copy of contents the entry e (nil:
// none) no longer has. Every copy the table listed when the contents
// changed was dropped then; a receiver it lists now is fetching anew, so
// its copy is another. One it does not list may hold the stale copy
// whole, unknown to any Delete, and would serve it to Gets on its node:
// it drops it (a Get waiting there asks again).
func (t *LocationTable) staleCopy(e *entry, req *messages.FetchDone) []outbox.Send {
	if e != nil && e.locs[req.GetReceiver().GetNodeId()] != nil {
		return nil
	}
	return []outbox.Send{{To: req.GetReceiver(), Msg: &messages.DropObject{ObjectId: req.GetObjectId(),
		Reason: messages.Errorf(messages.ErrorCode_RESET, "the copy of %q on %s holds contents the directory no longer has (its Reduce made it again, or failed)",
			req.GetObjectId(), req.GetReceiver().GetNodeId())}}}
}

// onFetchAborted removes a receiver that gave up and frees its sender. One
// that names its Locate's attempt removes only that attempt's claim: the
// receiver's node may have located the object again since, or hold it.
func (t *LocationTable) onFetchAborted(req *messages.FetchAborted) outbox.Box {
	e := t.entries[req.GetObjectId()]
	if e == nil || !nodeOK(req.GetReceiver()) {
		return outbox.Box{}
	}
	if a := req.GetAttempt(); a != 0 {
		loc := e.locs[req.GetReceiver().GetNodeId()]
		if loc == nil || loc.attempt != a || loc.state != messages.LocationState_PARTIAL || loc.creator ||
			!sameIncarnation(loc.node, req.GetReceiver()) {
			return outbox.Box{}
		}
	}
	out := t.removeLocation(e, req.GetReceiver().GetNodeId())
	if fx := t.recheck(e); fx != nil {
		return outbox.Box{Sends: append(out, fx...)}
	}
	return outbox.Box{Sends: append(out, t.serveWaiters(e)...)}
}

// setLocation adds or updates a copy and tells the subscribers.
func (t *LocationTable) setLocation(e *entry, node *messages.NodeRef, state messages.LocationState, creator bool) []outbox.Send {
	loc := e.locs[node.GetNodeId()]
	if loc == nil {
		e.seq++
		loc = &location{node: node, order: e.seq}
		e.locs[node.GetNodeId()] = loc
	}
	if loc.state == messages.LocationState_COMPLETE && state == messages.LocationState_PARTIAL {
		return nil // a complete copy never goes back
	}
	loc.state = state
	loc.creator = loc.creator || creator
	e.born(state, creator)
	if state == messages.LocationState_COMPLETE {
		loc.fetchingFrom = ""
		loc.unoffered = false
	}
	if loc.unoffered {
		return nil
	}
	return e.notify(node, state)
}

// removeLocation drops a copy: whoever it served must locate again, and
// the sender it was fetching from is freed.
func (t *LocationTable) removeLocation(e *entry, nodeID string) []outbox.Send {
	loc := e.locs[nodeID]
	if loc == nil {
		return nil
	}
	out := t.endTransfer(e, nodeID, true)
	if loc.servingTo != "" {
		e.closeTransfer(loc.servingTo, nodeID, true)
	}
	delete(e.locs, nodeID)
	return append(out, e.notify(loc.node, messages.LocationState_LOCATION_STATE_UNSPECIFIED)...)
}

// endTransfer finishes the receiver's current fetch, freeing its sender.
func (t *LocationTable) endTransfer(e *entry, receiver string, aborted bool) []outbox.Send {
	loc := e.locs[receiver]
	if loc == nil || loc.fetchingFrom == "" {
		return nil
	}
	sender := loc.fetchingFrom
	loc.fetchingFrom = ""
	if s := e.locs[sender]; s != nil && s.servingTo == receiver && !loc.chosen {
		s.servingTo = ""
	}
	e.closeTransfer(receiver, sender, aborted)
	return nil
}

// unfed reports whether a copy is a receiver's partial copy that no sender
// feeds: its receiver is locating again, and the copy cannot grow until a
// sender is claimed for it. It is not offered to receivers, readers or
// subscribers meanwhile.
func (l *location) unfed() bool {
	return l.state == messages.LocationState_PARTIAL && !l.creator && l.fetchingFrom == ""
}

func (t *LocationTable) sortedLocations(e *entry) []*location {
	locs := make([]*location, 0, len(e.locs))
	for _, l := range e.locs {
		locs = append(locs, l)
	}
	slices.SortFunc(locs, func(a, b *location) int { return cmp.Compare(a.order, b.order) })
	return locs
}

func (e *entry) closeTransfer(receiver, sender string, aborted bool) {
	for i := len(e.transfers) - 1; i >= 0; i-- {
		tr := e.transfers[i]
		if tr.Receiver == receiver && tr.Sender == sender && tr.EndSeq == 0 {
			e.seq++
			tr.EndSeq, tr.Aborted = int64(e.seq), aborted
			return
		}
	}
}
