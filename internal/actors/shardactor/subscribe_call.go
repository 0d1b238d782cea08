package shardactor

import (
	"context"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/hoplite-go/hoplite/internal/actorutil"
	"github.com/hoplite-go/hoplite/internal/directory"
	"github.com/hoplite-go/hoplite/internal/outbox"
	"github.com/hoplite-go/hoplite/messages"
)

// servedSubscribe is a Subscribe that arrived on the data plane, handed
// by ServeSubscribe to the object's shard on the same member, with the
// subscriber it names and the channel for the answer (buffered: the shard
// never waits on it).
type servedSubscribe struct {
	sub        *messages.Subscribe
	subscriber *actor.PID
	done       chan *messages.SubscribeAnswer
}

// servedGroup is a grouped SubscribeBatch's Subscribes to one shard, all
// naming one subscriber, handed over in one message: the shard steps
// them together, so no other update comes between them, and sends the
// updates they make to the subscriber as one LocationUpdateBatch.
type servedGroup struct {
	subs       []*messages.Subscribe
	subscriber *actor.PID
	done       chan *messages.SubscribeAnswer
}

// ServeSubscribe answers a Reduce coordinator's SubscribeBatch that
// arrived on the data plane (messages.ControlSubscribe): it hands each
// Subscribe to its object's shard on this member, which subscribes the
// coordinator named in Subscribe.subscriber, and returns the encoded
// SubscribeAnswer of them all. One request per member, not one per
// source: in a 1 KiB reduce of 8 on the testbed, the sources' shards sat
// on four or five of the other members, and a member with three of them
// answered three requests in turn, each a wake-up and a write.
//
// An inline source's current location comes back in the answer: a Reduce
// of small objects waits for nothing else, and a fan-out of data-plane
// requests to seven members costs a third to a half of the same fan-out
// of actor requests on the testbed (the data-rtt and actor-rtt floors of
// a 1 KiB reduce). Such an update carries the object's bytes and needs no
// order against the later updates, which keep coming as actor messages
// (another copy of the bytes, or a deletion, which the coordinator never
// lets an arrival undo). Any other object's updates (a copy's state, a
// loss) must keep their order, so they go as actor messages, as for a
// Subscribe sent as one, and are not in the answer. If any object's shard
// is not on this member or not running, the whole batch is UNAVAILABLE
// and subscribes nothing; the caller then subscribes by actor message.
// ctx must have a deadline.
func ServeSubscribe(ctx context.Context, root *actor.RootContext, shardFor func(id string) *actor.PID, req []byte) ([]byte, error) {
	var batch messages.SubscribeBatch
	if err := proto.Unmarshal(req, &batch); err != nil {
		return nil, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "malformed SubscribeBatch on the data plane: %v", err)
	}
	subs := batch.GetSubscribes()
	if len(subs) == 0 {
		return nil, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "SubscribeBatch on the data plane without a Subscribe")
	}
	if _, ok := ctx.Deadline(); !ok {
		return nil, messages.Errorf(messages.ErrorCode_INTERNAL, "Subscribe on the data plane without a deadline")
	}
	shards := make([]*actor.PID, len(subs))
	for i, sub := range subs {
		id, to := sub.GetObjectId(), sub.GetSubscriber()
		if id == "" || to.GetAddress() == "" || to.GetActorId() == "" {
			return nil, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "Subscribe on the data plane without an object id or a subscriber")
		}
		pid := shardFor(id)
		if pid == nil || pid.GetAddress() != root.ActorSystem().Address() {
			return nil, messages.Errorf(messages.ErrorCode_UNAVAILABLE, "the directory shard of %q is not on this member (%s)", id, pid.GetAddress())
		}
		if _, ok := root.ActorSystem().ProcessRegistry.Get(pid); !ok {
			return nil, messages.Errorf(messages.ErrorCode_UNAVAILABLE, "directory shard %s is not running", pid.GetId())
		}
		shards[i] = pid
	}
	done := make(chan *messages.SubscribeAnswer, len(subs))
	answers := len(subs)
	if batch.GetGrouped() {
		answers = sendGroups(root, shards, subs, done)
	} else {
		for i, sub := range subs {
			root.Send(shards[i], servedSubscribe{sub: sub, subscriber: sub.GetSubscriber().PID(), done: done})
		}
	}
	answer := &messages.SubscribeAnswer{}
	for range answers {
		select {
		case a := <-done:
			answer.Updates = append(answer.Updates, a.GetUpdates()...)
		case <-ctx.Done():
			// A shard stopped with it in its mailbox, or is swamped: the
			// caller subscribes by actor message (a second subscription of
			// the same subscriber is one).
			if ctx.Err() == context.DeadlineExceeded {
				return nil, messages.Errorf(messages.ErrorCode_TIMEOUT, "no answer from the directory shards before the deadline")
			}
			return nil, messages.AsError(ctx.Err())
		}
	}
	b, err := proto.Marshal(answer)
	if err != nil {
		return nil, messages.Errorf(messages.ErrorCode_INTERNAL, "encode SubscribeAnswer: %v", err)
	}
	return b, nil
}

// sendGroups hands each shard the Subscribes of a grouped batch that go
// to it and name the same subscriber, in one servedGroup each, in the
// order of each group's first Subscribe, and returns how many answers
// will come on done.
func sendGroups(root *actor.RootContext, shards []*actor.PID, subs []*messages.Subscribe, done chan *messages.SubscribeAnswer) int {
	type groupKey struct{ shard, subscriber string }
	type group struct {
		shard *actor.PID
		g     servedGroup
	}
	var order []*group
	groups := map[groupKey]*group{}
	for i, sub := range subs {
		to := sub.GetSubscriber().PID()
		k := groupKey{actorutil.Key(shards[i]), actorutil.Key(to)}
		g := groups[k]
		if g == nil {
			g = &group{shard: shards[i], g: servedGroup{subscriber: to, done: done}}
			groups[k] = g
			order = append(order, g)
		}
		g.g.subs = append(g.g.subs, sub)
	}
	for _, g := range order {
		root.Send(g.shard, g.g)
	}
	return len(order)
}

// inlineAnswer is the output of a Subscribe stepped on the data plane:
// the Box left to carry out, and the answer the caller gets.
type inlineAnswer struct {
	outbox.Box
	Answer *messages.SubscribeAnswer
}

// answering is the table stepped for a Subscribe that came on the data
// plane: its output's sends are split by answerInline, so a source whose
// updates all carry inline bytes is answered in the reply, not by
// message.
type answering struct{ t *directory.LocationTable }

func (c answering) Step(now time.Time, ev directory.Subscribe) inlineAnswer {
	a, rest := answerInline(c.t.Step(now, ev))
	return inlineAnswer{Box: rest, Answer: a}
}

// answerInline splits what a data-plane subscription sends its
// subscriber: if every update carries inline bytes, they are the answer
// and nothing goes as a message; otherwise all go as messages, in order.
func answerInline(out outbox.Box) (*messages.SubscribeAnswer, outbox.Box) {
	a := &messages.SubscribeAnswer{}
	for _, o := range out.Sends {
		u, ok := o.Msg.(*messages.LocationUpdate)
		if !ok || !u.GetHasInline() || u.GetDeleted() || u.GetError() != nil {
			return &messages.SubscribeAnswer{}, out
		}
		a.Updates = append(a.Updates, u)
	}
	out.Sends = nil
	return a, out
}

// groupUpdates has the LocationUpdates among sends that go to the
// subscriber named by key go as LocationUpdateBatches: each run of them
// (ended by another message to that subscriber) as one batch, where its
// first update was, so the subscriber hears everything in the order it
// would have one by one. A run of one stays a LocationUpdate. Sends to
// anyone else keep their place.
func groupUpdates(sends []outbox.Send, key string) []outbox.Send {
	var out []outbox.Send
	run := -1 // index in out of the open run's batch, -1 for none
	for _, o := range sends {
		pid, ok := o.To.(*actor.PID)
		if !ok || actorutil.Key(pid) != key {
			out = append(out, o)
			continue
		}
		u, ok := o.Msg.(*messages.LocationUpdate)
		if !ok {
			run = -1
			out = append(out, o)
			continue
		}
		if run < 0 {
			run = len(out)
			out = append(out, o)
			continue
		}
		switch b := out[run].Msg.(type) {
		case *messages.LocationUpdate:
			out[run].Msg = &messages.LocationUpdateBatch{Updates: []*messages.LocationUpdate{b, u}}
		case *messages.LocationUpdateBatch:
			b.Updates = append(b.Updates, u)
		}
	}
	return out
}
