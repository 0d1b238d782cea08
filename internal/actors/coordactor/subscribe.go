package coordactor

import (
	"context"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/hoplite-go/hoplite/internal/transport"
	"github.com/hoplite-go/hoplite/messages"
)

// subscribeCallTimeout bounds a SubscribeBatch on the data plane. The
// shards answer at once (they park nothing), so a call this slow meets a
// member that stopped or is swamped, and its Subscribes go again as actor
// messages.
const subscribeCallTimeout = 2 * time.Second

// queuedSubscribe is a Subscribe to a source's shard on another member,
// waiting for the end of the step that made it to go in that member's
// SubscribeBatch.
type queuedSubscribe struct {
	to  *actor.PID // the shard
	sub *messages.Subscribe
}

// subscribeAnswered ends a SubscribeBatch on the data plane.
type subscribeAnswered struct {
	subs  []queuedSubscribe
	reply []byte
	err   error
}

// subscribe queues a Subscribe to a source's shard on another member for
// that member's SubscribeBatch (sent by sendSubscribes at the end of the
// step), and reports whether it did. An inline source's location, with
// its bytes, comes back in the batch's answer; any other update comes as
// an actor message, as for a Subscribe sent as one (see
// shardactor.ServeSubscribe). A Reduce of small objects then waits for no
// actor message from the sources' shards: that fan-out was the largest
// step of a 1 KiB AllReduce.
func (c *Coordinator) subscribe(to *actor.PID, sub *messages.Subscribe) bool {
	if c.cfg.SubscribeAt == nil || c.cfg.CallData == nil {
		return false
	}
	addr := c.cfg.SubscribeAt(to)
	if addr == "" {
		return false
	}
	if _, ok := c.batches[addr]; !ok {
		c.batchOrder = append(c.batchOrder, addr)
	}
	c.batches[addr] = append(c.batches[addr], queuedSubscribe{to: to, sub: sub})
	return true
}

// subscribeBatchBytes bounds the encoded size of one SubscribeBatch:
// the data plane refuses a control request over
// transport.MaxControlRequest, and a member hosting the shards of more
// sources than fit gets several batches (a margin is left for the
// request's framing).
var subscribeBatchBytes = transport.MaxControlRequest - 1024

// sendSubscribes sends the step's queued Subscribes, one SubscribeBatch
// per member (or several, each within subscribeBatchBytes), in the order
// of each member's first Subscribe.
func (c *Coordinator) sendSubscribes(ctx actor.Context) {
	self := ctx.Self()
	ref := &messages.NodeRef{Address: self.GetAddress(), ActorId: self.GetId()}
	for _, addr := range c.batchOrder {
		subs := c.batches[addr]
		// Each as it goes in the batch: naming this coordinator, which a
		// request on the data plane has no sender to say.
		wire := make([]*messages.Subscribe, len(subs))
		from, size := 0, 0
		for i, q := range subs {
			wire[i] = &messages.Subscribe{ObjectId: q.sub.GetObjectId(), LocatedBefore: q.sub.GetLocatedBefore(), OnceBelow: q.sub.GetOnceBelow(), Subscriber: ref}
			n := protowire.SizeTag(1) + protowire.SizeBytes(proto.Size(wire[i])) // its field in the batch
			if i > from && size+n > subscribeBatchBytes {
				c.sendBatch(ctx, addr, subs[from:i:i], wire[from:i:i])
				from, size = i, 0
			}
			size += n
		}
		c.sendBatch(ctx, addr, subs[from:], wire[from:])
		delete(c.batches, addr)
	}
	c.batchOrder = c.batchOrder[:0]
}

// sendBatch sends one member's Subscribes (wire: as they go in the
// batch) as a SubscribeBatch, from a pooled worker (runCall) that reports
// the answer as a subscribeAnswered.
func (c *Coordinator) sendBatch(ctx actor.Context, addr string, subs []queuedSubscribe, wire []*messages.Subscribe) {
	self := ctx.Self()
	batch := &messages.SubscribeBatch{Subscribes: wire, Grouped: true}
	req, err := proto.Marshal(batch)
	if err != nil {
		for _, q := range subs {
			ctx.Request(q.to, standing(q.sub))
		}
		return
	}
	cctx, cancel := context.WithTimeout(context.Background(), subscribeCallTimeout)
	// One call per source is enough to end at Stopping: a resubscription's
	// call replaces the earlier one here, which ends by its own deadline.
	for _, q := range subs {
		c.subscribing[q.sub.GetObjectId()] = cancel
	}
	root, call, over := ctx.ActorSystem().Root, c.cfg.CallData, c.over
	runCall(func() {
		defer cancel()
		b, err := call(cctx, addr, messages.ControlSubscribe, req)
		if over.Load() {
			// The Reduce ended while the call ran. Its Unsubscribes, actor
			// messages, keep no order with this call and may have reached
			// the shards first: end the subscriptions again, from the
			// coordinator (a shard knows its subscribers by PID). A Reduce
			// that is over when this goroutine looks sent its own
			// Unsubscribes after these subscriptions were made.
			for _, q := range subs {
				root.RequestWithCustomSender(q.to, &messages.Unsubscribe{ObjectId: q.sub.GetObjectId()}, self)
			}
			return
		}
		root.Send(self, &subscribeAnswered{subs: subs, reply: b, err: err})
	})
}

// subscribeAnswered takes the answer to a SubscribeBatch on the data
// plane: its inline updates (the others come as actor messages). A call
// that failed may not have reached the shards: its Subscribes go again as
// actor messages (a subscriber subscribed twice is subscribed once).
func (c *Coordinator) subscribeAnswered(ctx actor.Context, m *subscribeAnswered, now time.Time) {
	if c.r.Over() {
		return
	}
	var a messages.SubscribeAnswer
	err := m.err
	if err == nil {
		if uerr := proto.Unmarshal(m.reply, &a); uerr != nil {
			err = uerr
		}
	}
	if err != nil {
		c.cfg.Log.WithField("reduce", c.id).WithField("sources", len(m.subs)).WithField("error", err).
			Debug("subscribe on the data plane failed; sending the Subscribes as actor messages")
		for _, q := range m.subs {
			ctx.Request(q.to, standing(q.sub))
		}
		return
	}
	if len(a.GetUpdates()) > 0 {
		c.locatedAt = now
	}
	for _, u := range a.GetUpdates() {
		if h := c.cfg.BeforeReceive; h != nil {
			h(c.id, u) // the hook sees a location as it came, on either path
		}
		c.step(ctx, now, u)
		if c.r.Over() {
			return
		}
	}
}

// standing is sub without once_below, for a Subscribe that goes again
// after its call on the data plane failed. That call may still reach the
// shard after this one, and subscribe there (a source not yet located,
// or lost) while the ended answer of this one made the Reduction count
// the source as followed by nothing: a standing Subscribe leaves it
// counted as followed, so its Unsubscribe goes at the end.
func standing(sub *messages.Subscribe) *messages.Subscribe {
	if sub.GetOnceBelow() == 0 {
		return sub
	}
	return &messages.Subscribe{ObjectId: sub.GetObjectId(), LocatedBefore: sub.GetLocatedBefore()}
}
