package shardactor

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/hoplite-go/hoplite/internal/actorutil"
	"github.com/hoplite-go/hoplite/internal/outbox"
	"github.com/hoplite-go/hoplite/messages"
)

// A grouped SubscribeBatch's Subscribes to streamed objects of one shard
// are answered in one LocationUpdateBatch, in the batch's order; those of
// another shard in another; an inline object's location still comes in
// the answer; an update made later comes alone, after the batch. Without
// grouped, each update is a message of its own, as older coordinators
// take them.
func TestServeSubscribeGrouped(t *testing.T) {
	system := actor.NewActorSystem()
	defer system.Shutdown()
	shard, err := system.Root.SpawnNamed(NewShardProps(ShardConfig{}), "shard-group")
	if err != nil {
		t.Fatal(err)
	}
	shard2, err := system.Root.SpawnNamed(NewShardProps(ShardConfig{}), "shard-group-2")
	if err != nil {
		t.Fatal(err)
	}
	shardFor := func(id string) *actor.PID {
		if id == "d" || id == "e" {
			return shard2
		}
		return shard
	}
	store := system.Root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
	creator := &messages.NodeRef{NodeId: "n1", Address: store.GetAddress(), ActorId: store.GetId()}
	got := make(chan any, 16)
	sub := system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		switch m := ctx.Message().(type) {
		case *messages.LocationUpdate, *messages.LocationUpdateBatch:
			got <- m
		}
	}))
	subscriber := &messages.NodeRef{Address: sub.GetAddress(), ActorId: sub.GetId()}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	small := []byte("sixteen bytes!!!")
	for _, id := range []string{"a", "b", "c", "d", "e", "f", "g"} {
		c := &messages.CreateObject{ObjectId: id, Size: 1 << 20, Creator: creator}
		if id == "c" {
			c.Size, c.HasInline, c.InlineData = int64(len(small)), true, small
		}
		if _, err := system.Root.RequestFuture(shardFor(id), c, 5*time.Second).Result(); err != nil {
			t.Fatal(err)
		}
	}
	serve := func(grouped bool, ids ...string) *messages.SubscribeAnswer {
		t.Helper()
		b := &messages.SubscribeBatch{Grouped: grouped}
		for _, id := range ids {
			b.Subscribes = append(b.Subscribes, &messages.Subscribe{ObjectId: id, Subscriber: subscriber})
		}
		req, _ := proto.Marshal(b)
		res, err := ServeSubscribe(ctx, system.Root, shardFor, req)
		if err != nil {
			t.Fatalf("ServeSubscribe(%v): %v", ids, err)
		}
		var a messages.SubscribeAnswer
		if err := proto.Unmarshal(res, &a); err != nil {
			t.Fatal(err)
		}
		return &a
	}
	next := func(what string) any {
		t.Helper()
		select {
		case m := <-got:
			return m
		case <-ctx.Done():
			t.Fatalf("no actor message for %s", what)
			return nil
		}
	}
	idsOf := func(m any) []string {
		switch m := m.(type) {
		case *messages.LocationUpdate:
			return []string{m.GetObjectId()}
		case *messages.LocationUpdateBatch:
			var ids []string
			for _, u := range m.GetUpdates() {
				ids = append(ids, u.GetObjectId())
			}
			return ids
		}
		return nil
	}

	a := serve(true, "a", "d", "b", "c", "e")
	if len(a.GetUpdates()) != 1 || a.GetUpdates()[0].GetObjectId() != "c" {
		t.Fatalf("answer %v, want the inline c's location alone", a.GetUpdates())
	}
	batches := map[string]bool{}
	for range 2 {
		m := next("a shard's batch")
		b, ok := m.(*messages.LocationUpdateBatch)
		if !ok {
			t.Fatalf("got %T %v, want a LocationUpdateBatch per shard", m, idsOf(m))
		}
		batches[join(idsOf(b))] = true
	}
	if !batches["a,b"] || !batches["d,e"] {
		t.Fatalf("batches %v, want a,b (one shard, in order) and d,e (the other)", batches)
	}
	// A later update of a grouped subscription comes alone.
	if _, err := system.Root.RequestFuture(shard, &messages.DeleteObject{ObjectId: "a"}, 5*time.Second).Result(); err != nil {
		t.Fatal(err)
	}
	if m := next("a's deletion"); join(idsOf(m)) != "a" || !m.(*messages.LocationUpdate).GetDeleted() {
		t.Fatalf("got %T %v, want a's deletion alone", m, idsOf(m))
	}

	// Not grouped: one message an update.
	serve(false, "f", "g")
	for _, want := range []string{"f", "g"} {
		if m := next(want); join(idsOf(m)) != want {
			t.Fatalf("ungrouped: got %T %v, want %s's location alone", m, idsOf(m), want)
		}
	}
}

func join(ids []string) string { return strings.Join(ids, ",") }

// groupUpdates batches each run of updates to the subscriber where its
// first was, ends a run at any other message to the subscriber, keeps a
// run of one a LocationUpdate, and leaves everyone else's sends in place.
func TestGroupUpdates(t *testing.T) {
	sub, other := actor.NewPID("a", "coordinator"), actor.NewPID("a", "other")
	u := func(id string) *messages.LocationUpdate { return &messages.LocationUpdate{ObjectId: id} }
	in := []outbox.Send{
		{To: sub, Msg: u("1")}, {To: other, Msg: u("x")}, {To: sub, Msg: u("2")}, {To: sub, Msg: u("3")},
		{To: sub, Msg: &messages.ReduceTaskStarted{}}, {To: sub, Msg: u("4")},
		{To: sub, Msg: &messages.ReduceTaskStarted{}}, {To: sub, Msg: u("5")}, {To: sub, Msg: u("6")},
	}
	out := groupUpdates(in, actorutil.Key(sub))
	var got []string
	for _, o := range out {
		to := o.To.(*actor.PID).GetId()
		switch m := o.Msg.(type) {
		case *messages.LocationUpdateBatch:
			got = append(got, to+":["+join(func() []string {
				var ids []string
				for _, x := range m.GetUpdates() {
					ids = append(ids, x.GetObjectId())
				}
				return ids
			}())+"]")
		case *messages.LocationUpdate:
			got = append(got, to+":"+m.GetObjectId())
		default:
			got = append(got, to+":other")
		}
	}
	want := "coordinator:[1,2,3] other:x coordinator:other coordinator:4 coordinator:other coordinator:[5,6]"
	if strings.Join(got, " ") != want {
		t.Fatalf("grouped %v, want %s", got, want)
	}
}
