package directory

import (
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/events"
	"github.com/hoplite-go/hoplite/messages"
)

// A shard watches every live store node from its start, before any of
// them locates or registers anything with it: a node that stops having
// never talked to the shard is still announced failed. (The watch would
// otherwise cost the node's first small Get of an object on this shard a
// remote Watch.)
func TestShardWatchesEveryStoreNodeFromItsStart(t *testing.T) {
	system := actor.NewActorSystem()
	defer system.Shutdown()
	republished := make(chan struct{}, 1)
	store := system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if _, ok := ctx.Message().(*messages.Republish); ok {
			select {
			case republished <- struct{}{}:
			default:
			}
		}
	}))
	node := &messages.NodeRef{NodeId: "n1", Address: store.GetAddress(), ActorId: store.GetId()}
	failed := make(chan *events.NodeFailed, 1)
	sub := system.EventStream.Subscribe(func(e any) {
		if f, ok := e.(*events.NodeFailed); ok {
			select {
			case failed <- f:
			default:
			}
		}
	})
	defer system.EventStream.Unsubscribe(sub)
	_, err := system.Root.SpawnNamed(NewShardProps(ShardConfig{
		Nodes:    func() []*messages.NodeRef { return []*messages.NodeRef{node} },
		Failures: &FailureLog{},
	}), "shard-watch-test")
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-republished: // the shard started and asked the node
	case <-time.After(5 * time.Second):
		t.Fatal("the shard never asked the store node to republish")
	}
	system.Root.Stop(store)
	select {
	case f := <-failed:
		if f.Node != "n1" {
			t.Fatalf("NodeFailed for %q, want n1", f.Node)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a store node that stopped without ever locating was not announced failed")
	}
}
