package shardactor

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/hoplite-go/hoplite/internal/actorutil"
	"github.com/hoplite-go/hoplite/messages"
)

// A Locate asking only for inline bytes is answered from the table's
// published objects, on the caller's goroutine, without a message to the
// shard: in process (LocateHere) and on the data plane (TryServeLocate,
// ServeLocate). Once a Delete is answered it finds nothing, and neither
// does it once the shard stopped; a Locate without inline_only is left
// to the shard.
func TestInlineOnlyLocateIsAnsweredWithoutTheShard(t *testing.T) {
	system := actor.NewActorSystem()
	t.Cleanup(system.Shutdown)
	var seen atomic.Int32 // Locates the shard's Receive saw
	pid, err := system.Root.SpawnNamed(NewShardProps(ShardConfig{BeforeReceive: func(_ string, m any) {
		if _, ok := m.(*messages.Locate); ok {
			seen.Add(1)
		}
	}}), "peek-shard")
	if err != nil {
		t.Fatal(err)
	}
	shardFor := func(string) *actor.PID { return pid }
	store := system.Root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
	creator := &messages.NodeRef{NodeId: "n1", Address: store.GetAddress(), ActorId: store.GetId()}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, id := range []string{"a", "b"} {
		res, err := actorutil.Request(ctx, system.Root, pid, &messages.CreateObject{ObjectId: id, Size: 3, Creator: creator, HasInline: true, InlineData: []byte(id + "yz")})
		if err != nil || res.(*messages.CreateObjectReply).GetError() != nil {
			t.Fatalf("create %s: %v %v", id, res, err)
		}
	}
	peek := &messages.Locate{ObjectId: "a", Receiver: &messages.NodeRef{NodeId: "n2"}, NoCopy: true, InlineOnly: true, TimeoutMs: 5000, Attempt: 4}
	r, err := LocateHere(ctx, system.Root, pid, peek)
	if err != nil || string(r.GetInlineData()) != "ayz" || r.GetSize() != 3 || r.GetAttempt() != 4 {
		t.Fatalf("in process: %v, %v", r, err)
	}
	req, _ := proto.Marshal(peek)
	b, how, err := TryServeLocate(system, shardFor, req, make([]byte, 7, 64))
	var dr messages.LocateReply
	if how != QuickInline || err != nil || proto.Unmarshal(b, &dr) != nil || string(dr.GetInlineData()) != "ayz" {
		t.Fatalf("on the data plane: %v, %v, %v", &dr, how, err)
	}
	if n := seen.Load(); n != 0 {
		t.Fatalf("the shard received %d of the inline-only Locates", n)
	}
	full, _ := proto.Marshal(&messages.Locate{ObjectId: "a", Receiver: &messages.NodeRef{NodeId: "n2"}, TimeoutMs: 5000})
	if _, how, _ := TryServeLocate(system, shardFor, full, nil); how != NotQuick {
		t.Fatal("a Locate for a copy was answered on the quick path")
	}

	res, err := actorutil.Request(ctx, system.Root, pid, &messages.DeleteObject{ObjectId: "a"})
	if err != nil || res.(*messages.DeleteObjectReply).GetError() != nil {
		t.Fatalf("delete: %v %v", res, err)
	}
	if r, err := LocateHere(ctx, system.Root, pid, peek); err != nil || r.GetHasInline() || r.GetError() != nil {
		t.Fatalf("after the Delete was answered: %v, %v; want neither bytes nor error", r, err)
	}
	// Asked in full, the shard itself says DELETED.
	if r, err := LocateHere(ctx, system.Root, pid, &messages.Locate{ObjectId: "a", Receiver: &messages.NodeRef{NodeId: "n2"}, NoCopy: true, TimeoutMs: 5000}); err != nil || !errors.Is(r.GetError(), messages.ErrDeleted) {
		t.Fatalf("the full Locate after the Delete: %v, %v", r, err)
	}
	if err := system.Root.StopFuture(pid).Wait(); err != nil {
		t.Fatal(err)
	}
	peek.ObjectId = "b"
	if r := peekInline(pid, peek); r.GetHasInline() {
		t.Fatal("a stopped shard's objects are still served")
	}
	if x := lookupInline(pid); x != nil {
		t.Fatal("a stopped shard's index is still registered")
	}
}

// The peek's answer is encoded by hand: it is what proto.Marshal makes of
// the same LocateReply, byte for byte, for a hit, a miss and the edge
// values, appended after what the buffer held.
func TestPeekReplyEncodesAsProtobuf(t *testing.T) {
	for _, r := range []*messages.LocateReply{
		{ObjectId: "x", Size: 3, Fingerprint: 1<<64 - 1, HasInline: true, InlineData: []byte("abc"), Attempt: 1<<64 - 1},
		{ObjectId: "miss", Attempt: 300},
		{ObjectId: "empty", HasInline: true},
		{},
	} {
		want, err := proto.MarshalOptions{Deterministic: true}.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		got := appendPeekReply([]byte("head"), r)
		if string(got[:4]) != "head" || string(got[4:]) != string(want) {
			t.Errorf("%v: encoded %x, proto.Marshal %x", r, got[4:], want)
		}
	}
}
