package processtest

import (
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/messages"
)

// TestProcessRequestToAKilledMemberIsAnswered: a raw application actor
// in the test client's actor system (ctx.Request: no watch, no future)
// has a Get waiting at a member's store node (its object does not exist
// yet) when the member is SIGKILLed. The client's own actor system
// answers it UNAVAILABLE, marked undelivered, as the connection to the
// member breaks: long before the Get's own deadline, which nobody is
// left to keep.
func TestProcessRequestToAKilledMemberIsAnswered(t *testing.T) {
	bin := hopliteBinary(t)
	slots, seeds := memberSlots(t, 2)
	nodes, c, _ := startConverged(t, bin, slots, seeds)
	victim := nodes[1]
	putRetry(t, c.of(victim), "ready", []byte("here"))

	const getTimeout = 20 * time.Second
	replies := make(chan any, 4)
	store := victim.store()
	requester := c.system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		switch m := ctx.Message().(type) {
		case string:
			ctx.Request(store, &messages.Get{ObjectId: m, TimeoutMs: getTimeout.Milliseconds()})
		case actor.SystemMessage, actor.AutoReceiveMessage:
		default:
			replies <- m
		}
	}))
	t.Cleanup(func() { c.system.Root.Stop(requester) })
	next := func(what string, bound time.Duration) *messages.GetReply {
		t.Helper()
		select {
		case m := <-replies:
			r, ok := m.(*messages.GetReply)
			if !ok {
				t.Fatalf("%s: %T %v instead of a GetReply", what, m, m)
			}
			return r
		case <-time.After(bound):
			t.Fatalf("%s: no reply within %v", what, bound)
			return nil
		}
	}
	c.system.Root.Send(requester, "never-put")
	// One sender's messages to one target arrive in order: once the Get
	// of an object that exists is answered, the first Get waits.
	c.system.Root.Send(requester, "ready")
	if r := next("the Get of an object that exists", getTimeout); r.GetObjectId() != "ready" || r.GetError() != nil {
		t.Fatalf("reply %v, want ready's bytes", r)
	}
	victim.kill()
	r := next("the Get waiting at the killed member", getTimeout/2)
	if r.GetObjectId() != "never-put" || r.GetError().GetCode() != messages.ErrorCode_UNAVAILABLE || !messages.IsUndelivered(r.GetError()) {
		t.Fatalf("reply %v, want never-put UNAVAILABLE, undelivered", r)
	}
}
