package coordactor

import (
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"github.com/sirupsen/logrus"
	"google.golang.org/protobuf/proto"

	"github.com/hoplite-go/hoplite/messages"
)

// coordinatorRig is an actor system in which fuzzed coordinators run: a
// shard and store nodes that hear everything and answer nothing.
type coordinatorRig struct {
	system   *actor.ActorSystem
	sink     *actor.PID
	restarts atomic.Int32
	nodes    []*messages.NodeRef
}

var coordinators = sync.OnceValue(func() *coordinatorRig {
	r := &coordinatorRig{system: actor.NewActorSystem()}
	r.sink = r.system.Root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
	r.nodes = []*messages.NodeRef{
		{NodeId: "n0", Address: r.sink.GetAddress(), ActorId: r.sink.GetId()},
		{NodeId: "n1", Address: r.sink.GetAddress(), ActorId: r.sink.GetId()},
		nil,
		{},
		{NodeId: "n2", Address: "elsewhere:1", ActorId: "n2/store"},
		{NodeId: strings.Repeat("n", 4097), Address: r.sink.GetAddress(), ActorId: "$nobody"},
	}
	return r
})

// A Reduce's coordinator takes location updates, task reports, store
// answers and commit confirmations from any process: whatever their
// fields, it does not restart (its Reduce's progress would be lost), and
// when it is stopped its requester has an answer.
func FuzzCoordinator(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 0, 1, 0, 1, 1, 1, 2, 0, 0, 0, 3})
	f.Add([]byte{0, 2, 3, 5, 1, 1, 4, 0, 2, 2, 5, 3, 3, 3, 9, 4, 4, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		rig := coordinators()
		replies := make(chan *messages.ReduceReply, 4)
		requester := rig.system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
			if r, ok := ctx.Message().(*messages.ReduceReply); ok {
				replies <- r
			}
		}))
		defer rig.system.Root.Stop(requester)
		log := logrus.New()
		log.SetOutput(io.Discard)
		cfg := ActorConfig{ShardFor: func(string) *actor.PID { return rig.sink }, Log: logrus.NewEntry(log),
			BeforeReceive: func(_ string, m any) {
				if _, ok := m.(*actor.Restarting); ok {
					rig.restarts.Add(1)
				}
			}}
		sources := []string{"s0", "s1", "s2"}
		start := &messages.StartReduce{Reduce: &messages.Reduce{TargetId: "t", SourceIds: sources, NumObjects: 2,
			Op: messages.ReduceOp_SUM, Dtype: messages.DType_INT64, TimeoutMs: 60_000}, Caller: rig.nodes[0]}
		pid := rig.system.Root.Spawn(NewProps(cfg, "t#c.n", start, requester, nil))
		ids := append(sources, "t", "", "x")
		for len(data) >= 5 {
			kind, id, size, node, n := data[0], ids[int(data[1])%len(ids)], []int64{8, 1 << 20, -1, 3, 0, 1 << 62}[int(data[2])%6],
				rig.nodes[int(data[3])%len(rig.nodes)], int(data[4])
			data = data[5:]
			raw := data[:min(n%32, len(data))]
			data = data[len(raw):]
			rid := "t#c.n"
			if kind&0x10 != 0 {
				rid = "other#c.n"
			}
			var m proto.Message
			switch kind % 5 {
			case 0:
				u := &messages.LocationUpdate{ObjectId: id, Size: size, Node: node, State: messages.LocationState(n % 4),
					HasInline: kind&0x20 != 0, InlineData: make([]byte, min(max(size, 0), 16)), Deleted: kind&0x40 != 0}
				m = u
				if kind&0x08 != 0 {
					// A grouped SubscribeBatch's updates, one of them nil.
					m = &messages.LocationUpdateBatch{Updates: []*messages.LocationUpdate{u, nil, proto.Clone(u).(*messages.LocationUpdate)}}
				}
			case 1:
				m = &messages.ReduceTaskStarted{ReduceId: rid, Position: int32(size), Generation: int32(n) - 1}
			case 2:
				m = &messages.ReduceTaskDone{ReduceId: rid, Position: int32(size), Generation: int32(n) - 1, MeasuredBytes: size, MeasuredNs: int64(n)}
			case 3:
				m = &messages.StoreReducedReply{ReduceId: rid}
			default:
				m = &messages.ReduceCommitted{ReduceId: rid, TargetId: id, NodeId: node.GetNodeId()}
			}
			if kind&0x80 != 0 {
				proto.Reset(m)
				if proto.Unmarshal(raw, m) != nil {
					continue
				}
			}
			rig.system.Root.Send(pid, m)
		}
		if err := rig.system.Root.PoisonFuture(pid).Wait(); err != nil {
			t.Fatalf("the coordinator did not stop: %v", err)
		}
		if n := rig.restarts.Load(); n != 0 {
			t.Fatalf("the coordinator restarted %d times", n)
		}
		select {
		case <-replies:
		case <-time.After(10 * time.Second):
			t.Fatal("the stopped coordinator's requester has no answer")
		}
	})
}
