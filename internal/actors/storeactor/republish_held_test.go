package storeactor

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/objstore"
	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/messages"
)

// republishRecorder is a rebuilt shard's stand-in: it asks a store node
// to republish and records, in order, what comes back.
type republishRecorder struct {
	got chan any
}

func (r *republishRecorder) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *messages.PublishLocation, *messages.RepublishDone, *messages.Tombstones:
		r.got <- m
	}
}

// heldRoot puts into store a Reduce root's finished target that awaits
// its commit: written whole, its last byte held back.
func heldRoot(t *testing.T, store *objstore.Store, id, rid string) {
	t.Helper()
	o, _, err := store.Create(id, 64, 0)
	if err != nil {
		t.Fatal(err)
	}
	o.SetProducer(rid, 1)
	o.HoldTail()
	if err := o.Append(make([]byte, 64)); err != nil {
		t.Fatal(err)
	}
	if !o.HeldWhole() {
		t.Fatal("the root's copy is not held whole")
	}
}

func nextRepublished(t *testing.T, got chan any) any {
	t.Helper()
	select {
	case m := <-got:
		return m
	case <-time.After(10 * time.Second):
		t.Fatal("nothing republished within 10 s")
		return nil
	}
}

// A rebuilt shard asks for republication while a Reduce root here holds
// its finished target and the commit is on its way (the coordinator sent
// it just before it died with the shard's old incarnation). The node
// holds RepublishDone back until the commit, and publishes the copy
// complete with the run and the sources it reduces: the shard knows the
// call's result before it starts the call's next attempt. Published as it
// stood (PARTIAL), the copy was dropped, the commit completed it anyway,
// and the next attempt failed CONFLICT on its own result (chaos seed 78
// under load).
func TestRepublicationWaitsForAHeldTargetsCommit(t *testing.T) {
	system := putQuietSystem(t)
	oldShard := system.Root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
	node, store := putNode(t, system, oldShard)
	const rid = "t#call.attempt1"
	heldRoot(t, store, "t", rid)
	if _, _, err := store.Create("plain", 8, 0); err != nil {
		t.Fatal(err)
	}

	rec := &republishRecorder{got: make(chan any, 16)}
	shard := system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return rec }))
	system.Root.RequestWithCustomSender(node, &messages.Republish{ShardCount: 1, Shards: []int32{0}}, shard)

	// The plain copy comes at once; RepublishDone does not.
	if m, ok := nextRepublished(t, rec.got).(*messages.PublishLocation); !ok || m.GetObjectId() != "plain" {
		t.Fatalf("first republished %v, want the plain copy", m)
	}
	select {
	case m := <-rec.got:
		t.Fatalf("before the held target's commit the node sent %T %v", m, m)
	case <-time.After(100 * time.Millisecond):
	}

	reduced := []string{"a", "b"}
	system.Root.Send(node, &messages.ReduceCommit{ReduceId: rid, TargetId: "t", Generation: 1, ReducedIds: reduced})
	pub, ok := nextRepublished(t, rec.got).(*messages.PublishLocation)
	if !ok || pub.GetObjectId() != "t" || pub.GetState() != messages.LocationState_COMPLETE ||
		pub.GetProducedBy() != rid || !slices.Equal(pub.GetReducedIds(), reduced) {
		t.Fatalf("after the commit the node republished %v, want t COMPLETE produced by %s from %v", pub, rid, reduced)
	}
	if _, ok := nextRepublished(t, rec.got).(*messages.RepublishDone); !ok {
		t.Fatal("no RepublishDone after the held target's publication")
	}
}

// A held target whose commit never comes (its coordinator died before it
// sent one) holds the republication back only so long: it is published as
// it stands and RepublishDone follows. If the commit comes after all, the
// node publishes the completed copy to the shard's current home.
func TestRepublicationOfAHeldTargetEndsWithoutItsCommit(t *testing.T) {
	system := putQuietSystem(t)
	homeGot := make(chan *messages.PublishLocation, 4)
	home := system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if m, ok := ctx.Message().(*messages.PublishLocation); ok {
			homeGot <- m
		}
	}))
	node, store := putNode(t, system, home)
	const rid = "t#call.attempt1"
	heldRoot(t, store, "t", rid)

	rec := &republishRecorder{got: make(chan any, 16)}
	shard := system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return rec }))
	system.Root.RequestWithCustomSender(node, &messages.Republish{ShardCount: 1, Shards: []int32{0}}, shard)
	pub, ok := nextRepublished(t, rec.got).(*messages.PublishLocation)
	if !ok || pub.GetState() != messages.LocationState_PARTIAL || pub.GetReduceId() != rid {
		t.Fatalf("at the end of the wait the node republished %v, want t PARTIAL of %s", pub, rid)
	}
	if _, ok := nextRepublished(t, rec.got).(*messages.RepublishDone); !ok {
		t.Fatal("no RepublishDone after the wait")
	}

	system.Root.Send(node, &messages.ReduceCommit{ReduceId: rid, TargetId: "t", Generation: 1, ReducedIds: []string{"a"}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	select {
	case m := <-homeGot:
		if m.GetState() != messages.LocationState_COMPLETE || m.GetProducedBy() != rid {
			t.Fatalf("the late commit published %v, want COMPLETE produced by %s", m, rid)
		}
	case <-ctx.Done():
		t.Fatal("the late commit was not published to the shard's home")
	}
}
