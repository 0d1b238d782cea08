package directory

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/hoplite-go/hoplite/messages"
	"github.com/hoplite-go/hoplite/outbox"
)

// TableConfig bounds what a LocationTable remembers.
type TableConfig struct {
	// InlineLimit: objects strictly smaller than this many bytes are kept
	// inline in the directory and returned in the LocateReply.
	InlineLimit int64
	// MaxObjectIDLen rejects longer ids.
	MaxObjectIDLen int
	// TombstoneLimit is how many deleted ids are remembered so that a late
	// Put, Get or publication of them gets DELETED (oldest forgotten first).
	TombstoneLimit int
	// TransferLogLimit is how many transfers are recorded per object.
	TransferLogLimit int
	// Amnesic marks the table of a shard that started over (rebuilt after
	// a crash or moved to another member): ids it does not know may have
	// existed, and may have been lost with the shard's old host. A Delete
	// of such an id succeeds (and leaves a tombstone, so a copy
	// republished later is dropped) instead of answering NOT_FOUND.
	Amnesic bool
	// Instance numbers this table among the tables a shard starts over
	// with (the low 24 bits count): every epoch it issues
	// (LocateReply.epoch) carries it, above a count of its own. A shard
	// gives each of its tables a random one, so a table that started over
	// issues no epoch an earlier one did, and tells a copy fetched under
	// one of its own epochs from one fetched under an earlier table's
	// (see FetchDone, and SameTable).
	Instance uint32
}

// epochCountBits is how many low bits of an epoch count a table's epochs
// (2^40: more than a table issues in years); the bits above are its
// Instance.
const epochCountBits = 40

// SameTable reports whether two epochs were issued by one table: then
// they differ only if the object's contents changed between them (a
// Reduce made its target again, or a failed one released it). Epochs of
// two tables say nothing of the sort: the shard started over in between,
// and an object's contents change only together with every copy the
// directory knows of.
func SameTable(a, b uint64) bool { return a>>epochCountBits == b>>epochCountBits }

// DefaultTableConfig returns the limits used when a field is zero.
func DefaultTableConfig() TableConfig {
	return TableConfig{InlineLimit: 64 << 10, MaxObjectIDLen: 1024, TombstoneLimit: 1 << 16, TransferLogLimit: 256}
}

func (c TableConfig) withDefaults() TableConfig {
	d := DefaultTableConfig()
	if c.InlineLimit == 0 {
		c.InlineLimit = d.InlineLimit
	}
	if c.MaxObjectIDLen == 0 {
		c.MaxObjectIDLen = d.MaxObjectIDLen
	}
	if c.TombstoneLimit == 0 {
		c.TombstoneLimit = d.TombstoneLimit
	}
	if c.TransferLogLimit == 0 {
		c.TransferLogLimit = d.TransferLogLimit
	}
	return c
}

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
	// the upstream chain used to refuse cycles on failover.
	fetchingFrom string
	// naive copies were fetched by the baseline and are never offered.
	naive bool
	// unoffered: a creator's copy offered to nobody until it is complete
	// (CreateObject.unoffered).
	unoffered bool
}

type waiterKind int

const (
	waitLocate waiterKind = iota
	waitQuery
)

type waiter struct {
	kind     waiterKind
	receiver *messages.NodeRef // waitLocate only
	naive    bool
	// noCopy: the receiver keeps no copy (Locate.no_copy): it is answered
	// without a claim or a location, and it is apart from the receiver's
	// Locates for a copy of its own.
	noCopy   bool
	attempt  uint64 // echoed in the LocateReply (waitLocate only)
	replyTo  any
	deadline time.Time
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

type lostMark struct {
	err *messages.Error
	seq uint64
	// epoch is the lost entry's: a whole copy of it that the loss did not
	// drop holds those contents (see FetchDone).
	epoch uint64
	// dropped holds the nodes whose partial copies the loss dropped. A
	// copy of theirs that reports itself whole afterwards (its FetchDone,
	// or a republication, crossed the loss's DropObject) is about to be
	// freed by that drop: it is no copy to end the loss with.
	dropped map[string]struct{}
}

// lostRef is one entry of the lost FIFO; seq tells whether the id was
// lost again (and re-marked) since.
type lostRef struct {
	id  string
	seq uint64
}

type subscriber struct {
	key string
	to  any
}

type entry struct {
	id          string
	known       bool // created or published: size and fingerprint are set
	size        int64
	fingerprint uint64
	hasInline   bool
	inline      []byte
	locs        map[string]*location
	seq         uint64
	transfers   []*messages.Transfer
	waiters     []*waiter
	subscribers []subscriber
	// target is the entry's Reduce side: the Reduce that reserved,
	// created or committed the id, if any (reduce_targets.go).
	target reduceTarget
	// epoch names the entry's contents (see LocationTable.newEpoch):
	// copies of another epoch hold bytes that are no longer valid.
	epoch uint64
}

// LocationTable is the state of one directory shard. It is not safe for
// concurrent use: its shell steps it from one goroutine.
type LocationTable struct {
	cfg        TableConfig
	entries    map[string]*entry
	tombstones map[string]struct{}
	tombOrder  []string // FIFO of tombstones, bounded by TombstoneLimit
	// lost remembers objects whose every copy died with its node, so a Get
	// fails at once with LOST instead of waiting for a copy that will not
	// come; a new Put, or a whole copy that the loss did not drop
	// (republished, or a fetch that completed), ends it. Bounded like the
	// tombstones.
	lost         map[string]lostMark
	lostOrder    []lostRef // FIFO, bounded by TombstoneLimit
	lostSeq      uint64
	nextDeadline time.Time
	// epochs is how many epochs the table issued (see newEpoch).
	epochs uint64
}

// NewLocationTable returns an empty table.
func NewLocationTable(cfg TableConfig) *LocationTable {
	return &LocationTable{cfg: cfg.withDefaults(), entries: map[string]*entry{}, tombstones: map[string]struct{}{},
		lost: map[string]lostMark{}}
}

func (t *LocationTable) check(id string) *messages.Error {
	if err := ValidateObjectID(id, t.cfg.MaxObjectIDLen); err != nil {
		return err
	}
	if _, ok := t.tombstones[id]; ok {
		return messages.Errorf(messages.ErrorCode_DELETED, "object %q was deleted", id)
	}
	return nil
}

func nodeOK(n *messages.NodeRef) bool { return n != nil && n.GetNodeId() != "" }

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

func (t *LocationTable) entry(id string) *entry {
	e := t.entries[id]
	if e == nil {
		e = &entry{id: id, locs: map[string]*location{}, epoch: t.newEpoch()}
		t.entries[id] = e
	}
	return e
}

// newEpoch issues an epoch: a name for an entry's contents that no other
// entry, no earlier contents of the same id and no other table of the
// shard had (TableConfig.Instance). An entry gets one when it is
// made, and a new one whenever its contents may change: a Reduce creates
// its target again, a failed Reduce releases it, or the id is created
// anew after every copy went.
func (t *LocationTable) newEpoch() uint64 {
	t.epochs++
	return t.base() | t.epochs&(1<<epochCountBits-1)
}

func (t *LocationTable) base() uint64 { return uint64(t.cfg.Instance&(1<<24-1)) << epochCountBits }

// ownEpoch reports whether this table issued epoch ep.
func (t *LocationTable) ownEpoch(ep uint64) bool {
	n := ep &^ t.base()
	return SameTable(ep, t.base()) && n > 0 && n <= t.epochs
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

// forgetIfIdle drops an entry that holds nothing and nobody waits on, so
// Gets of ids that never appear leave no trace once they give up.
func (t *LocationTable) forgetIfIdle(e *entry) {
	if !e.known && !e.target.reserved() && len(e.waiters) == 0 && len(e.subscribers) == 0 {
		delete(t.entries, e.id)
	}
}

// Create registers an object for its creator (a Put).
func (t *LocationTable) Create(req *messages.CreateObject, replyTo any) []outbox.Send {
	var out []outbox.Send
	if e := t.entries[req.GetObjectId()]; e != nil && nodeOK(req.GetCreator()) {
		out, _ = t.supersede(e, req.GetCreator())
	}
	return append(out, t.create(req, replyTo)...)
}

func (t *LocationTable) create(req *messages.CreateObject, replyTo any) []outbox.Send {
	id := req.GetObjectId()
	reply := func(err *messages.Error, existed bool) []outbox.Send {
		return []outbox.Send{{To: replyTo, Msg: &messages.CreateObjectReply{ObjectId: id, Error: err, Existed: existed, RequestId: req.GetRequestId()}}}
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
	if err := e.target.refuseCreate(id, req); err != nil {
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
	if e.known {
		if own := e.locs[req.GetCreator().GetNodeId()]; own != nil && own.creator &&
			e.size == req.GetSize() && e.fingerprint == req.GetFingerprint() {
			// The creator's own republication (a shard started) got here
			// before its CreateObject: this is that Put, not a second one.
			return append(reply(nil, false), t.serveWaiters(e)...)
		}
		if e.size == req.GetSize() && e.fingerprint == req.GetFingerprint() {
			return reply(nil, true)
		}
		return reply(messages.Errorf(messages.ErrorCode_CONFLICT,
			"object %q already exists with different contents (size %d, new size %d)", id, e.size, req.GetSize()), false)
	}
	e.known, e.size, e.fingerprint = true, req.GetSize(), req.GetFingerprint()
	e.target.created(req)
	if !sameBytes {
		// Whatever copies of the id went before held other contents (a
		// Reduce's earlier root, a released target, a lost object Put
		// again): a report of one of them is stale (see FetchDone).
		e.epoch = t.newEpoch()
	}
	if req.GetHasInline() && req.GetSize() < t.cfg.InlineLimit {
		e.hasInline, e.inline = true, req.GetInlineData()
	}
	out := append(reply(nil, false), stale...)
	if req.GetUnoffered() {
		// Recorded, so that the copy counts (a failure of its node, the
		// Reduce's release), but announced to nobody until it is complete.
		loc := &location{node: req.GetCreator(), state: messages.LocationState_PARTIAL, creator: true, unoffered: true}
		e.seq++
		loc.order = e.seq
		e.locs[req.GetCreator().GetNodeId()] = loc
		return out
	}
	out = append(out, t.setLocation(e, req.GetCreator(), messages.LocationState_PARTIAL, true)...)
	return append(out, t.serveWaiters(e)...)
}

// Publish records a copy's state on a node (PARTIAL when a copy starts,
// COMPLETE when it is whole). A publication for a deleted object answers
// with DropObject so the stale copy is freed.
func (t *LocationTable) Publish(req *messages.PublishLocation) []outbox.Send {
	id := req.GetObjectId()
	if !nodeOK(req.GetNode()) || ValidateObjectID(id, t.cfg.MaxObjectIDLen) != nil {
		return nil
	}
	if _, gone := t.tombstones[id]; gone {
		return []outbox.Send{{To: req.GetNode(), Msg: deletedDrop(id)}}
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
		if req.GetState() != messages.LocationState_COMPLETE {
			// A partial copy of a lost object can never complete.
			return []outbox.Send{{To: req.GetNode(), Msg: &messages.DropObject{ObjectId: id, Reason: l.err}}}
		}
		if !t.endLoss(id, req.GetNode().GetNodeId()) {
			return nil
		}
	}
	if drop := t.orphanRoot(req); drop != nil {
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
	if e.target.published(req) {
		e.fingerprint = req.GetFingerprint()
	}
	node := req.GetNode().GetNodeId()
	known := e.locs[node] != nil
	out := t.setLocation(e, req.GetNode(), state, req.GetCreator())
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

// unknownUpstream is the fetchingFrom of a partial copy whose sender the
// table does not know; it names no location, so upstreamContains treats
// every chain through it as possibly containing the receiver.
const unknownUpstream = "\x00unknown"

// Unpublish removes a node's copy (evicted, or a fetch given up).
func (t *LocationTable) Unpublish(req *messages.UnpublishLocation) []outbox.Send {
	e := t.entries[req.GetObjectId()]
	if e == nil || !nodeOK(req.GetNode()) {
		return nil
	}
	node := req.GetNode().GetNodeId()
	out := t.removeLocation(e, node)
	if fx, lost := t.markLostIfGone(e, node); lost {
		return append(out, fx...)
	}
	return append(out, t.serveWaiters(e)...)
}

// ReportLost removes a node's copy on its owner's word (a member leaving)
// and answers whether the object is now lost.
func (t *LocationTable) ReportLost(req *messages.ReportLost, replyTo any) []outbox.Send {
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

// Locate finds one sender for a receiver, or parks the request until one
// exists or the deadline passes (see Tick).
func (t *LocationTable) Locate(req *messages.Locate, replyTo any, now time.Time) []outbox.Send {
	var out []outbox.Send
	if e := t.entries[req.GetObjectId()]; e != nil && nodeOK(req.GetReceiver()) {
		if fx, gone := t.supersede(e, req.GetReceiver()); gone {
			out = fx
			if fx, lost := t.markLostIfGone(e, req.GetReceiver().GetNodeId()); lost {
				out = append(out, fx...) // answered LOST below
			}
		}
	}
	return append(out, t.locate(req, replyTo, now)...)
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
	e := t.entry(id)
	var out []outbox.Send
	rid := req.GetReceiver().GetNodeId()
	avoid := ""
	if f := req.GetFailedSender(); nodeOK(f) && f.GetNodeId() != rid {
		if loc := e.locs[f.GetNodeId()]; loc != nil && loc.state == messages.LocationState_COMPLETE && (loc.creator || !e.hasSourceBut(f.GetNodeId())) {
			// A receiver's stream error says nothing certain about the
			// creator (the receiver stalled, a connection broke): removed,
			// its whole copy, often the only one, was offered to nobody
			// again while its node lived, and every later Get waited to
			// its deadline. A creator that died goes with its node's
			// failure; until then this receiver tries others first, and
			// it again only after AvoidFailedCreator. So does the last
			// whole copy of any other node: removed, no copy was left to
			// offer, and once its node's failure came there was no copy
			// for it to end, so the object was never found LOST and its
			// Gets waited for their deadlines.
			avoid = f.GetNodeId()
		} else {
			out = append(out, t.removeLocation(e, f.GetNodeId())...)
		}
	}
	if req.GetNoCopy() {
		// Whatever the receiver's own record says, it is not about this
		// request: a copy the node holds or fetches for its Gets (the node
		// reads a complete one itself: see serveWaiters).
		w := &waiter{kind: waitLocate, receiver: req.GetReceiver(), noCopy: true, attempt: req.GetAttempt(),
			replyTo: replyTo, deadline: now.Add(Timeout(req.GetTimeoutMs(), 0))}
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
			// the node's own Put of the id finished. It has the object.
			return append(out, outbox.Send{To: replyTo, Msg: &messages.LocateReply{ObjectId: id,
				Error: messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "node %s already holds %q", rid, id), Attempt: req.GetAttempt()}})
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
	w := &waiter{kind: waitLocate, receiver: req.GetReceiver(), naive: req.GetNaive(), attempt: req.GetAttempt(), replyTo: replyTo,
		deadline: now.Add(Timeout(req.GetTimeoutMs(), 0))}
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

// AbandonLocate withdraws the one parked Locate whose answer was to go
// to replyTo, and no other: a caller on the data plane that hung up. A
// CancelLocate names only the receiver, and on the data plane it could
// overtake nothing in order — a receiver's next Locate may arrive on
// another connection first — so it would withdraw that one instead.
// replyTo is matched by address and id (a PID, or anything with those).
func (t *LocationTable) AbandonLocate(id string, replyTo any) []outbox.Send {
	e := t.entries[id]
	if e == nil {
		return nil
	}
	e.waiters = slices.DeleteFunc(e.waiters, func(w *waiter) bool {
		return w.kind == waitLocate && sameEndpoint(w.replyTo, replyTo)
	})
	t.forgetIfIdle(e)
	return nil
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

// CancelLocate withdraws the parked Locate requests of a receiver, except
// its no-copy ones: several of those may wait at once (a GetInto each),
// and a CancelLocate names only the receiver. They are withdrawn by their
// own deadlines, or by AbandonLocate.
func (t *LocationTable) CancelLocate(req *messages.CancelLocate) []outbox.Send {
	e := t.entries[req.GetObjectId()]
	if e == nil {
		return nil
	}
	rid := req.GetReceiver().GetNodeId()
	e.waiters = slices.DeleteFunc(e.waiters, func(w *waiter) bool {
		return w.kind == waitLocate && w.receiver.GetNodeId() == rid && !w.noCopy
	})
	t.forgetIfIdle(e)
	return nil
}

// FetchDone marks the receiver complete and frees its sender. A copy
// fetched under an epoch this table issued and no longer has (a Reduce
// created its target again, or a failed one released it, since the
// Locate) holds other contents than the entry: it is not recorded, and a
// receiver this table lists no copy of is told to drop it (one it lists
// fetches anew, its old copy gone). A copy fetched under an epoch of an
// earlier incarnation of the table (the shard started over since the
// Locate) teaches the table the object, as a republication would, even
// an id it has no entry for.
func (t *LocationTable) FetchDone(req *messages.FetchDone) []outbox.Send {
	id := req.GetObjectId()
	if _, gone := t.tombstones[id]; gone && nodeOK(req.GetReceiver()) {
		return []outbox.Send{{To: req.GetReceiver(), Msg: deletedDrop(id)}}
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
		// As in Publish: a whole copy ends the loss, unless it is one the
		// loss dropped. Recording that one (and keeping the mark) gave
		// subscribers and Locates a COMPLETE copy that its node frees
		// when the loss's DropObject arrives, while Gets failed LOST.
		if !t.endLoss(id, rid) {
			return nil
		}
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

// FetchAborted removes a receiver that gave up and frees its sender.
func (t *LocationTable) FetchAborted(req *messages.FetchAborted) []outbox.Send {
	e := t.entries[req.GetObjectId()]
	if e == nil || !nodeOK(req.GetReceiver()) {
		return nil
	}
	out := t.removeLocation(e, req.GetReceiver().GetNodeId())
	return append(out, t.serveWaiters(e)...)
}

// Delete removes the entry and every copy, and remembers the id as deleted.
func (t *LocationTable) Delete(req *messages.DeleteObject, replyTo any) []outbox.Send {
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
func (t *LocationTable) ApplyTombstones(req *messages.Tombstones) []outbox.Send {
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
	return out
}

// Subscribe pushes every current and future location of the object to
// the subscriber; key identifies the subscriber for Unsubscribe. The
// subscriber also hears when the object is deleted, and when it is lost
// (LocationUpdate.error: now, if it is lost already, and whenever its
// last copy goes). A subscriber that located the object before
// (Subscribe.located_before) hears LOST too when the table knows no copy
// of it: the shell sets that flag only once every store node has
// republished (see actors/directory), so no copy is left anywhere.
func (t *LocationTable) Subscribe(req *messages.Subscribe, key string, to any) []outbox.Send {
	id := req.GetObjectId()
	if err := t.check(id); err != nil {
		return []outbox.Send{{To: to, Msg: &messages.LocationUpdate{ObjectId: id, Deleted: true}}}
	}
	e := t.entry(id)
	if !slices.ContainsFunc(e.subscribers, func(s subscriber) bool { return s.key == key }) {
		e.subscribers = append(e.subscribers, subscriber{key: key, to: to})
	}
	var out []outbox.Send
	for _, loc := range t.sortedLocations(e) {
		if loc.unfed() || loc.unoffered {
			continue // see Locate
		}
		out = append(out, outbox.Send{To: to, Msg: e.update(loc.node, loc.state)})
	}
	if l, ok := t.lost[id]; ok {
		// Lost before this subscription (a Reduce that began after its
		// source's last copy died, or a resubscription): no location
		// will come unless the id is Put again, which the subscriber
		// will hear of.
		out = append(out, outbox.Send{To: to, Msg: lostUpdate(id, l.err)})
	} else if req.GetLocatedBefore() && !e.known && !e.target.reserved() {
		// The subscriber had a copy's location, and now no copy, no loss
		// and no deletion of the id is known: its copies went before
		// this table began (a shard that restarted or moved forgets its
		// lost marks, and a node that died with the shard's old host
		// republishes nothing). The subscriber (a Reduce waiting for the
		// source) waited for its deadline. A Reduce producing the id
		// (reservedBy) will create it: that is no loss.
		out = append(out, outbox.Send{To: to, Msg: lostUpdate(id, messages.Errorf(messages.ErrorCode_LOST,
			"object %q is lost: this directory shard knows no copy of it, and its subscriber located one before (every copy went before the shard started over); Put it again to re-create it", id))})
	}
	return out
}

// lostUpdate tells a subscriber that no copy of id is left (err: LOST).
func lostUpdate(id string, err *messages.Error) *messages.LocationUpdate {
	return &messages.LocationUpdate{ObjectId: id, Error: err}
}

// Unsubscribe stops the pushes to the subscriber with this key.
func (t *LocationTable) Unsubscribe(req *messages.Unsubscribe, key string) []outbox.Send {
	e := t.entries[req.GetObjectId()]
	if e == nil {
		return nil
	}
	e.subscribers = slices.DeleteFunc(e.subscribers, func(s subscriber) bool { return s.key == key })
	t.forgetIfIdle(e)
	return nil
}

// Query answers with the entry, waiting for it to exist if asked to.
func (t *LocationTable) Query(req *messages.QueryObject, replyTo any, now time.Time) []outbox.Send {
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
	e = t.entry(id)
	w := &waiter{kind: waitQuery, replyTo: replyTo, deadline: now.Add(Timeout(req.GetTimeoutMs(), 0))}
	e.waiters = append(e.waiters, w)
	t.noteDeadline(w.deadline)
	return nil
}

// NextDeadline is when Tick may next have a parked request to time out
// (zero: none is parked). It may be early, never late: a request answered
// before its deadline leaves it in place, and that Tick finds nothing.
func (t *LocationTable) NextDeadline() time.Time { return t.nextDeadline }

// Tick answers every parked request whose deadline has passed with TIMEOUT.
// It is cheap to call often: it scans only when a deadline is due.
func (t *LocationTable) Tick(now time.Time) []outbox.Send {
	if t.nextDeadline.IsZero() || now.Before(t.nextDeadline) {
		return nil
	}
	t.nextDeadline = time.Time{}
	var out []outbox.Send
	for _, e := range t.entries {
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
	return out
}

// NodeFailed forgets every copy on a failed node and every request it had
// parked. Receivers it was serving find out from their own sessions and
// locate again (naming it as failed); senders it was fetching from are free.
func (t *LocationTable) NodeFailed(node string) []outbox.Send {
	return t.nodeFailed(node, func(*messages.NodeRef) bool { return true })
}

// IncarnationFailed is NodeFailed for the incarnation of node at address
// only: the copies and requests of another incarnation of the id (at
// another address) stay, for it is not the one that failed.
func (t *LocationTable) IncarnationFailed(node, address string) []outbox.Send {
	return t.nodeFailed(node, func(n *messages.NodeRef) bool { return n.GetAddress() == address })
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
		}
		t.forgetIfIdle(e)
	}
	return out
}

// FailWaiters answers every parked request with err (the shard is about to
// lose its soft state: requesters retry against the rebuilt shard).
func (t *LocationTable) FailWaiters(err *messages.Error) []outbox.Send {
	var out []outbox.Send
	for _, e := range t.entries {
		for _, w := range e.waiters {
			out = append(out, w.fail(e.id, err))
		}
		e.waiters = nil
	}
	return out
}

// Len is the number of entries, known or waited on (for tests and metrics).
func (t *LocationTable) Len() int { return len(t.entries) }

func (t *LocationTable) noteDeadline(d time.Time) {
	if t.nextDeadline.IsZero() || d.Before(t.nextDeadline) {
		t.nextDeadline = d
	}
}

// endLoss decides whether a whole copy on node, reported after id was
// marked lost, ends the loss: it does (the mark goes) unless the loss
// dropped node's partial copy, whose completion crossed that DropObject
// and is freed by it. Such a report is ignored; the drop already on its
// way frees the copy, and sending another could free a copy the node
// fetches after a new Put of the id.
func (t *LocationTable) endLoss(id, node string) bool {
	if _, dropped := t.lost[id].dropped[node]; dropped {
		return false
	}
	delete(t.lost, id) // a whole copy survived after all
	return true
}

// markLostIfGone ends an object that can no longer be read: no inline
// bytes, no complete copy and no creator's copy (which completes from its
// Put) remain after node's copy went, and no Reduce is producing it. Its
// waiters fail with LOST, partial copies (which can never complete) are
// dropped, and the id is remembered as lost.
func (t *LocationTable) markLostIfGone(e *entry, node string) ([]outbox.Send, bool) {
	if !t.unreadable(e) {
		return nil, false
	}
	return t.markLost(e, messages.Errorf(messages.ErrorCode_LOST,
		"object %q is lost: no complete copy remains (the last was on %s, which failed or let it go); Put it again to re-create it", e.id, node)), true
}

// unreadable reports whether e is an object nobody can read any more: no
// inline bytes, no complete copy and no creator's copy are listed, and no
// Reduce is producing it.
func (t *LocationTable) unreadable(e *entry) bool {
	return e.known && !e.hasInline && !e.target.reserved() && !e.hasSource()
}

// Republished is the shell's word that every store node alive when the
// table began has republished what it holds, or failed (see
// actors/directory): a copy the table does not list exists nowhere. An
// object it knows only from partial copies (a rebuilt shard learns them
// from receivers whose sender died before the shard started over) can
// never be read whole: it is lost, its parked Gets fail with LOST instead
// of waiting for their deadlines, and its partial copies are dropped.
func (t *LocationTable) Republished() []outbox.Send {
	var ids []string
	for id, e := range t.entries {
		if t.unreadable(e) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	var out []outbox.Send
	for _, id := range ids {
		out = append(out, t.markLost(t.entries[id], messages.Errorf(messages.ErrorCode_LOST,
			"object %q is lost: no complete copy remains (every store node has republished its copies to this directory shard, which started over, and none is whole); Put it again to re-create it", id))...)
	}
	return out
}

// markLost ends e as lost with err (see markLostIfGone).
func (t *LocationTable) markLost(e *entry, err *messages.Error) []outbox.Send {
	var out []outbox.Send
	for _, w := range e.waiters {
		out = append(out, w.fail(e.id, err))
	}
	dropped := map[string]struct{}{}
	for _, loc := range t.sortedLocations(e) {
		out = append(out, outbox.Send{To: loc.node, Msg: &messages.DropObject{ObjectId: e.id, Reason: err}})
		dropped[loc.node.GetNodeId()] = struct{}{}
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
	t.lostSeq++
	t.lost[e.id] = lostMark{err: err, seq: t.lostSeq, epoch: e.epoch, dropped: dropped}
	t.lostOrder = append(t.lostOrder, lostRef{id: e.id, seq: t.lostSeq})
	if len(t.lostOrder) > t.cfg.TombstoneLimit {
		if old := t.lostOrder[0]; t.lost[old.id].seq == old.seq {
			delete(t.lost, old.id)
		}
		t.lostOrder = t.lostOrder[1:]
	}
	return out
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

func (w *waiter) fail(id string, err *messages.Error) outbox.Send {
	if w.kind == waitQuery {
		return outbox.Send{To: w.replyTo, Msg: &messages.ObjectInfo{ObjectId: id, Error: err}}
	}
	return outbox.Send{To: w.replyTo, Msg: &messages.LocateReply{ObjectId: id, Error: err, Attempt: w.attempt}}
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
	if s := e.locs[sender]; s != nil && s.servingTo == receiver && !loc.naive {
		s.servingTo = ""
	}
	e.closeTransfer(receiver, sender, aborted)
	return nil
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
			out = append(out, outbox.Send{To: w.replyTo, Msg: &messages.LocateReply{ObjectId: e.id, Size: e.size,
				Fingerprint: e.fingerprint, HasInline: true, InlineData: e.inline, Attempt: w.attempt}})
			// The receiver stores the bytes it is sent: it holds a copy
			// from now on (a Delete must reach it), recorded here instead
			// of by a PublishLocation of its own, which would cost the
			// shard a third message per inline Get. A receiver that fails
			// to store them unpublishes; until then the entry only sends
			// a Delete's drop to a node without the copy, since inline
			// objects are always served from here, never from a copy.
			// A no-copy receiver stores nothing.
			if !w.noCopy {
				out = append(out, t.setLocation(e, w.receiver, messages.LocationState_COMPLETE, false)...)
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
			sender := t.pickSender(e, w.receiver.GetNodeId(), w.naive, w.avoid)
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
	if !w.naive {
		sender.servingTo = rid
	}
	out := t.setLocation(e, w.receiver, messages.LocationState_PARTIAL, false)
	e.locs[rid].fetchingFrom = sender.node.GetNodeId()
	e.locs[rid].naive = w.naive
	e.seq++
	e.transfers = append(e.transfers, &messages.Transfer{Receiver: rid, Sender: sender.node.GetNodeId(), StartSeq: int64(e.seq)})
	if len(e.transfers) > t.cfg.TransferLogLimit {
		e.transfers = slices.Delete(e.transfers, 0, len(e.transfers)-t.cfg.TransferLogLimit)
	}
	return append(out, outbox.Send{To: w.replyTo, Msg: &messages.LocateReply{ObjectId: e.id, Size: e.size,
		Fingerprint: e.fingerprint, Sender: sender.node, SenderState: sender.state, Epoch: e.epoch, Attempt: w.attempt}})
}

// unfed reports whether a copy is a receiver's partial copy that no sender
// feeds: its receiver is locating again, and the copy cannot grow until a
// sender is claimed for it. It is not offered to receivers, readers or
// subscribers meanwhile.
func (l *location) unfed() bool {
	return l.state == messages.LocationState_PARTIAL && !l.creator && l.fetchingFrom == ""
}

// pickSender chooses a free copy for receiver: complete copies first, then
// partial ones, oldest first; never the receiver itself, never an unfed
// copy (its receiver would stall where it ends), never a copy whose
// upstream chain contains the receiver (that would be a cycle).
func (t *LocationTable) pickSender(e *entry, receiver string, naive bool, avoid string) *location {
	var best *location
	for id, loc := range e.locs {
		if id == avoid {
			continue
		}
		if naive {
			if loc.creator {
				return loc
			}
			continue
		}
		if id == receiver || loc.servingTo != "" || loc.naive || loc.unoffered || loc.unfed() || t.upstreamContains(e, loc, receiver) {
			continue
		}
		if best == nil || better(loc, best) {
			best = loc
		}
	}
	return best
}

// pickReadable chooses the copy a no-copy receiver reads: never its own
// node's, never a naive or unfed copy; a copy that serves nobody before a busy one
// (whose bandwidth goes to a receiver that extends the tree), then
// complete before partial, oldest first. A busy copy is taken rather than
// waited for: the reader claims nothing, so it cannot wait its turn in
// the tree, and a free sender might come only when a whole broadcast is
// done. Cycles do not matter: the reader feeds nobody.
func (t *LocationTable) pickReadable(e *entry, receiver, avoid string) *location {
	var best *location
	for id, loc := range e.locs {
		if id == receiver || id == avoid || loc.naive || loc.unoffered || loc.unfed() {
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

func (e *entry) update(node *messages.NodeRef, state messages.LocationState) *messages.LocationUpdate {
	return &messages.LocationUpdate{ObjectId: e.id, Size: e.size, Node: node, State: state,
		HasInline: e.hasInline, InlineData: e.inline}
}

func (e *entry) notify(node *messages.NodeRef, state messages.LocationState) []outbox.Send {
	out := make([]outbox.Send, 0, len(e.subscribers))
	for _, s := range e.subscribers {
		out = append(out, outbox.Send{To: s.to, Msg: e.update(node, state)})
	}
	return out
}

func (e *entry) info() *messages.ObjectInfo {
	info := &messages.ObjectInfo{ObjectId: e.id, Size: e.size, HasInline: e.hasInline}
	for _, loc := range e.locs {
		info.Locations = append(info.Locations, &messages.Location{Node: loc.node, State: loc.state,
			Serving: loc.servingTo != "", Creator: loc.creator})
	}
	slices.SortFunc(info.Locations, func(a, b *messages.Location) int {
		return strings.Compare(a.GetNode().GetNodeId(), b.GetNode().GetNodeId())
	})
	for _, tr := range e.transfers {
		info.Transfers = append(info.Transfers, proto.Clone(tr).(*messages.Transfer))
	}
	return info
}

// Known is the number of objects the table knows (created or published).
func (t *LocationTable) Known() int {
	n := 0
	for _, e := range t.entries {
		if e.known {
			n++
		}
	}
	return n
}

// ListLimit caps one page of List.
const ListLimit = 1000

// List answers one page of the objects this table knows (created or
// published), in id order after req's after id.
func (t *LocationTable) List(req *messages.ListObjects) *messages.ListObjectsReply {
	limit := int(req.GetLimit())
	if limit <= 0 || limit > ListLimit {
		limit = ListLimit
	}
	var ids []string
	for id, e := range t.entries {
		if e.known && id > req.GetAfter() {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	reply := &messages.ListObjectsReply{Shard: req.GetShard(), More: len(ids) > limit}
	for _, id := range ids[:min(limit, len(ids))] {
		e := t.entries[id]
		s := &messages.ObjectSummary{ObjectId: id, Size: e.size, Inline: e.hasInline}
		for _, loc := range e.locs {
			if loc.state == messages.LocationState_COMPLETE {
				s.CompleteCopies++
			} else {
				s.PartialCopies++
			}
		}
		reply.Objects = append(reply.Objects, s)
	}
	return reply
}

// String is for logs.
func (t *LocationTable) String() string {
	return fmt.Sprintf("LocationTable{entries: %d, tombstones: %d}", len(t.entries), len(t.tombstones))
}
