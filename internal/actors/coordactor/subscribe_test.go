package coordactor

import (
	"context"
	"encoding/binary"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/hoplite-go/hoplite/internal/reduction"
	"github.com/hoplite-go/hoplite/messages"
)

// subscribeShard is a source's shard (and, with props, the coordinator's
// parent): it answers an actor Subscribe with the source's inline
// location, and records every Subscribe and Unsubscribe it gets as actor
// messages.
type subscribeShard struct {
	props  *actor.Props
	inline map[string][]byte
	holder *messages.NodeRef
	seen   chan<- string // "subscribe a", "unsubscribe b from <sender id>"
}

func (s *subscribeShard) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		if s.props != nil {
			ctx.Spawn(s.props)
		}
	case *messages.Subscribe:
		s.seen <- "subscribe " + m.GetObjectId()
		ctx.Respond(inlineUpdate(m.GetObjectId(), s.inline[m.GetObjectId()], s.holder))
	case *messages.Unsubscribe:
		s.seen <- fmt.Sprintf("unsubscribe %s from %s", m.GetObjectId(), ctx.Sender().GetId())
	}
}

func inlineUpdate(id string, b []byte, n *messages.NodeRef) *messages.LocationUpdate {
	return &messages.LocationUpdate{ObjectId: id, Size: int64(len(b)), Node: n, State: messages.LocationState_COMPLETE, HasInline: true, InlineData: b}
}

// storeReduced answers a StoreReduced and passes its bytes on.
func storeReduced(stored chan<- []byte) *actor.Props {
	return actor.PropsFromFunc(func(ctx actor.Context) {
		if m, ok := ctx.Message().(*messages.StoreReduced); ok {
			stored <- m.GetData()
			ctx.Respond(&messages.StoreReducedReply{ReduceId: m.GetReduceId()})
		}
	})
}

func int64Bytes(vs ...int64) []byte {
	b := make([]byte, 8*len(vs))
	for i, v := range vs {
		binary.LittleEndian.PutUint64(b[8*i:], uint64(v))
	}
	return b
}

// A coordinator subscribes to its sources on the data plane, one
// SubscribeBatch per member of their shards: an inline source's bytes
// come back in the answer, and a call that fails goes again as actor
// messages. A call that ends after the Reduce did unsubscribes from the
// coordinator, since the Reduce's own Unsubscribe (an actor message) may
// have reached the shard before that subscription did.
func TestSubscribesOnTheDataPlane(t *testing.T) {
	system := actor.NewActorSystem()
	defer system.Shutdown()
	// a and d on m1's shard, b on m2's, c on m3's.
	sources := map[string][]byte{"a": int64Bytes(1, 2), "b": int64Bytes(10, 20), "c": int64Bytes(100, 200), "d": int64Bytes(1000, 2000)}
	stored := make(chan []byte, 4)
	storePID := system.Root.Spawn(storeReduced(stored))
	holder := &messages.NodeRef{NodeId: "n1", Address: storePID.GetAddress(), ActorId: storePID.GetId()}
	seen := make(chan string, 32)
	release := make(chan struct{}) // m3's call answers once the Reduce ended
	var mu sync.Mutex
	calls := map[string][]string{} // member -> the ids of each call, joined
	callData := func(ctx context.Context, addr string, kind byte, req []byte) ([]byte, error) {
		if kind != messages.ControlSubscribe {
			return nil, fmt.Errorf("unexpected call %q to %s", kind, addr)
		}
		var batch messages.SubscribeBatch
		if err := proto.Unmarshal(req, &batch); err != nil {
			return nil, fmt.Errorf("bad SubscribeBatch: %v", err)
		}
		var ids []string
		answer := &messages.SubscribeAnswer{}
		for _, sub := range batch.GetSubscribes() {
			if sub.GetSubscriber().GetActorId() == "" {
				return nil, fmt.Errorf("a Subscribe without its subscriber: %v", sub)
			}
			ids = append(ids, sub.GetObjectId())
			answer.Updates = append(answer.Updates, inlineUpdate(sub.GetObjectId(), sources[sub.GetObjectId()], holder))
		}
		mu.Lock()
		calls[addr] = append(calls[addr], strings.Join(ids, ","))
		mu.Unlock()
		switch addr {
		case "m2":
			return nil, messages.Errorf(messages.ErrorCode_UNAVAILABLE, "the shard's member is still starting")
		case "m3":
			select {
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return nil, nil // subscribed; no inline answer
		}
		return proto.Marshal(answer)
	}
	replies := make(chan *messages.ReduceReply, 1)
	requester := system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if r, ok := ctx.Message().(*messages.ReduceReply); ok {
			replies <- r
		}
	}))
	shards := map[string]*actor.PID{} // member -> its shard
	cfg := ActorConfig{
		Reduce:   reduction.Config{InlineLimit: 64 << 10},
		CallData: callData,
		SubscribeAt: func(pid *actor.PID) string {
			mu.Lock()
			defer mu.Unlock()
			for m, p := range shards {
				if p.Equal(pid) {
					return m
				}
			}
			return ""
		},
		ShardFor: func(id string) *actor.PID {
			mu.Lock()
			defer mu.Unlock()
			return shards[map[string]string{"a": "m1", "d": "m1", "b": "m2", "c": "m3"}[id]]
		},
	}
	start := &messages.StartReduce{Reduce: &messages.Reduce{TargetId: "sum", SourceIds: []string{"a", "b", "c", "d"}, NumObjects: 3,
		Op: messages.ReduceOp_SUM, Dtype: messages.DType_INT64, TimeoutMs: 10_000}, Caller: holder}
	props := NewProps(cfg, "sum#1", start, requester, nil)
	mu.Lock()
	for _, m := range []string{"m2", "m3", "m1"} { // m1's spawns the coordinator: the others exist by then
		var p *actor.Props
		if m == "m1" {
			p = props
		}
		shards[m] = system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor {
			return &subscribeShard{props: p, inline: sources, holder: holder, seen: seen}
		}))
	}
	mu.Unlock()

	successful(t, replies)
	if got := <-stored; string(got) != string(int64Bytes(1011, 2022)) {
		t.Fatalf("stored %v, want a+b+d = [1011 2022]", got)
	}
	close(release)
	// At the shards: b's Subscribe as an actor message (its call failed),
	// and two Unsubscribes of c from the coordinator: the Reduce's own,
	// and the one c's call sends when it ends after the Reduce did.
	coord, subscribedB, unsubscribedC := "", false, 0
	deadline := time.After(10 * time.Second)
	for !subscribedB || unsubscribedC < 2 {
		select {
		case s := <-seen:
			var id, from string
			if n, _ := fmt.Sscanf(s, "unsubscribe %s from %s", &id, &from); n == 2 {
				if coord == "" {
					coord = from
				}
				if from != coord {
					t.Fatalf("%q: an Unsubscribe from another actor than the coordinator (%s)", s, coord)
				}
				if id == "c" {
					unsubscribedC++
				}
				continue
			}
			if s != "subscribe b" {
				t.Fatalf("%q as an actor message: it went on the data plane", s)
			}
			subscribedB = true
		case <-deadline:
			t.Fatalf("at the shard: b subscribed by actor message %v, c unsubscribed %d times (want 2)", subscribedB, unsubscribedC)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	want := map[string][]string{"m1": {"a,d"}, "m2": {"b"}, "m3": {"c"}}
	if fmt.Sprint(calls) != fmt.Sprint(want) {
		t.Fatalf("data-plane SubscribeBatches %v, want one per member: %v", calls, want)
	}
}

// A member hosting the shards of more sources than one request may carry
// gets several SubscribeBatches, each within subscribeBatchBytes, which
// together subscribe to every source once.
func TestSubscribeBatchesStayWithinTheRequestLimit(t *testing.T) {
	saved := subscribeBatchBytes
	subscribeBatchBytes = 300
	t.Cleanup(func() { subscribeBatchBytes = saved })
	system := actor.NewActorSystem()
	defer system.Shutdown()
	sources := map[string][]byte{}
	var ids []string
	want := make([]int64, 2)
	for i := range 12 {
		id := fmt.Sprintf("source-with-a-longer-name-%02d", i)
		ids = append(ids, id)
		sources[id] = int64Bytes(int64(i), int64(10*i))
		want[0], want[1] = want[0]+int64(i), want[1]+int64(10*i)
	}
	stored := make(chan []byte, 1)
	storePID := system.Root.Spawn(storeReduced(stored))
	holder := &messages.NodeRef{NodeId: "n1", Address: storePID.GetAddress(), ActorId: storePID.GetId()}
	var mu sync.Mutex
	var sizes []int
	subscribed := map[string]int{}
	offPool := 0 // calls made on a goroutine of their own
	callData := func(ctx context.Context, addr string, kind byte, req []byte) ([]byte, error) {
		var batch messages.SubscribeBatch
		if err := proto.Unmarshal(req, &batch); err != nil || kind != messages.ControlSubscribe {
			return nil, fmt.Errorf("bad call %q: %v", kind, err)
		}
		answer := &messages.SubscribeAnswer{}
		onWorker := onPooledWorker()
		mu.Lock()
		if !onWorker {
			offPool++
		}
		sizes = append(sizes, len(req))
		for _, sub := range batch.GetSubscribes() {
			subscribed[sub.GetObjectId()]++
			answer.Updates = append(answer.Updates, inlineUpdate(sub.GetObjectId(), sources[sub.GetObjectId()], holder))
		}
		mu.Unlock()
		return proto.Marshal(answer)
	}
	replies := make(chan *messages.ReduceReply, 1)
	requester := system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if r, ok := ctx.Message().(*messages.ReduceReply); ok {
			replies <- r
		}
	}))
	var shardPID *actor.PID
	cfg := ActorConfig{
		Reduce:      reduction.Config{InlineLimit: 64 << 10},
		CallData:    callData,
		SubscribeAt: func(*actor.PID) string { return "m1" },
		ShardFor: func(string) *actor.PID {
			mu.Lock()
			defer mu.Unlock()
			return shardPID
		},
	}
	start := &messages.StartReduce{Reduce: &messages.Reduce{TargetId: "sum", SourceIds: ids, NumObjects: int32(len(ids)),
		Op: messages.ReduceOp_SUM, Dtype: messages.DType_INT64, TimeoutMs: 10_000}, Caller: holder}
	props := NewProps(cfg, "sum#1", start, requester, nil)
	seen := make(chan string, 64)
	mu.Lock()
	shardPID = system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor {
		return &subscribeShard{props: props, inline: sources, holder: holder, seen: seen}
	}))
	mu.Unlock()
	successful(t, replies)
	if got := <-stored; string(got) != string(int64Bytes(want...)) {
		t.Fatalf("stored %v, want %v", got, int64Bytes(want...))
	}
	mu.Lock()
	defer mu.Unlock()
	if len(sizes) < 2 {
		t.Fatalf("%d SubscribeBatches of %v bytes for %d sources, want several within %d bytes", len(sizes), sizes, len(ids), subscribeBatchBytes)
	}
	for _, n := range sizes {
		if n > subscribeBatchBytes {
			t.Errorf("a SubscribeBatch of %d bytes, over the limit of %d", n, subscribeBatchBytes)
		}
	}
	for _, id := range ids {
		if subscribed[id] != 1 {
			t.Errorf("%s subscribed %d times on the data plane, want once", id, subscribed[id])
		}
	}
	if offPool > 0 {
		t.Errorf("%d of %d SubscribeBatches were called from a goroutine of their own, want every one on a pooled worker (runCall)", offPool, len(sizes))
	}
}

// onPooledWorker reports whether the calling goroutine is one of
// actorutil.Dispatcher's workers, whose stack a run before grew.
func onPooledWorker() bool {
	pcs := make([]uintptr, 64)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(1, pcs)])
	for {
		f, more := frames.Next()
		if strings.HasSuffix(f.Function, "internal/actorutil.runWorker") {
			return true
		}
		if !more {
			return false
		}
	}
}
