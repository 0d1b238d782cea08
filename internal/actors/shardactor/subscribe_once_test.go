package shardactor

import (
	"context"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/hoplite-go/hoplite/messages"
)

// A Subscribe with once_below answered with an inline object's bytes
// leaves the shard without a subscriber, on the data plane and as an
// actor message: the subscriber need not unsubscribe, and the shard
// watches nothing for it. One the shard cannot answer so (the object
// not created yet) stands, and its later updates come.
func TestSubscribeOnceLeavesNoSubscriber(t *testing.T) {
	system := actor.NewActorSystem()
	defer system.Shutdown()
	shard, err := system.Root.SpawnNamed(NewShardProps(ShardConfig{}), "shard-once")
	if err != nil {
		t.Fatal(err)
	}
	store := system.Root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
	creator := &messages.NodeRef{NodeId: "n1", Address: store.GetAddress(), ActorId: store.GetId()}
	updates := make(chan *messages.LocationUpdate, 16)
	sub := system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if u, ok := ctx.Message().(*messages.LocationUpdate); ok {
			updates <- u
		}
	}))
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
	subscribers := func() int {
		t.Helper()
		return request(CountObjects{}).(ObjectCount).Subscribers
	}
	small := []byte("sixteen bytes!!!")
	for _, id := range []string{"a", "b"} {
		request(&messages.CreateObject{ObjectId: id, Size: int64(len(small)), Creator: creator, HasInline: true, InlineData: small})
	}
	once := int64(64 << 10)

	req, _ := proto.Marshal(&messages.SubscribeBatch{Subscribes: []*messages.Subscribe{
		{ObjectId: "a", OnceBelow: once, Subscriber: &messages.NodeRef{Address: sub.GetAddress(), ActorId: sub.GetId()}}}})
	b, err := ServeSubscribe(ctx, system.Root, func(string) *actor.PID { return shard }, req)
	if err != nil {
		t.Fatal(err)
	}
	var a messages.SubscribeAnswer
	if err := proto.Unmarshal(b, &a); err != nil {
		t.Fatal(err)
	}
	if u := a.GetUpdates(); len(u) != 1 || !u[0].GetEnded() || string(u[0].GetInlineData()) != string(small) {
		t.Fatalf("answer %v, want a's bytes, ended", u)
	}
	if n := subscribers(); n != 0 {
		t.Fatalf("%d subscribers after the data plane's answer ended the subscription", n)
	}

	system.Root.RequestWithCustomSender(shard, &messages.Subscribe{ObjectId: "b", OnceBelow: once}, sub)
	select {
	case u := <-updates:
		if u.GetObjectId() != "b" || !u.GetEnded() || !u.GetHasInline() {
			t.Fatalf("update %v, want b's bytes, ended", u)
		}
	case <-ctx.Done():
		t.Fatal("no answer to the Subscribe")
	}
	if n := subscribers(); n != 0 {
		t.Fatalf("%d subscribers after an answer that ended the subscription", n)
	}

	system.Root.RequestWithCustomSender(shard, &messages.Subscribe{ObjectId: "later", OnceBelow: once}, sub)
	if n := subscribers(); n != 1 {
		t.Fatalf("%d subscribers after a Subscribe of an object not created yet, want 1", n)
	}
	request(&messages.CreateObject{ObjectId: "later", Size: int64(len(small)), Creator: creator, HasInline: true, InlineData: small})
	select {
	case u := <-updates:
		if u.GetObjectId() != "later" || u.GetEnded() {
			t.Fatalf("update %v, want later's location of the standing subscription", u)
		}
	case <-ctx.Done():
		t.Fatal("no update of the standing subscription")
	}
}
