package storeactor

import (
	"bytes"
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/hoplite-go/hoplite/internal/objstore"
	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/fingerprint"
	"github.com/hoplite-go/hoplite/internal/actors/shardactor"
	"github.com/hoplite-go/hoplite/internal/directory"
	"github.com/hoplite-go/hoplite/internal/fastget"
	"github.com/hoplite-go/hoplite/internal/outbox"
	"github.com/hoplite-go/hoplite/internal/storeproto"
	"github.com/hoplite-go/hoplite/messages"
)

// fastPutter is the fast path of a Put of an inline object from a
// Client in the node's process: the caller's goroutine makes the
// creator copy in the node's store, sends the CreateObject (with the
// bytes, as every inline Put's) to the object's shard itself and waits
// for its answer (through the node's Creator: one actor message each way
// in process, the data plane across members), then stores the bytes in the copy and
// returns. The registration is the node's own, the same
// storeproto.PutRegistration stepped on the caller's goroutine; what is
// gone are the hops that carried nothing: the Put to the node, the
// shard's answer to the node, the copy-in's report to it and the node's
// answer to the caller. What the node still does, it does after the
// caller has its answer (fastPutDone).
//
// Ordering is the ordinary Put's. The copy is in the store before its
// CreateObject leaves, so a DropObject of a Delete that the shard
// ordered after the registration finds it (and the copy-in then fails,
// which putEnded decides as it does for a copy-in on the node). The
// answer is OK only after the shard took the registration and its
// bytes, so any later Get is answered from the shard's entry, and a
// later Delete finds the entry and the creator's location in it. A
// failed registration drops the copy and withdraws its location at the
// shard, as the node does. A Put of an id the node holds or fetches
// already, or one of an object over the inline limit, is not the fast
// path's: the node answers it.
type fastPutter struct {
	cfg    *Config
	system *actor.ActorSystem
	self   *actor.PID
	create Creator
	// republished is the node's count of Republish requests served (the
	// fast Get's, fastGetter.republished), nil without one.
	republished *atomic.Uint64
}

// Creator carries a fast Put's CreateObject to the object's directory
// shard and returns the shard's answer, or why there is none, as a
// Locator does a Locate. The cluster's asks a shard on its own member
// with an actor request and one on another member on the data plane
// (internal/actors/shardactor.CallCreate).
type Creator func(ctx context.Context, shard *actor.PID, c *messages.CreateObject) (*messages.CreateObjectReply, error)

// requestCreate is the Creator of a node without one: an actor request
// to the shard.
func requestCreate(system *actor.ActorSystem) Creator {
	return func(ctx context.Context, pid *actor.PID, c *messages.CreateObject) (*messages.CreateObjectReply, error) {
		return shardactor.RequestCreate(ctx, system.Root, pid, c)
	}
}

// fastPutIDs number the fast Puts' registrations (CreateObject's and a
// failed one's UnpublishLocation's request_id), apart from the node's
// own (requests.newID counts up from 1; these have fastPutIDBit set): a
// shard keeps the copy of a registration that a withdrawal of another
// one crossed.
var fastPutIDs atomic.Uint64

const fastPutIDBit = 1 << 63

// fastPutDone follows a fast Put to its node: the node sends the
// registration's messages to the shard (the COMPLETE publication, or a
// failed registration's withdrawal), withdraws the copies the Put's
// copy evicted, and observes the registration's latency. The shard's
// messages go from the node so that they keep their order with the
// node's own publications of the copy: a republication while the copy
// was filling says PARTIAL, and a COMPLETE sent from another goroutine
// could overtake it.
type fastPutDone struct {
	id      string
	reg     uint64 // the registration's request id
	evicted []string
	latency time.Duration
	boxes   []outbox.Box
	// recorded is the copy, whole in the store, that the shard recorded
	// COMPLETE at its registration (nil if it did not, or the copy-in
	// failed): shard and republished are the shard asked and the node's
	// count of Republish requests served when the CreateObject left. A
	// shard that moved or started over since may have heard of the copy
	// in a republication while it filled, as PARTIAL: the node publishes
	// it COMPLETE there, as the copy-in's end does on the node.
	recorded    *objstore.Object
	shard       *actor.PID
	republished uint64
}

// registerFastPut makes this node's Put fast path available to the
// Clients of its process.
func (n *StoreNode) registerFastPut(ctx actor.Context) {
	n.fastPut = &fastPutter{cfg: n.cfg, system: ctx.ActorSystem(), self: ctx.Self(), create: n.cfg.Create}
	if n.fast != nil {
		n.fastPut.republished = &n.fast.republished
	}
	if n.fastPut.create == nil {
		n.fastPut.create = requestCreate(ctx.ActorSystem())
	}
	fastget.RegisterPutter(ctx.Self(), n.fastPut)
}

// unregisterFastPut withdraws it: the node stops.
func (n *StoreNode) unregisterFastPut(ctx actor.Context) {
	if n.fastPut != nil {
		fastget.UnregisterPutter(ctx.Self(), n.fastPut)
	}
}

// Put implements fastget.Putter.
func (p *fastPutter) Put(ctx context.Context, id string, data []byte) (bool, error) {
	cfg, store := p.cfg, p.cfg.Store
	size := int64(len(data))
	deadline, ok := ctx.Deadline()
	if !ok || ctx.Err() != nil || size >= cfg.InlineLimit || size > store.Capacity() || cfg.Hooks.BeforePutChunk != nil ||
		directory.ValidateApplicationID(id, cfg.MaxObjectIDLen) != nil || store.Lookup(id) != nil {
		return false, nil
	}
	fp := fingerprint.Of(data)
	obj, evicted, err := store.Create(id, size, fp)
	if err != nil {
		// Taken meanwhile, full or failed: the node answers as it does.
		return false, nil
	}
	// The shard keeps the inline bytes (and hands them to Gets on its
	// member as they are): a copy, never the caller's buffer, which the
	// caller may reuse once Put returns.
	req := storeproto.PutRequest{RequestID: fastPutIDs.Add(1) | fastPutIDBit, ObjectID: id, Size: size, Fingerprint: fp,
		Creator: cfg.Self, Deadline: deadline, Inline: true, InlineData: bytes.Clone(data),
		// Recorded COMPLETE at the registration only where the node counts
		// its Republishes (publishRecorded needs the count).
		Complete: p.republished != nil}
	if req.InlineData == nil {
		req.InlineData = []byte{}
	}
	obj.SetRegistration(req.RequestID) // its republication names it
	reg := storeproto.NewPutRegistration(req)
	done := &fastPutDone{id: id, reg: req.RequestID, evicted: evicted}
	if p.republished != nil {
		done.republished = p.republished.Load() // before the CreateObject leaves
	}
	create := p.step(done, reg, obj, time.Now(), storeproto.PutStart{}).create
	var reply *messages.CreateObjectReply
	var rerr *messages.Error
	done.shard = cfg.ShardFor(id)
	if shard := done.shard; shard == nil {
		rerr = messages.Errorf(messages.ErrorCode_UNAVAILABLE, "no directory shard for %q", id)
	} else if reply, err = p.create(ctx, shard, create); err != nil {
		rerr = messages.AsError(err)
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			rerr = shardCallError(ctx.Err(), id)
		}
	}
	var step storeproto.PutStep
	if rerr != nil {
		step = p.step(done, reg, obj, time.Now(), storeproto.PutFailed{Err: rerr}).PutStep
	} else {
		step = p.step(done, reg, obj, time.Now(), reply).PutStep
		done.latency = step.Latency
	}
	if step.CopyIn {
		// Bounded memory work (an inline object), on this goroutine: on
		// the node the copy-in is a goroutine and its report a message.
		err := obj.NewWriter().Append(data)
		if err == nil {
			err = store.Complete(obj)
		}
		var e *messages.Error
		if err != nil {
			e = messages.AsError(putEnded(obj, err, step.Readable))
		}
		recorded := step.Recorded
		step = p.step(done, reg, obj, time.Now(), storeproto.PutCopiedIn{Complete: err == nil, Err: e}).PutStep
		if recorded && err == nil {
			done.recorded = obj
		}
	}
	p.system.Root.Send(p.self, done)
	if step.Err != nil {
		return true, step.Err
	}
	return true, nil
}

// fastStep is a fast Put's step as its caller's goroutine takes it: the
// CreateObject it sends, if any, which the caller asks itself.
type fastStep struct {
	storeproto.PutStep
	create *messages.CreateObject
}

// step steps reg with ev at now, as the node's putting does: it carries
// out the store's part at once and keeps the rest of the Box (a
// publication to the shard, a failed registration's withdrawal) for the
// node to carry out (fastPutDone), all but the CreateObject, which the
// caller asks itself and waits for. The Box's deadline timer and the
// answer to a requester have no place here: the caller's context bounds
// the call, and the answer is its return.
func (p *fastPutter) step(done *fastPutDone, reg *storeproto.PutRegistration, obj *objstore.Object, now time.Time, ev any) fastStep {
	s := fastStep{PutStep: reg.Step(now, ev)}
	putStore(p.cfg.Store, obj, done.id, s.PutStep)
	box := s.Box
	box.Sends = nil
	for _, send := range s.Sends {
		if c, ok := send.Msg.(*messages.CreateObject); ok {
			s.create = c
			continue
		}
		box.Sends = append(box.Sends, send)
	}
	if len(box.Sends) > 0 {
		done.boxes = append(done.boxes, box)
	}
	return s
}

// fastPutDone finishes a fast Put on its node: see fastPutDone. Its
// Boxes go through the node's Put driver, as the node's own Puts' do; the
// registration is not among the node's runs, so its timers are dropped
// (the caller's context bounded it) and only its sends go out.
func (n *StoreNode) fastPutDone(ctx actor.Context, m *fastPutDone) {
	n.unpublish(ctx.ActorSystem(), m.evicted)
	if m.latency > 0 && n.cfg.Estimator != nil {
		n.cfg.Estimator.ObserveLatency(m.latency)
	}
	for _, b := range m.boxes {
		n.putDrive.Carry(ctx, m.reg, b, nil)
	}
	if m.recorded != nil {
		n.fastPutRecorded(ctx, m)
	}
}

// fastPutRecorded: see publishRecorded.
func (n *StoreNode) fastPutRecorded(ctx actor.Context, m *fastPutDone) {
	n.publishRecorded(ctx, m.id, m.recorded, m.shard, m.republished)
}

// publishRecorded publishes a Put's copy obj of id COMPLETE to its shard
// if the shard that recorded it so at its registration (shard, asked when
// the node had served republished Republish requests) may no longer be
// the one that knows it: the shard moved, or this node served a
// Republish since the CreateObject left (a rebuilt shard heard of the
// copy from it, PARTIAL while it filled). Its order with the node's
// republications is the node's: both go from this actor.
func (n *StoreNode) publishRecorded(ctx actor.Context, id string, obj *objstore.Object, shard *actor.PID, republished uint64) {
	if obj == nil || n.cfg.Store.Lookup(id) != obj {
		return // dropped or replaced meanwhile: the shard knows
	}
	now := n.cfg.ShardFor(id)
	if now == nil || (now.Equal(shard) && n.fast != nil && n.fast.republished.Load() == republished) {
		return
	}
	if pub, ok := obj.Publication(n.cfg.Self); ok && pub.GetState() == messages.LocationState_COMPLETE {
		ctx.Send(now, pub)
	}
}
