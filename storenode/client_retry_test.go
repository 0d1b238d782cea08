package storenode

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/internal/fastget"
	"github.com/hoplite-go/hoplite/messages"
)

// fakeNode answers Puts with UNAVAILABLE (a directory shard that moved)
// its first racing times, then OK.
func fakeNode(t *testing.T, racing int64) (*Client, *atomic.Int64) {
	sys := actor.NewActorSystem()
	t.Cleanup(sys.Shutdown)
	var calls atomic.Int64
	pid := sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		switch m := c.Message().(type) {
		case *messages.Put:
			reply := &messages.PutReply{ObjectId: m.GetObjectId()}
			if calls.Add(1) <= racing {
				reply.Error = messages.Errorf(messages.ErrorCode_UNAVAILABLE, "node/shard-5 stopped before it answered")
			}
			c.Respond(reply)
		case *messages.Reduce:
			calls.Add(1)
			c.Respond(&messages.ReduceReply{TargetId: m.GetTargetId(),
				Error: messages.Errorf(messages.ErrorCode_UNAVAILABLE, "the coordinator's member failed")})
		}
	}))
	return NewClient(sys.Root, pid, 5*time.Second), &calls
}

// A Put that races a shard move is retried by the client itself.
func TestClientRetriesPlacementRaces(t *testing.T) {
	c, calls := fakeNode(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Put(ctx, "x", []byte("x")); err != nil {
		t.Fatalf("Put after two races: %v", err)
	}
	if n := calls.Load(); n != 3 {
		t.Fatalf("%d Puts reached the node, want 3", n)
	}
}

// A race that never ends fails with UNAVAILABLE by the deadline: the
// client neither hangs nor turns it into TIMEOUT.
func TestClientStopsRetryingAtTheDeadline(t *testing.T) {
	c, calls := fakeNode(t, 1<<30)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	err := c.Put(ctx, "x", []byte("x"))
	if !errors.Is(err, messages.ErrUnavailable) {
		t.Fatalf("Put that always races: %v, want UNAVAILABLE", err)
	}
	if calls.Load() < 2 {
		t.Fatalf("only %d tries", calls.Load())
	}
}

// A Reduce is not retried (its caller must learn it failed), nor is a
// request to a store node that is gone.
func TestClientDoesNotRetryReducesOrDeadNodes(t *testing.T) {
	c, calls := fakeNode(t, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.Reduce(ctx, "t", []string{"a"}, 1, messages.ReduceOp_SUM, messages.DType_INT64); !errors.Is(err, messages.ErrUnavailable) {
		t.Fatalf("Reduce: %v", err)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("the Reduce reached the node %d times, want once", n)
	}
	sys := actor.NewActorSystem()
	defer sys.Shutdown()
	gone := NewClient(sys.Root, actor.NewPID(sys.Address(), "no-such-node"), time.Minute)
	begin := time.Now()
	if err := gone.Put(ctx, "x", []byte("x")); !errors.Is(err, messages.ErrUnavailable) {
		t.Fatalf("Put to a node that is gone: %v, want UNAVAILABLE", err)
	}
	if ctx.Err() != nil {
		t.Fatalf("the Put to a gone node waited %v, until the deadline", time.Since(begin))
	}
}

// fixedPutter is a fast Put path that takes every Put and answers err.
type fixedPutter struct{ err error }

func (p *fixedPutter) Put(context.Context, string, []byte) (bool, error) { return true, p.err }

// A fast Put that answers UNAVAILABLE (its shard's member went before it
// answered) is retried as an ordinary Put, which asks the shard's new
// home; any other answer of the fast path is the Put's.
func TestClientRetriesAnUnavailableFastPut(t *testing.T) {
	for _, c := range []struct {
		fast  error
		want  error
		calls int64
	}{
		{messages.Errorf(messages.ErrorCode_UNAVAILABLE, "no data endpoint at mem://node-3"), nil, 1},
		{messages.Errorf(messages.ErrorCode_CONFLICT, "other bytes"), messages.ErrConflict, 0},
	} {
		cl, calls := fakeNode(t, 0)
		fast := &fixedPutter{err: c.fast}
		fastget.RegisterPutter(cl.PID(), fast)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := cl.Put(ctx, "x", []byte("x"))
		cancel()
		fastget.UnregisterPutter(cl.PID(), fast)
		if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) || calls.Load() != c.calls {
			t.Errorf("fast Put answered %v: Put %v after %d Puts to the node; want %v after %d", c.fast, err, calls.Load(), c.want, c.calls)
		}
	}
}
