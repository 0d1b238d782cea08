package storeactor

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/messages"
)

// A store node that stops answers the Gets waiting for their objects
// UNAVAILABLE, marked undelivered (it will not serve them): their object's notice and their deadline would reach a
// stopped actor, and a requester that does not watch the node (an
// application actor's ctx.Request) would wait for nothing.
func TestStoppingNodeAnswersWaitingGets(t *testing.T) {
	loc := &scriptedLocator{answer: func(ctx context.Context, _ int, _ *messages.Locate) (*messages.LocateReply, error) {
		<-ctx.Done() // nobody creates the object
		return nil, ctx.Err()
	}}
	sn := scriptedNode(t, loc, &openCounter{})
	replies := make(chan any, 4)
	requester := sn.system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		switch m := ctx.Message().(type) {
		case *messages.Get:
			ctx.Request(sn.node, m)
		case actor.SystemMessage, actor.AutoReceiveMessage:
		default:
			replies <- m
		}
	}))
	sn.system.Root.Send(requester, &messages.Get{ObjectId: "never", TimeoutMs: 20_000})
	// The hook runs as the node starts handling the Get; the Stop, a
	// system message, is handled after that Get.
	waitFor(t, "the node received the Get", func() bool { return slices.Contains(sn.received(), "*messages.Get") })
	sn.system.Root.Stop(sn.node)
	select {
	case m := <-replies:
		r, ok := m.(*messages.GetReply)
		if !ok || r.GetObjectId() != "never" || r.GetError().GetCode() != messages.ErrorCode_UNAVAILABLE || !messages.IsUndelivered(r.GetError()) {
			t.Fatalf("answer %T %v, want never's GetReply UNAVAILABLE, undelivered", m, m)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no answer to a Get waiting at a store node that stopped")
	}
}
