package cluster

import (
	"context"
	"sync"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/internal/actorutil"
	"github.com/hoplite-go/hoplite/internal/member"
	"github.com/hoplite-go/hoplite/messages"
)

// EventsBuffer is the capacity of the channel Events returns. A reader
// slower than that lets the members' relays queue (relayQueue events
// each) and then drop events, which an EventsDropped reports in place.
const EventsBuffer = 256

// Events subscribes to the recovery and collective events (package
// events: NodeFailed, SenderSwitched, TreeNodeReplaced,
// AncestorsInvalidated, ShardRebuilt, ReduceDone, AllReduceReplanned,
// BarrierDeliveryFailed, BarrierTookOver) of every live member, as each
// member publishes them (so each survivor reports a NodeFailed of its
// own). Events of one member come in its order. A member that fails
// ends its part; the client asks for the live members every few
// seconds and subscribes to those that joined (a member that restarts
// is a new one), at most 64 at once. The channel closes when ctx ends,
// or when every subscribed member has gone and no member answers.
// Subscribing waits at most the client's timeout (or ctx's deadline); a
// member that does not subscribe in that time is left out until the
// next look. It fails UNAVAILABLE if no member subscribes,
// RESOURCE_EXHAUSTED if the members relay to too many subscribers
// already.
func (c *Client) Events(ctx context.Context) (<-chan *messages.ClusterEvent, error) {
	sctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	r, err := c.liveHello(sctx)
	if err != nil {
		return nil, err
	}
	es := &eventStream{c: c, ctx: ctx, out: make(chan *messages.ClusterEvent, EventsBuffer),
		subs: map[string]*actor.PID{}, ended: make(chan string), done: make(chan struct{})}
	if err := es.subscribeNew(sctx, r); len(es.subs) == 0 {
		if err == nil {
			err = messages.Errorf(messages.ErrorCode_UNAVAILABLE, "no member to subscribe to")
		}
		return nil, err
	}
	go es.run()
	return es.out, nil
}

// eventStream is one Events call: its subscriptions, one per member id
// (run owns subs once Events returns).
type eventStream struct {
	c     *Client
	ctx   context.Context
	out   chan *messages.ClusterEvent
	subs  map[string]*actor.PID
	ended chan string   // a member's stream ended (its id)
	done  chan struct{} // closed when run stops: nobody reads ended
	pumps sync.WaitGroup
}

// subscribeNew subscribes to the members of r's view it has no stream
// of; it returns the first error of those that did not subscribe.
func (es *eventStream) subscribeNew(ctx context.Context, r *messages.MemberHelloReply) error {
	var firstErr error
	for i, id := range r.GetView() {
		if _, ok := es.subs[id]; ok || len(es.subs) >= maxEndpoints {
			continue
		}
		addr := r.GetViewAddresses()[i]
		s := member.NewEventSubscriber(EventRelayPID(addr))
		pid := es.c.system.Root.Spawn(actorutil.Props(func() actor.Actor { return s }))
		var reply *messages.SubscribeEventsReply
		select {
		case reply = <-s.Answered():
		case <-ctx.Done():
		}
		if err := messages.ErrOrNil(reply.GetError()); reply == nil || err != nil {
			if err == nil {
				err = messages.Errorf(messages.ErrorCode_UNAVAILABLE, "the event relay of member %s (at %s) did not answer", id, addr)
			}
			firstErr = cmpErr(firstErr, err)
			es.c.system.Root.Stop(pid)
			continue
		}
		relaying := reply.GetMember()
		es.subs[id] = pid
		es.pumps.Add(1)
		go func() {
			defer es.pumps.Done()
			s.Pump(es.ctx, es.c.system.Root, pid, relaying, es.out)
			select {
			case es.ended <- id:
			case <-es.done:
			}
		}()
	}
	return firstErr
}

// run looks for new members every refreshEvery, and at once when a
// member's stream ends, until ctx ends or no member is left.
func (es *eventStream) run() {
	t := time.NewTicker(refreshEvery)
	defer t.Stop()
	for {
		select {
		case <-es.ctx.Done():
			es.stop()
			return
		case id := <-es.ended:
			delete(es.subs, id)
			if len(es.subs) == 0 && !es.refresh() {
				es.stop()
				return
			}
		case <-t.C:
			if !es.refresh() && len(es.subs) == 0 {
				es.stop()
				return
			}
		}
	}
}

// refresh subscribes to the live members it has no stream of, and
// reports whether it has any stream.
func (es *eventStream) refresh() bool {
	ctx, cancel := context.WithTimeout(es.ctx, refreshEvery)
	defer cancel()
	if r, err := es.c.liveHello(ctx); err == nil {
		_ = es.subscribeNew(ctx, r) // those that did not subscribe are tried again at the next look
	}
	return len(es.subs) > 0
}

// stop ends every subscription and closes the channel once their pumps
// returned.
func (es *eventStream) stop() {
	close(es.done)
	for _, pid := range es.subs {
		es.c.system.Root.Stop(pid)
	}
	go func() {
		es.pumps.Wait()
		close(es.out)
	}()
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}
