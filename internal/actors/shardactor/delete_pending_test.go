package shardactor

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/messages"
)

// A store node can be slow to say it has republished while its mailbox
// runs freely: one that holds a Reduce's target whole waits up to
// seconds for the commit first. A Delete that a started shard held until
// then could not be answered in time, and its caller, left a fraction of
// its deadline to have the holders' drops confirmed, timed out. The shard
// answers at once, naming the store node not heard from beside the
// holders it lists; the copy that node republishes later meets the
// tombstone.
func TestStartedShardAnswersDeleteWithoutWaitingForASlowRepublisher(t *testing.T) {
	for _, tc := range []struct {
		name          string
		rebuilt, move bool
	}{{"rebuilt", true, false}, {"moved from a live member", false, true}, {"first placement", false, false}} {
		t.Run(tc.name, func(t *testing.T) {
			system := actor.NewActorSystem()
			defer system.Shutdown()
			copyOfX := func(self *messages.NodeRef) []*messages.PublishLocation {
				return []*messages.PublishLocation{{ObjectId: "x", Node: self, State: messages.LocationState_COMPLETE, Size: 1 << 20}}
			}
			fast := fakeRepublisher(t, system, "fast", false, copyOfX)
			slow := fakeRepublisher(t, system, "slow", true, copyOfX)
			shard, err := system.Root.SpawnNamed(NewShardProps(ShardConfig{Index: 0, Count: 1, Rebuilt: tc.rebuilt, Moved: tc.move,
				Nodes: func() []*messages.NodeRef { return []*messages.NodeRef{fast, slow} }}), "shard-0")
			if err != nil {
				t.Fatal(err)
			}
			// The fast node's copy is listed before the Delete.
			deadline := time.Now().Add(5 * time.Second)
			for {
				res, err := system.Root.RequestFuture(shard, CountObjects{}, 5*time.Second).Result()
				if err != nil {
					t.Fatal(err)
				}
				if res.(ObjectCount).Objects == 1 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the fast node's copy never reached the shard")
				}
				time.Sleep(10 * time.Millisecond)
			}
			// The slow node is released only after the answer: a shard
			// that waited for it never answers this future.
			res, err := system.Root.RequestFuture(shard, &messages.DeleteObject{ObjectId: "x", RequestId: 3}, 5*time.Second).Result()
			if err != nil {
				t.Fatalf("Delete while a store node has not republished: %v, want an answer without waiting for it", err)
			}
			r := res.(*messages.DeleteObjectReply)
			if err := messages.ErrOrNil(r.GetError()); err != nil {
				t.Fatalf("Delete: %v, want OK", err)
			}
			var named []string
			for _, n := range r.GetDropped() {
				named = append(named, n.GetNodeId())
			}
			if slices.Sort(named); !slices.Equal(named, []string{"fast", "slow"}) {
				t.Fatalf("the Delete named %v, want the holder it lists and the node not heard from: [fast slow]", named)
			}
			// The slow node's copy arrives after the Delete: it stays deleted.
			system.Root.Send(slow.PID(), releaseRepublish{})
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
				t.Fatalf("Locate after the Delete and the slow node's republication: %v, want DELETED", l)
			}
		})
	}
}
