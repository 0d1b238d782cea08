package directory

import (
	"slices"
	"time"

	"github.com/hoplite-go/hoplite/internal/outbox"
	"github.com/hoplite-go/hoplite/messages"
)

// A waiter is a parked request: a Locate that no copy can serve yet (or
// an inline object's Get), or a Query that waits for its object. Serving
// a Locate claims a sender for the receiver, which is how a broadcast
// becomes a tree; a waiter that nobody serves fails at its deadline
// (Tick).

type waiterKind int

const (
	waitLocate waiterKind = iota
	waitQuery
)

type waiter struct {
	kind     waiterKind
	receiver *messages.NodeRef // waitLocate only
	// chosen: TableConfig.Senders chooses the sender (a Locate for a
	// copy at a table that has a policy).
	chosen bool
	// noCopy: the receiver keeps no copy (Locate.no_copy): it is answered
	// without a claim or a location, and it is apart from the receiver's
	// Locates for a copy of its own.
	noCopy   bool
	attempt  uint64 // echoed in the LocateReply (waitLocate only)
	replyTo  any
	deadline time.Time
	// at is when the request came (the latest time the table knows of
	// when it serves it).
	at time.Time
	// failed: the Locate named a sender whose stream to the receiver
	// failed (an inline object's receiver then gets the bytes).
	failed bool
	// avoid is a creator whose stream to this receiver failed: the
	// receiver is not sent back to it before avoidUntil (see Locate).
	avoid      string
	avoidUntil time.Time
}

// AvoidFailedCreator is how long a receiver that named a creator's whole
// copy as its failed sender is not sent back to it. The copy stays in
// the directory for everyone else: only the creator's node can lose it,
// and the cluster says when that node fails.
const AvoidFailedCreator = 200 * time.Millisecond

// admitWaiter refuses a request that may park on id when the table is
// at MaxEntries and holds no entry for id, or when MaxWaitersPerObject
// requests wait on it already.
func (t *LocationTable) admitWaiter(id string) *messages.Error {
	e := t.entries[id]
	if e == nil && len(t.entries) >= t.cfg.MaxEntries {
		return messages.Errorf(messages.ErrorCode_RESOURCE_EXHAUSTED,
			"this directory shard holds %d entries (its bound) and none for %q; retry later", len(t.entries), id)
	}
	if e != nil && len(e.waiters) >= t.cfg.MaxWaitersPerObject {
		return messages.Errorf(messages.ErrorCode_RESOURCE_EXHAUSTED,
			"%d requests already wait on %q at its directory shard (the bound); retry later", len(e.waiters), id)
	}
	return nil
}

// onLocate finds one sender for a receiver, or parks the request until one
// exists or the deadline passes (see Tick).
func (t *LocationTable) onLocate(req *messages.Locate, replyTo any, now time.Time) outbox.Box {
	var out []outbox.Send
	if e := t.entries[req.GetObjectId()]; e != nil && nodeOK(req.GetReceiver()) {
		if fx, gone := t.supersede(e, req.GetReceiver()); gone {
			out = fx
			if fx, lost := t.markLostIfGone(e, req.GetReceiver().GetNodeId()); lost {
				out = append(out, fx...) // answered LOST below
			}
		}
	}
	out = append(out, t.locate(req, replyTo, now)...)
	if e := t.entries[req.GetObjectId()]; e != nil {
		// The receiver's copy stopped streaming (it locates again), or a
		// sender it named went: a doubt may be settled.
		out = append(out, t.recheck(e)...)
	}
	return outbox.Box{Sends: out}
}

func (t *LocationTable) locate(req *messages.Locate, replyTo any, now time.Time) []outbox.Send {
	id := req.GetObjectId()
	if err := t.check(id); err != nil {
		return []outbox.Send{{To: replyTo, Msg: &messages.LocateReply{ObjectId: id, Error: err, Attempt: req.GetAttempt()}}}
	}
	if !nodeOK(req.GetReceiver()) {
		return []outbox.Send{{To: replyTo, Msg: &messages.LocateReply{ObjectId: id,
			Error: messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "locate %q without a receiver", id), Attempt: req.GetAttempt()}}}
	}
	if l, ok := t.lost[id]; ok {
		return []outbox.Send{{To: replyTo, Msg: &messages.LocateReply{ObjectId: id, Error: l.err, Attempt: req.GetAttempt()}}}
	}
	if err := t.admitWaiter(id); err != nil {
		return []outbox.Send{{To: replyTo, Msg: &messages.LocateReply{ObjectId: id, Error: err, Attempt: req.GetAttempt()}}}
	}
	e := t.entry(id)
	var out []outbox.Send
	rid := req.GetReceiver().GetNodeId()
	avoid := ""
	if f := req.GetFailedSender(); nodeOK(f) && f.GetNodeId() != rid {
		loc := e.locs[f.GetNodeId()]
		if loc != nil && req.GetFailedSenderLacks() && sameIncarnation(loc.node, f) {
			e.withdraw(f.GetNodeId()) // its node lives, and let the copy go
			out = append(out, t.removeLocation(e, f.GetNodeId())...)
			if fx, lost := t.markLostIfGone(e, f.GetNodeId()); lost {
				out = append(out, fx...)
				return append(out, outbox.Send{To: replyTo, Msg: &messages.LocateReply{ObjectId: id, Error: t.lost[id].err, Attempt: req.GetAttempt()}})
			}
		} else if loc != nil && loc.state == messages.LocationState_COMPLETE {
			// A receiver's stream error says nothing certain about a
			// whole copy (the receiver stalled, a connection broke, the
			// receiver's own member was dying): a copy that went goes with
			// its node's failure, or with the node's own word (NOT_FOUND,
			// above). Until then this receiver tries others first, and it
			// again only after AvoidFailedCreator. Removed on the
			// receiver's word, a creator's whole copy, often the only
			// one, was offered to nobody again while its node lived, and
			// every later Get waited to its deadline; the last whole copy
			// of any other node left no copy for its node's failure to
			// end, so the object was never found LOST; and whole copies
			// that had another beside them were struck one by one by a
			// receiver whose member was being killed, until the last
			// went with an eviction and the object was answered LOST
			// while two live members held it whole (chaos seed 5000184).
			avoid = f.GetNodeId()
		} else if loc != nil {
			// A creator's copy still being Put goes as withdrawn: its node
			// lives as far as the table knows, and the stream likely ended
			// because the Put failed and dropped the copy. Taken for a
			// copy gone, it let the next copy to go (a receiver's, with
			// its member) lose the object while the creator's retried Put
			// was under way; the creator's own failure still loses it
			// (see creatorFailed).
			e.withdraw(f.GetNodeId())
			out = append(out, t.removeLocation(e, f.GetNodeId())...)
		}
	}
	if req.GetNoCopy() {
		// Whatever the receiver's own record says, it is not about this
		// request: a copy the node holds or fetches for its Gets (the node
		// reads a complete one itself: see serveWaiters).
		w := &waiter{kind: waitLocate, receiver: req.GetReceiver(), noCopy: true, attempt: req.GetAttempt(),
			replyTo: replyTo, deadline: now.Add(Timeout(req.GetTimeoutMs(), 0)), at: now, failed: nodeOK(req.GetFailedSender())}
		t.avoidFor(w, avoid, now)
		e.waiters = append(e.waiters, w)
		t.noteDeadline(w.deadline)
		return append(out, t.serveWaiters(e)...)
	}
	fed := false // the receiver's copy had a sender until this Locate
	if loc := e.locs[rid]; loc != nil {
		switch {
		case loc.state == messages.LocationState_COMPLETE && loc.creator:
			// The creator's copy: a Get that waited on this node before
			// the node's own Put of the id finished. It has the object,
			// and is its own sender. Only the node's store can tell that
			// record from a stale one (a copy the node no longer holds):
			// a receiver that holds nothing unpublishes it and asks again
			// (storeproto.FetchLocated).
			return append(out, outbox.Send{To: replyTo, Msg: &messages.LocateReply{ObjectId: id, Size: e.size,
				Fingerprint: e.fingerprint, Sender: loc.node, SenderState: loc.state, Epoch: e.epoch, Attempt: req.GetAttempt()}})
		case loc.state == messages.LocationState_COMPLETE:
			// A receiver asks because it does not hold the object, so a
			// record of its whole copy is stale: a late publication of a
			// copy that died with an earlier incarnation of the node, or
			// an eviction whose Unpublish is still on its way.
			out = append(out, t.removeLocation(e, rid)...)
			if fx, lost := t.markLostIfGone(e, rid); lost {
				out = append(out, fx...)
				return append(out, outbox.Send{To: replyTo, Msg: &messages.LocateReply{ObjectId: id, Error: t.lost[id].err, Attempt: req.GetAttempt()}})
			}
		default:
			// A receiver locating again (its sender failed, or it
			// restarted) releases the sender it had.
			fed = !loc.unfed()
			out = append(out, t.endTransfer(e, rid, true)...)
		}
	}
	// A receiver has at most one parked Locate: a newer one (its fetch
	// resumed after a restart) replaces it, or both would claim a sender.
	// Its no-copy Locates claim nothing and stay.
	e.waiters = slices.DeleteFunc(e.waiters, func(w *waiter) bool {
		if w.kind == waitLocate && w.receiver.GetNodeId() == rid && !w.noCopy {
			out = append(out, w.fail(id, messages.Errorf(messages.ErrorCode_UNAVAILABLE, "superseded by a newer Locate from %s", rid)))
			return true
		}
		return false
	})
	w := &waiter{kind: waitLocate, receiver: req.GetReceiver(), chosen: t.cfg.Senders != nil, attempt: req.GetAttempt(), replyTo: replyTo,
		deadline: now.Add(Timeout(req.GetTimeoutMs(), 0)), at: now, failed: nodeOK(req.GetFailedSender())}
	t.avoidFor(w, avoid, now)
	e.waiters = append(e.waiters, w)
	t.noteDeadline(w.deadline)
	out = append(out, t.serveWaiters(e)...)
	if loc := e.locs[rid]; loc != nil && fed && loc.unfed() {
		// No sender for it now: until one is claimed for it (which
		// announces it again), its copy cannot grow, and the subscribers
		// hear that it left. A Reduce coordinator that placed it puts a
		// backup in its place; kept, it waited for bytes that may never
		// come: the copy's sender had died with the last other copy
		// before the shard heard of the failure (so the object was not
		// lost), and the tree's root waited on it until the receiver
		// gave up at its Get's deadline; the Reduce failed although
		// another source was whole (chaos seed 93). The table keeps the
		// copy: a failure of its node can still show that the object is
		// lost, and a Delete or a loss still drops it.
		out = append(out, e.notify(loc.node, messages.LocationState_LOCATION_STATE_UNSPECIFIED)...)
	}
	return out
}

// avoidFor keeps w away from node until AvoidFailedCreator from now (no
// node: nothing to avoid).
func (t *LocationTable) avoidFor(w *waiter, node string, now time.Time) {
	if node == "" {
		return
	}
	w.avoid, w.avoidUntil = node, now.Add(AvoidFailedCreator)
	t.noteDeadline(w.avoidUntil)
}

// onAbandonLocate withdraws the one parked Locate whose answer was to go
// to replyTo, and no other: a caller on the data plane that hung up. A
// CancelLocate names only the receiver, and on the data plane it could
// overtake nothing in order — a receiver's next Locate may arrive on
// another connection first — so it would withdraw that one instead.
// replyTo is matched by address and id (a PID, or anything with those).
func (t *LocationTable) onAbandonLocate(id string, replyTo any) outbox.Box {
	e := t.entries[id]
	if e == nil {
		return outbox.Box{}
	}
	e.waiters = slices.DeleteFunc(e.waiters, func(w *waiter) bool {
		return w.kind == waitLocate && sameEndpoint(w.replyTo, replyTo)
	})
	t.forgetIfIdle(e)
	return outbox.Box{}
}

// endpoint is what a reply address has: an actor PID's address and id.
type endpoint interface {
	GetAddress() string
	GetId() string
}

func sameEndpoint(a, b any) bool {
	ea, ok1 := a.(endpoint)
	eb, ok2 := b.(endpoint)
	if !ok1 || !ok2 {
		return a == b
	}
	return ea.GetAddress() == eb.GetAddress() && ea.GetId() == eb.GetId()
}

// onCancelLocate withdraws the parked Locate requests of a receiver, except
// its no-copy ones: several of those may wait at once (a GetInto each),
// and a CancelLocate names only the receiver. They are withdrawn by their
// own deadlines, or by AbandonLocate.
func (t *LocationTable) onCancelLocate(req *messages.CancelLocate) outbox.Box {
	e := t.entries[req.GetObjectId()]
	if e == nil {
		return outbox.Box{}
	}
	rid := req.GetReceiver().GetNodeId()
	e.waiters = slices.DeleteFunc(e.waiters, func(w *waiter) bool {
		return w.kind == waitLocate && w.receiver.GetNodeId() == rid && !w.noCopy
	})
	t.forgetIfIdle(e)
	return outbox.Box{}
}

// onQuery answers with the entry, waiting for it to exist if asked to.
func (t *LocationTable) onQuery(req *messages.QueryObject, replyTo any, now time.Time) outbox.Box {
	return outbox.Box{Sends: t.query(req, replyTo, now)}
}

func (t *LocationTable) query(req *messages.QueryObject, replyTo any, now time.Time) []outbox.Send {
	id := req.GetObjectId()
	if err := t.check(id); err != nil {
		return []outbox.Send{{To: replyTo, Msg: &messages.ObjectInfo{ObjectId: id, Error: err}}}
	}
	if l, ok := t.lost[id]; ok {
		return []outbox.Send{{To: replyTo, Msg: &messages.ObjectInfo{ObjectId: id, Error: l.err}}}
	}
	e := t.entries[id]
	if e != nil && e.known {
		return []outbox.Send{{To: replyTo, Msg: e.info()}}
	}
	if !req.GetWait() {
		return []outbox.Send{{To: replyTo, Msg: &messages.ObjectInfo{ObjectId: id,
			Error: messages.Errorf(messages.ErrorCode_NOT_FOUND, "object %q does not exist", id)}}}
	}
	if err := t.admitWaiter(id); err != nil {
		return []outbox.Send{{To: replyTo, Msg: &messages.ObjectInfo{ObjectId: id, Error: err}}}
	}
	e = t.entry(id)
	w := &waiter{kind: waitQuery, replyTo: replyTo, deadline: now.Add(Timeout(req.GetTimeoutMs(), 0))}
	e.waiters = append(e.waiters, w)
	t.noteDeadline(w.deadline)
	return nil
}

// onTick answers every parked request whose deadline has passed with TIMEOUT.
// It is cheap to call often: it scans only when a deadline is due.
func (t *LocationTable) onTick(now time.Time) outbox.Box {
	if t.nextDeadline.IsZero() || now.Before(t.nextDeadline) {
		return outbox.Box{}
	}
	t.nextDeadline = time.Time{}
	var out []outbox.Send
	for _, e := range t.entries {
		if e.doubt != nil {
			if fx, lost := t.doubtTick(e, now); lost {
				out = append(out, fx...)
				continue
			}
		}
		kept := e.waiters[:0]
		unavoided := false
		for _, w := range e.waiters {
			if now.Before(w.deadline) {
				kept = append(kept, w)
				t.noteDeadline(w.deadline)
				if w.avoid != "" && now.Before(w.avoidUntil) {
					t.noteDeadline(w.avoidUntil)
				} else if w.avoid != "" {
					w.avoid, unavoided = "", true
				}
				continue
			}
			out = append(out, w.fail(e.id, messages.Errorf(messages.ErrorCode_TIMEOUT, "no location for %q before the deadline", e.id)))
		}
		clear(e.waiters[len(kept):])
		e.waiters = kept
		if unavoided {
			out = append(out, t.serveWaiters(e)...)
		}
		t.forgetIfIdle(e)
	}
	return outbox.Box{Sends: out}
}

// onFailWaiters answers every parked request with err (the shard is about to
// lose its soft state: requesters retry against the rebuilt shard).
func (t *LocationTable) onFailWaiters(err *messages.Error) outbox.Box {
	var out []outbox.Send
	for _, e := range t.entries {
		for _, w := range e.waiters {
			out = append(out, w.fail(e.id, err))
		}
		e.waiters = nil
	}
	return outbox.Box{Sends: out}
}

func (t *LocationTable) noteDeadline(d time.Time) {
	if t.nextDeadline.IsZero() || d.Before(t.nextDeadline) {
		t.nextDeadline = d
	}
}

func (w *waiter) fail(id string, err *messages.Error) outbox.Send {
	if w.kind == waitQuery {
		return outbox.Send{To: w.replyTo, Msg: &messages.ObjectInfo{ObjectId: id, Error: err}}
	}
	return outbox.Send{To: w.replyTo, Msg: &messages.LocateReply{ObjectId: id, Error: err, Attempt: w.attempt}}
}

// serveWaiters answers parked requests that can now be answered, oldest
// first. Each served receiver becomes a partial location at once, so the
// next waiter can fetch from it: concurrent receivers form a pipeline.
func (t *LocationTable) serveWaiters(e *entry) []outbox.Send {
	if !e.known || len(e.waiters) == 0 {
		return nil
	}
	var out []outbox.Send
	kept := e.waiters[:0]
	for _, w := range e.waiters {
		switch {
		case w.kind == waitQuery:
			out = append(out, outbox.Send{To: w.replyTo, Msg: e.info()})
		case e.hasInline:
			// The bytes while the shard's uplink is not the bottleneck,
			// else a copy that holds them (inline.go).
			switch holder := t.inlineHolder(e, w); {
			case holder == nil:
				out = append(out, t.inlineReply(e, w)...)
			case w.noCopy:
				out = append(out, outbox.Send{To: w.replyTo, Msg: &messages.LocateReply{ObjectId: e.id, Size: e.size,
					Fingerprint: e.fingerprint, Sender: holder.node, SenderState: holder.state, Epoch: e.epoch, Attempt: w.attempt}})
			default:
				out = append(out, t.claim(e, holder, w)...)
			}
		case e.locs[w.receiver.GetNodeId()] != nil && e.locs[w.receiver.GetNodeId()].creator,
			w.noCopy && e.locs[w.receiver.GetNodeId()] != nil && e.locs[w.receiver.GetNodeId()].state == messages.LocationState_COMPLETE:
			// The receiver became the creator (a Put on that node while its
			// Get was waiting): it is its own sender. So is a no-copy
			// receiver whose node now holds a whole copy: it reads that.
			own := e.locs[w.receiver.GetNodeId()]
			out = append(out, outbox.Send{To: w.replyTo, Msg: &messages.LocateReply{ObjectId: e.id, Size: e.size,
				Fingerprint: e.fingerprint, Sender: own.node, SenderState: own.state, Epoch: e.epoch, Attempt: w.attempt}})
		case w.noCopy:
			sender := t.pickReadable(e, w.receiver.GetNodeId(), w.avoid)
			if sender == nil {
				kept = append(kept, w)
				continue
			}
			out = append(out, outbox.Send{To: w.replyTo, Msg: &messages.LocateReply{ObjectId: e.id, Size: e.size,
				Fingerprint: e.fingerprint, Sender: sender.node, SenderState: sender.state, Epoch: e.epoch, Attempt: w.attempt}})
		default:
			sender := t.pickSender(e, w.receiver.GetNodeId(), w.chosen, w.avoid)
			if sender == nil {
				kept = append(kept, w)
				continue
			}
			out = append(out, t.claim(e, sender, w)...)
		}
	}
	clear(e.waiters[len(kept):])
	e.waiters = kept
	return out
}

func (t *LocationTable) claim(e *entry, sender *location, w *waiter) []outbox.Send {
	rid := w.receiver.GetNodeId()
	t.endTransfer(e, rid, true) // a receiver fetches from one sender at a time
	if !w.chosen {
		sender.servingTo = rid
	}
	out := t.setLocation(e, w.receiver, messages.LocationState_PARTIAL, false)
	e.locs[rid].fetchingFrom = sender.node.GetNodeId()
	e.locs[rid].chosen = w.chosen
	e.locs[rid].attempt = w.attempt
	e.seq++
	e.transfers = append(e.transfers, &messages.Transfer{Receiver: rid, Sender: sender.node.GetNodeId(), StartSeq: int64(e.seq)})
	if len(e.transfers) > t.cfg.TransferLogLimit {
		e.transfers = slices.Delete(e.transfers, 0, len(e.transfers)-t.cfg.TransferLogLimit)
	}
	run, reduced := e.target.marks()
	return append(out, outbox.Send{To: w.replyTo, Msg: &messages.LocateReply{ObjectId: e.id, Size: e.size,
		Fingerprint: e.fingerprint, Sender: sender.node, SenderState: sender.state, Epoch: e.epoch, Attempt: w.attempt,
		ProducedBy: run, ReducedIds: reduced, ReduceId: e.target.reservedBy, Chunk: t.streamChunk(e)}})
}

// pickSender chooses a free copy for receiver: complete copies first, then
// partial ones, oldest first; never the receiver itself, never an unfed
// copy (its receiver would stall where it ends), never a copy whose
// upstream chain contains the receiver (that would be a cycle). Under a
// fan-out k > 1 (TableConfig.FanOut, or the cost model's choice) a copy
// is free while it streams to fewer than k receivers, and the shallowest
// free copy is chosen (fanout.go). A chosen receiver's sender is the
// policy's (TableConfig.Senders) instead.
func (t *LocationTable) pickSender(e *entry, receiver string, chosen bool, avoid string) *location {
	if chosen {
		return t.pickByPolicy(e, receiver, avoid)
	}
	if k := t.fanOut(e); k > 1 {
		return t.pickShallowest(e, receiver, avoid, k)
	}
	var best *location
	for id, loc := range e.locs {
		if id == avoid {
			continue
		}
		if id == receiver || loc.servingTo != "" || loc.chosen || loc.unoffered || loc.unfed() || t.upstreamContains(e, loc, receiver) {
			continue
		}
		if best == nil || better(loc, best) {
			best = loc
		}
	}
	return best
}

// pickByPolicy asks TableConfig.Senders for a chosen receiver's sender.
func (t *LocationTable) pickByPolicy(e *entry, receiver, avoid string) *location {
	copies := make([]Copy, 0, len(e.locs))
	for id, loc := range e.locs {
		if id != avoid {
			copies = append(copies, Copy{Node: id, Creator: loc.creator, State: loc.state})
		}
	}
	id, ok := t.cfg.Senders(receiver, copies)
	if !ok || id == avoid {
		return nil
	}
	return e.locs[id]
}

// pickReadable chooses the copy a no-copy receiver reads: never its own
// node's, never a chosen or unfed copy; a copy that serves nobody before a busy one
// (whose bandwidth goes to a receiver that extends the tree), then
// complete before partial, oldest first. A busy copy is taken rather than
// waited for: the reader claims nothing, so it cannot wait its turn in
// the tree, and a free sender might come only when a whole broadcast is
// done. Cycles do not matter: the reader feeds nobody.
func (t *LocationTable) pickReadable(e *entry, receiver, avoid string) *location {
	var best *location
	for id, loc := range e.locs {
		if id == receiver || id == avoid || loc.chosen || loc.unoffered || loc.unfed() {
			continue
		}
		free, bestFree := loc.servingTo == "", best != nil && best.servingTo == ""
		if best == nil || free && !bestFree || free == bestFree && better(loc, best) {
			best = loc
		}
	}
	return best
}

func better(a, b *location) bool {
	if a.state != b.state {
		return a.state == messages.LocationState_COMPLETE
	}
	return a.order < b.order
}

// upstreamContains reports whether receiver may be upstream of loc. A
// chain that reaches a copy no longer in the directory, or an unfed one,
// counts as containing it: that copy's node may still be streaming (a receiver
// named it failed after a stall, which removed it and freed its own
// sender), so where its bytes come from is unknown. Offering such a chain
// formed real cycles of streams (the fetch simulation, regression seed 673: four
// receivers each waiting on the next until their stall timeouts); it is
// offered again once its head locates again.
func (t *LocationTable) upstreamContains(e *entry, loc *location, receiver string) bool {
	for hops := 0; loc.fetchingFrom != ""; hops++ {
		if loc.fetchingFrom == receiver || hops > len(e.locs) {
			return true
		}
		if loc = e.locs[loc.fetchingFrom]; loc == nil || loc.unfed() {
			return true
		}
	}
	return false
}
