package shardactor

import (
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/internal/directory"
	"github.com/hoplite-go/hoplite/messages"
)

// A Reduce's coordinator died with its shard's home after committing the
// target, before its answer reached the caller, and the caller's node
// starts the Reduce again (same call id) at the rebuilt shard. The shard
// starts no Reduce while a store node may still republish: reserved then,
// the target would have been produced again over the committed result
// that readers may have read. Once the root's node republished the
// committed copy (with its producer and sources), the shard answers the
// new attempt with that result and starts no coordinator.
func TestRebuiltShardAnswersAnAttemptWithItsCallsCommittedResult(t *testing.T) {
	system := actor.NewActorSystem()
	defer system.Shutdown()
	type release struct{}
	var self *messages.NodeRef
	var asker *actor.PID
	released := false
	// The root's node republishes once it was asked and released.
	store, err := system.Root.SpawnNamed(actor.PropsFromFunc(func(ctx actor.Context) {
		switch ctx.Message().(type) {
		case *messages.Republish:
			asker = ctx.Sender()
		case release:
			released = true
		default:
			return
		}
		if asker != nil && released {
			ctx.Send(asker, &messages.PublishLocation{ObjectId: "t", Node: self, State: messages.LocationState_COMPLETE,
				Size: 64, Fingerprint: 7, Creator: true, ProducedBy: directory.ReduceID("t", "callA", "first"), ReducedIds: []string{"s1", "s0"}})
			ctx.Send(asker, &messages.RepublishDone{Node: self})
		}
	}), "root-node")
	if err != nil {
		t.Fatal(err)
	}
	self = &messages.NodeRef{NodeId: "root-node", Address: store.GetAddress(), ActorId: store.GetId(), DataAddress: "mem://root-node"}
	var coordinators atomic.Int32
	shard, err := system.Root.SpawnNamed(NewShardProps(ShardConfig{Index: 0, Count: 1, Rebuilt: true,
		Nodes: func() []*messages.NodeRef { return []*messages.NodeRef{self} },
		NewCoordinator: func(id string, start *messages.StartReduce, requester *actor.PID, _ func() bool) *actor.Props {
			coordinators.Add(1)
			return actor.PropsFromFunc(func(ctx actor.Context) {
				if _, ok := ctx.Message().(*actor.Started); ok {
					ctx.Send(requester, &messages.ReduceReply{TargetId: "t",
						Error: messages.Errorf(messages.ErrorCode_INTERNAL, "a coordinator ran for %s", id)})
				}
			})
		}}), "shard-0")
	if err != nil {
		t.Fatal(err)
	}
	start := &messages.StartReduce{CallId: "callA", Reduce: &messages.Reduce{TargetId: "t", SourceIds: []string{"s0", "s1", "s2"},
		NumObjects: 2, Op: messages.ReduceOp_SUM, Dtype: messages.DType_INT64, TimeoutMs: 10_000}}
	f := system.Root.RequestFuture(shard, start, 10*time.Second)
	system.Root.Send(store, release{})
	res, err := f.Result()
	if err != nil {
		t.Fatal(err)
	}
	rep := res.(*messages.ReduceReply)
	if rep.GetError() != nil || !slices.Equal(rep.GetReducedIds(), []string{"s1", "s0"}) || !slices.Equal(rep.GetUnreducedIds(), []string{"s2"}) {
		t.Fatalf("the attempt's answer: %v; want the committed result (reduced [s1 s0], unreduced [s2])", rep)
	}
	if n := coordinators.Load(); n != 0 {
		t.Fatalf("%d coordinators started for a committed target", n)
	}
	// Another call into the same target is refused, not answered with
	// someone else's result.
	other := &messages.StartReduce{CallId: "callB", Reduce: start.GetReduce()}
	res, err = system.Root.RequestFuture(shard, other, 10*time.Second).Result()
	if err != nil {
		t.Fatal(err)
	}
	if rep := res.(*messages.ReduceReply); rep.GetError().GetCode() != messages.ErrorCode_CONFLICT {
		t.Fatalf("another call's Reduce into the committed target: %v, want CONFLICT", rep)
	}
}
