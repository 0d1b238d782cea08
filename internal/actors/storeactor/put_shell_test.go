package storeactor

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/objstore"
	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"github.com/sirupsen/logrus"

	"github.com/hoplite-go/hoplite/internal/actorutil"
	"github.com/hoplite-go/hoplite/internal/testutil"
	"github.com/hoplite-go/hoplite/messages"
)

// putShardLog records what a store node sends its directory shard and
// answers CreateObjects as answer decides.
type putShardLog struct {
	mu       sync.Mutex
	got      []any
	received chan any
}

func putQuietSystem(t *testing.T) *actor.ActorSystem {
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}))
	t.Cleanup(system.Shutdown)
	return system
}

// putNode starts a store node whose only shard is shard.
func putNode(t *testing.T, system *actor.ActorSystem, shard *actor.PID) (*actor.PID, *objstore.Store) {
	store := objstore.NewStore(1 << 20)
	log := logrus.New()
	log.SetOutput(io.Discard)
	cfg := Config{Self: &messages.NodeRef{NodeId: "n"}, Store: store, ShardFor: func(string) *actor.PID { return shard },
		InlineLimit: 16, Log: logrus.NewEntry(log)}
	return system.Root.Spawn(NewProps(cfg)), store
}

func doPut(t *testing.T, system *actor.ActorSystem, node *actor.PID, id string, data []byte, timeoutMs int64) error {
	t.Helper()
	answer, err := putVia(system, node, id, data, timeoutMs)
	if err != nil {
		t.Fatalf("Put %s: no answer: %v", id, err)
	}
	return answer
}

// putVia asks node to Put and returns its answer, or why none came.
func putVia(system *actor.ActorSystem, node *actor.PID, id string, data []byte, timeoutMs int64) (answer, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := actorutil.Request(ctx, system.Root, node, &messages.Put{ObjectId: id, Data: data, TimeoutMs: timeoutMs})
	if err != nil {
		return nil, err
	}
	return messages.ErrOrNil(res.(*messages.PutReply).GetError()), nil
}

func (f *putShardLog) record(m any) {
	f.mu.Lock()
	f.got = append(f.got, m)
	f.mu.Unlock()
	select {
	case f.received <- m:
	default:
	}
}

func (f *putShardLog) sent() []any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]any(nil), f.got...)
}

// A shard that never answers: the Put fails TIMEOUT at its deadline, its
// copy is dropped and its location withdrawn.
func TestPutTimesOutWithoutShardReply(t *testing.T) {
	system := putQuietSystem(t)
	f := &putShardLog{received: make(chan any, 16)}
	shard := system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		switch m := ctx.Message().(type) {
		case *messages.CreateObject, *messages.UnpublishLocation:
			f.record(m)
		}
	}))
	node, store := putNode(t, system, shard)
	if err := doPut(t, system, node, "x", testutil.Pattern(1, 1000), 50); !errors.Is(err, messages.ErrTimeout) {
		t.Fatalf("Put: %v, want TIMEOUT", err)
	}
	if store.Lookup("x") != nil {
		t.Fatal("the timed-out Put left its copy in the store")
	}
	putWaitFor(t, "UnpublishLocation", func() bool {
		for _, m := range f.sent() {
			if u, ok := m.(*messages.UnpublishLocation); ok && u.GetObjectId() == "x" {
				return true
			}
		}
		return false
	})
}

// A shard that stops before it answers fails the Put with UNAVAILABLE
// (the node watches it), long before the Put's own deadline.
func TestPutFailsWhenShardStops(t *testing.T) {
	system := putQuietSystem(t)
	shard := system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if _, ok := ctx.Message().(*messages.CreateObject); ok {
			ctx.Stop(ctx.Self())
		}
	}))
	node, store := putNode(t, system, shard)
	if err := doPut(t, system, node, "x", testutil.Pattern(2, 1000), 60_000); !errors.Is(err, messages.ErrUnavailable) {
		t.Fatalf("Put: %v, want UNAVAILABLE", err)
	}
	if store.Lookup("x") != nil {
		t.Fatal("the failed Put left its copy in the store")
	}
	// The shard is gone for good: the next Put fails the same way.
	if err := doPut(t, system, node, "y", testutil.Pattern(3, 1000), 60_000); !errors.Is(err, messages.ErrUnavailable) {
		t.Fatalf("Put to a dead shard: %v, want UNAVAILABLE", err)
	}
}

// Replies are matched to their Puts by request id: a shard that answers
// two registrations in the opposite order, one refused, gets each answer
// to the right Put, and only the accepted one is published.
func TestPutRepliesMatchTheirRequests(t *testing.T) {
	system := putQuietSystem(t)
	f := &putShardLog{received: make(chan any, 16)}
	type pending struct {
		to  *actor.PID
		req *messages.CreateObject
	}
	var held []pending
	shard := system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		switch m := ctx.Message().(type) {
		case *messages.CreateObject:
			held = append(held, pending{ctx.Sender(), m})
			if len(held) < 2 {
				return
			}
			for i := len(held) - 1; i >= 0; i-- {
				r := &messages.CreateObjectReply{ObjectId: held[i].req.GetObjectId(), RequestId: held[i].req.GetRequestId()}
				if held[i].req.GetObjectId() == "refused" {
					r.Error = messages.Errorf(messages.ErrorCode_CONFLICT, "refused")
				}
				ctx.Send(held[i].to, r)
			}
		case *messages.PublishLocation:
			f.record(m)
		}
	}))
	node, store := putNode(t, system, shard)
	errs := make(chan [2]error, 1)
	go func() {
		a, err := putVia(system, node, "accepted", testutil.Pattern(4, 1000), 60_000)
		errs <- [2]error{a, err}
	}()
	refused := doPut(t, system, node, "refused", testutil.Pattern(5, 1000), 60_000)
	got := <-errs
	if got[1] != nil {
		t.Fatalf("Put accepted: no answer: %v", got[1])
	}
	accepted := got[0]
	if !errors.Is(refused, messages.ErrConflict) || accepted != nil {
		t.Fatalf("answers: refused %v, accepted %v; want CONFLICT and success", refused, accepted)
	}
	if store.Lookup("refused") != nil || store.Lookup("accepted") == nil {
		t.Fatal("the store holds the wrong copies")
	}
	putWaitFor(t, "the accepted copy's publish", func() bool { return len(f.sent()) > 0 })
	for _, m := range f.sent() {
		if pl := m.(*messages.PublishLocation); pl.GetObjectId() != "accepted" || pl.GetState() != messages.LocationState_COMPLETE {
			t.Fatalf("published %v", pl)
		}
	}
}

// waitFor polls cond until it holds, failing the test after a deadline.
func putWaitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("no %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A Delete waits for each node that held a copy: one that drops it
// answers, one that stops before it answers counts as dropped (it has no
// copy to serve), and this node's own copy goes in place.
func TestDeleteWaitsForDropsAndPeerFailure(t *testing.T) {
	system := putQuietSystem(t)
	dropped := make(chan string, 4)
	peer := func(name string, stop bool) *messages.NodeRef {
		pid := system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
			if m, ok := ctx.Message().(*messages.DropObject); ok {
				dropped <- name
				if stop {
					ctx.Stop(ctx.Self())
					return
				}
				ctx.Respond(&messages.DeleteObjectReply{ObjectId: m.GetObjectId(), RequestId: m.GetRequestId()})
			}
		}))
		return &messages.NodeRef{NodeId: name, Address: pid.GetAddress(), ActorId: pid.GetId()}
	}
	a, b := peer("a", false), peer("b", true)
	shard := system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		switch m := ctx.Message().(type) {
		case *messages.CreateObject:
			ctx.Respond(&messages.CreateObjectReply{ObjectId: m.GetObjectId(), RequestId: m.GetRequestId()})
		case *messages.DeleteObject:
			ctx.Respond(&messages.DeleteObjectReply{ObjectId: m.GetObjectId(), RequestId: m.GetRequestId(),
				Dropped: []*messages.NodeRef{{NodeId: "n"}, a, b}})
		}
	}))
	node, store := putNode(t, system, shard)
	if err := doPut(t, system, node, "d", testutil.Pattern(6, 1000), 60_000); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// The Delete's own deadline is far: only the answers can end it.
	res, err := actorutil.Request(ctx, system.Root, node, &messages.Delete{ObjectId: "d", TimeoutMs: 60_000})
	if err != nil {
		t.Fatalf("Delete: no answer: %v", err)
	}
	if e := res.(*messages.DeleteReply).GetError(); e != nil {
		t.Fatalf("Delete: %v", e)
	}
	if len(dropped) != 2 {
		t.Fatalf("%d peers asked to drop before the answer, want 2", len(dropped))
	}
	if store.Lookup("d") != nil {
		t.Fatal("this node's copy survived the Delete")
	}
	if !slices.Contains(store.DeletedIDs(), "d") {
		t.Fatal("the deletion is not remembered for rebuilt shards")
	}
}

// remoteShard is a directory shard on another member as the registry
// resolves one: it passes messages to inner, counts the store node's
// watches, and once gone drops them and answers a Watch with Terminated,
// as a member does for an actor it no longer holds.
type remoteShard struct {
	system             *actor.ActorSystem
	inner              *actor.PID
	gone               atomic.Bool
	watches, unwatches atomic.Int32
}

func (r *remoteShard) SendUserMessage(_ *actor.PID, message any) {
	if !r.gone.Load() {
		p, _ := r.system.ProcessRegistry.Get(r.inner)
		p.SendUserMessage(r.inner, message)
	}
}

func (r *remoteShard) SendSystemMessage(pid *actor.PID, message any) {
	switch m := message.(type) {
	case *actor.Watch:
		r.watches.Add(1)
		if r.gone.Load() {
			w, _ := r.system.ProcessRegistry.Get(m.Watcher)
			w.SendSystemMessage(m.Watcher, &actor.Terminated{Who: pid, Why: actor.TerminatedReason_NotFound})
		}
	case *actor.Unwatch:
		r.unwatches.Add(1)
	}
}

func (*remoteShard) Stop(*actor.PID) {}

// A Put to a shard on another member watches it only when its
// CreateObject is late: Puts answered in time send no Watch across the
// network; one to a shard that stopped there is watched, fails
// UNAVAILABLE well before its deadline, and leaves no copy.
func TestPutWatchesARemoteShardOnlyWhenLate(t *testing.T) {
	defer actorutil.SetRemoteWatchDelay(30 * time.Millisecond)()
	system := putQuietSystem(t)
	inner := system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if m, ok := ctx.Message().(*messages.CreateObject); ok {
			ctx.Respond(&messages.CreateObjectReply{ObjectId: m.GetObjectId(), RequestId: m.GetRequestId()})
		}
	}))
	far := &remoteShard{system: system, inner: inner}
	system.ProcessRegistry.RegisterAddressResolver(func(p *actor.PID) (actor.Process, bool) {
		return far, p.GetAddress() == "far:1"
	})
	node, store := putNode(t, system, actor.NewPID("far:1", "shard"))
	for _, id := range []string{"a", "b", "c"} {
		if err := doPut(t, system, node, id, testutil.Pattern(1, 1000), 60_000); err != nil {
			t.Fatalf("Put %s: %v", id, err)
		}
	}
	if w := far.watches.Load(); w != 0 {
		t.Fatalf("3 Puts answered at once sent %d watches to the remote shard, want 0", w)
	}
	far.gone.Store(true)
	// Ended by the late watch's Terminated, not by its deadline (which
	// would be TIMEOUT).
	if err := doPut(t, system, node, "x", testutil.Pattern(2, 1000), 60_000); !errors.Is(err, messages.ErrUnavailable) {
		t.Fatalf("Put to a shard gone: %v, want UNAVAILABLE", err)
	}
	if w := far.watches.Load(); w != 1 {
		t.Fatalf("the late Put sent %d watches, want 1", w)
	}
	if store.Lookup("x") != nil {
		t.Fatal("the failed Put left its copy in the store")
	}
}
