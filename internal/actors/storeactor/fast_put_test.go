package storeactor

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/objstore"
	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/internal/actorutil"
	"github.com/hoplite-go/hoplite/internal/fastget"
	"github.com/hoplite-go/hoplite/messages"
)

// putShard records what a store node and its fast path send a shard,
// and answers CreateObject with create's answer.
type putShard struct {
	mu     sync.Mutex
	got    []any
	create func(*messages.CreateObject) *messages.CreateObjectReply
	self   *actor.PID // set at its start
}

func (f *putShard) receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		f.mu.Lock()
		f.self = ctx.Self()
		f.mu.Unlock()
	case *messages.CreateObject:
		f.note(m)
		ctx.Respond(f.create(m))
	case *messages.PublishLocation, *messages.UnpublishLocation:
		f.note(m)
	case shardSync:
		ctx.Respond(m)
	}
}

// shardSync asks a putShard for an answer once it has taken every message
// sent to it before.
type shardSync struct{}

// syncShard returns once the shard at pid has taken every message sent to
// it before, by anyone.
func syncShard(t *testing.T, system *actor.ActorSystem, pid *actor.PID) {
	t.Helper()
	if _, err := system.Root.RequestFuture(pid, shardSync{}, 10*time.Second).Result(); err != nil {
		t.Fatal(err)
	}
}

func (f *putShard) note(m any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.got = append(f.got, m)
}

func (f *putShard) pid() *actor.PID {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.self
}

func (f *putShard) sent() []any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]any(nil), f.got...)
}

// waitSent waits, within a deadline, until the shard got n messages,
// and returns what it got.
func (f *putShard) waitSent(t *testing.T, n int) []any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for len(f.sent()) < n && ctx.Err() == nil {
		time.Sleep(time.Millisecond)
	}
	return f.sent()
}

// fastPutNode is a store node whose shard is f, and its fast Put path.
func fastPutNode(t *testing.T, f *putShard) (*actor.ActorSystem, *actor.PID, *objstore.Store, fastget.Putter) {
	t.Helper()
	system, node, store, _ := fastNodeShard(t, func(context.Context, *actor.PID, *messages.Locate) (*messages.LocateReply, error) {
		return nil, errors.New("no Locate in these tests")
	}, f.receive)
	p := fastget.LookupPutter(node)
	if p == nil {
		t.Fatal("the started node registered no fast Put")
	}
	return system, node, store, p
}

func fastPut(t *testing.T, p fastget.Putter, id string, data []byte) (bool, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return p.Put(ctx, id, data)
}

// A fast Put registers the creator copy with its bytes at the shard from
// the caller's goroutine, answers once the copy is whole, and the node
// then publishes it COMPLETE: the shard learns of the copy as from an
// ordinary Put.
func TestFastPutRegistersStoresAndPublishes(t *testing.T) {
	f := &putShard{create: func(c *messages.CreateObject) *messages.CreateObjectReply {
		return &messages.CreateObjectReply{ObjectId: c.GetObjectId(), RequestId: c.GetRequestId()}
	}}
	system, node, store, p := fastPutNode(t, f)
	data := []byte("small bytes")
	ok, err := fastPut(t, p, "x", data)
	if !ok || err != nil {
		t.Fatalf("fast Put: %v, %v", ok, err)
	}
	data[0] = 'S' // the caller's buffer is its own again
	o := store.Lookup("x")
	if o == nil {
		t.Fatal("no creator copy after the fast Put")
	}
	if b, err := o.Bytes(); err != nil || string(b) != "small bytes" {
		t.Fatalf("the copy: %q, %v", b, err)
	}
	syncNode(t, system, node)
	got := f.waitSent(t, 2)
	if len(got) != 2 {
		t.Fatalf("the shard got %v, want a CreateObject and a PublishLocation", got)
	}
	c, ok := got[0].(*messages.CreateObject)
	if !ok || !c.GetHasInline() || string(c.GetInlineData()) != "small bytes" || c.GetCreator().GetNodeId() != "me" {
		t.Fatalf("first to the shard: %v, want the CreateObject with the bytes", got[0])
	}
	pub, ok := got[1].(*messages.PublishLocation)
	if !ok || pub.GetState() != messages.LocationState_COMPLETE || !pub.GetCreator() {
		t.Fatalf("then: %v, want the creator's COMPLETE publication", got[1])
	}
	// A Put of an id the node holds is the node's (same bytes: OK).
	if ok, _ := fastPut(t, p, "x", []byte("small bytes")); ok {
		t.Error("the fast path took a Put of an id the node holds")
	}
	// An object over the inline limit is not the fast path's.
	if ok, _ := fastPut(t, p, "big", bytes.Repeat([]byte{1}, 64<<10)); ok {
		t.Error("the fast path took a Put over the inline limit")
	}
}

// A fast Put the shard refuses answers its error and leaves no copy; one
// whose shard stopped before it answered answers UNAVAILABLE, drops the
// copy.
func TestFastPutFailuresLeaveNoCopy(t *testing.T) {
	f := &putShard{create: func(c *messages.CreateObject) *messages.CreateObjectReply {
		return &messages.CreateObjectReply{ObjectId: c.GetObjectId(), RequestId: c.GetRequestId(),
			Error: messages.Errorf(messages.ErrorCode_CONFLICT, "other bytes")}
	}}
	system, node, store, p := fastPutNode(t, f)
	ok, err := fastPut(t, p, "x", []byte("mine"))
	if !ok || !errors.Is(err, messages.ErrConflict) {
		t.Fatalf("refused fast Put: %v, %v; want CONFLICT", ok, err)
	}
	if store.Lookup("x") != nil {
		t.Fatal("a refused Put left its copy")
	}

	// The shard stops instead of answering.
	var reached atomic.Bool
	system2, node2, store2, _ := fastNodeShard(t, nil, func(ctx actor.Context) {
		if _, ok := ctx.Message().(*messages.CreateObject); ok {
			reached.Store(true)
			ctx.Stop(ctx.Self())
		}
	})
	p2 := fastget.LookupPutter(node2)
	ok, err = fastPut(t, p2, "y", []byte("mine"))
	if !ok || !errors.Is(err, messages.ErrUnavailable) {
		t.Fatalf("fast Put to a shard that stopped: %v, %v; want UNAVAILABLE", ok, err)
	}
	if store2.Lookup("y") != nil {
		t.Fatal("a failed Put left its copy")
	}
	if !reached.Load() {
		t.Fatal("the CreateObject never reached the shard")
	}
	syncNode(t, system, node)
	syncNode(t, system2, node2)
}

// recordingShard answers a CreateObject that asks for it (complete) as a
// shard that recorded the creator's copy COMPLETE at the registration.
func recordingShard(before func(*messages.CreateObject)) *putShard {
	return &putShard{create: func(c *messages.CreateObject) *messages.CreateObjectReply {
		if before != nil {
			before(c)
		}
		return &messages.CreateObjectReply{ObjectId: c.GetObjectId(), RequestId: c.GetRequestId(), RecordedComplete: c.GetComplete()}
	}}
}

// A fast Put asks the shard to record its copy COMPLETE at the
// registration; once the shard has, the node publishes nothing after the
// copy-in: the CreateObject is the one message the shard hears.
func TestFastPutRecordedCompleteSendsNoPublication(t *testing.T) {
	f := recordingShard(nil)
	system, node, store, p := fastPutNode(t, f)
	if ok, err := fastPut(t, p, "x", []byte("small bytes")); !ok || err != nil {
		t.Fatalf("fast Put: %v, %v", ok, err)
	}
	if o := store.Lookup("x"); o == nil || !o.IsWhole() {
		t.Fatal("no whole creator copy after the fast Put")
	}
	syncNode(t, system, node) // the node has taken the Put's end
	syncShard(t, system, f.pid())
	got := f.sent()
	if len(got) != 1 {
		t.Fatalf("the shard got %v, want the CreateObject alone", got)
	}
	if c, ok := got[0].(*messages.CreateObject); !ok || !c.GetComplete() || !c.GetHasInline() {
		t.Fatalf("the shard got %v, want an inline CreateObject asking to record the copy COMPLETE", got[0])
	}
}

// A Republish served while a Put's registration was out may have told a
// rebuilt shard of the copy as PARTIAL: the node then publishes it
// COMPLETE after the copy-in, as the copy-in's end always did, so the
// shard's last word on the copy is COMPLETE. Both the fast Put and the
// node's own.
func TestRecordedCompletePublishesAfterARepublish(t *testing.T) {
	for _, fast := range []bool{true, false} {
		var node *actor.PID
		var system *actor.ActorSystem
		f := recordingShard(func(*messages.CreateObject) {
			// The shard started over while the registration was out and
			// asks the node for what it holds (as a rebuilt shard does),
			// before its answer to the CreateObject. The node republishes
			// the copy as it is now: PARTIAL, its bytes not copied in
			// before this answer.
			system.Root.Send(node, &messages.Republish{ShardCount: 1, Shards: []int32{0}})
			syncNode(t, system, node)
		})
		var p fastget.Putter
		system, node, _, p = fastPutNode(t, f)
		if fast {
			if ok, err := fastPut(t, p, "x", []byte("small bytes")); !ok || err != nil {
				t.Fatalf("fast Put: %v, %v", ok, err)
			}
		} else {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			res, err := actorutil.Request(ctx, system.Root, node, &messages.Put{ObjectId: "x", Data: []byte("small bytes")})
			cancel()
			if r, ok := res.(*messages.PutReply); err != nil || !ok || r.GetError() != nil {
				t.Fatalf("Put answered %v, %v", res, err)
			}
		}
		syncNode(t, system, node)
		syncShard(t, system, f.pid())
		var last *messages.PublishLocation
		var partial bool
		for _, m := range f.sent() {
			if pub, ok := m.(*messages.PublishLocation); ok && pub.GetObjectId() == "x" {
				last = pub
				partial = partial || pub.GetState() == messages.LocationState_PARTIAL
			}
		}
		if !partial {
			t.Fatalf("fast %v: the shard heard %v: no PARTIAL republication, so the test did not make the race it is about", fast, f.sent())
		}
		if last == nil || last.GetState() != messages.LocationState_COMPLETE || !last.GetCreator() {
			t.Fatalf("fast %v: the shard's last publication of x: %v (all: %v), want the creator's copy COMPLETE", fast, last, f.sent())
		}
	}
}

// The node's own Put of an inline object (an actor's Put message) asks
// for the same: once the shard recorded the copy COMPLETE, it hears the
// CreateObject alone.
func TestNodePutRecordedCompleteSendsNoPublication(t *testing.T) {
	f := recordingShard(nil)
	system, node, store, _ := fastPutNode(t, f)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := actorutil.Request(ctx, system.Root, node, &messages.Put{ObjectId: "y", Data: []byte("small bytes")})
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := res.(*messages.PutReply); !ok || r.GetError() != nil {
		t.Fatalf("Put answered %v", res)
	}
	if o := store.Lookup("y"); o == nil || !o.IsWhole() {
		t.Fatal("no whole creator copy after the Put")
	}
	syncNode(t, system, node)
	syncShard(t, system, f.pid())
	got := f.sent()
	if len(got) != 1 {
		t.Fatalf("the shard got %v, want the CreateObject alone", got)
	}
	if c, ok := got[0].(*messages.CreateObject); !ok || !c.GetComplete() {
		t.Fatalf("the shard got %v, want a CreateObject asking to record the copy COMPLETE", got[0])
	}
}
