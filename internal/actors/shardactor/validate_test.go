package shardactor

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/messages"
)

// A StartReduce may come from any process, not only a store node that
// validated its caller's Reduce: the shard answers a bad one
// INVALID_ARGUMENT and starts no coordinator for it (a negative
// num_objects reached the planner, a huge timeout_ms wrapped into a
// deadline in the past), and a good one after them still starts.
func TestShardRefusesAnInvalidStartReduce(t *testing.T) {
	system := actor.NewActorSystem()
	defer system.Shutdown()
	var coordinators atomic.Int32
	shard, err := system.Root.SpawnNamed(NewShardProps(ShardConfig{
		NewCoordinator: func(id string, start *messages.StartReduce, requester *actor.PID, _ func() bool) *actor.Props {
			coordinators.Add(1)
			return actor.PropsFromFunc(func(ctx actor.Context) {
				if _, ok := ctx.Message().(*actor.Started); ok {
					ctx.Send(requester, &messages.ReduceReply{TargetId: start.GetReduce().GetTargetId()})
				}
			})
		}}), "shard-validate")
	if err != nil {
		t.Fatal(err)
	}
	good := func() *messages.Reduce {
		return &messages.Reduce{TargetId: "t", SourceIds: []string{"a", "b"}, NumObjects: 2,
			Op: messages.ReduceOp_SUM, Dtype: messages.DType_INT64, TimeoutMs: 10_000}
	}
	ask := func(m *messages.StartReduce) *messages.ReduceReply {
		t.Helper()
		res, err := system.Root.RequestFuture(shard, m, 10*time.Second).Result()
		if err != nil {
			t.Fatalf("%v: %v", m, err)
		}
		return res.(*messages.ReduceReply)
	}
	for name, mutate := range map[string]func(r *messages.Reduce){
		"negative num_objects":    func(r *messages.Reduce) { r.NumObjects = -3 },
		"num_objects too large":   func(r *messages.Reduce) { r.NumObjects = 1 << 30 },
		"duplicate source":        func(r *messages.Reduce) { r.SourceIds = []string{"a", "a"} },
		"target is a source":      func(r *messages.Reduce) { r.SourceIds = []string{"a", "t"} },
		"unknown op":              func(r *messages.Reduce) { r.Op = 99 },
		"no timeout":              func(r *messages.Reduce) { r.TimeoutMs = 0 },
		"negative timeout":        func(r *messages.Reduce) { r.TimeoutMs = -1 },
		"timeout past a Duration": func(r *messages.Reduce) { r.TimeoutMs = 1 << 62 },
		"bad knee":                func(r *messages.Reduce) { r.NumObjects, r.Knee = 0, &messages.ReduceKnee{MinPercent: -1} },
	} {
		r := good()
		mutate(r)
		if rep := ask(&messages.StartReduce{Reduce: r, CallId: name}); rep.GetError().GetCode() != messages.ErrorCode_INVALID_ARGUMENT {
			t.Errorf("%s: answered %v, want INVALID_ARGUMENT", name, rep)
		}
	}
	if rep := ask(&messages.StartReduce{CallId: "none"}); rep.GetError().GetCode() != messages.ErrorCode_INVALID_ARGUMENT {
		t.Errorf("a StartReduce without a Reduce: answered %v, want INVALID_ARGUMENT", rep)
	}
	if n := coordinators.Load(); n != 0 {
		t.Fatalf("%d coordinators started for invalid Reduces", n)
	}
	if rep := ask(&messages.StartReduce{Reduce: good(), CallId: "good"}); rep.GetError() != nil || coordinators.Load() != 1 {
		t.Fatalf("a good Reduce after them: %v, %d coordinators", rep, coordinators.Load())
	}
}
