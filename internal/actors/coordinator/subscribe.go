package coordinator

import (
	"context"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/hoplite-go/hoplite/messages"
)

// subscribeCallTimeout bounds a Subscribe on the data plane. The shard
// answers at once (it parks nothing), so a call this slow meets a shard
// that stopped or is swamped, and the Subscribe goes again as an actor
// message.
const subscribeCallTimeout = 2 * time.Second

// subscribeAnswered ends a Subscribe on the data plane.
type subscribeAnswered struct {
	to    *actor.PID
	sub   *messages.Subscribe
	reply []byte
	err   error
}

// subscribe sends a Subscribe to a source's shard on another member as a
// control request on the data plane (messages.ControlSubscribe), and
// reports whether it did. An inline source's location, with its bytes,
// comes back in the answer; any other update comes as an actor message,
// as for a Subscribe sent as one (see shard.ServeSubscribe). A Reduce of
// small objects then waits for no actor message from the sources' shards:
// that fan-out was the largest step of a 1 KiB AllReduce.
func (c *Coordinator) subscribe(ctx actor.Context, to *actor.PID, sub *messages.Subscribe) bool {
	if c.cfg.SubscribeAt == nil || c.cfg.CallData == nil {
		return false
	}
	addr := c.cfg.SubscribeAt(to)
	if addr == "" {
		return false
	}
	self := ctx.Self()
	id := sub.GetObjectId()
	req, err := proto.Marshal(&messages.Subscribe{ObjectId: id, LocatedBefore: sub.GetLocatedBefore(),
		Subscriber: &messages.NodeRef{Address: self.GetAddress(), ActorId: self.GetId()}})
	if err != nil {
		return false
	}
	cctx, cancel := context.WithTimeout(context.Background(), subscribeCallTimeout)
	// One call per source is enough to end at Stopping: a resubscription's
	// call replaces the earlier one here, which ends by its own deadline.
	c.subscribing[id] = cancel
	root, call, over := ctx.ActorSystem().Root, c.cfg.CallData, c.over
	go func() {
		defer cancel()
		b, err := call(cctx, addr, messages.ControlSubscribe, req)
		if over.Load() {
			// The Reduce ended while the call ran. Its Unsubscribe, an
			// actor message, keeps no order with this call and may have
			// reached the shard first: end the subscription again, from
			// the coordinator (the shard knows its subscribers by PID).
			// A Reduce that is over when this goroutine looks sent its
			// own Unsubscribe after this subscription was made.
			root.RequestWithCustomSender(to, &messages.Unsubscribe{ObjectId: id}, self)
			return
		}
		root.Send(self, &subscribeAnswered{to: to, sub: sub, reply: b, err: err})
	}()
	return true
}

// subscribeAnswered takes the answer to a Subscribe on the data plane:
// its inline updates, or nothing (the updates come as actor messages). A
// call that failed may not have reached the shard: the Subscribe goes
// again as an actor message (a subscriber subscribed twice is subscribed
// once).
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
		c.cfg.Log.WithField("reduce", c.id).WithField("source", m.sub.GetObjectId()).WithField("error", err).
			Debug("subscribe on the data plane failed; sending it as an actor message")
		ctx.Request(m.to, m.sub)
		return
	}
	if len(a.GetUpdates()) > 0 {
		c.locatedAt = now
	}
	for _, u := range a.GetUpdates() {
		if h := c.cfg.BeforeReceive; h != nil {
			h(c.id, u) // the hook sees a location as it came, on either path
		}
		c.drain(ctx, c.r.Located(u, now))
		if c.r.Over() {
			return
		}
	}
}
