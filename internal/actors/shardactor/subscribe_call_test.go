package shardactor

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/hoplite-go/hoplite/messages"
)

// A Subscribe on the data plane answers an inline source's location, with
// its bytes, in the answer and not as an actor message; the subscription
// holds, so later updates (a deletion) come as actor messages. Any other
// object's updates come as actor messages, in order, and are not in the
// answer; so does an object that does not exist yet, once it is created.
// A batch subscribes to each of its objects and answers the inline ones'
// locations together; a batch with an object whose shard is elsewhere
// subscribes to none.
func TestServeSubscribe(t *testing.T) {
	system := actor.NewActorSystem()
	defer system.Shutdown()
	shard, err := system.Root.SpawnNamed(NewShardProps(ShardConfig{}), "shard-subscribe")
	if err != nil {
		t.Fatal(err)
	}
	// A second shard on the same member: a batch may name objects of
	// several.
	shard2, err := system.Root.SpawnNamed(NewShardProps(ShardConfig{}), "shard-subscribe-2")
	if err != nil {
		t.Fatal(err)
	}
	shardFor := func(id string) *actor.PID {
		if id == "two" {
			return shard2
		}
		return shard
	}
	store := system.Root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
	creator := &messages.NodeRef{NodeId: "n1", Address: store.GetAddress(), ActorId: store.GetId()}
	updates := make(chan *messages.LocationUpdate, 16)
	sub := system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if u, ok := ctx.Message().(*messages.LocationUpdate); ok {
			updates <- u
		}
	}))
	subscriber := &messages.NodeRef{Address: sub.GetAddress(), ActorId: sub.GetId()}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	request := func(msg any) any {
		t.Helper()
		to := shard
		if c, ok := msg.(*messages.CreateObject); ok {
			to = shardFor(c.GetObjectId())
		}
		res, err := system.Root.RequestFuture(to, msg, 5*time.Second).Result()
		if err != nil {
			t.Fatalf("%T: %v", msg, err)
		}
		return res
	}
	batch := func(ids ...string) []byte {
		b := &messages.SubscribeBatch{}
		for _, id := range ids {
			b.Subscribes = append(b.Subscribes, &messages.Subscribe{ObjectId: id, Subscriber: subscriber})
		}
		req, _ := proto.Marshal(b)
		return req
	}
	serve := func(ids ...string) *messages.SubscribeAnswer {
		t.Helper()
		b, err := ServeSubscribe(ctx, system.Root, shardFor, batch(ids...))
		if err != nil {
			t.Fatalf("ServeSubscribe(%v): %v", ids, err)
		}
		var a messages.SubscribeAnswer
		if err := proto.Unmarshal(b, &a); err != nil {
			t.Fatal(err)
		}
		return &a
	}
	next := func(what string) *messages.LocationUpdate {
		t.Helper()
		select {
		case u := <-updates:
			return u
		case <-ctx.Done():
			t.Fatalf("no actor message for %s", what)
			return nil
		}
	}
	small := []byte("sixteen bytes!!!")
	request(&messages.CreateObject{ObjectId: "small", Size: int64(len(small)), Creator: creator, HasInline: true, InlineData: small})
	request(&messages.CreateObject{ObjectId: "big", Size: 1 << 20, Creator: creator})

	a := serve("small")
	if len(a.GetUpdates()) != 1 || !a.GetUpdates()[0].GetHasInline() || !bytes.Equal(a.GetUpdates()[0].GetInlineData(), small) {
		t.Fatalf("inline source: answer %v, want its location with its bytes", a.GetUpdates())
	}
	request(&messages.DeleteObject{ObjectId: "small"})
	if u := next("the deletion"); u.GetObjectId() != "small" || !u.GetDeleted() {
		t.Fatalf("first actor message %v, want the deletion of small (its location went in the answer only)", u)
	}

	if a := serve("big"); len(a.GetUpdates()) != 0 {
		t.Fatalf("a source that is not inline: answer %v, want empty", a.GetUpdates())
	}
	if u := next("big's location"); u.GetObjectId() != "big" || u.GetNode().GetNodeId() != "n1" || u.GetHasInline() {
		t.Fatalf("actor message %v, want big's location on n1", u)
	}

	if a := serve("later"); len(a.GetUpdates()) != 0 {
		t.Fatalf("an object not created yet: answer %v, want empty", a.GetUpdates())
	}
	request(&messages.CreateObject{ObjectId: "later", Size: int64(len(small)), Creator: creator, HasInline: true, InlineData: small})
	if u := next("later's location"); u.GetObjectId() != "later" || !bytes.Equal(u.GetInlineData(), small) {
		t.Fatalf("actor message %v, want later's location once it exists", u)
	}

	// Two inline objects (on two shards) and a large one in one batch:
	// both inline locations in the answer, the large one's as an actor
	// message.
	two := []byte("another sixteen!")
	request(&messages.CreateObject{ObjectId: "one", Size: int64(len(small)), Creator: creator, HasInline: true, InlineData: small})
	request(&messages.CreateObject{ObjectId: "two", Size: int64(len(two)), Creator: creator, HasInline: true, InlineData: two})
	request(&messages.CreateObject{ObjectId: "large", Size: 1 << 20, Creator: creator})
	a = serve("one", "large", "two")
	got := map[string][]byte{}
	for _, u := range a.GetUpdates() {
		got[u.GetObjectId()] = u.GetInlineData()
	}
	if len(a.GetUpdates()) != 2 || !bytes.Equal(got["one"], small) || !bytes.Equal(got["two"], two) {
		t.Fatalf("a batch of two inline objects and a large one: answer %v, want both inline locations", a.GetUpdates())
	}
	if u := next("large's location"); u.GetObjectId() != "large" || u.GetNode().GetNodeId() != "n1" {
		t.Fatalf("actor message %v, want large's location on n1", u)
	}

	for name, req := range map[string][]byte{
		"a Subscribe without a subscriber": func() []byte {
			b, _ := proto.Marshal(&messages.SubscribeBatch{Subscribes: []*messages.Subscribe{{ObjectId: "small"}}})
			return b
		}(),
		"an empty batch":     batch(),
		"a batch with no id": batch("one", ""),
		"not a batch":        []byte{0xff, 0xff},
	} {
		if _, err := ServeSubscribe(ctx, system.Root, shardFor, req); !errors.Is(err, messages.ErrInvalidArgument) {
			t.Fatalf("%s: %v, want INVALID_ARGUMENT", name, err)
		}
	}
	// One object's shard elsewhere: UNAVAILABLE, and no subscription to
	// the other (its deletion reaches no subscriber).
	elsewhere := func(id string) *actor.PID {
		if id == "two" {
			return actor.NewPID("127.0.0.1:1", "shard-subscribe")
		}
		return shard
	}
	request(&messages.CreateObject{ObjectId: "three", Size: int64(len(small)), Creator: creator, HasInline: true, InlineData: small})
	if _, err := ServeSubscribe(ctx, system.Root, elsewhere, batch("three", "two")); !errors.Is(err, messages.ErrUnavailable) {
		t.Fatalf("a shard on another member: %v, want UNAVAILABLE", err)
	}
	request(&messages.DeleteObject{ObjectId: "three"})
	request(&messages.DeleteObject{ObjectId: "one"})
	if u := next("one's deletion"); u.GetObjectId() != "one" || !u.GetDeleted() {
		t.Fatalf("actor message %v, want one's deletion (three was never subscribed to)", u)
	}
}
