package shardactor

import (
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/events"
	"github.com/hoplite-go/hoplite/messages"
)

// A shard's Terminated of a store node whose connection merely broke is
// a suspicion: once the node speaks again and answers the shard's probe,
// the shard takes it back and asks the node for its copies again, and
// the node's real failure later is announced, not taken for a repeat of
// the suspicion.
func TestSuspicionOfALiveNodeIsTakenBack(t *testing.T) {
	system := actor.NewActorSystem()
	defer system.Shutdown()
	republished := make(chan struct{}, 4)
	var node *messages.NodeRef
	store := system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		switch ctx.Message().(type) {
		case *messages.Republish:
			republished <- struct{}{}
		case *messages.NodeStatus:
			ctx.Respond(&messages.NodeStatusReply{Node: node})
		}
	}))
	node = &messages.NodeRef{NodeId: "n1", Address: store.GetAddress(), ActorId: store.GetId()}
	failed := make(chan *events.NodeFailed, 4)
	sub := system.EventStream.Subscribe(func(e any) {
		if f, ok := e.(*events.NodeFailed); ok {
			failed <- f
		}
	})
	defer system.EventStream.Unsubscribe(sub)
	failures := &FailureLog{}
	shard, err := system.Root.SpawnNamed(NewShardProps(ShardConfig{
		Nodes:    func() []*messages.NodeRef { return []*messages.NodeRef{node} },
		Failures: failures,
	}), "shard-suspicion-test")
	if err != nil {
		t.Fatal(err)
	}
	wait := func(what string, ch <-chan struct{}) {
		t.Helper()
		select {
		case <-ch:
		case <-time.After(5 * time.Second):
			t.Fatal(what)
		}
	}
	wait("the shard never asked the store node to republish", republished)

	// The connection broke: the Terminated Proto.Actor gives the watchers
	// of every actor at the address. The node lives.
	system.Root.Send(shard, &actor.Terminated{Who: store, Why: actor.TerminatedReason_AddressTerminated})
	select {
	case <-failed: // the suspicion is announced, as any Terminated is
	case <-time.After(5 * time.Second):
		t.Fatal("the Terminated was not announced")
	}
	// The node speaks again.
	system.Root.Send(shard, &messages.PublishLocation{ObjectId: "x", Node: node, State: messages.LocationState_PARTIAL, Size: 10})
	wait("a node that proved alive was not asked for its copies again", republished)

	// Its real failure.
	system.Root.Stop(store)
	select {
	case f := <-failed:
		if f.Node != "n1" {
			t.Fatalf("NodeFailed for %q, want n1", f.Node)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the real failure of a node once suspected was never announced")
	}
	if failures.First("n1", store.GetAddress()) {
		t.Fatal("the member's failure path announced the failure a second time")
	}
}

// A suspicion the member's failure path confirmed is a failure: a late
// message of the node does not take it back, and nothing announces it
// again.
func TestConfirmedFailureIsNotRefuted(t *testing.T) {
	var f FailureLog
	if !f.Suspect("n", "a") || f.First("n", "a") {
		t.Fatal("a shard's report, then the failure path's: one announcement")
	}
	if f.Refute("n", "a") || f.Suspect("n", "a") || f.First("n", "a") {
		t.Fatal("a confirmed failure was taken back or announced again")
	}
	if !f.Suspect("m", "a") || !f.Refute("m", "a") || !f.First("m", "a") || f.Suspect("m", "a") {
		t.Fatal("a refuted suspicion, then the real failure: announced once more, and only once")
	}
}

// A message a store node sent before it died can reach the shard after
// its Terminated: that is no sign of life. The shard's probe of it gets
// no answer, and the failure, once confirmed, is announced once.
func TestLateMessageOfAFailedNodeRefutesNothing(t *testing.T) {
	system := actor.NewActorSystem()
	defer system.Shutdown()
	store := system.Root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
	node := &messages.NodeRef{NodeId: "n1", Address: store.GetAddress(), ActorId: store.GetId()}
	failed := make(chan *events.NodeFailed, 4)
	sub := system.EventStream.Subscribe(func(e any) {
		if f, ok := e.(*events.NodeFailed); ok {
			failed <- f
		}
	})
	defer system.EventStream.Unsubscribe(sub)
	failures := &FailureLog{}
	shard, err := system.Root.SpawnNamed(NewShardProps(ShardConfig{
		Nodes:    func() []*messages.NodeRef { return []*messages.NodeRef{node} }, // the view has not heard yet
		Failures: failures,
	}), "shard-late-test")
	if err != nil {
		t.Fatal(err)
	}
	system.Root.Stop(store)
	select {
	case <-failed:
	case <-time.After(5 * time.Second):
		t.Fatal("the failure was not announced")
	}
	system.Root.Send(shard, &messages.PublishLocation{ObjectId: "x", Node: node, State: messages.LocationState_PARTIAL, Size: 10})
	// The shard handled it once it answers what came after it.
	if _, err := system.Root.RequestFuture(shard, CountObjects{}, 5*time.Second).Result(); err != nil {
		t.Fatal(err)
	}
	if failures.First("n1", store.GetAddress()) {
		t.Fatal("the member's failure path announced the failure again: a late message took the suspicion back")
	}
	if len(failed) != 0 {
		t.Fatalf("the failure was announced again: %+v", <-failed)
	}
}
