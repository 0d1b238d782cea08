package directory

import (
	"slices"
	"strings"

	"github.com/hoplite-go/hoplite/internal/outbox"
	"github.com/hoplite-go/hoplite/messages"
)

// A Reduce target is an object id a Reduce will create: its coordinator,
// a child of the target's shard, reserves the id (Reserve) before any
// source moves, the tree's root creates it (CreateObject with the
// Reduce's id and its root generation), the coordinator commits the
// root's result (a creator's COMPLETE PublishLocation with the Reduce's
// id), and a Reduce that fails releases it (Release). reduceTarget is an
// entry's part of that: which Reduce holds the id, which created it, and
// which call committed it. The table asks it what each of those steps
// may do; what the steps do to the object's copies is the table's.

// reduceTarget is an entry's Reduce side (the zero value: no Reduce
// involved).
type reduceTarget struct {
	// reservedBy is the Reduce that will create this object; nobody else
	// may create it meanwhile.
	reservedBy string
	// producedBy is the Reduce that created this object (its release
	// drops the target even once committed).
	producedBy string
	// rootGen is the newest root generation of that Reduce that created
	// it: an older root's late CreateObject must not undo a newer one.
	rootGen int32
	// committedBy and reduced, learnt from the coordinator's commit or a
	// republished complete copy, say which Reduce run committed this
	// object and what it reduces: an attempt of that run's call started
	// again here (its coordinator died with this shard's old home)
	// answers with them (see Reserve), and every receiver is told them
	// (see marks), so that its copy can say so too.
	committedBy string
	call        string
	reduced     []string
	// readFrom is the run a reader's whole copy says it streamed this
	// object from, when the copy heard nothing of the run's commit
	// (republished to a rebuilt shard; PublishLocation.reduce_id on a
	// COMPLETE copy): the object is that run's result, but which sources
	// it reduces died with the members that knew. A later attempt of the
	// run's call is told so (see reserve) rather than CONFLICT, which
	// would say another writer made the id.
	readFrom string
}

// marks are what a receiver records on its copy of the object: the run
// that committed it and the sources it reduces ("" and nil if no commit
// is known).
func (r *reduceTarget) marks() (string, []string) {
	if r.committedBy == "" || len(r.reduced) == 0 {
		return "", nil
	}
	return r.committedBy, r.reduced
}

// learn records that run committed the object, reducing reduced.
func (r *reduceTarget) learn(run string, reduced []string) {
	r.committedBy, r.call, r.reduced = run, CallOf(run), slices.Clone(reduced)
}

// none reports whether no Reduce has reserved, created, committed or
// been read into the id: a plain Put's object, whose inline bytes the
// table publishes (InlinePublisher).
func (r *reduceTarget) none() bool {
	return r.reservedBy == "" && r.producedBy == "" && r.committedBy == "" && r.readFrom == "" && len(r.reduced) == 0
}

// reserved reports whether a Reduce holds the id: it will create it, so
// nobody else may, and its absence is no loss.
func (r *reduceTarget) reserved() bool { return r.reservedBy != "" }

// heldBy reports whether the Reduce rid holds the id's reservation.
func (r *reduceTarget) heldBy(rid string) bool { return r.reservedBy == rid }

// refuseCreate answers whether a CreateObject of id may go on, as far as
// Reduces are concerned (nil: it may). A Reduce creates its target only
// while it holds the reservation: its coordinator ends it when it takes a
// root's result (see Publish), and never creates the target again after
// that. A root that finished is not a result before then, and no reader
// got its last byte (objstore.Object.HoldTail), so a repaired root
// simply creates the target anew.
//
// A Reduce this table never reserved (known: see reservedHere; reduce
// ids come only from the shards that reserve them) reserved the id at
// another incarnation of the shard: its root asked the shard's new home
// (the shard moved or restarted since the reservation) while its
// coordinator, a child of the old one, may still run. That is
// UNAVAILABLE, which the coordinator takes for a shard move: the
// caller's node starts the Reduce again at the shard's home. Answered
// INVALID_ARGUMENT, the Reduce failed as if its caller had misused it
// (chaos seed 78 under load). A late create of a Reduce this table
// released, or whose result it committed, is still INVALID_ARGUMENT.
func (r *reduceTarget) refuseCreate(id string, req *messages.CreateObject, known bool) *messages.Error {
	rid := req.GetReduceId()
	if rid != "" && r.producedBy == rid && req.GetReduceGeneration() < r.rootGen {
		return messages.Errorf(messages.ErrorCode_CANCELED,
			"object %q: root generation %d of reduce %s was replaced by generation %d", id, req.GetReduceGeneration(), rid, r.rootGen)
	}
	if r.reservedBy != rid {
		if rid != "" && !known && !r.knows(rid) {
			return messages.Errorf(messages.ErrorCode_UNAVAILABLE,
				"object %q: this directory shard holds no reservation for reduce %s, which reserved it before the shard moved or restarted", id, rid)
		}
		if rid != "" {
			return messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "object %q is not reserved for reduce %s", id, rid)
		}
		return messages.Errorf(messages.ErrorCode_CONFLICT, "object %q is the target of a running Reduce", id)
	}
	return nil
}

// knows reports whether the entry records the Reduce run rid: it created
// or committed the target, or a copy names it.
func (r *reduceTarget) knows(rid string) bool {
	return r.producedBy == rid || r.committedBy == rid || r.readFrom == rid
}

// created records a CreateObject that made the object: no call committed
// these contents yet, and a Reduce's root names its Reduce and
// generation.
func (r *reduceTarget) created(req *messages.CreateObject) {
	r.committedBy, r.call, r.reduced, r.readFrom = "", "", nil, ""
	if rid := req.GetReduceId(); rid != "" {
		r.producedBy, r.rootGen = rid, req.GetReduceGeneration()
	}
}

// refusesCommit reports whether a publication is a Reduce coordinator's
// commit of its root's result (the root holds the target's last byte back
// until then, so this is when the target becomes readable whole) that
// does not count: the Reduce no longer holds the reservation, for it was
// released (it failed), or the shard was rebuilt and the coordinator died
// with its old incarnation. A root copy the table no longer lists is
// recorded again: a receiver that named the root a failed sender removed
// it while it was partial, and the root holds the result. If instead the
// root's node failed, recording it watches the node again, and the
// failure comes back at once and leaves the target lost.
func (t *LocationTable) refusesCommit(req *messages.PublishLocation) bool {
	rid := req.GetReduceId()
	if rid == "" || req.GetState() != messages.LocationState_COMPLETE || !req.GetCreator() {
		return false
	}
	e := t.entries[req.GetObjectId()]
	return e == nil || !e.target.heldBy(rid)
}

// orphanRoot answers the republication of a Reduce's root still writing
// its target to a shard that was rebuilt (nil if req is none, or its
// Reduce still holds the reservation): the Reduce's coordinator, a child
// of the shard, died with it, so the Reduce has failed and nothing will
// ever finish this copy. Recording it would leave a location that its
// root drops when it is released, which this shard might never hear (the
// release can go to the shard's old, dead address).
func (t *LocationTable) orphanRoot(req *messages.PublishLocation) []outbox.Send {
	id, rid := req.GetObjectId(), req.GetReduceId()
	if rid == "" || req.GetState() != messages.LocationState_PARTIAL || !req.GetCreator() {
		return nil
	}
	if e := t.entries[id]; e != nil && e.target.heldBy(rid) {
		return nil
	}
	return []outbox.Send{{To: req.GetNode(), Msg: &messages.DropObject{ObjectId: id, ReduceId: rid,
		Reason: messages.Errorf(messages.ErrorCode_NOT_FOUND, "the Reduce producing %q ended with its directory shard", id)}}}
}

// orphanCopy answers the republication of a reader's partial copy of a
// Reduce's target that no run holds here (nil if req is none, or its
// Reduce still holds the reservation, or a commit is known): it streamed
// from a root whose coordinator died with the shard's old home, so
// nothing will finish it. Recorded, it made the object look lost once
// every node had republished (a LOST answer for a target the Reduce's
// next attempt was about to produce: chaos seed 5000897). It is dropped
// with RESET: a Get waiting for it asks again, and waits for the
// target as for any object not made yet.
func (t *LocationTable) orphanCopy(req *messages.PublishLocation) []outbox.Send {
	id, rid := req.GetObjectId(), req.GetReduceId()
	if rid == "" || req.GetState() != messages.LocationState_PARTIAL || req.GetCreator() {
		return nil
	}
	if e := t.entries[id]; e != nil && (e.target.heldBy(rid) || e.target.committedBy != "") {
		return nil
	}
	return []outbox.Send{{To: req.GetNode(), Msg: &messages.DropObject{ObjectId: id,
		Reason: messages.Errorf(messages.ErrorCode_RESET, "the Reduce producing %q ended with its directory shard before its commit", id)}}}
}

// published takes in what a whole copy's publication says of Reduces: a
// committed target republished to a rebuilt shard names the call that
// committed it and what it reduces; a creator's whole copy of a reserved
// target is its coordinator's commit, which ends the reservation. It
// reports whether it was that commit: only now are the target's contents,
// and so its fingerprint, known.
func (r *reduceTarget) published(req *messages.PublishLocation) (committed bool) {
	if req.GetState() != messages.LocationState_COMPLETE {
		return false
	}
	if rid := req.GetReduceId(); rid != "" && !req.GetCreator() && req.GetProducedBy() == "" && r.reservedBy == "" && r.call == "" {
		r.readFrom = rid
	}
	if req.GetProducedBy() != "" && r.reservedBy == "" && r.call == "" {
		r.learn(req.GetProducedBy(), req.GetReducedIds())
	}
	if req.GetCreator() && r.reservedBy != "" {
		// A Reduce's coordinator committed its root's target (or a sliced
		// AllReduce's gathers).
		r.reservedBy = ""
		if req.GetProducedBy() != "" {
			r.learn(req.GetProducedBy(), req.GetReducedIds())
		}
		return true
	}
	return false
}

// reserve is Reserve on an entry whose id passed the table's checks;
// known is whether the entry holds an object.
func (r *reduceTarget) reserve(id, reduceID string, known bool) (committed []string, err *messages.Error) {
	switch {
	case known && r.call != "" && r.call == CallOf(reduceID) && len(r.reduced) > 0:
		return slices.Clone(r.reduced), nil
	case known && r.call == "" && r.readFrom != "" && CallOf(r.readFrom) == CallOf(reduceID):
		return nil, messages.Errorf(messages.ErrorCode_LOST,
			"reduce into %q: an earlier attempt of this call made the target, and which sources it reduces was lost with the members that knew (its coordinator's and its root's); the target's bytes remain readable, or Delete it and Reduce again", id)
	case known:
		return nil, messages.Errorf(messages.ErrorCode_CONFLICT, "Reduce target %q already exists", id)
	case r.reservedBy != "":
		return nil, messages.Errorf(messages.ErrorCode_CONFLICT, "Reduce target %q is already being produced", id)
	}
	r.reservedBy = reduceID
	return nil, nil
}

// release ends what the Reduce rid holds of the id, and reports whether
// its target goes: it does if rid holds the reservation, and if rid
// created the target and committed it (its coordinator's COMPLETE ended
// the reservation): the Reduce failed after all (an AllReduce whose
// participant could not fetch the result, or whose deadline passed
// meanwhile), and the root's node drops its copy on the same release.
// Kept, it was a copy its node no longer held: a Get there failed with
// "already holds" (chaos soak seed 91128695).
func (r *reduceTarget) release(rid string) bool {
	finished := r.producedBy == rid && r.reservedBy == ""
	if r.producedBy == rid {
		r.producedBy = ""
	}
	if r.reservedBy != rid && !finished {
		return false
	}
	r.reservedBy = ""
	r.committedBy, r.call, r.reduced, r.readFrom = "", "", nil, ""
	return true
}

// Reserve keeps id free for the Reduce reduceID to create. It fails if the
// id exists, was deleted, or is already reserved.
//
// A target that an earlier attempt of the same call committed (see
// ReduceID) is that call's result: Reserve returns the sources it
// reduces, reserves nothing, and the Reduce answers with them. Its
// coordinator died with this shard's old home after the commit, before
// its answer reached the caller; reducing again would replace a result
// that readers may have read.
func (t *LocationTable) Reserve(id, reduceID string) (committed []string, err *messages.Error) {
	if err := t.check(id); err != nil {
		return nil, err
	}
	e := t.entry(id)
	committed, err = e.target.reserve(id, reduceID, e.known)
	if err == nil && committed == nil {
		t.reservedRun(reduceID)
	}
	return committed, err
}

// reservedRun remembers that this table reserved a target for the Reduce
// run rid (the last TombstoneLimit of them; see reservedHere).
func (t *LocationTable) reservedRun(rid string) {
	if _, ok := t.runs[rid]; ok {
		return
	}
	t.runs[rid] = struct{}{}
	t.runOrder = append(t.runOrder, rid)
	if len(t.runOrder) > t.cfg.TombstoneLimit {
		delete(t.runs, t.runOrder[0])
		t.runOrder[0] = ""
		t.runOrder = t.runOrder[1:]
	}
}

// reservedHere reports whether this table reserved a target for the
// Reduce run rid: a CreateObject of a run it did not comes from a Reduce
// whose reservation is in another incarnation of the shard (see
// refuseCreate). Its entry alone cannot tell: a released or lost
// target's entry is forgotten.
func (t *LocationTable) reservedHere(rid string) bool {
	_, ok := t.runs[rid]
	return ok
}

// Reservation is the Reduce that holds id's reservation ("" if none).
func (t *LocationTable) Reservation(id string) string {
	if e := t.entries[id]; e != nil {
		return e.target.reservedBy
	}
	return ""
}

// ReduceID names one attempt (nonce) of a Reduce call into target.
// Attempts of one call share the prefix CallOf returns.
func ReduceID(target, call, nonce string) string {
	return target + "#" + call + "." + nonce
}

// CallOf is the call a reduce id's attempt belongs to (see ReduceID): the
// id up to its last '.', or the whole id if it has none.
func CallOf(reduceID string) string {
	if i := strings.LastIndexByte(reduceID, '.'); i >= 0 {
		return reduceID[:i]
	}
	return reduceID
}

// onRelease undoes a failed Reduce: its reservation goes, and so does any
// target it created, partial or finished (copies dropped, no tombstone),
// so nothing of it remains and the id can be used again. Waiting Gets
// keep waiting.
func (t *LocationTable) onRelease(req *messages.ReleaseTarget) outbox.Box {
	rid := req.GetReduceId()
	if rid == "" {
		return outbox.Box{}
	}
	e := t.entries[req.GetTargetId()]
	if e == nil || !e.target.release(rid) {
		return outbox.Box{}
	}
	out := t.withdrawInline(e)
	failed := messages.Errorf(messages.ErrorCode_NOT_FOUND, "the Reduce producing %q failed; the id may be produced again", e.id)
	for _, loc := range t.sortedLocations(e) {
		out = append(out, t.removeLocation(e, loc.node.GetNodeId())...)
		out = append(out, outbox.Send{To: loc.node, Msg: &messages.DropObject{ObjectId: e.id, Reason: failed}})
	}
	e.known, e.size, e.fingerprint, e.hasInline, e.inline = false, 0, 0, false, nil
	e.transfers = nil
	e.epoch = t.newEpoch() // a copy of the released target reporting late is stale
	t.forgetIfIdle(e)
	return outbox.Box{Sends: out}
}
