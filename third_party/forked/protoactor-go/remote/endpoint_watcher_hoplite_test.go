package remote

import (
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
)

// Hoplite patch: a watch that reaches an endpoint watcher after its
// address terminated (the manager handed it over just before it removed
// the endpoint) is answered with Terminated, not dropped: upstream's
// watcher had stopped itself at the termination, and the watch's watcher
// waited for good.
func TestWatchReachingATerminatedEndpointWatcher(t *testing.T) {
	system := actor.NewActorSystem()
	defer system.Shutdown()
	r := &Remote{actorSystem: system}
	const addr = "198.18.0.9:1"
	watcher := system.Root.Spawn(actor.PropsFromProducer(newEndpointWatcher(r, addr)))
	system.Root.Send(watcher, &EndpointTerminatedEvent{Address: addr})

	got := make(chan *actor.Terminated, 1)
	catcher := system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if m, ok := ctx.Message().(*actor.Terminated); ok {
			got <- m
		}
	}))
	// The termination is handled before this (one mailbox, in order);
	// wait a little more, as a watch that races with it would come.
	time.Sleep(50 * time.Millisecond)
	watchee := actor.NewPID(addr, "shard-1")
	system.Root.Send(watcher, &remoteWatch{Watcher: catcher, Watchee: watchee})
	select {
	case m := <-got:
		if m.GetWho().GetId() != watchee.GetId() || m.GetWhy() != actor.TerminatedReason_AddressTerminated {
			t.Fatalf("Terminated %v, want %s's, address terminated", m, watchee)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no Terminated for a watch of an address that terminated: the watch was dropped")
	}
}
