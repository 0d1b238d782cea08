package actors_test

import (
	"context"
	"fmt"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/actors"
	"github.com/hoplite-go/hoplite/messages"
	"github.com/hoplite-go/hoplite/storenode"
)

// Two store nodes and a directory shard in an application's own actor
// system, their bytes moving on an in-process transport: an object Put on
// one node is fetched by the other.
func Example() {
	system := actor.NewActorSystem()
	defer system.Shutdown()
	data := actors.NewMemoryTransport(0) // unlimited bandwidth

	shard, err := system.Root.SpawnNamed(actors.Shard(actors.ShardConfig{Index: 0, Count: 1}), "shard-0")
	if err != nil {
		panic(err)
	}
	shardFor := actors.ShardFor([]*actor.PID{shard})
	node := func(name string) *actor.PID {
		store := actors.NewStore(64 << 20)
		addr, err := data.Serve(name, store)
		if err != nil {
			panic(err)
		}
		self := &messages.NodeRef{NodeId: name, Address: system.Address(), ActorId: name, DataAddress: addr}
		pid, err := system.Root.SpawnNamed(actors.StoreNode(actors.StoreNodeConfig{Self: self, Store: store,
			ShardFor: shardFor, Transport: data}), name)
		if err != nil {
			panic(err)
		}
		return pid
	}
	a := storenode.NewClient(system.Root, node("a"), 0)
	b := storenode.NewClient(system.Root, node("b"), 0)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := a.Put(ctx, "greeting", make([]byte, 1<<20)); err != nil { // 1 MiB: above the inline limit, so b fetches it from a
		panic(err)
	}
	got, err := b.Get(ctx, "greeting")
	if err != nil {
		panic(err)
	}
	fmt.Println(len(got), "bytes")
	// Output: 1048576 bytes
}
