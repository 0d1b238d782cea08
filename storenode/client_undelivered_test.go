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

// A reply marked undelivered (the node was not running: its process's
// dead letters answered, or the client's own actor system did as the
// node's process died) is not retried as a placement race would be: a
// retry at the same node fails the same way until the deadline.
func TestClientDoesNotRetryUndeliveredRequests(t *testing.T) {
	sys := actor.NewActorSystem()
	t.Cleanup(sys.Shutdown)
	var calls atomic.Int64
	pid := sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		if m, ok := c.Message().(*messages.Get); ok {
			calls.Add(1)
			reply, _ := messages.UndeliveredReply(m, actor.NewPID("10.0.0.9:7001", "store"), "is not running")
			c.Respond(reply)
		}
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := NewClient(sys.Root, pid, time.Minute).Get(ctx, "x")
	if !errors.Is(err, messages.ErrUnavailable) {
		t.Fatalf("Get: %v, want UNAVAILABLE", err)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("the Get reached the node %d times, want once", n)
	}
}
