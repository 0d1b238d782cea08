package cluster

import (
	"context"
	"sync"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/internal/actorutil"
	"github.com/hoplite-go/hoplite/messages"
)

// EventsBuffer is the capacity of the channel Events returns. A reader
// slower than that lets the members' relays queue (relayQueue events
// each) and then drop events, which an EventsDropped reports in place.
const EventsBuffer = 256

// Events subscribes to the recovery and collective events (package
// events: NodeFailed, SenderSwitched, TreeNodeReplaced,
// AncestorsInvalidated, ShardRebuilt, ReduceDone, AllReduceReplanned,
// BarrierDeliveryFailed, BarrierTookOver) of every member live when it
// is called, as each member publishes them (so each survivor reports a
// NodeFailed of its own). Events of one member come in its order. The
// channel closes when ctx ends or when every subscribed member has
// gone; a member that fails ends only its part, and a member that
// joins later is not subscribed (call Events again). Subscribing waits
// at most the client's timeout (or ctx's deadline); a member that does
// not subscribe in that time is left out. It fails UNAVAILABLE if no
// member subscribes, RESOURCE_EXHAUSTED if the members relay to too
// many subscribers already.
func (c *Client) Events(ctx context.Context) (<-chan *messages.ClusterEvent, error) {
	sctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	r, err := c.liveHello(sctx)
	if err != nil {
		return nil, err
	}
	out := make(chan *messages.ClusterEvent, EventsBuffer)
	var subs []*actor.PID
	var pumps sync.WaitGroup
	var firstErr error
	for _, addr := range r.GetViewAddresses() {
		s := &eventSubscriber{relay: EventRelayPID(addr), answered: make(chan *messages.SubscribeEventsReply, 1),
			batches: make(chan *messages.EventBatch, 2)}
		pid := c.system.Root.Spawn(actorutil.Props(func() actor.Actor { return s }))
		var reply *messages.SubscribeEventsReply
		select {
		case reply = <-s.answered:
		case <-sctx.Done():
		}
		if err := messages.ErrOrNil(reply.GetError()); reply == nil || err != nil {
			if err == nil {
				err = messages.Errorf(messages.ErrorCode_UNAVAILABLE, "the event relay of member %s did not answer", addr)
			}
			firstErr = cmpErr(firstErr, err)
			c.system.Root.Stop(pid)
			continue
		}
		s.member = reply.GetMember()
		subs = append(subs, pid)
		pumps.Add(1)
		go func() {
			defer pumps.Done()
			s.pump(ctx, c.system.Root, pid, out)
		}()
	}
	if len(subs) == 0 {
		return nil, firstErr
	}
	ended := make(chan struct{})
	go func() {
		pumps.Wait()
		close(out)
		close(ended)
	}()
	go func() {
		select {
		case <-ctx.Done():
		case <-ended:
		}
		for _, pid := range subs {
			c.system.Root.Stop(pid)
		}
	}()
	return out, nil
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// eventSubscriber is one member's subscription: its actor receives the
// relay's batches, its pump (a goroutine) delivers them and has the
// actor acknowledge each once delivered, so that the relay sends no
// more than one batch ahead of the reader.
type eventSubscriber struct {
	relay    *actor.PID
	answered chan *messages.SubscribeEventsReply
	batches  chan *messages.EventBatch // closed when the subscription ends
	member   string                    // the relaying member's id
	closed   bool
	// dropped counts the events of batches beyond the relay's one
	// unacknowledged (none, unless it misbehaves): the next batch
	// reports them.
	dropped int64
}

// ackDue asks the subscriber's actor to acknowledge a delivered batch.
type ackDue struct{ seq uint64 }

func (s *eventSubscriber) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		ctx.Watch(s.relay)
		ctx.Request(s.relay, &messages.SubscribeEvents{})
	case *messages.SubscribeEventsReply:
		s.answer(m)
	case *actor.DeadLetterResponse:
		s.answer(&messages.SubscribeEventsReply{Error: messages.Errorf(messages.ErrorCode_UNAVAILABLE,
			"member %s runs no event relay (another release?)", s.relay.GetAddress())})
	case *messages.EventBatch:
		if s.closed {
			return
		}
		m.Dropped += s.dropped
		select {
		case s.batches <- m:
			s.dropped = 0
		default:
			s.dropped = m.GetDropped() + int64(len(m.GetEvents())) // m.Dropped holds the earlier count
		}
	case ackDue:
		ctx.Request(s.relay, &messages.EventBatchAck{Seq: m.seq})
	case *actor.Terminated, *actor.Stopping:
		s.answer(&messages.SubscribeEventsReply{Error: messages.Errorf(messages.ErrorCode_UNAVAILABLE,
			"member %s stopped before it subscribed", s.relay.GetAddress())})
		if !s.closed {
			s.closed = true
			close(s.batches)
		}
	}
}

// answer hands the subscription's first answer to Events.
func (s *eventSubscriber) answer(r *messages.SubscribeEventsReply) {
	select {
	case s.answered <- r:
	default:
	}
}

// pump delivers the batches to out until the subscription ends or ctx
// does.
func (s *eventSubscriber) pump(ctx context.Context, root *actor.RootContext, self *actor.PID, out chan<- *messages.ClusterEvent) {
	for b := range s.batches {
		evs := b.GetEvents()
		if b.GetDropped() > 0 {
			evs = append([]*messages.ClusterEvent{{Member: s.member,
				Event: &messages.ClusterEvent_Dropped{Dropped: &messages.EventsDropped{Count: b.GetDropped()}}}}, evs...)
		}
		for _, ev := range evs {
			select {
			case out <- ev:
			case <-ctx.Done():
				return
			}
		}
		root.Send(self, ackDue{b.GetSeq()})
	}
}
