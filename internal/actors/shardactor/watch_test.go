package shardactor

import (
	"sync/atomic"
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

// A store node that becomes live after the shard started is watched once
// the shard is told the stores changed (WatchStores), before it locates
// or registers anything here: its stop is announced, as a node's live at
// the shard's start is.
func TestShardWatchesAStoreNodeThatJoinsLater(t *testing.T) {
	system := actor.NewActorSystem()
	defer system.Shutdown()
	idle := actor.PropsFromFunc(func(actor.Context) {})
	first, later := system.Root.Spawn(idle), system.Root.Spawn(idle)
	n1 := &messages.NodeRef{NodeId: "n1", Address: first.GetAddress(), ActorId: first.GetId()}
	n2 := &messages.NodeRef{NodeId: "n2", Address: later.GetAddress(), ActorId: later.GetId()}
	var joined atomic.Bool
	failed := make(chan string, 2)
	sub := system.EventStream.Subscribe(func(e any) {
		if f, ok := e.(*events.NodeFailed); ok {
			failed <- f.Node
		}
	})
	defer system.EventStream.Unsubscribe(sub)
	shard, err := system.Root.SpawnNamed(NewShardProps(ShardConfig{
		Nodes: func() []*messages.NodeRef {
			if joined.Load() {
				return []*messages.NodeRef{n1, n2}
			}
			return []*messages.NodeRef{n1}
		},
		Failures: &FailureLog{},
	}), "shard-watch-joined-test")
	if err != nil {
		t.Fatal(err)
	}
	// RebuildQuery answers once Started ran: n1 is watched, n2 not yet.
	if _, err := system.Root.RequestFuture(shard, RebuildQuery{}, 5*time.Second).Result(); err != nil {
		t.Fatal(err)
	}
	joined.Store(true)
	system.Root.Send(shard, WatchStores{})
	if _, err := system.Root.RequestFuture(shard, RebuildQuery{}, 5*time.Second).Result(); err != nil {
		t.Fatal(err)
	}
	system.Root.Stop(later)
	select {
	case node := <-failed:
		if node != "n2" {
			t.Fatalf("NodeFailed for %q, want n2", node)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a store node that joined after the shard started and then stopped was not announced failed")
	}
}
