package coordactor

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/internal/netmodel/estimator"
	"github.com/hoplite-go/hoplite/internal/reduction"
	"github.com/hoplite-go/hoplite/messages"
)

// fetchingStore is a fakeStore that also answers an AllReduce's Get of
// the result: with the result, or, when gone is set, with the reply the
// coordinator's actor system gives for a node whose process died with
// the Get unanswered (an undelivered GetReply), telling gone of it.
type fetchingStore struct {
	fakeStore
	gone chan<- struct{}
}

func (f *fetchingStore) Receive(ctx actor.Context) {
	if m, ok := ctx.Message().(*messages.Get); ok {
		if f.gone != nil {
			reply, _ := messages.UndeliveredReply(m, ctx.Self(), "failed before it answered")
			ctx.Respond(reply)
			f.gone <- struct{}{}
			return
		}
		ctx.Respond(&messages.GetReply{ObjectId: m.GetObjectId()})
		return
	}
	f.fakeStore.Receive(ctx)
}

// An AllReduce participant whose Get of the result is answered
// undelivered (its process died: the coordinator's own actor system
// answered) is a participant that is gone, as a dead letter was: the
// watch reports it, and the AllReduce completes without it. Taken for the
// node's own answer, it failed the AllReduce ("could not fetch the
// result").
func TestAllReduceParticipantWhoseGetIsUndeliveredIsGone(t *testing.T) {
	system := actor.NewActorSystem()
	defer system.Shutdown()
	// n1 streams its source to the root, n2: it gets the result by a Get.
	const sources, victim = 3, 1
	releases := make(chan release, 16)
	gone := make(chan struct{}, 1)
	holders := map[string]*messages.NodeRef{}
	pids := map[string]*actor.PID{}
	var ids []string
	for i := range sources {
		name := fmt.Sprintf("n%d", i)
		var g chan<- struct{}
		if i == victim {
			g = gone
		}
		pid, err := system.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor {
			return &fetchingStore{fakeStore: fakeStore{name: name, releases: releases}, gone: g}
		}), "store-"+name)
		if err != nil {
			t.Fatal(err)
		}
		pids[name] = pid
		id := fmt.Sprintf("src-%d", i)
		ids = append(ids, id)
		holders[id] = &messages.NodeRef{NodeId: name, Address: pid.GetAddress(), ActorId: pid.GetId()}
	}
	replies := make(chan *messages.ReduceReply, 1)
	requester := system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if r, ok := ctx.Message().(*messages.ReduceReply); ok {
			replies <- r
		}
	}))
	var shardPID *actor.PID
	var mu sync.Mutex
	cfg := ActorConfig{Reduce: reduction.Config{ForceDegree: 1, InlineLimit: 64 << 10}, Estimator: estimator.New(100*time.Microsecond, 0)}
	cfg.ShardFor = func(string) *actor.PID {
		mu.Lock()
		defer mu.Unlock()
		return shardPID
	}
	start := &messages.StartReduce{Reduce: &messages.Reduce{TargetId: "sum", SourceIds: ids, NumObjects: sources,
		Op: messages.ReduceOp_SUM, Dtype: messages.DType_FLOAT32, TimeoutMs: 10_000, AllReduce: true}, Caller: holders["src-0"]}
	props := NewProps(cfg, "sum#1", start, requester, nil)
	mu.Lock()
	shardPID = system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor {
		return &fakeShard{props: props, holders: holders, size: 1 << 20}
	}))
	mu.Unlock()
	select {
	case <-gone:
	case r := <-replies:
		t.Fatalf("the AllReduce answered %v before its victim's Get", r)
	case <-time.After(10 * time.Second):
		t.Fatal("no Get of the result reached the victim")
	}
	// Its process is gone: the watch reports it. Later than the
	// undelivered reply, as across processes; a Terminated handled first
	// would make the reply moot (and this test pass either way).
	time.Sleep(100 * time.Millisecond)
	system.Root.Stop(pids[fmt.Sprintf("n%d", victim)])
	successful(t, replies)
}
