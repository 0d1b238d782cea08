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
	"github.com/hoplite-go/hoplite/internal/directory"
	"github.com/hoplite-go/hoplite/messages"
)

// A Locate of a published inline object is answered from the table's
// index, on the caller's goroutine, without a message to the shard: in
// process (LocateHere) and on the data plane (TryServeLocate). The
// receiver's copy is recorded all the same: the directory lists it, and
// a Delete drops it. Once the Delete is answered the index answers
// nothing (the shard says DELETED), nor once the shard stopped. A Locate
// naming a sender that failed it is the shard's.
func TestPublishedInlineLocateIsAnsweredWithoutTheShard(t *testing.T) {
	system := actor.NewActorSystem()
	t.Cleanup(system.Shutdown)
	var seen atomic.Int32 // Locates the shard's Receive saw
	pid, err := system.Root.SpawnNamed(NewShardProps(ShardConfig{BeforeReceive: func(_ string, m any) {
		if _, ok := m.(*messages.Locate); ok {
			seen.Add(1)
		}
	}}), "inline-shard")
	if err != nil {
		t.Fatal(err)
	}
	shardFor := func(string) *actor.PID { return pid }
	drops := make(chan string, 4)
	store := func(name string) *messages.NodeRef {
		p := system.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
			if d, ok := c.Message().(*messages.DropObject); ok {
				drops <- name + ":" + d.GetObjectId()
			}
		}))
		return &messages.NodeRef{NodeId: name, Address: p.GetAddress(), ActorId: p.GetId()}
	}
	creator, reader, other := store("n1"), store("n2"), store("n3")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, id := range []string{"a", "b"} {
		res, err := actorutil.Request(ctx, system.Root, pid, &messages.CreateObject{ObjectId: id, Size: 3, Creator: creator, HasInline: true, InlineData: []byte(id + "yz")})
		if err != nil || res.(*messages.CreateObjectReply).GetError() != nil {
			t.Fatalf("create %s: %v %v", id, res, err)
		}
	}
	l := &messages.Locate{ObjectId: "a", Receiver: reader, TimeoutMs: 5000, Attempt: 4}
	r, err := LocateHere(ctx, system.Root, pid, l)
	if err != nil || string(r.GetInlineData()) != "ayz" || r.GetSize() != 3 || r.GetAttempt() != 4 {
		t.Fatalf("in process: %v, %v", r, err)
	}
	req, _ := proto.Marshal(&messages.Locate{ObjectId: "a", Receiver: other, TimeoutMs: 5000})
	b, ok := TryServeLocate(system, shardFor, req, make([]byte, 7, 64))
	var dr messages.LocateReply
	if !ok || proto.Unmarshal(b, &dr) != nil || string(dr.GetInlineData()) != "ayz" {
		t.Fatalf("on the data plane: %v, %v", &dr, ok)
	}
	if n := seen.Load(); n != 0 {
		t.Fatalf("the shard received %d of the Locates", n)
	}
	failed, _ := proto.Marshal(&messages.Locate{ObjectId: "a", Receiver: other, FailedSender: creator, TimeoutMs: 5000})
	if _, ok := TryServeLocate(system, shardFor, failed, nil); ok {
		t.Fatal("a Locate naming a failed sender was answered on the quick path")
	}
	res, err := actorutil.Request(ctx, system.Root, pid, &messages.QueryObject{ObjectId: "a"})
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, loc := range res.(*messages.ObjectInfo).GetLocations() {
		if loc.GetState() == messages.LocationState_COMPLETE {
			listed[loc.GetNode().GetNodeId()] = true
		}
	}
	if !listed["n2"] || !listed["n3"] {
		t.Fatalf("the directory lists %v: want the copies of both readers answered without the shard", listed)
	}

	res, err = actorutil.Request(ctx, system.Root, pid, &messages.DeleteObject{ObjectId: "a"})
	if err != nil || res.(*messages.DeleteObjectReply).GetError() != nil {
		t.Fatalf("delete: %v %v", res, err)
	}
	got := map[string]bool{}
	for len(got) < 3 {
		select {
		case d := <-drops:
			got[d] = true
		case <-ctx.Done():
			t.Fatalf("drops %v: want the creator's and both readers'", got)
		}
	}
	if r, err := LocateHere(ctx, system.Root, pid, l); err != nil || !errors.Is(r.GetError(), messages.ErrDeleted) {
		t.Fatalf("after the Delete was answered: %v, %v; want DELETED from the shard", r, err)
	}
	if err := system.Root.StopFuture(pid).Wait(); err != nil {
		t.Fatal(err)
	}
	if quickLocate(pid, &messages.Locate{ObjectId: "b", Receiver: reader}) != nil || lookupInline(pid) != nil {
		t.Fatal("a stopped shard's objects are still served")
	}
}

// An answer from the index is encoded by hand: it is what proto.Marshal makes of
// the same LocateReply, byte for byte, for a hit, a miss and the edge
// values, appended after what the buffer held.
func TestInlineReplyEncodesAsProtobuf(t *testing.T) {
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
		got := appendInlineReply([]byte("head"), r)
		if string(got[:4]) != "head" || string(got[4:]) != string(want) {
			t.Errorf("%v: encoded %x, proto.Marshal %x", r, got[4:], want)
		}
	}
}

// BenchmarkLocateAnswer prices, side by side, the two ways a member
// answers another member's Locate of a published 1 KiB inline object
// from its encoded request to its encoded reply: on the quick path
// (TryServeLocate, on the connection's goroutine) and by the shard's
// actor (ServeLocate's path when the object is not published: the
// request's decoding, a message to the shard and the table's step, the
// reply's encoding). Their ratio (quick/shard) is what the simulator
// charges a quick answer against a shard's message
// (sim.QuickLocateShare). Locates keep no copy, so that the answers
// record no readers for a table that takes none in between, and the
// shard's uplink is unbounded, so that its budget never sends a Locate
// from the quick path to the table.
//
//	go test -run '^$' -bench LocateAnswer -count 5 ./internal/actors/shardactor/
func BenchmarkLocateAnswer(b *testing.B) {
	system := actor.NewActorSystem()
	b.Cleanup(system.Shutdown)
	pid, err := system.Root.SpawnNamed(NewShardProps(ShardConfig{Table: directory.TableConfig{InlineUplink: 1e15}}), "bench-shard")
	if err != nil {
		b.Fatal(err)
	}
	shardFor := func(string) *actor.PID { return pid }
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	node := system.Root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
	creator := &messages.NodeRef{NodeId: "n1", Address: node.GetAddress(), ActorId: node.GetId()}
	res, err := actorutil.Request(ctx, system.Root, pid, &messages.CreateObject{ObjectId: "a", Size: 1024, Creator: creator,
		HasInline: true, InlineData: make([]byte, 1024)})
	if err != nil || res.(*messages.CreateObjectReply).GetError() != nil {
		b.Fatalf("create: %v %v", res, err)
	}
	req, _ := proto.Marshal(&messages.Locate{ObjectId: "a", Receiver: creator, NoCopy: true, TimeoutMs: 60000})
	var quick, shard time.Duration
	b.Run("quick", func(b *testing.B) {
		dst := make([]byte, 0, 4096)
		b.ReportAllocs()
		t0 := time.Now()
		for b.Loop() {
			r, ok := TryServeLocate(system, shardFor, req, dst)
			if !ok || len(r) < 1024 {
				b.Fatalf("not answered on the quick path (%d bytes)", len(r))
			}
		}
		quick = time.Since(t0) / time.Duration(b.N)
	})
	b.Run("shard", func(b *testing.B) {
		b.ReportAllocs()
		t0 := time.Now()
		for b.Loop() {
			// ServeLocate's path past its quickLocate.
			var l messages.Locate
			if err := proto.Unmarshal(req, &l); err != nil {
				b.Fatal(err)
			}
			c := &callReply{done: make(chan any, 1)}
			system.Root.Send(shardFor(l.GetObjectId()), servedLocate{locate: &l, reply: c})
			reply, ok := (<-c.done).(*messages.LocateReply)
			if !ok {
				b.Fatal("the shard did not answer with a LocateReply")
			}
			r, err := proto.Marshal(reply)
			if err != nil || len(r) < 1024 {
				b.Fatalf("shard: %d bytes, %v: %v", len(r), err, reply)
			}
		}
		shard = time.Since(t0) / time.Duration(b.N)
	})
	if quick > 0 && shard > 0 {
		b.Logf("quick %v, shard %v: quick/shard %.3f", quick, shard, float64(quick)/float64(shard))
	}
}
