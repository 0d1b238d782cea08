package storenode

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/messages"
)

// A node gives up on a Get at the Get's own deadline and answers with
// what it waited for. That answer can reach the caller just after the
// caller's deadline (here: only once the caller's context has ended);
// the caller waits a bounded grace for it rather than replace it with
// "no reply".
func TestClientKeepsTheNodesAnswerAtTheDeadline(t *testing.T) {
	sys := actor.NewActorSystem()
	t.Cleanup(sys.Shutdown)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	pid := sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		if m, ok := c.Message().(*messages.Get); ok {
			to := c.Sender()
			go func() {
				<-ctx.Done()
				sys.Root.Send(to, &messages.GetReply{ObjectId: m.GetObjectId(),
					Error: messages.Errorf(messages.ErrorCode_TIMEOUT, "object %q: no location before the deadline", m.GetObjectId())})
			}()
		}
	}))
	c := NewClient(sys.Root, pid, 5*time.Second)
	_, err := c.Get(ctx, "x")
	if !errors.Is(err, messages.ErrTimeout) || !strings.Contains(err.Error(), "no location before the deadline") {
		t.Fatalf("Get: %v; want the node's own TIMEOUT", err)
	}
}

// A call canceled before it was sent says so: CANCELED, not TIMEOUT.
func TestClientCanceledBeforeSendingIsCanceled(t *testing.T) {
	sys := actor.NewActorSystem()
	t.Cleanup(sys.Shutdown)
	pid := sys.Root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
	c := NewClient(sys.Root, pid, 5*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	cancel()
	if _, err := c.Get(ctx, "x"); !errors.Is(err, messages.ErrCanceled) && !errors.Is(err, context.Canceled) {
		t.Fatalf("a canceled Get: %v, want CANCELED", err)
	}
}
