package directory

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
// object's updates come as actor messages, in order, and the answer is
// empty; so does an object that does not exist yet, once it is created.
func TestServeSubscribe(t *testing.T) {
	system := actor.NewActorSystem()
	defer system.Shutdown()
	shard, err := system.Root.SpawnNamed(NewShardProps(ShardConfig{}), "shard-subscribe")
	if err != nil {
		t.Fatal(err)
	}
	shardFor := func(string) *actor.PID { return shard }
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
		res, err := system.Root.RequestFuture(shard, msg, 5*time.Second).Result()
		if err != nil {
			t.Fatalf("%T: %v", msg, err)
		}
		return res
	}
	serve := func(id string) *messages.SubscribeAnswer {
		t.Helper()
		req, _ := proto.Marshal(&messages.Subscribe{ObjectId: id, Subscriber: subscriber})
		b, err := ServeSubscribe(ctx, system.Root, shardFor, req)
		if err != nil {
			t.Fatalf("ServeSubscribe(%s): %v", id, err)
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

	bad, _ := proto.Marshal(&messages.Subscribe{ObjectId: "small"})
	if _, err := ServeSubscribe(ctx, system.Root, shardFor, bad); !errors.Is(err, messages.ErrInvalidArgument) {
		t.Fatalf("a Subscribe without a subscriber: %v, want INVALID_ARGUMENT", err)
	}
	elsewhere := func(string) *actor.PID { return actor.NewPID("127.0.0.1:1", "shard-subscribe") }
	ok, _ := proto.Marshal(&messages.Subscribe{ObjectId: "small", Subscriber: subscriber})
	if _, err := ServeSubscribe(ctx, system.Root, elsewhere, ok); !errors.Is(err, messages.ErrUnavailable) {
		t.Fatalf("a shard on another member: %v, want UNAVAILABLE", err)
	}
}
