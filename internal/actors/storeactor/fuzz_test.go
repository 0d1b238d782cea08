package storeactor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/objstore"
	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"github.com/sirupsen/logrus"
	"google.golang.org/protobuf/proto"

	"github.com/hoplite-go/hoplite/internal/actorutil"
	"github.com/hoplite-go/hoplite/internal/testutil"
	"github.com/hoplite-go/hoplite/messages"
)

// fuzzInput reads a fuzz target's bytes as a program (testutil.FuzzInput).
type fuzzInput = testutil.FuzzInput

// hostileInt is a size, offset, timeout or count a peer may send.
func hostileInt(c byte) int64 {
	return testutil.HostileInt(c, 8, 1<<40, 1<<31-1, 16)
}

var fuzzIDs = []string{"held", "other", "", strings.Repeat("x", 4097), "\x00reduce/r/0/1", "target"}

// hostileNode is a NodeRef a peer may name.
func hostileNode(c byte) *messages.NodeRef {
	switch c % 5 {
	case 0:
		return &messages.NodeRef{NodeId: "n", Address: "nonhost", ActorId: "node"}
	case 1:
		return &messages.NodeRef{NodeId: "peer", Address: "elsewhere:1", ActorId: "peer/store", DataAddress: "elsewhere:2"}
	case 2:
		return nil
	case 3:
		return &messages.NodeRef{}
	}
	return &messages.NodeRef{NodeId: strings.Repeat("n", 4097), Address: "evil:1", ActorId: "$1"}
}

// fuzzNodeMessage builds one message a store node takes from other
// processes, decoded from the input and, unless the input says not to,
// given hostile fields.
func fuzzNodeMessage(in *fuzzInput) proto.Message {
	kind, raw := in.Byte(), in.Bytes()
	var m proto.Message
	switch kind % 16 {
	case 0:
		m = &messages.ReduceTask{}
	case 1:
		m = &messages.ReduceTaskBatch{}
	case 2:
		m = &messages.ReduceRelease{}
	case 3:
		m = &messages.ReduceInvalidate{}
	case 4:
		m = &messages.ReduceCommit{}
	case 5:
		m = &messages.StoreReduced{}
	case 6:
		m = &messages.Republish{}
	case 7:
		m = &messages.Put{}
	case 8:
		m = &messages.CreateObjectReply{}
	case 9:
		m = &messages.Get{}
	case 10:
		m = &messages.Delete{}
	case 11:
		m = &messages.DeleteObjectReply{}
	case 12:
		m = &messages.DropObject{}
	case 13:
		m = &messages.QueryObject{}
	case 14:
		m = &messages.Reduce{}
	default:
		m = &messages.NodeStatus{}
	}
	if proto.Unmarshal(raw, m) != nil {
		proto.Reset(m)
	}
	if kind&0x10 == 0 {
		return m
	}
	id := fuzzIDs[int(in.Byte())%len(fuzzIDs)]
	v, w := hostileInt(in.Byte()), hostileInt(in.Byte())
	n := hostileNode(in.Byte())
	task := func() *messages.ReduceTask {
		return &messages.ReduceTask{ReduceId: "r", TargetId: "target", Op: messages.ReduceOp_SUM, Dtype: messages.DType_INT64,
			Size: v, Position: int32(w), Root: kind&0x20 != 0, SourceId: id, OutputId: "\x00reduce/r/0/1", TimeoutMs: w,
			Generation: int32(v), SourceOffset: w, Gather: kind&0x40 != 0, Relay: kind&0x80 != 0, Slices: int32(w),
			Children: []*messages.ReduceInput{{Node: n, ObjectId: id, Offset: v}}, Bandwidth: float64(w)}
	}
	switch m := m.(type) {
	case *messages.ReduceTask:
		proto.Merge(m, task())
	case *messages.ReduceTaskBatch:
		m.Tasks = append(m.Tasks, task(), nil, task())
		if kind&0x20 != 0 {
			proto.Merge(m, &messages.ReduceTaskBatch{Ring: &messages.SlicedRingShare{ReduceId: "r", TargetId: "target",
				Dtype: messages.DType_INT64, Size: v, Slices: int32(w), Index: int32(v), SourceId: id, Node: n, Predecessor: n,
				GatherPosition: int32(w), TimeoutMs: w}})
		}
	case *messages.ReduceRelease:
		m.ReduceId, m.TargetId, m.KeepTarget, m.Bandwidth = "r", id, kind&0x20 != 0, float64(v)
	case *messages.ReduceInvalidate:
		m.ReduceId, m.Position, m.Generation = "r", int32(v), int32(w)
	case *messages.ReduceCommit:
		m.ReduceId, m.Position, m.Generation, m.TargetId, m.MarkOnly = "r", int32(v), int32(w), id, kind&0x20 != 0
	case *messages.StoreReduced:
		m.ReduceId, m.TargetId, m.Data, m.TimeoutMs = "r", id, make([]byte, min(max(v, 0), 64)), w
	case *messages.Republish:
		m.Shards, m.ShardCount = []int32{int32(v), int32(w)}, int32(w)
	case *messages.Put:
		m.ObjectId, m.Data, m.TimeoutMs = id, make([]byte, min(max(v, 0), 64)), w
	case *messages.CreateObjectReply:
		m.ObjectId, m.RequestId = id, uint64(v)
	case *messages.Get:
		m.ObjectId, m.TimeoutMs, m.Prefetch, m.Pushed, m.Pin = id, w, kind&0x20 != 0, kind&0x40 != 0, kind&0x80 != 0
		if m.Pushed {
			m.PushedData = make([]byte, min(max(v, 0), 64))
		}
	case *messages.Delete:
		m.ObjectId, m.TimeoutMs = id, w
	case *messages.DeleteObjectReply:
		m.ObjectId, m.RequestId, m.Dropped = id, uint64(v), []*messages.NodeRef{n, nil}
	case *messages.DropObject:
		m.ObjectId, m.RequestId, m.ReduceId = id, uint64(v), "r"
	case *messages.QueryObject:
		m.ObjectId, m.TimeoutMs, m.Wait = id, w, kind&0x20 != 0
	case *messages.Reduce:
		m.TargetId, m.SourceIds, m.NumObjects, m.TimeoutMs = "target", []string{id, "held"}, int32(v), w
	}
	return m
}

// fuzzNode is a store node, in an actor system of its own, whose shard
// accepts every Put and whose Locates answer "no such object".
type fuzzNode struct {
	system   *actor.ActorSystem
	node     *actor.PID
	store    *objstore.Store
	restarts atomic.Int32
	puts     atomic.Int32
}

var storeNodeForFuzz = sync.OnceValue(func() *fuzzNode {
	system := actor.NewActorSystem()
	f := &fuzzNode{system: system, store: objstore.NewStore(1 << 20)}
	shard := system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		switch m := ctx.Message().(type) {
		case *messages.CreateObject:
			ctx.Respond(&messages.CreateObjectReply{ObjectId: m.GetObjectId(), RequestId: m.GetRequestId()})
		case *messages.DeleteObject:
			ctx.Respond(&messages.DeleteObjectReply{ObjectId: m.GetObjectId(), RequestId: m.GetRequestId()})
		case *messages.ReportLost:
			ctx.Respond(&messages.ReportLostReply{ObjectId: m.GetObjectId()})
		}
	}))
	log := logrus.New()
	log.SetOutput(io.Discard)
	locate := func(ctx context.Context, _ *actor.PID, l *messages.Locate) (*messages.LocateReply, error) {
		return &messages.LocateReply{ObjectId: l.GetObjectId(), Attempt: l.GetAttempt(),
			Error: messages.Errorf(messages.ErrorCode_NOT_FOUND, "no %q", l.GetObjectId())}, nil
	}
	cfg := Config{Self: &messages.NodeRef{NodeId: "n", Address: "nonhost", ActorId: "node"}, Store: f.store,
		ShardFor: func(string) *actor.PID { return shard }, Locate: locate, Transport: &openCounter{},
		InlineLimit: 16, DefaultTimeout: time.Second, StallTimeout: time.Second, Log: logrus.NewEntry(log),
		Hooks: Hooks{BeforeReceive: func(_ string, m any) {
			if _, ok := m.(*actor.Restarting); ok {
				f.restarts.Add(1)
			}
		}}}
	var err error
	if f.node, err = system.Root.SpawnNamed(NewProps(cfg), "node"); err != nil {
		panic(err)
	}
	return f
})

// stillGood checks that the node did not restart, and that a Put of a
// new object and a Get of it still work.
func (f *fuzzNode) stillGood(t *testing.T) {
	t.Helper()
	if n := f.restarts.Load(); n != 0 {
		t.Fatalf("the store node restarted %d times", n)
	}
	id := fmt.Sprintf("good-%d", f.puts.Add(1))
	data := []byte("eight by")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := actorutil.Request(ctx, f.system.Root, f.node, &messages.Put{ObjectId: id, Data: data, TimeoutMs: 5000})
	if r, ok := res.(*messages.PutReply); err != nil || !ok || r.GetError() != nil {
		t.Fatalf("a good Put after the fuzzed messages: %v, %v", res, err)
	}
	res, err = actorutil.Request(ctx, f.system.Root, f.node, &messages.Get{ObjectId: id, TimeoutMs: 5000})
	if r, ok := res.(*messages.GetReply); err != nil || !ok || r.GetError() != nil || !bytes.Equal(r.GetData(), data) {
		t.Fatalf("a good Get after the fuzzed messages: %v, %v", res, err)
	}
	f.store.Remove(id, messages.ErrDeleted)
}

// A store node takes reduce tasks, commits, releases, pushes, Puts, Gets
// and the directory's answers from any process: whatever their fields
// (negative and huge sizes, offsets, positions and generations, ids at
// the limits, nil and foreign nodes), it does not restart, it answers a
// request that has an answer with a typed error or a result, and a good
// Put and Get still work after them.
func FuzzStoreNode(f *testing.F) {
	enc := func(kind byte, m proto.Message) []byte {
		b, _ := proto.Marshal(m)
		return append([]byte{kind, byte(len(b))}, b...)
	}
	f.Add(enc(7, &messages.Put{ObjectId: "held", Data: []byte("12345678")}))
	f.Add(enc(9, &messages.Get{ObjectId: "held", Prefetch: true, Pushed: true, PushedData: []byte("12345678")}))
	f.Add(enc(0, &messages.ReduceTask{ReduceId: "r", Size: 8, Generation: 1, OutputId: "\x00o", SourceId: "held", Op: messages.ReduceOp_SUM, Dtype: messages.DType_INT64}))
	f.Add([]byte{0x10, 0, 0, 5, 3, 1, 0x30, 0, 1, 2, 4, 0})
	f.Add([]byte{0x94, 0, 5, 1, 1, 0, 0x12, 0, 2, 2, 2, 2, 0x19, 0, 0, 3, 0, 0})
	f.Add([]byte{0x50, 0, 0, 4, 4, 1, 0x11, 0, 0, 2, 7, 3})
	f.Fuzz(func(t *testing.T, data []byte) {
		fn := storeNodeForFuzz()
		in := testutil.NewFuzzInput(data)
		for i := 0; in.More() && i < 8; i++ {
			m := fuzzNodeMessage(in)
			// A short deadline: a Get of an object that never comes waits
			// for its own; the answer, when one comes, is checked.
			res, err := fn.system.Root.RequestFuture(fn.node, m, 5*time.Millisecond).Result()
			if err != nil {
				continue
			}
			if e := replyErr(res); e != nil {
				var me *messages.Error
				if !errors.As(e, &me) || me.GetCode() == messages.ErrorCode_INTERNAL {
					t.Fatalf("%T %v answered %v", m, m, e)
				}
			}
		}
		fn.stillGood(t)
	})
}

// replyErr is the error a store node's answer carries.
func replyErr(res any) error {
	type withError interface{ GetError() *messages.Error }
	if r, ok := res.(withError); ok {
		return messages.ErrOrNil(r.GetError())
	}
	return nil
}
