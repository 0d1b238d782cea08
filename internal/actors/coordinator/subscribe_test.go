package coordinator

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/hoplite-go/hoplite/internal/coordinator"
	"github.com/hoplite-go/hoplite/messages"
)

// subscribeShard is the coordinator's parent and every source's shard: it
// answers an actor Subscribe with the source's inline location, and
// records every Subscribe and Unsubscribe it gets as actor messages.
type subscribeShard struct {
	props  *actor.Props
	inline map[string][]byte
	holder *messages.NodeRef
	seen   chan<- string // "subscribe a", "unsubscribe b from <sender id>"
}

func (s *subscribeShard) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		ctx.Spawn(s.props)
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

// A coordinator subscribes to its sources on the data plane: an inline
// source's bytes come back in the answer, and a call that fails goes
// again as an actor message. A call that ends after the Reduce did
// unsubscribes from the coordinator, since the Reduce's own Unsubscribe
// (an actor message) may have reached the shard before that
// subscription did.
func TestSubscribesOnTheDataPlane(t *testing.T) {
	system := actor.NewActorSystem()
	defer system.Shutdown()
	sources := map[string][]byte{"a": int64Bytes(1, 2), "b": int64Bytes(10, 20), "c": int64Bytes(100, 200)}
	stored := make(chan []byte, 4)
	storePID := system.Root.Spawn(storeReduced(stored))
	holder := &messages.NodeRef{NodeId: "n1", Address: storePID.GetAddress(), ActorId: storePID.GetId()}
	seen := make(chan string, 32)
	release := make(chan struct{}) // c's call answers once the Reduce ended
	var mu sync.Mutex
	calls := map[string]int{}
	callData := func(ctx context.Context, addr string, kind byte, req []byte) ([]byte, error) {
		if kind != messages.ControlSubscribe || addr != "shard-member" {
			return nil, fmt.Errorf("unexpected call %q to %s", kind, addr)
		}
		var sub messages.Subscribe
		if err := proto.Unmarshal(req, &sub); err != nil || sub.GetSubscriber().GetActorId() == "" {
			return nil, fmt.Errorf("bad Subscribe %v: %v", &sub, err)
		}
		id := sub.GetObjectId()
		mu.Lock()
		calls[id]++
		mu.Unlock()
		switch id {
		case "b":
			return nil, messages.Errorf(messages.ErrorCode_UNAVAILABLE, "the shard's member is still starting")
		case "c":
			select {
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return nil, nil // subscribed; no inline answer
		}
		return proto.Marshal(&messages.SubscribeAnswer{Updates: []*messages.LocationUpdate{inlineUpdate(id, sources[id], holder)}})
	}
	replies := make(chan *messages.ReduceReply, 1)
	requester := system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if r, ok := ctx.Message().(*messages.ReduceReply); ok {
			replies <- r
		}
	}))
	var shardPID *actor.PID
	cfg := ActorConfig{
		Reduce:      coordinator.Config{InlineLimit: 64 << 10},
		CallData:    callData,
		SubscribeAt: func(*actor.PID) string { return "shard-member" },
		ShardFor: func(string) *actor.PID {
			mu.Lock()
			defer mu.Unlock()
			return shardPID
		},
	}
	start := &messages.StartReduce{Reduce: &messages.Reduce{TargetId: "sum", SourceIds: []string{"a", "b", "c"}, NumObjects: 2,
		Op: messages.ReduceOp_SUM, Dtype: messages.DType_INT64, TimeoutMs: 10_000}, Caller: holder}
	props := NewProps(cfg, "sum#1", start, requester, nil)
	mu.Lock()
	shardPID = system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor {
		return &subscribeShard{props: props, inline: sources, holder: holder, seen: seen}
	}))
	mu.Unlock()

	var reply *messages.ReduceReply
	select {
	case reply = <-replies:
	case <-time.After(10 * time.Second):
		t.Fatal("no ReduceReply")
	}
	if err := messages.ErrOrNil(reply.GetError()); err != nil {
		t.Fatalf("reduce: %v", err)
	}
	if got := <-stored; string(got) != string(int64Bytes(11, 22)) {
		t.Fatalf("stored %v, want a+b = [11 22]", got)
	}
	close(release)
	// At the shard: b's Subscribe as an actor message (its call failed),
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
	if calls["a"] != 1 || calls["b"] != 1 || calls["c"] != 1 {
		t.Fatalf("data-plane Subscribes %v, want one per source", calls)
	}
}
