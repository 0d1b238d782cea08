package storenode

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/sirupsen/logrus"
	"google.golang.org/protobuf/proto"

	"github.com/hoplite-go/hoplite/actors/directory"
	"github.com/hoplite-go/hoplite/coordinator"
	"github.com/hoplite-go/hoplite/internal/actorutil"
	"github.com/hoplite-go/hoplite/messages"
)

// StoreNode is the actor that serves one node's Put, Get and Delete. It is
// a thin shell: the bytes live in the Store (which survives the actor's
// restarts), transfers run in fetch session children, and long waits run
// on goroutines bounded by the request's deadline, so the mailbox never
// blocks behind a copy.
type StoreNode struct {
	cfg     *Config
	fetches map[string]*fetchState          // in-flight fetches, by object id
	reduces map[string]map[int32]*actor.PID // reduce workers, by reduce id and position
	// gets are the Gets waiting for their objects. They outlive restarts
	// of the actor, as the Store does: the Gets' timers and the objects'
	// settle notices name this actor's PID, which a restart keeps.
	gets *getWaiters
}

type fetchState struct {
	pid      *actor.PID
	deadline *atomic.Int64 // unix nanos; extended by later Gets
}

// fetchEnded is sent by a fetch session to its store node when it stops.
type fetchEnded struct {
	id  string
	pid *actor.PID
}

// NewProps returns the props of a store node actor.
func NewProps(cfg Config) *actor.Props {
	c := cfg.withDefaults()
	gets := newGetWaiters()
	return actor.PropsFromProducer(func() actor.Actor { return &StoreNode{cfg: c, gets: gets} })
}

// Receive implements actor.Actor.
func (n *StoreNode) Receive(ctx actor.Context) {
	if h := n.cfg.Hooks.BeforeReceive; h != nil {
		h(n.cfg.Self.GetNodeId(), ctx.Message())
	}
	switch m := ctx.Message().(type) {
	case *actor.Started:
		n.fetches = map[string]*fetchState{}
		n.reduces = map[string]map[int32]*actor.PID{}
		if n.gets == nil {
			n.gets = newGetWaiters()
		}
		n.resume(ctx)
	case *messages.Reduce:
		n.reduce(ctx, m)
	case *messages.ReduceTask:
		n.reduceTask(ctx, m)
	case *messages.ReduceRelease:
		for _, pid := range n.reduces[m.GetReduceId()] {
			ctx.Send(pid, m)
		}
		delete(n.reduces, m.GetReduceId())
	case *messages.ReduceInvalidate:
		if pid := n.reduces[m.GetReduceId()][m.GetPosition()]; pid != nil {
			ctx.Send(pid, m)
		}
	case *messages.StoreReduced:
		n.storeReduced(ctx, m)
	case *messages.Republish:
		n.republish(ctx, m)
	case *messages.Put:
		n.put(ctx, m)
	case *messages.Get:
		n.get(ctx, m)
	case *objectSettled:
		n.settled(ctx, m.obj)
	case *getExpired:
		n.expired(ctx, m)
	case *messages.Delete:
		n.delete(ctx, m)
	case *messages.DropObject:
		reason := m.GetReason()
		if reason != nil && errors.Is(reason, messages.ErrDeleted) {
			// Only a drop that says DELETED is a deletion (see
			// directory's deletedDrop); one without a reason frees a copy
			// the directory disagrees with.
			n.noteDeleted(m.GetObjectId())
		}
		if reason == nil {
			reason = messages.Errorf(messages.ErrorCode_DELETED, "object %q was deleted", m.GetObjectId())
		}
		if n.cfg.Store.Remove(m.GetObjectId(), reason) {
			n.cfg.Log.WithField("object", m.GetObjectId()).Debug("dropped deleted object")
		}
		if ctx.Sender() != nil {
			// Asked by a Delete's caller node: the copy is gone here.
			ctx.Respond(&messages.DeleteObjectReply{ObjectId: m.GetObjectId()})
		}
	case *messages.NodeStatus:
		ctx.Respond(n.status())
	case *messages.QueryObject:
		if err := n.validate(m.GetObjectId()); err != nil {
			ctx.Respond(&messages.ObjectInfo{ObjectId: m.GetObjectId(), Error: err})
			return
		}
		ctx.Forward(n.cfg.ShardFor(m.GetObjectId()))
	case *fetchEnded:
		if f := n.fetches[m.id]; f != nil && samePID(f.pid, m.pid) {
			delete(n.fetches, m.id)
		}
	case *actor.Terminated:
		for id, f := range n.fetches {
			if samePID(f.pid, m.GetWho()) {
				delete(n.fetches, id)
			}
		}
		for id, workers := range n.reduces {
			for pos, pid := range workers {
				if samePID(pid, m.GetWho()) {
					delete(workers, pos)
				}
			}
			if len(workers) == 0 {
				delete(n.reduces, id)
			}
		}
	case actor.SystemMessage, actor.AutoReceiveMessage:
	default:
		entry := n.cfg.Log.WithField("type", actorutil.TypeName(m))
		if ctx.Sender() != nil {
			entry = entry.WithField("from", ctx.Sender().String())
		}
		entry.Warn("store node dropped an unknown message")
	}
}

// validate checks an object id from an application. Ids starting with
// NUL are reserved for the intermediate results of Reduce trees, which
// live only in stores (directory.ValidateObjectID accepts them: the
// directory is also asked about them internally).
func (n *StoreNode) validate(id string) *messages.Error {
	if err := directory.ValidateObjectID(id, n.cfg.MaxObjectIDLen); err != nil {
		return err
	}
	if strings.HasPrefix(id, internalPrefix) {
		return messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "object id %q starts with NUL, which is reserved for internal objects", id)
	}
	return nil
}

// internalPrefix starts the ids of Reduce intermediates.
const internalPrefix = "\x00"

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
		n.startFetch(ctx, o, time.Now().Add(n.cfg.DefaultTimeout))
		n.cfg.Log.WithField("object", o.ID()).Info("resuming fetch after restart")
	}
}

func (n *StoreNode) put(ctx actor.Context, m *messages.Put) {
	sender, system := ctx.Sender(), ctx.ActorSystem()
	id, data := m.GetObjectId(), m.GetData()
	respond := func(err error) {
		reply(system, sender, &messages.PutReply{ObjectId: id, Error: messages.AsError(err)})
	}
	if err := n.validate(id); err != nil {
		respond(err)
		return
	}
	if int64(len(data)) > n.cfg.Store.Capacity() {
		respond(messages.Errorf(messages.ErrorCode_CAPACITY, "object %q of %d bytes exceeds the node capacity of %d bytes", id, len(data), n.cfg.Store.Capacity()))
		return
	}
	rctx, cancel := context.WithTimeout(context.Background(), n.cfg.timeout(m.GetTimeoutMs()))
	go func() {
		defer cancel()
		err := n.putObject(rctx, system, id, data, "")
		if err != nil {
			n.cfg.Log.WithFields(logrus.Fields{"object": id, "error": err}).Debug("put failed")
		}
		respond(err)
	}()
}

// putObject stores a creator copy: register with the directory (the
// creator is a partial location from then on, so receivers may start
// pipelining), copy the bytes in chunk by chunk, then publish COMPLETE.
func (n *StoreNode) putObject(ctx context.Context, system *actor.ActorSystem, id string, data []byte, reduceID string) error {
	fp := Fingerprint(data)
	size := int64(len(data))
	var obj *Object
	var evicted []string
	var err error
	promoted := false
	if local := n.cfg.Store.Lookup(id); local != nil {
		// A Get on this node that is still locating the object left a
		// placeholder: this Put fills it (its waiters get these bytes).
		if evicted, err = n.cfg.Store.Promote(local, size, fp); errors.Is(err, messages.ErrCapacity) {
			return err
		} else if err != nil {
			return n.samePut(ctx, local, data)
		}
		obj, promoted = local, true
	} else if obj, evicted, err = n.cfg.Store.Create(id, size, fp); err != nil {
		if errors.Is(err, messages.ErrConflict) { // a concurrent Put or Get on this node
			if local := n.cfg.Store.Lookup(id); local != nil {
				return n.samePut(ctx, local, data)
			}
		}
		return err
	}
	n.unpublish(system, evicted)
	create := &messages.CreateObject{ObjectId: id, Size: size, Fingerprint: fp, Creator: n.cfg.Self, ReduceId: reduceID}
	if size < n.cfg.InlineLimit {
		create.HasInline, create.InlineData = true, data
	}
	sent := time.Now()
	res, err := actorutil.Request(ctx, system.Root, n.cfg.ShardFor(id), create)
	if err == nil && n.cfg.Estimator != nil {
		// A CreateObject is answered at once: half its round trip is one
		// control message's latency.
		n.cfg.Estimator.ObserveLatency(time.Since(sent) / 2)
	}
	if err != nil {
		n.cfg.Store.Abort(obj, err)
		// The shard may have registered us before the deadline hit.
		system.Root.Send(n.cfg.ShardFor(id), &messages.UnpublishLocation{ObjectId: id, Node: n.cfg.Self})
		return err
	}
	cr, ok := res.(*messages.CreateObjectReply)
	if !ok {
		n.cfg.Store.Abort(obj, messages.ErrInternal)
		return messages.Errorf(messages.ErrorCode_INTERNAL, "unexpected reply %T to CreateObject", res)
	}
	if e := messages.ErrOrNil(cr.GetError()); e != nil {
		n.cfg.Store.Abort(obj, e)
		return e
	}
	// The directory took the id as a live object: a deletion this node
	// remembers is older than its shard's memory and must not come back
	// to delete this object when the shard is rebuilt.
	n.cfg.Store.ForgetDeleted(id)
	if cr.GetExisted() {
		// The same bytes already live elsewhere: idempotent. A promoted
		// placeholder keeps them as an ordinary copy for its waiters.
		if !promoted {
			n.cfg.Store.Abort(obj, messages.Errorf(messages.ErrorCode_NOT_FOUND, "object %q not stored here", id))
			return nil
		}
		n.cfg.Store.Unpin(obj)
	}
	// Whether Gets can already return these bytes without this copy: the
	// directory serves an inline object from its registration on (shards
	// and nodes share one InlineLimit), and an id that existed has them.
	readable := create.GetHasInline() || cr.GetExisted()
	// The copy-in is bounded memory work and is not cut short by the
	// deadline: the directory already announced this copy.
	w := obj.NewWriter() // supersedes a fetch that was filling a placeholder
	for off := int64(0); off < size; off += int64(n.cfg.ChunkSize) {
		if h := n.cfg.Hooks.BeforePutChunk; h != nil {
			h(n.cfg.Self.GetNodeId(), id, off)
		}
		if err := w.Append(data[off:min(size, off+int64(n.cfg.ChunkSize))]); err != nil {
			return putEnded(obj, err, readable) // dropped meanwhile (deleted)
		}
	}
	if err := n.cfg.Store.Complete(obj); err != nil {
		return putEnded(obj, err, readable)
	}
	system.Root.Send(n.cfg.ShardFor(id), &messages.PublishLocation{ObjectId: id, Node: n.cfg.Self,
		State: messages.LocationState_COMPLETE, Size: size, Fingerprint: fp, Creator: !cr.GetExisted()})
	return nil
}

// putEnded decides a Put whose copy was dropped before it was complete.
// Only a Delete that came before the bytes were readable fails the Put:
// once they were (readable, or every byte was in this copy, which
// receivers stream from while it fills), a consumer may have Got the
// object and Deleted it before this Put's reply, and that must not turn
// the Put into an error. The dropped copy is not published: the
// directory has forgotten the object.
func putEnded(obj *Object, err error, readable bool) error {
	if errors.Is(err, messages.ErrDeleted) && (readable || obj.isWhole()) {
		return nil
	}
	return err
}

// samePut answers a Put of an id this node already holds: the same bytes
// are an idempotent success, other bytes a conflict. The copy it joined
// counts as the first Put's: deleted after it was whole, the same bytes
// still succeed (see putEnded).
func (n *StoreNode) samePut(ctx context.Context, local *Object, data []byte) error {
	err := local.WaitComplete(ctx)
	var have []byte
	if err == nil {
		have, err = local.Bytes()
	}
	if err != nil {
		var whole bool
		if have, whole = local.wholeBytes(); !whole || !errors.Is(err, messages.ErrDeleted) {
			return err
		}
	}
	if !bytes.Equal(have, data) {
		return messages.Errorf(messages.ErrorCode_CONFLICT, "object %q already exists with different contents", local.ID())
	}
	return nil
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
	n.getUntil(ctx, m, ctx.Sender(), time.Now().Add(n.cfg.timeout(m.GetTimeoutMs())))
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
	obj, created := n.cfg.Store.Reserve(id)
	if created {
		n.startFetch(ctx, obj, deadline)
	} else if f := n.fetches[id]; f != nil {
		if extend(f.deadline, deadline) {
			ctx.Send(f.pid, &extendFetch{deadline: deadline})
		}
	}
	w := &waitingGet{m: m, sender: sender, deadline: deadline}
	if _, done, err := obj.Progress(); done || err != nil {
		n.answer(ctx, w, obj, err)
		return
	}
	system, self := ctx.ActorSystem(), ctx.Self()
	w.timer = time.AfterFunc(time.Until(deadline), func() { system.Root.Send(self, &getExpired{obj: obj, w: w}) })
	n.gets.add(obj, w, func() { system.Root.Send(self, &objectSettled{obj: obj}) })
}

// settled answers the Gets waiting on obj, which is complete or failed
// (or was, and was rewound since: they wait on).
func (n *StoreNode) settled(ctx actor.Context, obj *Object) {
	system, self := ctx.ActorSystem(), ctx.Self()
	ws, err := n.gets.settle(obj, func() { system.Root.Send(self, &objectSettled{obj: obj}) })
	for _, w := range ws {
		w.timer.Stop()
		n.answer(ctx, w, obj, err)
	}
}

// expired answers a Get whose deadline passed before its object settled.
func (n *StoreNode) expired(ctx actor.Context, m *getExpired) {
	if n.gets.remove(m.obj, m.w) {
		reply(ctx.ActorSystem(), m.w.sender, &messages.GetReply{ObjectId: m.obj.ID(), Error: messages.AsError(context.DeadlineExceeded)})
	}
}

// answer replies to a Get whose object settled with err (nil: complete).
func (n *StoreNode) answer(ctx actor.Context, w *waitingGet, obj *Object, err error) {
	m := w.m
	if errors.Is(err, messages.ErrReset) {
		// The copy was stale (a Reduce re-created its target): ask this
		// node again, within the same deadline.
		n.getUntil(ctx, m, w.sender, w.deadline)
		return
	}
	r := &messages.GetReply{ObjectId: m.GetObjectId()}
	if err != nil {
		r.Error = messages.AsError(err)
	} else if m.GetPrefetch() {
		// The object is here; the caller did not want the bytes.
	} else if b, err := obj.Bytes(); err != nil {
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

// extend moves d to t if t is later, and reports whether it did.
func extend(d *atomic.Int64, t time.Time) bool {
	for {
		old := d.Load()
		if t.UnixNano() <= old {
			return false
		}
		if d.CompareAndSwap(old, t.UnixNano()) {
			return true
		}
	}
}

func (n *StoreNode) startFetch(ctx actor.Context, obj *Object, deadline time.Time) {
	d := new(atomic.Int64)
	d.Store(deadline.UnixNano())
	pid := ctx.Spawn(newFetchProps(n.cfg, obj, d))
	n.fetches[obj.ID()] = &fetchState{pid: pid, deadline: d}
}

func (n *StoreNode) delete(ctx actor.Context, m *messages.Delete) {
	sender, system := ctx.Sender(), ctx.ActorSystem()
	id := m.GetObjectId()
	if err := n.validate(id); err != nil {
		reply(system, sender, &messages.DeleteReply{ObjectId: id, Error: err})
		return
	}
	rctx, cancel := context.WithTimeout(context.Background(), n.cfg.timeout(m.GetTimeoutMs()))
	go func() {
		defer cancel()
		r := &messages.DeleteReply{ObjectId: id}
		res, err := actorutil.Request(rctx, system.Root, n.cfg.ShardFor(id), &messages.DeleteObject{ObjectId: id})
		switch dr := res.(type) {
		case nil:
			r.Error = messages.AsError(err)
		case *messages.DeleteObjectReply:
			r.Error = dr.GetError()
			if r.Error == nil {
				n.noteDeleted(id)
				n.awaitDrops(rctx, system, id, dr.GetDropped())
			}
		default:
			r.Error = messages.Errorf(messages.ErrorCode_INTERNAL, "unexpected reply %T to DeleteObject", res)
		}
		reply(system, sender, r)
	}()
}

// awaitDrops makes a Delete read-your-writes across nodes: the shard
// tells the nodes holding copies to drop them, but its messages and a
// later Get at one of those nodes travel different paths, so the Delete
// returns only once each of them has dropped its copy (a node that fails
// or does not answer by the deadline has no copy to serve anyway).
func (n *StoreNode) awaitDrops(ctx context.Context, system *actor.ActorSystem, id string, nodes []*messages.NodeRef) {
	drop := &messages.DropObject{ObjectId: id, Reason: messages.Errorf(messages.ErrorCode_DELETED, "object %q was deleted", id)}
	var wg sync.WaitGroup
	for _, node := range nodes {
		if node.GetNodeId() == n.cfg.Self.GetNodeId() {
			n.cfg.Store.Remove(id, drop.GetReason())
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = actorutil.Request(ctx, system.Root, node.PID(), drop)
		}()
	}
	wg.Wait()
}

func (n *StoreNode) reduce(ctx actor.Context, m *messages.Reduce) {
	if err := coordinator.ValidateReduce(m, n.cfg.MaxObjectIDLen); err != nil {
		reply(ctx.ActorSystem(), ctx.Sender(), &messages.ReduceReply{TargetId: m.GetTargetId(), Error: err})
		return
	}
	if ms := n.cfg.timeout(m.GetTimeoutMs()).Milliseconds(); ms != m.GetTimeoutMs() {
		// The coordinator and the workers take timeout_ms as it comes.
		m = proto.CloneOf(m)
		m.TimeoutMs = ms
	}
	if n.cfg.Naive {
		if m.GetKnee() != nil {
			reply(ctx.ActorSystem(), ctx.Sender(), &messages.ReduceReply{TargetId: m.GetTargetId(),
				Error: messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "reduce: the naive baseline has no knee policy; give num_objects")})
			return
		}
		n.naiveReduce(ctx, m)
		return
	}
	start := &messages.StartReduce{Reduce: m, Caller: n.cfg.Self}
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
	sender, system := ctx.Sender(), ctx.ActorSystem()
	// A little past the coordinator's own deadline, so that its TIMEOUT,
	// which names the sources that never appeared, arrives first.
	rctx, cancel := context.WithTimeout(context.Background(), time.Duration(m.GetTimeoutMs())*time.Millisecond+time.Second)
	go func() {
		defer cancel()
		res, err := actorutil.Request(rctx, system.Root, shard, start)
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

// reduceTask runs a tree position: a new worker, or a newer generation
// for the worker already there (it rewinds and reduces again).
func (n *StoreNode) reduceTask(ctx actor.Context, m *messages.ReduceTask) {
	workers := n.reduces[m.GetReduceId()]
	if pid := workers[m.GetPosition()]; pid != nil {
		ctx.Send(pid, m)
		return
	}
	if workers == nil {
		workers = map[int32]*actor.PID{}
		n.reduces[m.GetReduceId()] = workers
	}
	workers[m.GetPosition()] = ctx.Spawn(newReduceWorkerProps(n.cfg, m, ctx.Sender()))
}

// storeReduced stores a result the coordinator computed without a tree.
func (n *StoreNode) storeReduced(ctx actor.Context, m *messages.StoreReduced) {
	sender, system := ctx.Sender(), ctx.ActorSystem()
	rctx, cancel := context.WithTimeout(context.Background(), n.cfg.timeout(m.GetTimeoutMs()))
	go func() {
		defer cancel()
		err := n.putObject(rctx, system, m.GetTargetId(), m.GetData(), m.GetReduceId())
		reply(system, sender, &messages.StoreReducedReply{ReduceId: m.GetReduceId(), Error: messages.AsError(err)})
	}()
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
	want := map[int]bool{}
	for _, s := range m.GetShards() {
		want[int(s)] = true
	}
	// Deletions first: a copy that missed its DropObject is then dropped
	// on arrival instead of being offered to a receiver meanwhile.
	n.republishDeleted(ctx, want, count)
	for _, o := range n.cfg.Store.Objects() {
		id := o.ID()
		if strings.HasPrefix(id, internalPrefix) || !want[directory.ShardIndex(id, count)] {
			continue // reduce intermediates are not in the directory
		}
		size := o.Size()
		_, done, err := o.Progress()
		if size < 0 || err != nil {
			continue
		}
		state := messages.LocationState_PARTIAL
		if done {
			state = messages.LocationState_COMPLETE
		}
		to := ctx.Sender()
		if to == nil {
			to = n.cfg.ShardFor(id)
		}
		ctx.Send(to, &messages.PublishLocation{ObjectId: id, Node: n.cfg.Self, State: state,
			Size: size, Fingerprint: o.Fingerprint(), Creator: o.Pinned()})
	}
}

// tombstoneBatch bounds the ids of one Tombstones message (a remote
// message must stay well under the gRPC message limit).
const tombstoneBatch = 256 << 10

// republishDeleted sends the remembered deletions of the wanted shards,
// batched per shard.
func (n *StoreNode) republishDeleted(ctx actor.Context, want map[int]bool, count int) {
	batches := map[int]*messages.Tombstones{}
	size := map[int]int{}
	send := func(shard int) {
		b := batches[shard]
		to := ctx.Sender()
		if to == nil {
			to = n.cfg.ShardFor(b.GetObjectIds()[0])
		}
		ctx.Send(to, b)
		delete(batches, shard)
		size[shard] = 0
	}
	for _, id := range n.cfg.Store.DeletedIDs() {
		shard := directory.ShardIndex(id, count)
		if !want[shard] {
			continue
		}
		b := batches[shard]
		if b == nil {
			b = &messages.Tombstones{}
			batches[shard] = b
		}
		b.ObjectIds = append(b.ObjectIds, id)
		if size[shard] += len(id) + 8; size[shard] >= tombstoneBatch {
			send(shard)
		}
	}
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
