package storenode

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/messages"
)

// A reply that says the store node itself did not serve the request (it
// was not running: its process's dead letters answered, or the client's
// own actor system did as the node's process died) is not retried as a
// placement race would be: a retry at the same node fails the same way
// until the deadline. One that names another actor, the shard a node
// handed a QueryObject to, is a race: the shard's new home answers.
func TestClientDoesNotRetryUndeliveredRequests(t *testing.T) {
	sys := actor.NewActorSystem()
	t.Cleanup(sys.Shutdown)
	var gets, queries atomic.Int64
	shard := actor.NewPID("10.0.0.9:7001", "node#1/shard-3")
	pid := sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		switch m := c.Message().(type) {
		case *messages.Get:
			gets.Add(1)
			reply, _ := messages.UndeliveredReply(m, c.Self(), "is not running")
			c.Respond(reply)
		case *messages.QueryObject:
			if queries.Add(1) == 1 {
				reply, _ := messages.UndeliveredReply(m, shard, "failed before it answered")
				c.Respond(reply)
				return
			}
			c.Respond(&messages.ObjectInfo{ObjectId: m.GetObjectId(), Size: 1})
		}
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c := NewClient(sys.Root, pid, time.Minute)
	if _, err := c.Get(ctx, "x"); !errors.Is(err, messages.ErrUnavailable) {
		t.Fatalf("Get: %v, want UNAVAILABLE", err)
	}
	if n := gets.Load(); n != 1 {
		t.Fatalf("the Get reached the node %d times, want once", n)
	}
	if _, err := c.Info(ctx, "x", true); err != nil {
		t.Fatalf("Info after its shard's member died: %v, want the answer of the shard's new home", err)
	}
	if n := queries.Load(); n != 2 {
		t.Fatalf("the QueryObject reached the node %d times, want twice", n)
	}
}
