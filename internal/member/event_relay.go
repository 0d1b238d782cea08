package member

import (
	"slices"
	"sync/atomic"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/eventstream"

	"github.com/hoplite-go/hoplite/events"
	"github.com/hoplite-go/hoplite/internal/actorutil"
	"github.com/hoplite-go/hoplite/messages"
)

// A member's event relay sends the events of package events that its
// actor system publishes to subscribers in other processes (clients,
// see Client.Events), as messages.ClusterEvent. Each subscriber has a
// queue of relayQueue events and at most one EventBatch unacknowledged:
// a subscriber that reads slower than events come loses the newest,
// which the next batch counts. The subscription ends when the
// subscriber stops (the relay watches it; a process that dies stops
// its actors).
const (
	eventRelayName = "events"
	relayQueue     = 1024
	relayBatch     = 128
	maxSubscribers = 64
)

// EventRelayPID is the event relay of the member whose actor system is
// at address: a messages.SubscribeEvents sent there (with a sender, the
// subscriber) subscribes to the member's events.
func EventRelayPID(address string) *actor.PID { return actor.NewPID(address, eventRelayName) }

type eventRelay struct {
	member string
	subs   map[string]*eventSub
	// active mirrors len(subs) for the EventStream handler, which runs
	// in the publisher's goroutine: no subscriber, no conversion.
	active atomic.Int32
	stream *eventstream.Subscription
}

type eventSub struct {
	pid      *actor.PID
	queue    []*messages.ClusterEvent
	dropped  int64
	seq      uint64
	inFlight bool
}

func eventRelayProps(member string) *actor.Props {
	return actorutil.Props(func() actor.Actor { return &eventRelay{member: member, subs: map[string]*eventSub{}} })
}

func (r *eventRelay) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		system, self := ctx.ActorSystem(), ctx.Self()
		r.stream = system.EventStream.Subscribe(func(e any) {
			if r.active.Load() == 0 {
				return
			}
			if ev := clusterEvent(r.member, e); ev != nil {
				system.Root.Send(self, ev)
			}
		})
	case *actor.Stopping:
		ctx.ActorSystem().EventStream.Unsubscribe(r.stream)
	case *messages.SubscribeEvents:
		r.subscribe(ctx)
	case *messages.ClusterEvent:
		for _, s := range r.subs {
			if len(s.queue) >= relayQueue {
				s.dropped++
				continue
			}
			s.queue = append(s.queue, m)
			r.flush(ctx, s)
		}
	case *messages.EventBatchAck:
		if s := r.subs[PIDKey(ctx.Sender())]; s != nil && m.GetSeq() == s.seq {
			s.inFlight = false
			r.flush(ctx, s)
		}
	case *actor.Terminated:
		if _, ok := r.subs[PIDKey(m.GetWho())]; ok {
			delete(r.subs, PIDKey(m.GetWho()))
			r.active.Store(int32(len(r.subs)))
		}
	case eventRelayCount:
		ctx.Respond(len(r.subs))
	}
}

// eventRelayCount asks a relay for its number of subscribers.
type eventRelayCount struct{}

func (r *eventRelay) subscribe(ctx actor.Context) {
	from := ctx.Sender()
	if from == nil {
		return
	}
	if _, ok := r.subs[PIDKey(from)]; !ok {
		if len(r.subs) >= maxSubscribers {
			ctx.Respond(&messages.SubscribeEventsReply{Member: r.member, Error: messages.Errorf(messages.ErrorCode_RESOURCE_EXHAUSTED,
				"member %s relays its events to %d subscribers at most", r.member, maxSubscribers)})
			return
		}
		ctx.Watch(from)
		r.subs[PIDKey(from)] = &eventSub{pid: from}
		r.active.Store(int32(len(r.subs)))
	}
	ctx.Respond(&messages.SubscribeEventsReply{Member: r.member})
}

// flush sends s its next batch unless one is unacknowledged.
func (r *eventRelay) flush(ctx actor.Context, s *eventSub) {
	if s.inFlight || len(s.queue) == 0 && s.dropped == 0 {
		return
	}
	n := min(len(s.queue), relayBatch)
	s.seq++
	ctx.Send(s.pid, &messages.EventBatch{Seq: s.seq, Events: s.queue[:n], Dropped: s.dropped})
	// A copy: the batch holds the sent events until it is serialized.
	s.queue, s.dropped, s.inFlight = slices.Clone(s.queue[n:]), 0, true
}

// PIDKey is a PID as a map key: its address and id.
func PIDKey(p *actor.PID) string { return p.GetAddress() + "/" + p.GetId() }

// clusterEvent is e as a ClusterEvent that member relays, nil for the
// events it does not relay: the transfers' and the Reduce trees' (a
// live view's, many per object) and the barriers' states.
func clusterEvent(member string, e any) *messages.ClusterEvent {
	ev := &messages.ClusterEvent{Member: member, AtUnixNano: time.Now().UnixNano()}
	switch e := e.(type) {
	case *events.NodeFailed:
		ev.AtUnixNano = e.At.UnixNano()
		ev.Event = &messages.ClusterEvent_NodeFailed{NodeFailed: &messages.NodeFailedEvent{
			Node: e.Node, Address: e.Address, DetectedBy: e.DetectedBy, Forwarder: e.Forwarder}}
	case *events.SenderSwitched:
		ev.Event = &messages.ClusterEvent_SenderSwitched{SenderSwitched: &messages.SenderSwitchedEvent{
			Object: e.Object, Receiver: e.Receiver, From: e.From, To: e.To, Offset: e.Offset}}
	case *events.TreeNodeReplaced:
		ev.Event = &messages.ClusterEvent_TreeNodeReplaced{TreeNodeReplaced: &messages.TreeNodeReplacedEvent{
			Reduce: e.Reduce, Position: int32(e.Position), Failed: e.Failed, Replacement: e.Replacement}}
	case *events.AncestorsInvalidated:
		pos := make([]int32, len(e.Positions))
		for i, p := range e.Positions {
			pos[i] = int32(p)
		}
		ev.Event = &messages.ClusterEvent_AncestorsInvalidated{AncestorsInvalidated: &messages.AncestorsInvalidatedEvent{
			Reduce: e.Reduce, Positions: pos}}
	case *events.ShardRebuilt:
		ev.Event = &messages.ClusterEvent_ShardRebuilt{ShardRebuilt: &messages.ShardRebuiltEvent{Shard: e.Shard, Host: e.Host}}
	case *events.ReduceDone:
		var err *messages.Error
		if e.Err != nil {
			err = messages.AsError(e.Err)
		}
		ev.Event = &messages.ClusterEvent_ReduceDone{ReduceDone: &messages.ReduceDoneEvent{
			Reduce: e.Reduce, Target: e.Target, Reduced: slices.Clone(e.Reduced), ElapsedUs: e.Elapsed.Microseconds(), Error: err}}
	case *events.AllReduceReplanned:
		ev.Event = &messages.ClusterEvent_AllReduceReplanned{AllReduceReplanned: &messages.AllReduceReplannedEvent{
			Reduce: e.Reduce, Node: e.Node, Lost: slices.Clone(e.Lost), Num: int32(e.Num), From: e.From}}
	case *events.BarrierDeliveryFailed:
		ev.AtUnixNano = e.At.UnixNano()
		ev.Event = &messages.ClusterEvent_BarrierDeliveryFailed{BarrierDeliveryFailed: &messages.BarrierDeliveryFailedEvent{
			Barrier: e.Barrier, Label: e.Label, Host: e.Host, Reason: e.Reason, Manager: e.Manager}}
	case *events.BarrierTookOver:
		ev.AtUnixNano = e.At.UnixNano()
		ev.Event = &messages.ClusterEvent_BarrierTookOver{BarrierTookOver: &messages.BarrierTookOverEvent{
			Barrier: e.Barrier, Manager: e.Manager, Member: e.Member, Epoch: e.Epoch}}
	default:
		return nil
	}
	return ev
}
