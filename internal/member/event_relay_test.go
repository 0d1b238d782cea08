package member

import (
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/events"
	"github.com/hoplite-go/hoplite/messages"
)

// batchRecorder subscribes to a relay and hands on what it receives,
// acknowledging nothing itself.
type batchRecorder struct {
	relay *actor.PID
	got   chan any
}

func (b *batchRecorder) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		ctx.Request(b.relay, &messages.SubscribeEvents{})
	case *messages.SubscribeEventsReply, *messages.EventBatch:
		b.got <- m
	}
}

// A subscriber that does not acknowledge gets one batch; the relay
// queues relayQueue events more and counts the rest, which the next
// batch (after the acknowledgement) reports; the relay forgets a
// subscriber that stopped. Events it does not relay are left out.
func TestEventRelayBoundsAndCountsDrops(t *testing.T) {
	system := actor.NewActorSystem()
	defer system.Shutdown()
	relay, err := system.Root.SpawnNamed(eventRelayProps("m1"), eventRelayName)
	if err != nil {
		t.Fatal(err)
	}
	rec := &batchRecorder{relay: relay, got: make(chan any, 16)}
	sub := system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return rec }))
	ctx := deadline(t, 20*time.Second)
	next := func() any {
		t.Helper()
		select {
		case m := <-rec.got:
			return m
		case <-ctx.Done():
			t.Fatal("the relay sent nothing")
			return nil
		}
	}
	if r, ok := next().(*messages.SubscribeEventsReply); !ok || r.GetError() != nil || r.GetMember() != "m1" {
		t.Fatalf("subscribe: %v", r)
	}
	const published = 2000
	for i := range published {
		system.EventStream.Publish(&events.TransferStarted{Object: "not relayed"})
		system.EventStream.Publish(&events.NodeFailed{Node: "n", DetectedBy: string(rune('a' + i%26))})
	}
	b1, ok := next().(*messages.EventBatch)
	if !ok || b1.GetSeq() != 1 || len(b1.GetEvents()) != 1 || b1.GetDropped() != 0 || b1.GetEvents()[0].GetNodeFailed().GetNode() != "n" ||
		b1.GetEvents()[0].GetMember() != "m1" {
		t.Fatalf("first batch %v: want seq 1 with the first NodeFailed alone", b1)
	}
	// Acknowledged from the subscriber: the relay tells subscribers apart
	// by the sender.
	system.Root.RequestWithCustomSender(relay, &messages.EventBatchAck{Seq: 1}, sub)
	b2, ok := next().(*messages.EventBatch)
	if !ok || b2.GetSeq() != 2 || len(b2.GetEvents()) != relayBatch || b2.GetDropped() != published-1-relayQueue {
		t.Fatalf("second batch: seq %d, %d events, %d dropped; want seq 2, %d events, %d dropped",
			b2.GetSeq(), len(b2.GetEvents()), b2.GetDropped(), relayBatch, published-1-relayQueue)
	}
	system.Root.Stop(sub)
	eventually(t, 10*time.Second, "the relay forgets the stopped subscriber", func() bool {
		n, err := system.Root.RequestFuture(relay, eventRelayCount{}, time.Second).Result()
		return err == nil && n == 0
	})
}
