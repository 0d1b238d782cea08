package naive

import (
	"context"
	"encoding/binary"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/internal/actorutil"
	"github.com/hoplite-go/hoplite/internal/directory"
	"github.com/hoplite-go/hoplite/messages"
)

// fakeNode stands in for a store node: it answers Gets from objects and
// records every message that reaches it.
type fakeNode struct {
	mu      sync.Mutex
	objects map[string][]byte
	seen    []any
}

func (f *fakeNode) receive(ctx actor.Context) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch m := ctx.Message().(type) {
	case *messages.Get:
		f.seen = append(f.seen, m)
		b, ok := f.objects[m.GetObjectId()]
		r := &messages.GetReply{ObjectId: m.GetObjectId(), Data: b}
		if !ok {
			r.Error = messages.Errorf(messages.ErrorCode_NOT_FOUND, "no %s", m.GetObjectId())
		}
		ctx.Respond(r)
	case *messages.Put:
		f.seen = append(f.seen, m)
		f.objects[m.GetObjectId()] = m.GetData()
		ctx.Respond(&messages.PutReply{ObjectId: m.GetObjectId()})
	case *messages.Delete:
		f.seen = append(f.seen, m)
		ctx.Respond(&messages.DeleteReply{})
	case *messages.Reduce:
		f.seen = append(f.seen, m) // the middleware should have taken it
	}
}

func (f *fakeNode) sawReduce() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.ContainsFunc(f.seen, func(m any) bool { _, ok := m.(*messages.Reduce); return ok })
}

func int64s(v ...int64) []byte {
	b := make([]byte, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(b[8*i:], uint64(x))
	}
	return b
}

func start(t *testing.T, objects map[string][]byte) (*actor.ActorSystem, *actor.PID, *fakeNode) {
	t.Helper()
	system := actor.NewActorSystem()
	node := &fakeNode{objects: objects}
	pid := system.Root.Spawn(actorutil.PropsFromFunc(node.receive,
		actor.WithReceiverMiddleware(Middleware(Config{DefaultTimeout: 5 * time.Second}))))
	t.Cleanup(func() { system.Root.Stop(pid); system.Shutdown() })
	return system, pid, node
}

func request(t *testing.T, system *actor.ActorSystem, pid *actor.PID, m any) any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := actorutil.Request(ctx, system.Root, pid, m)
	if err != nil {
		t.Fatalf("%T: %v", m, err)
	}
	return res
}

// A Reduce is gathered with the node's own Gets and its target Put
// through the node; the node never sees the Reduce itself.
func TestReduceGathersThroughTheNode(t *testing.T) {
	system, pid, node := start(t, map[string][]byte{"a": int64s(1, 10), "b": int64s(2, 20), "c": int64s(3, 30)})
	res := request(t, system, pid, &messages.Reduce{TargetId: "t", SourceIds: []string{"a", "b", "c"}, NumObjects: 3,
		Op: messages.ReduceOp_SUM, Dtype: messages.DType_INT64, TimeoutMs: 5000})
	r, ok := res.(*messages.ReduceReply)
	if !ok || r.GetError() != nil {
		t.Fatalf("reply %v", res)
	}
	if r.GetPlan().GetShape() != Shape || len(r.GetReducedIds()) != 3 || len(r.GetUnreducedIds()) != 0 {
		t.Errorf("reply %v: want shape %s, 3 reduced", r, Shape)
	}
	node.mu.Lock()
	got := node.objects["t"]
	node.mu.Unlock()
	if !slices.Equal(got, int64s(6, 60)) {
		t.Errorf("target %v, want the sum %v", got, int64s(6, 60))
	}
	if node.sawReduce() {
		t.Error("the Reduce reached the node")
	}
	// Any other message goes on to the node.
	if _, ok := request(t, system, pid, &messages.Delete{ObjectId: "a"}).(*messages.DeleteReply); !ok {
		t.Error("a Delete did not reach the node")
	}
}

// With fewer sources left than num, the Reduce fails with the missing
// source's code, and no target is Put.
func TestReduceFailsWithTheMissingSources(t *testing.T) {
	system, pid, node := start(t, map[string][]byte{"a": int64s(1)})
	r := request(t, system, pid, &messages.Reduce{TargetId: "t", SourceIds: []string{"a", "gone"}, NumObjects: 2,
		Op: messages.ReduceOp_SUM, Dtype: messages.DType_INT64, TimeoutMs: 5000}).(*messages.ReduceReply)
	if r.GetError().GetCode() != messages.ErrorCode_NOT_FOUND {
		t.Fatalf("error %v, want NOT_FOUND", r.GetError())
	}
	node.mu.Lock()
	_, put := node.objects["t"]
	node.mu.Unlock()
	if put {
		t.Error("a target was Put")
	}
}

// What the baseline cannot do, or what no node would accept, is refused
// at once, as INVALID_ARGUMENT.
func TestReduceRefused(t *testing.T) {
	system, pid, node := start(t, map[string][]byte{"a": int64s(1), "b": int64s(2)})
	for name, m := range map[string]*messages.Reduce{
		"knee":   {TargetId: "t", SourceIds: []string{"a", "b"}, Knee: &messages.ReduceKnee{MinPercent: 50}, Op: messages.ReduceOp_SUM, Dtype: messages.DType_INT64},
		"num":    {TargetId: "t", SourceIds: []string{"a", "b"}, NumObjects: 3, Op: messages.ReduceOp_SUM, Dtype: messages.DType_INT64},
		"target": {TargetId: "a", SourceIds: []string{"a", "b"}, NumObjects: 2, Op: messages.ReduceOp_SUM, Dtype: messages.DType_INT64},
	} {
		r := request(t, system, pid, m).(*messages.ReduceReply)
		if r.GetError().GetCode() != messages.ErrorCode_INVALID_ARGUMENT {
			t.Errorf("%s: error %v, want INVALID_ARGUMENT", name, r.GetError())
		}
	}
	node.mu.Lock()
	defer node.mu.Unlock()
	if len(node.seen) != 0 {
		t.Errorf("the node saw %v", node.seen)
	}
}

// Every receiver of a table under FromCreator fetches from the creator,
// though the creator already serves one and a whole copy is free; with
// the creator to avoid, a receiver waits.
func TestFromCreatorSendsEveryReceiverToTheCreator(t *testing.T) {
	tb := directory.NewLocationTable(directory.TableConfig{Senders: FromCreator})
	tb.Step(time.Time{}, directory.Create{Req: &messages.CreateObject{ObjectId: "x", Size: 1 << 20, Creator: &messages.NodeRef{NodeId: "c"}}, ReplyTo: "create"})
	tb.Step(time.Time{}, &messages.PublishLocation{ObjectId: "x", Node: &messages.NodeRef{NodeId: "c"}, State: messages.LocationState_COMPLETE, Size: 1 << 20, Creator: true})
	now := time.Unix(1000, 0)
	locate := func(r string, avoid *messages.NodeRef) []*messages.LocateReply {
		var got []*messages.LocateReply
		for _, s := range tb.Step(now, directory.Locate{Req: &messages.Locate{ObjectId: "x", Receiver: &messages.NodeRef{NodeId: r}, TimeoutMs: 1000, FailedSender: avoid}, ReplyTo: r}).Sends {
			if lr, ok := s.Msg.(*messages.LocateReply); ok && s.To == r {
				got = append(got, lr)
			}
		}
		return got
	}
	for _, r := range []string{"r1", "r2", "r3"} {
		got := locate(r, nil)
		if len(got) != 1 || got[0].GetSender().GetNodeId() != "c" {
			t.Fatalf("%s: %v, want the creator c", r, got)
		}
		if r == "r1" {
			tb.Step(time.Time{}, &messages.FetchDone{ObjectId: "x", Receiver: &messages.NodeRef{NodeId: r}, Sender: &messages.NodeRef{NodeId: "c"}, Size: 1 << 20})
		}
	}
	if got := locate("r4", &messages.NodeRef{NodeId: "c"}); len(got) != 0 {
		t.Fatalf("r4 avoiding the creator: %v, want no answer yet", got)
	}
}
