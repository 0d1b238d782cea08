package storeactor

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strings"
	"time"

	"github.com/hoplite-go/hoplite/fingerprint"
	"github.com/hoplite-go/hoplite/internal/objstore"
	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/hoplite-go/hoplite/internal/actors/shardactor"
	"github.com/hoplite-go/hoplite/internal/actors/shell"
	"github.com/hoplite-go/hoplite/internal/actorutil"
	"github.com/hoplite-go/hoplite/internal/directory"
	"github.com/hoplite-go/hoplite/internal/getinto"
	"github.com/hoplite-go/hoplite/internal/localput"
	"github.com/hoplite-go/hoplite/internal/reduction"
	"github.com/hoplite-go/hoplite/internal/storeproto"
	"github.com/hoplite-go/hoplite/messages"
)

// StoreNode is the actor that serves one node's Put, Get and Delete. It is
// a thin shell: the bytes live in the objstore.Store (which survives the actor's
// restarts), each fetch is a run it drives itself (fetchRun) whose copies
// move on goroutines that report only their end, and long waits run
// on goroutines bounded by the request's deadline, so the mailbox never
// blocks behind a copy.
type StoreNode struct {
	cfg *Config
	// fetches are the fetches of this node's copies, by object id, and
	// intos those into GetInto callers' buffers (see fetchRun).
	fetches map[string]*fetchRun
	intos   map[*fetchRun]struct{}
	// locator carries the fetches' Locates (Config.Locate).
	locator Locator
	// fetchDrive, putDrive and deleteDrive step a fetch's, a Put's and
	// a Delete's protocol and carry out their Boxes (the generic shell,
	// wired once per incarnation).
	fetchDrive  *shell.Driver[*fetchRun, any, storeproto.FetchOutput]
	putDrive    *shell.Driver[uint64, any, storeproto.PutStep]
	deleteDrive *shell.Driver[uint64, any, storeproto.DeleteStep]
	// reduces are the reduce workers, by reduce id and position. They
	// are not children: a restart of this actor stops its children, and
	// a worker stopped that way tells its coordinator nothing (the
	// coordinator would wait for the position until the Reduce's
	// deadline, although its node and the store's bytes are fine). They
	// run beside it, watched, and the map outlives restarts as the store
	// does.
	reduces map[string]map[int32]*workerRef
	reqs    *requests // Puts and Deletes in flight; survive restarts
	// gets are the Gets waiting for their objects. They outlive restarts
	// of the actor, as the objstore.Store does: the Gets' timers and the objects'
	// settle notices name this actor's PID, which a restart keeps.
	gets *getWaiters
	// held are republications waiting for the commit of targets this node
	// holds whole (see heldRepublish), and lateCommit the targets whose
	// wait ran out: a commit that comes after all publishes them again.
	// Both are bounded by the Reduce roots this node runs.
	held       []*heldRepublish
	lateCommit map[string]bool
	// fast is this incarnation's fast path for Clients in its process.
	fast    *fastGetter
	fastPut *fastPutter
	// kept is what this member's directory shards keep here for their
	// next tables (see kept.go).
	kept *kept
	// reduceCalls are the Reduces waiting for their coordinators'
	// answers, for their callers' cancels (see reduce_cancel.go).
	reduceCalls *reduceCalls
}

// workerRef is a reduce worker as its store node knows it.
type workerRef struct {
	pid *actor.PID
	out *positionOutput // shared with the worker
}

// NewProps returns the props of a store node actor.
func NewProps(cfg Config) *actor.Props {
	c := cfg.withDefaults()
	r, gets, reduces, k, rc := newRequests(), newGetWaiters(), map[string]map[int32]*workerRef{}, newKept(), &reduceCalls{}
	return actorutil.Props(func() actor.Actor {
		return &StoreNode{cfg: c, reqs: r, gets: gets, reduces: reduces, kept: k, reduceCalls: rc}
	})
}

// Receive implements actor.Actor.
func (n *StoreNode) Receive(ctx actor.Context) {
	if h := n.cfg.Hooks.BeforeReceive; h != nil {
		h(n.cfg.Self.GetNodeId(), ctx.Message())
	}
	switch m := ctx.Message().(type) {
	case *actor.Started:
		n.started(ctx)
	case *messages.Reduce:
		n.reduce(ctx, m)
	case *messages.CancelReduce:
		n.cancelReduce(ctx, m)
	case *messages.ReduceTask:
		n.reduceTask(ctx, m, time.Now())
	case *messages.ReduceTaskBatch:
		n.reduceTaskBatch(ctx, m)
	case *messages.ReduceRelease:
		n.reduceRelease(ctx, m)
	case *messages.ReduceInvalidate:
		n.reduceInvalidate(ctx, m)
	case *messages.ReduceCommit:
		n.reduceCommit(ctx, m)
	case *messages.StoreReduced:
		n.storeReduced(ctx, m)
	case *messages.Republish:
		n.republish(ctx, m)
	case *messages.Tombstones:
		n.keep(m) // a shard of this member's, for its next table
	case *heldRepublishDue:
		n.heldDue(ctx, m)
	case shardactor.TableOpened:
		n.kept.hosting[m.Shard] = m.Table
	case shardactor.TableHandedOver:
		n.handedOver(ctx, m)
	case *handoverDue:
		n.handoverDue(ctx, m)
	case *messages.Put:
		n.put(ctx, m)
	case *localput.Request:
		n.putLocal(ctx, m)
	case *messages.PutFrom:
		n.putFrom(ctx, m)
	case *putFetched:
		n.putFetchedDone(ctx, m)
	case *messages.CreateObjectReply:
		n.putReply(ctx, m)
	case storeproto.PutDeadline:
		n.putTimedOut(ctx, m)
	case putCreated:
		n.putCreatedBack(ctx, m)
	case putCopied:
		n.putCopiedIn(ctx, m)
	case *actor.DeadLetterResponse:
		n.peerGone(ctx, m.Target, "was not running")
	case *actor.Stopping:
		n.unregisterFastGet(ctx)
		n.unregisterFastPut(ctx)
		n.endHeld(ctx, true)
		n.stopFetches(ctx)
		n.stopRequests(ctx)
		n.stopGets(ctx)
		n.stopWorkers(ctx)
		n.reqs.senders.Close()
	case *actor.Restarting:
		n.endHeld(ctx, true)
		n.stopFetches(ctx)
	case *messages.Get:
		n.get(ctx, m)
	case *fastRun:
		n.fastHandOff(ctx, m)
	case *fastPutDone:
		n.fastPutDone(ctx, m)
	case *getinto.Request:
		n.getInto(ctx, m)
	case *objectSettled:
		n.settled(ctx, m.obj)
	case *getExpired:
		n.expired(ctx, m)
	case *messages.Delete:
		n.delete(ctx, m)
	case deleteAnswered:
		n.deleteAnsweredBack(ctx, m)
	case *messages.DeleteObjectReply:
		n.deleteReply(ctx, m)
	case storeproto.DeleteDeadline:
		n.deleteTimedOut(ctx, m)
	case *messages.DropObject:
		n.dropObject(ctx, m)
	case *messages.NodeStatus:
		ctx.Respond(n.status())
	case *messages.QueryObject:
		n.queryObject(ctx, m)
	case *messages.WaitObjects:
		n.waitObjects(ctx, m)
	case *fetchLocated:
		n.fetchLocated(ctx, m)
	case *fetchTimerFired:
		n.fetchTimerFired(ctx, m)
	case *fetchStreamEnded:
		n.fetchStreamEnded(ctx, m)
	case *fetchCallerGone:
		n.fetchCallerGone(ctx, m)
	case *fetchWatchDue:
		n.fetchWatchDue(ctx, m)
	case putWatchDue:
		n.putWatchDue(ctx, m)
	case *actor.Terminated:
		n.terminated(ctx, m.GetWho())
	case actor.SystemMessage, actor.AutoReceiveMessage:
	default:
		n.unknown(ctx, m)
	}
}

func (n *StoreNode) started(ctx actor.Context) {
	n.fetches, n.intos = map[string]*fetchRun{}, map[*fetchRun]struct{}{}
	n.fetchDrive, n.putDrive, n.deleteDrive = n.newFetchDriver(), n.newPutDriver(), n.newDeleteDriver()
	n.locator = n.cfg.Locate
	if n.locator == nil {
		n.locator = requestLocate(ctx.ActorSystem())
	}
	n.registerFastGet(ctx)
	n.registerFastPut(ctx)
	if n.gets == nil {
		n.gets = newGetWaiters()
	}
	n.resume(ctx)
}

// stopWorkers stops the reduce workers with this actor (they are not
// its children, which a stop would take along): the node is going away.
// A restart keeps them.
func (n *StoreNode) stopWorkers(ctx actor.Context) {
	for id, workers := range n.reduces {
		for _, wk := range workers {
			ctx.Stop(wk.pid)
		}
		delete(n.reduces, id)
	}
}

func (n *StoreNode) reduceRelease(ctx actor.Context, m *messages.ReduceRelease) {
	if e := n.cfg.Estimator; e != nil {
		e.ObservePeer(m.GetBandwidth())
	}
	for _, wk := range n.reduces[m.GetReduceId()] {
		if !m.GetKeepTarget() {
			// In this turn, not when the worker gets to it: the messages
			// after this one (a re-planned run's tasks and Gets of the
			// target) must find nothing of this run (see positionOutput).
			if o, target := wk.out.release(); o != nil {
				dropReleased(n.cfg.Store, o, target, m.GetReduceId())
			}
		}
		ctx.Send(wk.pid, m)
	}
	delete(n.reduces, m.GetReduceId())
	// The copy of the target this Reduce's run made here, found by id:
	// its worker may have stopped already, taking its record above with
	// it (its coordinator's Terminated, a system message, overtook this
	// release). It stays only as the result: kept, and complete (its
	// commit came before this release, or it is a gather's that
	// finished). A root's target that no commit completed is no result.
	if o := n.cfg.Store.Lookup(m.GetTargetId()); o != nil && m.GetTargetId() != "" {
		_, done, _ := o.Progress()
		if rid, _ := o.Producer(); rid == m.GetReduceId() && !(m.GetKeepTarget() && done) {
			dropReleased(n.cfg.Store, o, true, rid)
		}
	}
	if m.GetTargetId() != "" {
		n.settleHeld(ctx, m.GetTargetId())
	}
}

func (n *StoreNode) reduceInvalidate(ctx actor.Context, m *messages.ReduceInvalidate) {
	if wk := n.reduces[m.GetReduceId()][m.GetPosition()]; wk != nil {
		ctx.Send(wk.pid, m)
	}
}

// reduceCommit completes the target a tree root on this node wrote whole
// for the generation its coordinator took (messages.ReduceCommit): its
// readers finish, and Gets here return it. It is done here, in this
// turn, not by the root's worker: the coordinator stops once it has
// answered, and its Terminated, a system message, can reach the worker
// before this (the worker then keeps the held target for it), and the
// release that follows it finds the target complete. A commit of a
// generation that did not write the copy completes nothing.
func (n *StoreNode) reduceCommit(ctx actor.Context, m *messages.ReduceCommit) {
	if m.GetMarkOnly() {
		// A participant's copy of an AllReduce's result: it records the
		// run, and a copy this node makes later is the fetch's own (the
		// coordinator's Get of the result came first).
		o := n.cfg.Store.Lookup(m.GetTargetId())
		if o != nil {
			o.MarkRun(m.GetReduceId(), m.GetReducedIds())
		}
		if ctx.Sender() != nil {
			ctx.Respond(&messages.ReduceCommitted{ReduceId: m.GetReduceId(), TargetId: m.GetTargetId(), Whole: o != nil, NodeId: n.cfg.Self.GetNodeId()})
		}
		return
	}
	whole := n.cfg.Store.CommitTarget(m.GetTargetId(), m.GetReduceId(), m.GetGeneration(), m.GetReducedIds())
	n.settleHeld(ctx, m.GetTargetId())
	if !whole {
		n.cfg.Log.WithFields(map[string]any{"reduce": m.GetReduceId(), "target": m.GetTargetId(), "generation": m.GetGeneration()}).
			Info("a committed reduce target is not here whole (dropped, or its node's store failed): the result is lost")
	}
	if ctx.Sender() != nil {
		ctx.Respond(&messages.ReduceCommitted{ReduceId: m.GetReduceId(), TargetId: m.GetTargetId(), Whole: whole, NodeId: n.cfg.Self.GetNodeId()})
	}
}

// uncommittedOf reports whether o is a copy of a Reduce's target that
// run reduceID wrote and no commit completed.
func uncommittedOf(o *objstore.Object, reduceID string) bool {
	if o == nil || !o.Uncommitted() {
		return false
	}
	p, _ := o.Producer()
	return p == reduceID
}

// dropObject frees a copy the directory dropped. Only a drop that says
// DELETED is a deletion (see directory's deletedDrop); one without a
// reason frees a copy the directory disagrees with.
func (n *StoreNode) dropObject(ctx actor.Context, m *messages.DropObject) {
	reason := m.GetReason()
	if reason != nil && errors.Is(reason, messages.ErrDeleted) {
		n.noteDeleted(m.GetObjectId())
	}
	if reason == nil {
		reason = messages.Errorf(messages.ErrorCode_DELETED, "object %q was deleted", m.GetObjectId())
	}
	if obj := n.cfg.Store.Lookup(m.GetObjectId()); obj != nil && errors.Is(reason, messages.ErrLost) && obj.IsWhole() {
		// A loss drops the partial copies, which can no longer complete
		// from the failed senders; this one completed as the drop came
		// (its stream outran the failure). Its report, sent or coming,
		// ends the loss at the shard: freeing it would lose the object's
		// last whole copy.
		n.cfg.Log.WithField("object", m.GetObjectId()).Info("kept a whole copy of an object its directory shard found lost: its completion crossed the loss")
		return
	}
	if rid := m.GetReduceId(); rid != "" && !uncommittedOf(n.cfg.Store.Lookup(m.GetObjectId()), rid) {
		// Only the uncommitted copy that run made: by now the copy here
		// may be another attempt's of the same target, or committed.
		return
	}
	if obj := n.cfg.Store.Lookup(m.GetObjectId()); obj != nil && n.cfg.Store.Remove(m.GetObjectId(), reason) {
		n.cfg.Log.WithField("object", m.GetObjectId()).Debug("dropped deleted object")
		n.fetchDropped(ctx, obj)
	}
	n.settleHeld(ctx, m.GetObjectId())
	if ctx.Sender() != nil {
		// Asked by a Delete's caller node: the copy is gone here.
		ctx.Respond(&messages.DeleteObjectReply{ObjectId: m.GetObjectId(), RequestId: m.GetRequestId()})
	}
}

func (n *StoreNode) queryObject(ctx actor.Context, m *messages.QueryObject) {
	if err := n.validate(m.GetObjectId()); err != nil {
		ctx.Respond(&messages.ObjectInfo{ObjectId: m.GetObjectId(), Error: err})
		return
	}
	ctx.Forward(n.cfg.ShardFor(m.GetObjectId()))
}

// terminated forgets a watched actor that stopped: a shard or peer that
// Puts and Deletes wait on, or a fetch (see fetchPeerGone), a reduce
// worker.
func (n *StoreNode) terminated(ctx actor.Context, who *actor.PID) {
	n.peerGone(ctx, who, "stopped (its node failed, left or stopped)")
	n.fetchPeerGone(ctx, who)
	for id, workers := range n.reduces {
		for pos, wk := range workers {
			if samePID(wk.pid, who) {
				delete(workers, pos)
			}
		}
		if len(workers) == 0 {
			delete(n.reduces, id)
		}
	}
}

func (n *StoreNode) unknown(ctx actor.Context, m any) {
	entry := n.cfg.Log.WithField("type", actorutil.TypeName(m))
	if ctx.Sender() != nil {
		entry = entry.WithField("from", ctx.Sender().String())
	}
	entry.Warn("store node dropped an unknown message")
}

// validate checks an object id from an application.
func (n *StoreNode) validate(id string) *messages.Error {
	return directory.ValidateApplicationID(id, n.cfg.MaxObjectIDLen)
}

// internalPrefix starts the ids of Reduce intermediates.
const internalPrefix = directory.InternalPrefix

// noteDeleted remembers an application object's deletion in the store,
// for directory shards that restart or move (see republish).
func (n *StoreNode) noteDeleted(id string) {
	if !strings.HasPrefix(id, internalPrefix) {
		n.cfg.Store.NoteDeleted(id)
	}
}

// reply sends to the requester from any goroutine; a tell (no sender) has
// nobody to answer.
func reply(system *actor.ActorSystem, to *actor.PID, msg proto.Message) {
	if to != nil {
		system.Root.Send(to, msg)
	}
}

// resume restarts the fetches of incomplete copies found in the store:
// after an actor restart their sessions are gone but their bytes are not,
// so each continues from its current offset.
func (n *StoreNode) resume(ctx actor.Context) {
	for _, o := range n.cfg.Store.Objects() {
		_, done, err := o.Progress()
		if done || err != nil || o.Pinned() {
			continue
		}
		n.startFetch(ctx, o, time.Now().Add(n.cfg.DefaultTimeout), "")
		n.cfg.Log.WithField("object", o.ID()).Info("resuming fetch after restart")
	}
}

func (n *StoreNode) unpublish(system *actor.ActorSystem, evicted []string) {
	for _, id := range evicted {
		n.cfg.Log.WithField("object", id).Debug("evicted")
		system.Root.Send(n.cfg.ShardFor(id), &messages.UnpublishLocation{ObjectId: id, Node: n.cfg.Self})
	}
}

func (n *StoreNode) get(ctx actor.Context, m *messages.Get) {
	id := m.GetObjectId()
	if err := n.validate(id); err != nil {
		reply(ctx.ActorSystem(), ctx.Sender(), &messages.GetReply{ObjectId: id, Error: err})
		return
	}
	if m.GetPrefetch() && m.GetPushed() && n.storePushed(ctx, m) {
		return
	}
	n.getUntil(ctx, m, ctx.Sender(), time.Now().Add(n.cfg.timeout(m.GetTimeoutMs())))
}

// storePushed serves a prefetch that came with the object's bytes (an
// inline Reduce's result) by storing them, pinned if asked, and reports
// whether it did.
// It does not when this node holds or is fetching a copy already: the
// ordinary Get waits for that one, which its fetch registers. A copy
// stored here is registered by the coordinator (see messages.Get.pushed),
// which saves every participant a Locate of the result at the one shard
// they would all ask at once.
func (n *StoreNode) storePushed(ctx actor.Context, m *messages.Get) bool {
	id, data := m.GetObjectId(), m.GetPushedData()
	size, fingerprint := int64(len(data)), fingerprint.Of(data)
	var obj *objstore.Object
	var evicted []string
	if m.GetPin() {
		if n.cfg.Store.Lookup(id) != nil {
			return false
		}
		var err error
		obj, evicted, err = n.cfg.Store.Create(id, size, fingerprint)
		if err != nil {
			reply(ctx.ActorSystem(), ctx.Sender(), &messages.GetReply{ObjectId: id, Error: messages.AsError(err)})
			return true
		}
	} else {
		var created bool
		if obj, created = n.cfg.Store.Reserve(id); !created {
			return false
		}
		var err error
		if evicted, err = n.cfg.Store.Allocate(obj, size, fingerprint); err != nil {
			reply(ctx.ActorSystem(), ctx.Sender(), &messages.GetReply{ObjectId: id, Error: messages.AsError(err)})
			return true
		}
	}
	fail := func(err error) {
		n.cfg.Store.Abort(obj, err)
		reply(ctx.ActorSystem(), ctx.Sender(), &messages.GetReply{ObjectId: id, Error: messages.AsError(err)})
	}
	n.unpublish(ctx.ActorSystem(), evicted)
	if err := obj.NewWriter().Append(data); err != nil {
		fail(err)
		return true
	}
	if err := n.cfg.Store.Complete(obj); err != nil {
		fail(err)
		return true
	}
	reply(ctx.ActorSystem(), ctx.Sender(), &messages.GetReply{ObjectId: id})
	return true
}

// getInto serves a GetInto (storenode.Client.GetInto). An object this
// node holds or is receiving is answered as a read-only Get, which the
// caller copies into its buffer; any other is fetched by a run of its own
// (startInto) straight into the caller's buffer, keeping no copy here.
// Such runs are not in n.fetches: they are no fetch of the node's copy,
// and several may run for one object (one per caller, each into its own
// buffer) beside a Get's fetch of it.
func (n *StoreNode) getInto(ctx actor.Context, m *getinto.Request) {
	id := m.ObjectID
	fail := func(err *messages.Error) {
		ctx.Send(ctx.Sender(), &getinto.Reply{ObjectID: id, Err: err})
	}
	switch {
	case ctx.Sender() == nil:
		return // nobody to answer, nobody to fetch for
	case m.Dst == nil:
		fail(messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "GetInto of %q without a buffer", id))
		return
	case !time.Now().Before(m.Deadline):
		fail(messages.AsError(context.DeadlineExceeded))
		return
	}
	if err := n.validate(id); err != nil {
		fail(err)
		return
	}
	if o := n.cfg.Store.Lookup(id); o != nil {
		if size := o.Size(); size > m.Dst.Len() {
			// Known already: no need to wait for a copy that cannot fit.
			fail(messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "object %q is %d bytes; the buffer holds only %d", id, size, m.Dst.Len()))
			return
		}
		n.getIntoLocal(ctx, m, ctx.Sender())
		return
	}
	n.startInto(ctx, m, ctx.Sender())
}

// getIntoLocal answers a GetInto from this node's copy, once it is
// complete, as a read-only Get.
func (n *StoreNode) getIntoLocal(ctx actor.Context, m *getinto.Request, caller *actor.PID) {
	if n.cfg.Store.Lookup(m.ObjectID) == nil {
		// The directory named this node's copy, which is gone already:
		// the caller asks again (a placement race, like a moving shard).
		ctx.Send(caller, &getinto.Reply{ObjectID: m.ObjectID, Err: messages.Errorf(messages.ErrorCode_UNAVAILABLE,
			"the directory names %s's copy of %q, which its store no longer holds", n.cfg.Self.GetNodeId(), m.ObjectID)})
		return
	}
	n.getUntil(ctx, &messages.Get{ObjectId: m.ObjectID, ReadOnly: true}, caller, m.Deadline)
}

// getUntil serves a Get by deadline: at once if the object is here (or
// failed), else when it settles (objectSettled) or the deadline passes
// (getExpired), whichever comes first. No goroutine waits: the object
// and one timer per Get send this actor a message.
func (n *StoreNode) getUntil(ctx actor.Context, m *messages.Get, sender *actor.PID, deadline time.Time) {
	id := m.GetObjectId()
	if !time.Now().Before(deadline) {
		// Asked again after a RESET, too late.
		reply(ctx.ActorSystem(), sender, &messages.GetReply{ObjectId: id, Error: messages.AsError(context.DeadlineExceeded)})
		return
	}
	w := &waitingGet{m: m, sender: sender, deadline: deadline}
	if sender != nil && sender.GetAddress() != ctx.ActorSystem().Address() {
		w.source = sender.GetAddress()
	}
	// Checked before Reserve: a refused Get starts no fetch. A Get of a
	// complete copy parks nothing, so it is never refused.
	if !n.completeHere(id) {
		if err := n.gets.admit(w.source); err != nil {
			reply(ctx.ActorSystem(), sender, &messages.GetReply{ObjectId: id, Error: err})
			return
		}
	}
	obj, created := n.cfg.Store.Reserve(id)
	if created {
		n.startFetch(ctx, obj, deadline, m.GetTraceParent())
	} else if run := n.fetches[id]; run != nil && run.obj == obj {
		run.p.Extend(deadline)
	}
	if _, done, err := obj.Progress(); done || err != nil {
		n.answer(ctx, w, obj, err)
		return
	}
	system, self := ctx.ActorSystem(), ctx.Self()
	w.timer = time.AfterFunc(time.Until(deadline), func() { system.Root.Send(self, &getExpired{obj: obj, w: w}) })
	n.gets.add(obj, w, func() { system.Root.Send(self, &objectSettled{obj: obj}) })
}

// tooBigToReply refuses a Get whose reply would carry more bytes to
// another actor system than its remote message may (Config.MaxRemoteReply).
func (n *StoreNode) tooBigToReply(ctx actor.Context, to *actor.PID, obj *objstore.Object) *messages.Error {
	limit := n.cfg.MaxRemoteReply
	if limit <= 0 || to == nil || to.GetAddress() == ctx.ActorSystem().Address() {
		return nil
	}
	size, _, _ := obj.Progress()
	if size <= int64(limit) {
		return nil
	}
	return messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT,
		"object %q is %d bytes; a Get's reply to another actor system (%s) is one Proto.Actor remote message of at most %d bytes: Get it from an actor in the member's own actor system (Member.Spawn), through a member's Client, from another process through a cluster.Dial client (made from the actor's own actor system: cluster.WithActorSystem), whose bytes move on the data plane, or in slices",
		obj.ID(), size, to.GetAddress(), limit)
}

// completeHere says whether this node holds a complete copy of id.
func (n *StoreNode) completeHere(id string) bool {
	o := n.cfg.Store.Lookup(id)
	if o == nil {
		return false
	}
	_, done, err := o.Progress()
	return done && err == nil
}

// settled answers the Gets waiting on obj, which is complete or failed
// (or was, and was rewound since: they wait on).
func (n *StoreNode) settled(ctx actor.Context, obj *objstore.Object) {
	system, self := ctx.ActorSystem(), ctx.Self()
	ws, err := n.gets.settle(obj, func() { system.Root.Send(self, &objectSettled{obj: obj}) })
	for _, w := range ws {
		w.timer.Stop()
		n.answer(ctx, w, obj, err)
	}
}

// stopGets answers the Gets waiting for their objects: the node is
// stopping, and their object's notice or deadline would reach a stopped
// actor, leaving the requester waiting out its own deadline.
func (n *StoreNode) stopGets(ctx actor.Context) {
	// Undelivered: this node will not serve them, and a requester treats
	// them as it treats a request to a node that is gone (a client does
	// not ask this node again).
	stopped := &messages.Error{Code: messages.ErrorCode_UNAVAILABLE, UndeliveredTo: ctx.Self().GetId(),
		Message: "store node " + n.cfg.Self.GetNodeId() + " stopped before the object was ready"}
	for _, w := range n.gets.takeAll() {
		w.timer.Stop()
		reply(ctx.ActorSystem(), w.sender, &messages.GetReply{ObjectId: w.m.GetObjectId(), Error: stopped})
	}
}

// expired answers a Get whose deadline passed before its object settled.
func (n *StoreNode) expired(ctx actor.Context, m *getExpired) {
	if n.gets.remove(m.obj, m.w) {
		reply(ctx.ActorSystem(), m.w.sender, &messages.GetReply{ObjectId: m.obj.ID(), Error: messages.AsError(context.DeadlineExceeded)})
	}
}

// answer replies to a Get whose object settled with err (nil: complete).
func (n *StoreNode) answer(ctx actor.Context, w *waitingGet, obj *objstore.Object, err error) {
	m := w.m
	again := errors.Is(err, messages.ErrReset) || objstore.Evicted(err) || errors.Is(err, messages.ErrCanceled)
	// Only once the store let the settled copy go: asked again, a copy
	// still there would settle this Get the same way at once, and again.
	if again && n.cfg.Store.Lookup(obj.ID()) != obj {
		// The copy was stale (a Reduce re-created its target), or it was
		// evicted to make room between its completion and this answer (a
		// store full of cached copies), or the run that filled it was
		// canceled by someone else (a fast Get whose caller returned, a
		// run another superseded; a waiting Get's own caller never
		// cancels it here, it expires): ask this node again, within the
		// same deadline. Answered, an eviction was NOT_FOUND for an object
		// that exists, and a cancel was another caller's.
		n.getUntil(ctx, m, w.sender, w.deadline)
		return
	}
	r := &messages.GetReply{ObjectId: m.GetObjectId()}
	if err != nil {
		r.Error = messages.AsError(err)
	} else if m.GetPrefetch() {
		// The object is here; the caller did not want the bytes.
	} else if e := n.tooBigToReply(ctx, w.sender, obj); e != nil {
		r.Error = e
	} else if b, err := obj.Bytes(); objstore.Evicted(err) {
		n.getUntil(ctx, m, w.sender, w.deadline) // evicted since it completed, as above
		return
	} else if err != nil {
		r.Error = messages.AsError(err)
	} else if m.GetReadOnly() {
		r.Data = b
	} else {
		r.Data = bytes.Clone(b)
		if r.Data == nil {
			r.Data = []byte{}
		}
	}
	reply(ctx.ActorSystem(), w.sender, r)
}

func (n *StoreNode) reduce(ctx actor.Context, m *messages.Reduce) {
	if err := reduction.ValidateReduce(m, n.cfg.MaxObjectIDLen); err != nil {
		reply(ctx.ActorSystem(), ctx.Sender(), &messages.ReduceReply{TargetId: m.GetTargetId(), Error: err})
		return
	}
	if ms := n.cfg.timeout(m.GetTimeoutMs()).Milliseconds(); ms != m.GetTimeoutMs() {
		// The coordinator and the workers take timeout_ms as it comes.
		m = proto.CloneOf(m)
		m.TimeoutMs = ms
	}
	var call [8]byte
	_, _ = rand.Read(call[:])
	start := &messages.StartReduce{Reduce: m, Caller: n.cfg.Self, CallId: hex.EncodeToString(call[:])}
	shard := n.cfg.ShardFor(m.GetTargetId())
	if ctx.Sender() == nil {
		ctx.Send(shard, start)
		return
	}
	// The caller waits through a watched request rather than letting the
	// coordinator answer it directly: the coordinator runs on the member
	// that hosts the target's shard, and if that member dies (SIGKILL, a
	// lost host) nothing would ever answer. Watching the shard turns the
	// loss of its member into UNAVAILABLE at once instead of a wait for
	// the caller's whole deadline.
	sender, system, self := ctx.Sender(), ctx.ActorSystem(), ctx.Self()
	// A little past the coordinator's own deadline, so that its TIMEOUT,
	// which names the sources that never appeared, arrives first.
	rctx, cancel := context.WithTimeout(context.Background(), time.Duration(m.GetTimeoutMs())*time.Millisecond+time.Second)
	withdrawable := &reduceCall{id: start.GetCallId()}
	forget := n.reduceCalls.add(sender, m.GetTargetId(), withdrawable)
	go func() {
		defer cancel()
		defer forget()
		res, err := n.startReduce(rctx, system, self, shard, start, withdrawable)
		if err != nil {
			reply(system, sender, &messages.ReduceReply{TargetId: m.GetTargetId(), Error: messages.AsError(err)})
			return
		}
		if r, ok := res.(proto.Message); ok {
			reply(system, sender, r)
			return
		}
		reply(system, sender, &messages.ReduceReply{TargetId: m.GetTargetId(),
			Error: messages.Errorf(messages.ErrorCode_INTERNAL, "unexpected reply %T to StartReduce", res)})
	}()
}

// Bounds of startReduce's pause between asking a stopped shard and its
// new home.
const (
	reshardFirstWait = 5 * time.Millisecond
	reshardMaxWait   = 200 * time.Millisecond
)

// startReduce asks the target's shard to run the Reduce and waits for its
// answer. A shard that stops before it answers (its member failed or
// left) took the Reduce's coordinator with it: the Reduce starts again at
// the shard's new home, with the time left and the same call id, for as
// long as this node runs. That is safe. Nothing of the dead attempt is
// readable unless its coordinator committed it: an uncommitted root
// holds its target's last byte back, and the rebuilt shard drops such
// copies (the attempt's own, by its reduce id). A committed result is
// republished with its call id and sources, and the rebuilt shard, which
// starts no Reduce before every store node has republished, answers the
// new attempt with it. Otherwise the new coordinator reserves, reduces
// and commits afresh, so its answer names exactly the sources of the
// target it makes. Only the caller's own member failing, or the sources
// running out, fails such a Reduce.
//
// A call its caller canceled (nil: none can be) starts no new attempt.
func (n *StoreNode) startReduce(ctx context.Context, system *actor.ActorSystem, self, shard *actor.PID, start *messages.StartReduce, call *reduceCall) (any, error) {
	target := start.GetReduce().GetTargetId()
	deadline, _ := ctx.Deadline()
	limit := deadline.Add(-time.Second) // the coordinator's own deadline (see reduce)
	wait := reshardFirstWait
	for {
		res, err := actorutil.Request(ctx, system.Root, shard, start)
		if r, ok := res.(*messages.ReduceReply); ok && r.GetShardStopped() {
			// The coordinator stopped with its shard (moved, restarted).
			err = messages.AsError(r.GetError())
		} else if err == nil || !errors.Is(err, messages.ErrUnavailable) {
			return res, err
		}
		// The request failed itself, or the coordinator stopped with its
		// shard (any other answer that is an error is the coordinator's
		// verdict and stands): the shard stopped or is not running. Its
		// new home may be named before the shard runs there, or only once
		// this member's view drops the dead one: ask again, with a
		// growing pause, until the deadline.
		if !n.running(system, self) || time.Until(limit) <= wait {
			return nil, err
		}
		if call != nil && call.canceled.Load() {
			return nil, messages.Errorf(messages.ErrorCode_CANCELED, "reduce into %q: its caller canceled it, and its coordinator stopped before it answered", target)
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(wait):
		}
		wait = min(2*wait, reshardMaxWait)
		if !n.running(system, self) {
			return nil, err
		}
		shard = n.cfg.ShardFor(target)
		left := time.Until(limit).Milliseconds()
		if left <= 0 {
			return nil, err
		}
		n.cfg.Log.WithFields(map[string]any{"target": target, "call": start.GetCallId(), "shard": shard.String(), "error": err, "left_ms": left}).
			Info("reduce: the target's shard stopped before it answered; starting the Reduce again at its new home")
		r := proto.CloneOf(start.GetReduce())
		r.TimeoutMs = left
		start = &messages.StartReduce{Reduce: r, Caller: start.GetCaller(), CallId: start.GetCallId()}
	}
}

// running reports whether this store node still runs (its actor system
// up, its store not failed, the actor itself registered): a Reduce it
// started is worth starting again only then.
func (n *StoreNode) running(system *actor.ActorSystem, self *actor.PID) bool {
	if system.IsStopped() || n.cfg.Store.Failed() != nil {
		return false
	}
	_, ok := system.ProcessRegistry.Get(self)
	return ok
}

// reduceTaskBatch runs every task of a batch, in its order, as if each
// had come alone (see reduceTask): its listed tasks, then those its ring
// share states (reduction.ExpandRing). A task that cannot run is
// answered as its position's error and the others run.
func (n *StoreNode) reduceTaskBatch(ctx actor.Context, m *messages.ReduceTaskBatch) {
	now := time.Now()
	tasks, err := reduction.BatchTasks(m)
	for _, t := range tasks {
		n.reduceTask(ctx, t, now)
	}
	if err != nil {
		// A share that names no run: answered as its gather's start, the
		// one position of its that the coordinator awaits whatever else.
		sh := m.GetRing()
		n.cfg.Log.WithFields(map[string]any{"reduce": sh.GetReduceId(), "error": err}).Warn("refused a sliced ring share")
		if ctx.Sender() != nil {
			ctx.Send(ctx.Sender(), &messages.ReduceTaskStarted{ReduceId: sh.GetReduceId(), Position: sh.GetGatherPosition(),
				Generation: 1, Error: err})
		}
	}
}

// reduceTask runs a tree position: a new worker, or a newer generation
// for the worker already there (it rewinds and reduces again). A task
// that names no position to run is answered at once with
// INVALID_ARGUMENT as that position's start, which fails its Reduce
// (see storeproto.CheckTask); received is when it was taken from the
// mailbox (the worker's debug timeline).
func (n *StoreNode) reduceTask(ctx actor.Context, m *messages.ReduceTask, received time.Time) {
	if err := storeproto.CheckTask(m); err != nil {
		n.cfg.Log.WithFields(map[string]any{"reduce": m.GetReduceId(), "position": m.GetPosition(), "error": err}).Warn("refused a reduce task")
		if ctx.Sender() != nil {
			ctx.Send(ctx.Sender(), &messages.ReduceTaskStarted{ReduceId: m.GetReduceId(), Position: m.GetPosition(),
				Generation: m.GetGeneration(), Error: err})
		}
		return
	}
	workers := n.reduces[m.GetReduceId()]
	if wk := workers[m.GetPosition()]; wk != nil {
		ctx.Send(wk.pid, m)
		return
	}
	if workers == nil {
		workers = map[int32]*workerRef{}
		n.reduces[m.GetReduceId()] = workers
	}
	// Beside this actor, not a child (see StoreNode.reduces).
	out := &positionOutput{}
	pid := ctx.ActorSystem().Root.Spawn(newReduceWorkerProps(n.cfg, m, ctx.Sender(), out, received))
	ctx.Watch(pid)
	workers[m.GetPosition()] = &workerRef{pid: pid, out: out}
}

// republish sends the directory every copy this node holds that belongs
// to the given shards, and the ids of theirs it saw deleted: a shard that
// restarted or moved rebuilds from them. They go to the shard that asked,
// which may be newer than this node's shard table.
func (n *StoreNode) republish(ctx actor.Context, m *messages.Republish) {
	count := int(m.GetShardCount())
	if count <= 0 {
		return
	}
	if n.fast != nil {
		n.fast.republished.Add(1) // see fastStored
	}
	want := map[int]bool{}
	for _, s := range m.GetShards() {
		want[int(s)] = true
	}
	// Deletions first: a copy that missed its DropObject is then dropped
	// on arrival instead of being offered to a receiver meanwhile.
	n.republishDeleted(ctx, want, count)
	var held []string
	for _, o := range n.cfg.Store.Objects() {
		id := o.ID()
		if strings.HasPrefix(id, internalPrefix) || !want[directory.ShardIndex(id, count)] {
			continue // reduce intermediates are not in the directory
		}
		if ctx.Sender() != nil && o.HeldWhole() {
			held = append(held, id) // its commit may be on its way
			continue
		}
		pub, ok := o.Publication(n.cfg.Self)
		if !ok {
			continue
		}
		to := ctx.Sender()
		if to == nil {
			to = n.cfg.ShardFor(id)
		}
		ctx.Send(to, pub)
	}
	// The asker (a rebuilt shard) learns that it has everything now: the
	// publications above reach it first (one sender, one receiver, in
	// order), and it decides whether a copy is the last one only then.
	hosted := n.hostedFor(ctx, m.GetShards())
	switch {
	case len(held) > 0 || len(hosted) > 0:
		n.hold(ctx, ctx.Sender(), held, hosted, count)
	case ctx.Sender() != nil:
		ctx.Respond(&messages.RepublishDone{Node: n.cfg.Self})
	}
}

// tombstoneBatch bounds the ids of one Tombstones message (a remote
// message must stay well under the gRPC message limit).
const tombstoneBatch = 256 << 10

// republishDeleted sends the remembered deletions of the wanted shards,
// and what this member's shards kept here (kept.go), batched per shard,
// to the asker (or, for a tell, to where each batch's shard is placed).
func (n *StoreNode) republishDeleted(ctx actor.Context, want map[int]bool, count int) {
	n.republishDeletedTo(ctx, ctx.Sender(), want, count)
}

// republishDeletedTo is republishDeleted to asker (nil: a tell).
func (n *StoreNode) republishDeletedTo(ctx actor.Context, asker *actor.PID, want map[int]bool, count int) {
	batches := map[int]*messages.Tombstones{}
	size := map[int]int{}
	send := func(shard int) {
		b := batches[shard]
		delete(batches, shard)
		size[shard] = 0
		to := asker
		if to == nil {
			// A tell after a change of placement goes where an id of the
			// batch is placed; one that names none (only the amnesia) is
			// left to the shard's own Republish request.
			var id string
			switch {
			case len(b.GetObjectIds()) > 0:
				id = b.GetObjectIds()[0]
			case len(b.GetLostIds()) > 0:
				id = b.GetLostIds()[0]
			default:
				return
			}
			to = n.cfg.ShardFor(id)
		}
		ctx.Send(to, b)
	}
	batch := func(shard int) *messages.Tombstones {
		b := batches[shard]
		if b == nil {
			b = &messages.Tombstones{}
			batches[shard] = b
		}
		return b
	}
	add := func(shard int, id string, lost bool) {
		b := batch(shard)
		if lost {
			b.LostIds = append(b.LostIds, id)
		} else {
			b.ObjectIds = append(b.ObjectIds, id)
		}
		if size[shard] += len(id) + 8; size[shard] >= tombstoneBatch {
			send(shard)
		}
	}
	for _, id := range n.cfg.Store.DeletedIDs() {
		if shard := directory.ShardIndex(id, count); want[shard] {
			add(shard, id, false)
		}
	}
	n.keptFor(want, count, func(shard int, id string) { add(shard, id, true) }, batch)
	for shard := range batches {
		send(shard)
	}
}

// status is what `hoplite status` shows of this node.
func (n *StoreNode) status() *messages.NodeStatusReply {
	u := n.cfg.Store.Usage()
	r := &messages.NodeStatusReply{Node: n.cfg.Self, Capacity: u.Capacity, Used: u.Used, Pinned: u.Pinned, Objects: int32(u.Objects)}
	if e := n.cfg.Estimator; e != nil {
		l, b, ls, bs := e.Estimate()
		r.LatencyUs, r.BandwidthBytesPerSecond = l.Microseconds(), b
		r.LatencySamples, r.BandwidthSamples = int32(ls), int32(bs)
	}
	return r
}
