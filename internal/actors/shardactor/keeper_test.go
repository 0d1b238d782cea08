package shardactor

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/messages"
)

// fakeKeeper is a store node that holds no copy: it keeps what a shard
// tells it (Tombstones) and republishes it, as a member's store node does.
type fakeKeeper struct {
	mu    sync.Mutex
	kept  messages.Tombstones
	notes chan struct{}
	ref   *messages.NodeRef
}

func newFakeKeeper(t *testing.T, system *actor.ActorSystem, name string) *fakeKeeper {
	t.Helper()
	k := &fakeKeeper{notes: make(chan struct{}, 64)}
	pid, err := system.Root.SpawnNamed(actor.PropsFromFunc(func(ctx actor.Context) {
		switch m := ctx.Message().(type) {
		case *messages.Tombstones:
			k.mu.Lock()
			k.kept.ObjectIds = append(k.kept.ObjectIds, m.GetObjectIds()...)
			k.kept.LostIds = append(k.kept.LostIds, m.GetLostIds()...)
			k.kept.Amnesic = k.kept.Amnesic || m.GetAmnesic()
			k.mu.Unlock()
			k.notes <- struct{}{}
		case *messages.Republish:
			k.mu.Lock()
			b := &messages.Tombstones{ObjectIds: k.kept.ObjectIds, LostIds: k.kept.LostIds, Amnesic: k.kept.Amnesic}
			k.mu.Unlock()
			ctx.Send(ctx.Sender(), b)
			ctx.Send(ctx.Sender(), &messages.RepublishDone{Node: k.ref})
		}
	}), name)
	if err != nil {
		t.Fatal(err)
	}
	k.ref = &messages.NodeRef{NodeId: name, Address: pid.GetAddress(), ActorId: pid.GetId(), DataAddress: "mem://" + name}
	return k
}

// waitKept waits until the keeper holds want lost ids.
func (k *fakeKeeper) waitKept(t *testing.T, want int) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		k.mu.Lock()
		n := len(k.kept.LostIds)
		k.mu.Unlock()
		if n >= want {
			return
		}
		select {
		case <-k.notes:
		case <-deadline:
			t.Fatalf("the keeper holds %d lost ids, want %d", n, want)
		}
	}
}

// A shard's objects are lost on its member (their only holder failed),
// then the shard moves to a member at that member's first placement (it
// joined or rejoined: no former owner known, no rebuild). Its new table
// learnt nothing of the losses: a Delete of a lost object answered
// NOT_FOUND and a Query of one NOT_FOUND instead of LOST. The former
// table told its member's store node (the Keeper), whose republication
// carries them to the new one; and an amnesic former table makes the new
// one amnesic (a moved one's caution is its own: nothing was forgotten).
func TestLossesFollowAShardToAMembersFirstPlacement(t *testing.T) {
	for _, tc := range []struct {
		name    string
		rebuilt bool // the former table was rebuilt after a failure
		moved   bool // the former table was moved from a live member
	}{{"former table at the first placement", false, false}, {"former table rebuilt", true, false},
		{"former table moved from a live member", false, true}} {
		t.Run(tc.name, func(t *testing.T) {
			system := actor.NewActorSystem()
			defer system.Shutdown()
			keeper := newFakeKeeper(t, system, "keeper")
			holder := fakeRepublisher(t, system, "holder", false, func(self *messages.NodeRef) []*messages.PublishLocation {
				var pubs []*messages.PublishLocation
				for _, id := range []string{"deleted", "read"} {
					pubs = append(pubs, &messages.PublishLocation{ObjectId: id, Node: self, State: messages.LocationState_COMPLETE, Size: 1 << 20, Creator: true})
				}
				return pubs
			})
			former, err := system.Root.SpawnNamed(NewShardProps(ShardConfig{Index: 0, Count: 1, Rebuilt: tc.rebuilt, Moved: tc.moved, Keeper: keeper.ref,
				Nodes: func() []*messages.NodeRef { return []*messages.NodeRef{keeper.ref, holder} }}), "former/shard-0")
			if err != nil {
				t.Fatal(err)
			}
			count := func(shard *actor.PID) int {
				res, err := system.Root.RequestFuture(shard, CountObjects{}, 5*time.Second).Result()
				if err != nil {
					t.Fatal(err)
				}
				return res.(ObjectCount).Objects
			}
			for end := time.Now().Add(10 * time.Second); count(former) != 2; {
				if time.Now().After(end) {
					t.Fatal("the former table never learnt the holder's copies")
				}
				time.Sleep(5 * time.Millisecond)
			}
			system.Root.Stop(holder.PID()) // the only holder fails
			keeper.waitKept(t, 2)
			if err := system.Root.StopFuture(former).Wait(); err != nil {
				t.Fatal(err)
			}

			shard, err := system.Root.SpawnNamed(NewShardProps(ShardConfig{Index: 0, Count: 1, Keeper: keeper.ref,
				Nodes: func() []*messages.NodeRef { return []*messages.NodeRef{keeper.ref} }}), "rejoined/shard-0")
			if err != nil {
				t.Fatal(err)
			}
			del := func(id string) error {
				res, err := system.Root.RequestFuture(shard, &messages.DeleteObject{ObjectId: id}, 5*time.Second).Result()
				if err != nil {
					t.Fatal(err)
				}
				return messages.ErrOrNil(res.(*messages.DeleteObjectReply).GetError())
			}
			if err := del("deleted"); err != nil {
				t.Fatalf("Delete of an object lost before the move: %v, want OK", err)
			}
			res, err := system.Root.RequestFuture(shard, &messages.QueryObject{ObjectId: "read"}, 5*time.Second).Result()
			if err != nil {
				t.Fatal(err)
			}
			if err := messages.ErrOrNil(res.(*messages.ObjectInfo).GetError()); !errors.Is(err, messages.ErrLost) {
				t.Fatalf("Query of an object lost before the move: %v, want LOST", err)
			}
			err = del("never")
			if tc.rebuilt && err != nil {
				t.Fatalf("Delete of an id unknown to a shard once rebuilt: %v, want OK", err)
			}
			if !tc.rebuilt && !errors.Is(err, messages.ErrNotFound) {
				t.Fatalf("Delete of an id never Put: %v, want NOT_FOUND", err)
			}
		})
	}
}
