package directory

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/messages"
)

// An idle shard wakes itself for nothing; a parked request is answered
// TIMEOUT at its deadline by the shard's own timer, with no other message
// to prompt it.
func TestShardWakesOnlyForDeadlines(t *testing.T) {
	system := actor.NewActorSystem()
	defer system.Shutdown()
	var ticks atomic.Int32
	shard, err := system.Root.SpawnNamed(NewShardProps(ShardConfig{BeforeReceive: func(_ string, msg any) {
		if _, ok := msg.(tick); ok {
			ticks.Add(1)
		}
	}}), "shard-test")
	if err != nil {
		t.Fatal(err)
	}
	// Idle: a ticker would have fired about ten times by now.
	idle := system.Root.RequestFuture(shard, CountObjects{}, 5*time.Second)
	if _, err := idle.Result(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if n := ticks.Load(); n != 0 {
		t.Fatalf("an idle shard woke %d times", n)
	}
	// A live receiver: the shard watches it, and drops what a dead one parked.
	store := system.Root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
	receiver := &messages.NodeRef{NodeId: "n1", Address: store.GetAddress(), ActorId: store.GetId()}
	f := system.Root.RequestFuture(shard, &messages.Locate{ObjectId: "never", Receiver: receiver, TimeoutMs: 100}, 5*time.Second)
	res, err := f.Result()
	if err != nil {
		t.Fatalf("the parked Locate was never answered: %v", err)
	}
	r, ok := res.(*messages.LocateReply)
	if !ok || !errors.Is(messages.ErrOrNil(r.GetError()), messages.ErrTimeout) {
		t.Fatalf("parked Locate answered %v, want TIMEOUT", res)
	}
	if n := ticks.Load(); n < 1 || n > 3 {
		t.Fatalf("the shard woke %d times for one deadline", n)
	}
}
