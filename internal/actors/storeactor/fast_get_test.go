package storeactor

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/objstore"
	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"

	"github.com/hoplite-go/hoplite/internal/actorutil"
	"github.com/hoplite-go/hoplite/internal/fastget"
	"github.com/hoplite-go/hoplite/internal/transport"
	"github.com/hoplite-go/hoplite/messages"
)

// fastNode is a store node whose Locates locate answers, with its store,
// and its fast path's Getter.
func fastNode(t *testing.T, locate Locator) (*actor.ActorSystem, *actor.PID, *objstore.Store, fastget.Getter) {
	t.Helper()
	return fastNodeShard(t, locate, func(actor.Context) {})
}

// fastNodeShard is fastNode whose shard actor receives with shard.
func fastNodeShard(t *testing.T, locate Locator, shardFunc actor.ReceiveFunc) (*actor.ActorSystem, *actor.PID, *objstore.Store, fastget.Getter) {
	t.Helper()
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}))
	t.Cleanup(system.Shutdown)
	// The shard stays up (the node watches it); the Locator answers for it.
	shard := system.Root.Spawn(actor.PropsFromFunc(shardFunc))
	log, _ := logtest.NewNullLogger()
	store := objstore.NewStore(1 << 20)
	node := system.Root.Spawn(NewProps(Config{Self: &messages.NodeRef{NodeId: "me", Address: system.Address(), ActorId: "me/store", DataAddress: "mem://me"},
		Store: store, ShardFor: func(string) *actor.PID { return shard }, Locate: locate, Transport: transport.NewMemory(0), Log: logrus.NewEntry(log)}))
	syncNode(t, system, node)
	g := fastget.Lookup(node)
	if g == nil {
		t.Fatal("the started node registered no fast path")
	}
	return system, node, store, g
}

// syncNode returns once node has taken every message sent to it before.
func syncNode(t *testing.T, system *actor.ActorSystem, node *actor.PID) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := actorutil.Request(ctx, system.Root, node, &messages.NodeStatus{}); err != nil {
		t.Fatal(err)
	}
}

func fastGet(t *testing.T, g fastget.Getter, id string) ([]byte, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return g.Get(ctx, id, false)
}

// A fast Get's bytes come from the shard's answer to a Locate that names
// the node as its receiver, and the node then holds the copy: its own
// Get of the object is answered from it, with no second Locate.
func TestFastGetAnswersAndTheNodeKeepsTheCopy(t *testing.T) {
	var locates atomic.Int32
	system, node, store, g := fastNode(t, func(_ context.Context, _ *actor.PID, l *messages.Locate) (*messages.LocateReply, error) {
		locates.Add(1)
		if l.GetReceiver().GetNodeId() != "me" || l.GetNoCopy() {
			t.Errorf("Locate %v: want the node as the receiver of a copy", l)
		}
		return inlineAnswer(l), nil
	})
	data, ok := fastGet(t, g, "x")
	if !ok || string(data) != "inline bytes" {
		t.Fatalf("fast Get: %q, %v", data, ok)
	}
	syncNode(t, system, node)
	if o := store.Lookup("x"); o == nil {
		t.Fatal("the node holds no copy after the fast Get")
	} else if _, done, err := o.Progress(); !done || err != nil {
		t.Fatalf("the node's copy: done %v, err %v", done, err)
	}
	getInline(t, system, node, "x")
	if _, ok := fastGet(t, g, "x"); ok {
		t.Error("the fast path answered a Get of a copy the node holds")
	}
	if n := locates.Load(); n != 1 {
		t.Fatalf("%d Locates, want 1", n)
	}
}

// A Delete that completes after the shard answered a fast Get with the
// bytes but before the node took the run over (the shard's drop reaches
// the node first) leaves no copy behind: the copy was reserved before
// the Locate left, so the drop removes it, and the run stores nothing.
// A copy stored after the drop would be read by later Gets on the node,
// after the Delete completed.
func TestFastGetDropBeforeHandOffLeavesNoCopy(t *testing.T) {
	var system *actor.ActorSystem
	var node *actor.PID
	var store *objstore.Store
	var deleted atomic.Bool
	system, node, store, g := fastNode(t, func(ctx context.Context, _ *actor.PID, l *messages.Locate) (*messages.LocateReply, error) {
		if deleted.Load() {
			return &messages.LocateReply{ObjectId: l.GetObjectId(), Attempt: l.GetAttempt(),
				Error: messages.Errorf(messages.ErrorCode_DELETED, "deleted")}, nil
		}
		if store.Lookup(l.GetObjectId()) == nil {
			t.Error("the Locate left before the node's copy was reserved")
		}
		// The shard answers, then the Delete drops the recorded copy
		// and completes, before this answer is back.
		reply := inlineAnswer(l)
		deleted.Store(true)
		system.Root.Send(node, &messages.DropObject{ObjectId: l.GetObjectId(), Reason: messages.Errorf(messages.ErrorCode_DELETED, "deleted")})
		for store.Lookup(l.GetObjectId()) != nil {
			select {
			case <-ctx.Done():
				return nil, messages.AsError(ctx.Err())
			case <-time.After(time.Millisecond):
			}
		}
		return reply, nil
	})
	if data, ok := fastGet(t, g, "x"); !ok || string(data) != "inline bytes" {
		t.Fatalf("fast Get begun before the Delete: %q, %v", data, ok)
	}
	syncNode(t, system, node)
	if o := store.Lookup("x"); o != nil {
		t.Fatal("the node holds a copy of an object deleted before the run reached it")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := actorutil.Request(ctx, system.Root, node, &messages.Get{ObjectId: "x", TimeoutMs: 5000})
	if err != nil {
		t.Fatal(err)
	}
	if r := res.(*messages.GetReply); !errors.Is(r.GetError(), messages.ErrDeleted) {
		t.Fatalf("Get after the Delete: %q, %v; want DELETED", r.GetData(), r.GetError())
	}
}

// A failed Locate is no answer: the fast path declines, and the node's
// own Get, which the Client sends next, fetches the object.
func TestFastGetFallsBackWhenTheLocateFails(t *testing.T) {
	var calls atomic.Int32
	system, node, _, g := fastNode(t, func(_ context.Context, _ *actor.PID, l *messages.Locate) (*messages.LocateReply, error) {
		if calls.Add(1) == 1 {
			return nil, messages.Errorf(messages.ErrorCode_UNAVAILABLE, "the shard is moving")
		}
		return inlineAnswer(l), nil
	})
	if data, ok := fastGet(t, g, "x"); ok {
		t.Fatalf("fast Get answered %q after a failed Locate", data)
	}
	getInline(t, system, node, "x")
}

// A shard that starts over while a fast Get's copy is reserved and not
// yet stored rebuilds from republications that cannot carry that copy
// (its size is unknown until the answer is stored), although the answer
// recorded it at the shard's previous table. The node publishes the copy
// once stored: a Delete at the rebuilt shard then reaches it, and a loss
// of the other copies is no LOST while it lives.
func TestFastGetPublishesACopyAShardRebuiltWithout(t *testing.T) {
	pubs := make(chan *messages.PublishLocation, 4)
	var system *actor.ActorSystem
	var node *actor.PID
	system, node, _, g := fastNodeShard(t, func(ctx context.Context, _ *actor.PID, l *messages.Locate) (*messages.LocateReply, error) {
		// The shard answers, restarts, and asks the node to republish;
		// the node serves that before the answer reaches it.
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if _, err := actorutil.Request(rctx, system.Root, node, &messages.Republish{Shards: []int32{0}, ShardCount: 1}); err != nil {
			t.Errorf("republish: %v", err)
		}
		return inlineAnswer(l), nil
	}, func(c actor.Context) {
		switch m := c.Message().(type) {
		case *messages.PublishLocation:
			pubs <- m
		case *messages.Republish:
		}
	})
	if data, ok := fastGet(t, g, "x"); !ok || string(data) != "inline bytes" {
		t.Fatalf("fast Get: %q, %v", data, ok)
	}
	syncNode(t, system, node)
	select {
	case p := <-pubs:
		if p.GetObjectId() != "x" || p.GetState() != messages.LocationState_COMPLETE || p.GetNode().GetNodeId() != "me" || p.GetSize() != int64(len("inline bytes")) {
			t.Fatalf("publication %v, want me's whole copy of x", p)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the node did not publish the copy the rebuilt shard could not have learned")
	}
}

// Without a republication since the Get reserved its copy, the shard
// that answered recorded the copy and nothing is published: an inline
// Get costs the shard no third message.
func TestFastGetPublishesNothingToTheShardThatRecorded(t *testing.T) {
	pubs := make(chan *messages.PublishLocation, 4)
	system, node, _, g := fastNodeShard(t, func(_ context.Context, _ *actor.PID, l *messages.Locate) (*messages.LocateReply, error) {
		return inlineAnswer(l), nil
	}, func(c actor.Context) {
		if m, ok := c.Message().(*messages.PublishLocation); ok {
			pubs <- m
		}
	})
	if data, ok := fastGet(t, g, "x"); !ok || string(data) != "inline bytes" {
		t.Fatalf("fast Get: %q, %v", data, ok)
	}
	syncNode(t, system, node)
	getInline(t, system, node, "x") // the copy is stored
	syncNode(t, system, node)
	select {
	case p := <-pubs:
		t.Fatalf("published %v to the shard that recorded the copy", p)
	default:
	}
}
