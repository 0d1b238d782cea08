package shardactor

import (
	"errors"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/messages"
)

// A shard that placement moves to a member (one that joined, or rejoined
// after a restart) starts empty, and the copies of the objects that exist
// reach it as the store nodes republish. Nothing failed, so it is not
// Rebuilt; a Delete that came before a holder's republication found no
// entry and answered NOT_FOUND of an object that exists, whose copy then
// stayed readable. It waits for the republication (or, in a table that
// started over, names the node not heard from, whose caller asks it to
// drop its copy: TestStartedShardAnswersDeleteWithoutWaitingForASlowRepublisher),
// and drops the copy.
func TestMovedShardAnswersDeleteOfAnObjectThatExistsOnceRepublished(t *testing.T) {
	for _, tc := range []struct {
		name  string
		moved bool // a later placement (a former owner is known) or the member's first
	}{{"first placement of a member that rejoined", false}, {"moved from a live member", true}} {
		t.Run(tc.name, func(t *testing.T) {
			system := actor.NewActorSystem()
			defer system.Shutdown()
			holder := fakeRepublisher(t, system, "holder", true, func(self *messages.NodeRef) []*messages.PublishLocation {
				return []*messages.PublishLocation{{ObjectId: "x", Node: self, State: messages.LocationState_COMPLETE, Size: 1 << 20, Creator: true}}
			})
			shard, err := system.Root.SpawnNamed(NewShardProps(ShardConfig{Index: 0, Count: 1, Moved: tc.moved,
				Nodes: func() []*messages.NodeRef { return []*messages.NodeRef{holder} }}), "shard-0")
			if err != nil {
				t.Fatal(err)
			}
			del := system.Root.RequestFuture(shard, &messages.DeleteObject{ObjectId: "x", RequestId: 7}, 10*time.Second)
			// The Delete is in the shard's mailbox before the holder
			// republishes: it must not be answered from the empty table.
			res, err := system.Root.RequestFuture(shard, CountObjects{}, 5*time.Second).Result()
			if err != nil {
				t.Fatal(err)
			}
			if n := res.(ObjectCount).Objects; n != 0 {
				t.Fatalf("the shard knows %d objects before the holder republished", n)
			}
			system.Root.Send(holder.PID(), releaseRepublish{})
			res, err = del.Result()
			if err != nil {
				t.Fatalf("the Delete: %v, want an answer", err)
			}
			r := res.(*messages.DeleteObjectReply)
			if err := messages.ErrOrNil(r.GetError()); err != nil {
				t.Fatalf("Delete of an object a store node holds, sent while the moved shard waited for its republication: %v, want OK", err)
			}
			if len(r.GetDropped()) != 1 || r.GetDropped()[0].GetNodeId() != "holder" {
				t.Fatalf("the Delete named %v as holders, want the holder", r.GetDropped())
			}
			// Gone after: a Locate hears DELETED.
			getter, err := system.Root.SpawnNamed(actor.PropsFromFunc(func(actor.Context) {}), "getter")
			if err != nil {
				t.Fatal(err)
			}
			res, err = system.Root.RequestFuture(shard, &messages.Locate{ObjectId: "x", TimeoutMs: 5_000,
				Receiver: &messages.NodeRef{NodeId: "getter", Address: getter.GetAddress(), ActorId: getter.GetId()}}, 5*time.Second).Result()
			if err != nil {
				t.Fatal(err)
			}
			if l := res.(*messages.LocateReply); !errors.Is(messages.ErrOrNil(l.GetError()), messages.ErrDeleted) {
				t.Fatalf("Locate after the Delete: %v, want DELETED", l)
			}
		})
	}
}

// A shard moved from a live member does not learn what only its former
// table knew (an object lost there): a Delete of an id it does not know
// succeeds, as a rebuilt shard's does, rather than claim the object never
// existed. One of the cluster's first placement still answers NOT_FOUND.
func TestMovedShardDeletesAnIDItDoesNotKnow(t *testing.T) {
	for _, tc := range []struct {
		moved bool
		want  error
	}{{true, nil}, {false, messages.ErrNotFound}} {
		system := actor.NewActorSystem()
		shard, err := system.Root.SpawnNamed(NewShardProps(ShardConfig{Index: 0, Count: 1, Moved: tc.moved,
			Nodes: func() []*messages.NodeRef { return nil }}), "shard-0")
		if err != nil {
			t.Fatal(err)
		}
		res, err := system.Root.RequestFuture(shard, &messages.DeleteObject{ObjectId: "lost-before-the-move"}, 5*time.Second).Result()
		system.Shutdown()
		if err != nil {
			t.Fatal(err)
		}
		if got := messages.ErrOrNil(res.(*messages.DeleteObjectReply).GetError()); !errors.Is(got, tc.want) || (tc.want == nil && got != nil) {
			t.Fatalf("moved %v: Delete of an unknown id: %v, want %v", tc.moved, got, tc.want)
		}
	}
}
