package storeactor

import (
	"bytes"
	"context"
	"errors"
	"time"

	"github.com/hoplite-go/hoplite/internal/objstore"
	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"github.com/sirupsen/logrus"

	"github.com/hoplite-go/hoplite/fingerprint"
	"github.com/hoplite-go/hoplite/internal/actors/shell"
	"github.com/hoplite-go/hoplite/internal/actorutil"
	"github.com/hoplite-go/hoplite/internal/directory"
	"github.com/hoplite-go/hoplite/internal/localput"
	"github.com/hoplite-go/hoplite/internal/outbox"
	"github.com/hoplite-go/hoplite/internal/storeproto"
	"github.com/hoplite-go/hoplite/messages"
)

// requests is the store node's table of Puts and Deletes in flight, by
// id. It lives outside the actor's restartable state, like the Store:
// the answers, the deadline timers and the copy-ins' reports are
// addressed to the node's PID, which a restart keeps, so a request in
// flight survives a restart of its node's actor.
type requests struct {
	next    uint64
	runs    map[uint64]*putRun
	deletes map[uint64]*deleteRun
	routes  map[uint64]deleteRoute // a Delete's requests to shard and nodes, by request id
	watched map[string]bool        // shards and nodes this node watches, by PID
	// senders are the senders of the requests to shards and nodes, one
	// per peer: a DeadLetterResponse names the peer that was not running.
	senders actorutil.Senders
}

func newRequests() *requests {
	return &requests{runs: map[uint64]*putRun{}, deletes: map[uint64]*deleteRun{},
		routes: map[uint64]deleteRoute{}, watched: map[string]bool{}}
}

// newID names a request.
func (r *requests) newID() uint64 {
	r.next++
	return r.next
}

// watch watches pid once: its end fails what waits for it. Watches are
// kept (a node talks to a bounded set of shards and peers) until the
// peer's end, so no request can miss it.
func (n *StoreNode) watch(ctx actor.Context, pid *actor.PID) {
	if key := actorutil.Key(pid); !n.reqs.watched[key] {
		n.reqs.watched[key] = true
		ctx.Watch(pid)
	}
}

// watchWhenLate watches pid for a request now waiting on it: an actor on
// this member at once, one on another member only if the answer is still
// missing after actorutil.RemoteWatchDelay, when the returned timer sends
// due to this node, whose handler then watches it if it still waits.
// Nil when there is nothing to wait for (watched, or watched already).
func (n *StoreNode) watchWhenLate(ctx actor.Context, pid *actor.PID, due any) *time.Timer {
	system := ctx.ActorSystem()
	if !actorutil.IsRemote(system, pid) {
		n.watch(ctx, pid)
		return nil
	}
	if n.reqs.watched[actorutil.Key(pid)] {
		return nil
	}
	self := ctx.Self()
	return time.AfterFunc(actorutil.RemoteWatchDelay(), func() { system.Root.Send(self, due) })
}

// putRun is one registration and what its shell holds for it.
type putRun struct {
	reg   *storeproto.PutRegistration
	obj   *objstore.Object
	data  []byte
	owned bool       // data is the node's own buffer (a PutFrom's): the copy adopts it
	shard *actor.PID // where the CreateObject went; its end fails the Put
	// recorded: the shard recorded the copy COMPLETE at its registration
	// (storeproto.PutStep.Recorded); republished is the node's count of
	// Republish requests served when the registration started (see
	// publishRecorded).
	recorded    bool
	republished uint64
	timer       *time.Timer
	// watchDue watches a shard on another member if the CreateObject is
	// still unanswered after actorutil.RemoteWatchDelay (see locate).
	watchDue *time.Timer
}

// putWatchDue: a Put's CreateObject to a shard on another member is
// still unanswered after actorutil.RemoteWatchDelay.
type putWatchDue struct {
	id    uint64
	shard *actor.PID
}

// putCopied is a copy-in's report: whether the copy is complete, else
// the Put's answer as putEnded decided it.
type putCopied struct {
	id       uint64
	complete bool
	err      *messages.Error
}

// A copy-in may report after its node stopped: that is expected.
func (putCopied) IgnoreDeadLetterLogging() {}

func (n *StoreNode) put(ctx actor.Context, m *messages.Put) {
	if req, ok := n.admitPut(ctx, m); ok {
		n.startPut(ctx, req, m.GetData(), m.GetTimeoutMs(), fingerprint.Of(m.GetData()))
	}
}

// putLocal is a Put from a Client in this process that computed the
// fingerprint (see localput).
func (n *StoreNode) putLocal(ctx actor.Context, m *localput.Request) {
	if req, ok := n.admitPut(ctx, m.Put); ok {
		n.startPut(ctx, req, m.Put.GetData(), m.Put.GetTimeoutMs(), m.Fingerprint)
	}
}

// admitPut is Put m's request, or false once m is answered: an invalid
// id, or more bytes than the node holds (refused before anything reads
// them).
func (n *StoreNode) admitPut(ctx actor.Context, m *messages.Put) (storeproto.PutRequest, bool) {
	id, size := m.GetObjectId(), int64(len(m.GetData()))
	req := storeproto.PutRequest{ObjectID: id, Requester: requester(ctx)}
	if err := n.validate(id); err != nil {
		n.answerPut(ctx, req, err)
		return req, false
	}
	if size > n.cfg.Store.Capacity() {
		n.answerPut(ctx, req, messages.Errorf(messages.ErrorCode_CAPACITY, "object %q of %d bytes exceeds the node capacity of %d bytes", id, size, n.cfg.Store.Capacity()))
		return req, false
	}
	return req, true
}

// storeReduced stores a result the coordinator computed without a tree:
// a Put of the Reduce's reserved target.
func (n *StoreNode) storeReduced(ctx actor.Context, m *messages.StoreReduced) {
	req := storeproto.PutRequest{ObjectID: m.GetTargetId(), ReduceID: m.GetReduceId(), Reduced: true,
		ReducedIDs: m.GetReducedIds(), Requester: requester(ctx)}
	// Checked here as a Put is (admitPut): it comes from another
	// process, and an id no application may use made a local copy first
	// and a registration the directory refused.
	switch id := m.GetTargetId(); {
	case n.validate(id) != nil:
		n.answerPut(ctx, req, n.validate(id))
		return
	case m.GetReduceId() == "":
		n.answerPut(ctx, req, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "StoreReduced of %q without a reduce id", id))
		return
	case int64(len(m.GetData())) > n.cfg.Store.Capacity():
		n.answerPut(ctx, req, messages.Errorf(messages.ErrorCode_CAPACITY, "reduced %q of %d bytes exceeds the node capacity of %d bytes", id, len(m.GetData()), n.cfg.Store.Capacity()))
		return
	}
	n.startPut(ctx, req, m.GetData(), m.GetTimeoutMs(), fingerprint.Of(m.GetData()))
}

// requester is who answers a request: nobody for a tell.
func requester(ctx actor.Context) any {
	if s := ctx.Sender(); s != nil {
		return s
	}
	return nil
}

func (n *StoreNode) answerPut(ctx actor.Context, req storeproto.PutRequest, err *messages.Error) {
	if err != nil {
		n.cfg.Log.WithFields(logrus.Fields{"object": req.ObjectID, "error": err}).Debug("put failed")
	}
	if to, ok := req.Requester.(*actor.PID); ok {
		ctx.Send(to, storeproto.PutAnswer(req, err))
	}
}

// startPut makes the creator copy in the local store and starts its
// registration with the directory; fp is the data's fingerprint.
func (n *StoreNode) startPut(ctx actor.Context, req storeproto.PutRequest, data []byte, timeoutMs int64, fp uint64) {
	n.startPutOf(ctx, req, data, false, timeoutMs, fp)
}

// startPutOf is startPut; owned says data is the node's own buffer,
// which nobody else writes (see putRun.owned).
func (n *StoreNode) startPutOf(ctx actor.Context, req storeproto.PutRequest, data []byte, owned bool, timeoutMs int64, fp uint64) {
	now := time.Now()
	req.Deadline = now.Add(n.cfg.timeout(timeoutMs))
	req.Size, req.Fingerprint, req.Creator = int64(len(data)), fp, n.cfg.Self
	obj, joined, evicted, err := n.putCopy(&req)
	if err != nil {
		n.answerPut(ctx, req, messages.AsError(err))
		return
	}
	if joined != nil {
		n.samePutLater(ctx, req, joined, data)
		return
	}
	n.unpublish(ctx.ActorSystem(), evicted)
	if req.Reduced {
		// A rebuilt shard learns from this copy's republication which
		// Reduce made it and what it reduces.
		obj.SetProducer(req.ReduceID, 0)
		obj.SetReduced(req.ReducedIDs)
	}
	if req.Size < n.cfg.InlineLimit {
		// The shard keeps these bytes (and, on its own member, hands them
		// to Gets as they are): a copy, never the caller's buffer, which
		// the caller may reuse once Put returns.
		req.Inline, req.InlineData = true, bytes.Clone(data)
	}
	req.RequestID = n.reqs.newID()
	obj.SetRegistration(req.RequestID) // its republication names it
	run := &putRun{obj: obj, data: data, owned: owned}
	if req.Inline && !req.Reduced && !req.Promoted && n.fast != nil {
		// The shard may record the copy COMPLETE at the registration,
		// which spares the publication after the copy-in.
		req.Complete, run.republished = true, n.fast.republished.Load()
	}
	run.reg = storeproto.NewPutRegistration(req)
	n.reqs.runs[req.RequestID] = run
	n.putStepAt(ctx, req.RequestID, now, storeproto.PutStart{})
}

// putCopy makes the creator copy of req in the store, or returns the
// copy of the id this node already holds (joined: a concurrent Put or
// Get), for samePut to decide.
func (n *StoreNode) putCopy(req *storeproto.PutRequest) (obj, joined *objstore.Object, evicted []string, err error) {
	if local := n.cfg.Store.Lookup(req.ObjectID); local != nil {
		// A Get on this node that is still locating the object left a
		// placeholder: this Put fills it (its waiters get these bytes).
		evicted, err := n.cfg.Store.Promote(local, req.Size, req.Fingerprint)
		if errors.Is(err, messages.ErrCapacity) {
			return nil, nil, nil, err
		} else if err != nil {
			return nil, local, nil, nil
		}
		req.Promoted = true
		return local, nil, evicted, nil
	}
	obj, evicted, err = n.cfg.Store.Create(req.ObjectID, req.Size, req.Fingerprint)
	if errors.Is(err, messages.ErrConflict) {
		if local := n.cfg.Store.Lookup(req.ObjectID); local != nil {
			return nil, local, nil, nil
		}
	}
	return obj, nil, evicted, err
}

// samePutLater waits, on its own goroutine and within the Put's
// deadline, for the copy this node already has to be whole, and answers
// as samePut decides: it is a wait on a local object, not a protocol.
func (n *StoreNode) samePutLater(ctx actor.Context, req storeproto.PutRequest, local *objstore.Object, data []byte) {
	system := ctx.ActorSystem()
	go func() {
		rctx, cancel := context.WithDeadline(context.Background(), req.Deadline)
		defer cancel()
		err := messages.AsError(n.samePut(rctx, local, data))
		if err != nil {
			n.cfg.Log.WithFields(logrus.Fields{"object": req.ObjectID, "error": err}).Debug("put failed")
		}
		if to, ok := req.Requester.(*actor.PID); ok {
			system.Root.Send(to, storeproto.PutAnswer(req, err))
		}
	}()
}

// putting is a Put's registration with this node's part of each step
// done as it is stepped, before its Box is carried out: the latency it
// measured, and the store's state (an abort, a deletion forgotten, an
// unpin).
type putting struct {
	n   *StoreNode
	run *putRun
}

func (p putting) Step(now time.Time, ev any) storeproto.PutStep {
	n, run := p.n, p.run
	s := run.reg.Step(now, ev)
	if s.Latency > 0 && n.cfg.Estimator != nil {
		n.cfg.Estimator.ObserveLatency(s.Latency)
	}
	putStore(n.cfg.Store, run.obj, run.reg.Request().ObjectID, s)
	return s
}

// putStore carries out the store's part of a Put's step s on obj, the
// copy of object id: an abort, a deletion forgotten, an unpin. The node
// and the fast path (on the caller's goroutine) both do it as they step.
func putStore(store *objstore.Store, obj *objstore.Object, id string, s storeproto.PutStep) {
	if s.Abort != nil {
		store.Abort(obj, s.Abort)
	}
	if s.ForgetDeleted {
		store.ForgetDeleted(id)
	}
	if s.Unpin {
		store.Unpin(obj)
	}
}

// putStep steps registration id with ev on putDrive.
func (n *StoreNode) putStep(ctx actor.Context, id uint64, ev any) {
	n.putStepAt(ctx, id, time.Now(), ev)
}

// putStepAt is putStep at now; then it starts the copy-in the step asks
// for, and forgets the Put once it answered.
func (n *StoreNode) putStepAt(ctx actor.Context, id uint64, now time.Time, ev any) {
	run := n.reqs.runs[id]
	if run == nil {
		return
	}
	s, carried := n.putDrive.StepAt(ctx, id, putting{n: n, run: run}, now, ev)
	if !carried {
		return // the sends ended it (no shard to register with)
	}
	if s.Recorded {
		run.recorded = true
	}
	if s.CopyIn {
		n.copyIn(ctx, id, run, s.Readable)
	}
	if s.Done && s.Err == nil && run.recorded {
		n.publishRecorded(ctx, run.reg.Request().ObjectID, run.obj, run.shard, run.republished)
	}
	if s.Done {
		if run.timer != nil {
			run.timer.Stop()
		}
		if run.watchDue != nil {
			run.watchDue.Stop()
		}
		delete(n.reqs.runs, id)
		if s.Err != nil {
			n.cfg.Log.WithFields(logrus.Fields{"object": run.reg.Request().ObjectID, "error": s.Err}).Debug("put failed")
		}
	}
}

// newPutDriver wires the generic driver to the Put protocol: a send to
// a shard goes by toShard, the deadline comes back to this actor, and a
// Put its sends ended carries out nothing more.
func (n *StoreNode) newPutDriver() *shell.Driver[uint64, any, storeproto.PutStep] {
	return &shell.Driver[uint64, any, storeproto.PutStep]{Ended: n.putEnded, Carrier: shell.Carrier[uint64]{
		Route: func(ctx actor.Context, id uint64, s outbox.Send) bool {
			to, ok := s.To.(directory.ShardOf)
			if ok {
				n.toShard(ctx, n.reqs.runs[id], string(to), s.Msg)
			}
			return ok
		},
		Timer: func(ctx actor.Context, id uint64, t outbox.Timer) {
			if run := n.reqs.runs[id]; run != nil {
				run.timer = shell.After(ctx, t.At, t.Msg)
			}
		},
	}}
}

// putEnded reports whether the Put id is over (its sends can end it).
func (n *StoreNode) putEnded(id uint64) bool { return n.reqs.runs[id] == nil }

// toShard sends to the shard of id. The CreateObject goes as a request,
// so the shard answers this actor, which watches the shard: a shard that
// stops before it answers fails the Put instead of waiting for its
// deadline (one on this member at once; one on another member is watched
// only when its answer is late, as a fetch's Locate's shard is). An
// inline object's, to a shard on another member, goes through the
// node's Creator instead, the data plane as a fast Put's
// (createElsewhere).
func (n *StoreNode) toShard(ctx actor.Context, run *putRun, id string, msg any) {
	shard := n.cfg.ShardFor(id)
	if _, ok := msg.(*messages.CreateObject); !ok {
		if shard != nil {
			ctx.Send(shard, msg)
		}
		return
	}
	if shard == nil {
		// Failed sends its UnpublishLocation to no shard, which is
		// dropped above: there is nobody to withdraw from.
		n.putStep(ctx, run.reg.Request().RequestID, storeproto.PutFailed{Err: messages.Errorf(messages.ErrorCode_UNAVAILABLE, "no directory shard for %q", id)})
		return
	}
	run.shard = shard
	if run.watchDue != nil {
		run.watchDue.Stop() // the Put asks again, perhaps elsewhere
	}
	if c := msg.(*messages.CreateObject); n.cfg.Create != nil && c.GetHasInline() && shard.GetAddress() != ctx.Self().GetAddress() {
		n.createElsewhere(ctx, run, shard, c)
		return
	}
	run.watchDue = n.watchWhenLate(ctx, shard, putWatchDue{id: run.reg.Request().RequestID, shard: shard})
	n.reqs.senders.Request(ctx, shard, msg)
}

// putCreated is the answer to a CreateObject that createElsewhere sent,
// or why there is none.
type putCreated struct {
	id    uint64
	shard *actor.PID
	reply *messages.CreateObjectReply
	err   error
}

// createElsewhere sends an inline Put's CreateObject to a shard on
// another member through the node's Creator (the data plane, where the
// shard's member serves it: one request and its answer, where an actor
// request and its reply crossed the actors' remote, the costlier path),
// on a goroutine of its own bounded by the Put's deadline, and hands the
// answer back to the node (putCreated). A failed call fails the
// registration as a stopped shard does: its location is withdrawn,
// naming the registration, should the request have reached the shard
// after all. Only inline objects: the ordering argument is the fast
// Put's (a request on another path than the node's messages to the
// shard), and a streamed object's registration is a sliver of its time.
func (n *StoreNode) createElsewhere(ctx actor.Context, run *putRun, shard *actor.PID, c *messages.CreateObject) {
	create, req := n.cfg.Create, run.reg.Request()
	callBounded(ctx, req.Deadline, func(cctx context.Context) any {
		r, err := create(cctx, shard, c)
		return putCreated{id: req.RequestID, shard: shard, reply: r, err: err}
	})
}

// putCreatedBack steps the registration with createElsewhere's answer.
func (n *StoreNode) putCreatedBack(ctx actor.Context, m putCreated) {
	run := n.reqs.runs[m.id]
	if run == nil || !samePID(run.shard, m.shard) {
		return // over, or asking another shard now
	}
	if m.err != nil {
		n.putStep(ctx, m.id, storeproto.PutFailed{Err: shardCallError(m.err, run.reg.Request().ObjectID)})
		return
	}
	n.putStep(ctx, m.id, m.reply)
}

// putWatchDue watches the shard of a Put whose CreateObject is late.
func (n *StoreNode) putWatchDue(ctx actor.Context, m putWatchDue) {
	if run := n.reqs.runs[m.id]; run != nil && samePID(run.shard, m.shard) {
		n.watch(ctx, m.shard)
	}
}

// copyIn copies the bytes into the creator copy on its own goroutine, so
// the actor keeps serving (a DropObject of this very object among
// others), and reports the end.
func (n *StoreNode) copyIn(ctx actor.Context, id uint64, run *putRun, readable bool) {
	system, self := ctx.ActorSystem(), ctx.Self()
	obj, data, cfg := run.obj, run.data, n.cfg
	w := obj.NewWriter() // supersedes a fetch that was filling a placeholder
	if written, _, _ := obj.Progress(); run.owned && written == 0 && len(data) > 0 {
		// The bytes arrived in a buffer of their own: it becomes the
		// copy's, one pass over them fewer.
		go func() {
			err := w.Adopt(data)
			if err == nil {
				err = cfg.Store.Complete(obj)
			}
			if err != nil {
				system.Root.Send(self, putCopied{id: id, err: messages.AsError(putEnded(obj, err, readable))})
				return
			}
			system.Root.Send(self, putCopied{id: id, complete: true})
		}()
		return
	}
	go func() {
		size := int64(len(data))
		for off := int64(0); off < size; off += int64(cfg.ChunkSize) {
			if h := cfg.Hooks.BeforePutChunk; h != nil {
				h(cfg.Self.GetNodeId(), obj.ID(), off)
			}
			if err := w.Append(data[off:min(size, off+int64(cfg.ChunkSize))]); err != nil {
				// Dropped meanwhile (deleted).
				system.Root.Send(self, putCopied{id: id, err: messages.AsError(putEnded(obj, err, readable))})
				return
			}
		}
		if err := cfg.Store.Complete(obj); err != nil {
			system.Root.Send(self, putCopied{id: id, err: messages.AsError(putEnded(obj, err, readable))})
			return
		}
		system.Root.Send(self, putCopied{id: id, complete: true})
	}()
}

// putReply hands the shard's answer to its registration.
func (n *StoreNode) putReply(ctx actor.Context, m *messages.CreateObjectReply) {
	n.putStep(ctx, m.GetRequestId(), m)
}

func (n *StoreNode) putTimedOut(ctx actor.Context, m storeproto.PutDeadline) {
	n.putStep(ctx, m.ID, m)
}

func (n *StoreNode) putCopiedIn(ctx actor.Context, m putCopied) {
	n.putStep(ctx, m.id, storeproto.PutCopiedIn{Complete: m.complete, Err: m.err})
}

// peerGone fails what waits for a shard or node that stopped
// (Terminated) or was not running (a DeadLetterResponse to a request).
func (n *StoreNode) peerGone(ctx actor.Context, who *actor.PID, why string) {
	if who == nil {
		return
	}
	key := actorutil.Key(who)
	delete(n.reqs.watched, key) // a peer started again under this PID is watched anew
	n.reqs.senders.Forget(who)
	gone := messages.Errorf(messages.ErrorCode_UNAVAILABLE, "%s %s before it answered", who.GetId(), why)
	for id, run := range n.reqs.runs {
		if run.shard != nil && actorutil.Key(run.shard) == key {
			n.putStep(ctx, id, storeproto.PutFailed{Err: gone})
		}
	}
	n.deletePeerGone(ctx, key, gone)
}

// stopRequests fails the Puts still waiting for the directory and the
// Deletes still waiting for their shard when the node stops for good:
// nobody would take their answers. A failed (killed) node says nothing.
func (n *StoreNode) stopRequests(ctx actor.Context) {
	if n.cfg.Store.Failed() != nil {
		return
	}
	stopped := messages.Errorf(messages.ErrorCode_UNAVAILABLE, "store node %s stopped", n.cfg.Self.GetNodeId())
	for id := range n.reqs.runs {
		n.putStep(ctx, id, storeproto.PutFailed{Err: stopped})
	}
	for id := range n.reqs.deletes {
		n.deleteStep(ctx, id, storeproto.DeleteFailed{Err: stopped})
	}
}

// putEnded decides a Put whose copy was dropped before it was complete.
// Only a Delete that came before the bytes were readable fails the Put:
// once they were (readable, or every byte was in this copy, which
// receivers stream from while it fills), a consumer may have Got the
// object and Deleted it before this Put's reply, and that must not turn
// the Put into an error. The dropped copy is not published: the
// directory has forgotten the object.
func putEnded(obj *objstore.Object, err error, readable bool) error {
	if errors.Is(err, messages.ErrDeleted) && (readable || obj.IsWhole()) {
		return nil
	}
	return err
}

// samePut answers a Put of an id this node already holds: the same bytes
// are an idempotent success, other bytes a conflict. The copy it joined
// counts as the first Put's: deleted after it was whole, the same bytes
// still succeed (see putEnded).
func (n *StoreNode) samePut(ctx context.Context, local *objstore.Object, data []byte) error {
	err := local.WaitComplete(ctx)
	var have []byte
	if err == nil {
		have, err = local.Bytes()
	}
	if err != nil {
		var whole bool
		if have, whole = local.WholeBytes(); !whole || !errors.Is(err, messages.ErrDeleted) {
			return err
		}
	}
	if !bytes.Equal(have, data) {
		return messages.Errorf(messages.ErrorCode_CONFLICT, "object %q already exists with different contents", local.ID())
	}
	return nil
}
