package member

import (
	"context"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/messages"
)

// EventSubscriber is a client's subscription to one member's event relay
// (EventRelayPID): its actor receives the relay's batches, its Pump (a
// goroutine) delivers them and has the actor acknowledge each once
// delivered, so that the relay sends no more than one batch ahead of the
// reader.
type EventSubscriber struct {
	relay    *actor.PID
	answered chan *messages.SubscribeEventsReply
	batches  chan *messages.EventBatch // closed when the subscription ends
	closed   bool
	// dropped counts the events of batches beyond the relay's one
	// unacknowledged (none, unless it misbehaves): the next batch
	// reports them.
	dropped int64
}

// NewEventSubscriber is the subscriber of the relay at relay; spawned, it
// subscribes, and Answered gives the relay's answer.
func NewEventSubscriber(relay *actor.PID) *EventSubscriber {
	return &EventSubscriber{relay: relay, answered: make(chan *messages.SubscribeEventsReply, 1),
		batches: make(chan *messages.EventBatch, 2)}
}

// Answered gives the relay's answer to the subscription, or an
// UNAVAILABLE one if the relay is not there or stopped first.
func (s *EventSubscriber) Answered() <-chan *messages.SubscribeEventsReply { return s.answered }

// ackDue asks the subscriber's actor to acknowledge a delivered batch.
type ackDue struct{ seq uint64 }

func (s *EventSubscriber) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		ctx.Watch(s.relay)
		ctx.Request(s.relay, &messages.SubscribeEvents{})
	case *messages.SubscribeEventsReply:
		s.answer(m)
	case *actor.DeadLetterResponse:
		s.answer(&messages.SubscribeEventsReply{Error: messages.Errorf(messages.ErrorCode_UNAVAILABLE,
			"the member at %s runs no event relay (another release?)", s.relay.GetAddress())})
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
			"the member at %s stopped before it subscribed", s.relay.GetAddress())})
		if !s.closed {
			s.closed = true
			close(s.batches)
		}
	}
}

// answer hands the subscription's first answer to Answered.
func (s *EventSubscriber) answer(r *messages.SubscribeEventsReply) {
	select {
	case s.answered <- r:
	default:
	}
}

// Pump delivers the batches to out until the subscription ends or ctx
// does; self is the subscriber's actor, member the relaying member's id
// (what the relay's answer names), which a report of dropped events
// carries.
func (s *EventSubscriber) Pump(ctx context.Context, root *actor.RootContext, self *actor.PID, member string, out chan<- *messages.ClusterEvent) {
	for b := range s.batches {
		evs := b.GetEvents()
		if b.GetDropped() > 0 {
			evs = append([]*messages.ClusterEvent{{Member: member,
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
