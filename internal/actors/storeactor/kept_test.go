package storeactor

import (
	"slices"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/messages"
)

// A directory shard of the node's member tells it what no store node
// would republish to the shard's next table: ids it marked lost, the
// deletion of an id no node held, that its table is amnesic. The node
// republishes them with its deletions to whichever table asks next.
func TestRepublicationCarriesWhatAShardKeptHere(t *testing.T) {
	system := putQuietSystem(t)
	node, _ := putNode(t, system, system.Root.Spawn(actor.PropsFromFunc(func(actor.Context) {})))
	system.Root.Send(node, &messages.Tombstones{LostIds: []string{"a", "b"}})
	system.Root.Send(node, &messages.Tombstones{ObjectIds: []string{"d"}})
	system.Root.Send(node, &messages.Tombstones{Amnesic: true, Shard: 0})

	rec := &republishRecorder{got: make(chan any, 16)}
	shard := system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return rec }))
	system.Root.RequestWithCustomSender(node, &messages.Republish{ShardCount: 1, Shards: []int32{0}}, shard)
	b, ok := nextRepublished(t, rec.got).(*messages.Tombstones)
	if !ok {
		t.Fatalf("the node republished %T first, want Tombstones", b)
	}
	if !slices.Equal(b.GetLostIds(), []string{"a", "b"}) || !slices.Equal(b.GetObjectIds(), []string{"d"}) || !b.GetAmnesic() || b.GetShard() != 0 {
		t.Fatalf("republished %v, want lost a and b, d deleted, shard 0 amnesic", b)
	}
	if _, ok := nextRepublished(t, rec.got).(*messages.RepublishDone); !ok {
		t.Fatal("no RepublishDone after the kept notes")
	}
}

// A Put's creator copy is republished with the registration that made it
// (the CreateObject's request id), so that a shard that learns the copy
// from the republication keeps it against the withdrawal of another
// attempt's registration.
func TestRepublishedCreatorCopyNamesItsRegistration(t *testing.T) {
	system := putQuietSystem(t)
	creates := make(chan *messages.CreateObject, 4)
	mute := system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if c, ok := ctx.Message().(*messages.CreateObject); ok {
			creates <- c // no answer: the registration stays open
		}
	}))
	node, _ := putNode(t, system, mute)
	system.Root.Send(node, &messages.Put{ObjectId: "x", Data: make([]byte, 1024), TimeoutMs: 60_000})
	var create *messages.CreateObject
	select {
	case create = <-creates:
	case <-time.After(10 * time.Second):
		t.Fatal("no CreateObject")
	}
	rec := &republishRecorder{got: make(chan any, 16)}
	shard := system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return rec }))
	system.Root.RequestWithCustomSender(node, &messages.Republish{ShardCount: 1, Shards: []int32{0}}, shard)
	pub, ok := nextRepublished(t, rec.got).(*messages.PublishLocation)
	if !ok || !pub.GetCreator() || pub.GetRegistration() == 0 || pub.GetRegistration() != create.GetRequestId() {
		t.Fatalf("republished %v, want the creator's copy naming registration %d", pub, create.GetRequestId())
	}
}
