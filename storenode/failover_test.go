package storenode

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/messages"
)

// answeringNode answers Put and Reduce as a store node would, and counts them.
type answeringNode struct{ puts, reduces chan string }

func (f *answeringNode) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *messages.Put:
		f.puts <- m.GetObjectId()
		ctx.Respond(&messages.PutReply{ObjectId: m.GetObjectId()})
	case *messages.Reduce:
		f.reduces <- m.GetTargetId()
		ctx.Respond(&messages.ReduceReply{TargetId: m.GetTargetId(), ReducedIds: m.GetSourceIds()})
	case *messages.WaitObjects:
		ctx.Respond(&messages.WaitObjectsReply{Ready: m.GetObjectIds()[:m.GetNumReady()], NotReady: m.GetObjectIds()[m.GetNumReady():]})
	}
}

// undeliveredNode answers every request as its process's dead letters
// (why "is not running") or its requester's actor system (why "failed
// before it answered") would if it were gone.
type undeliveredNode struct{ why string }

func (u *undeliveredNode) Receive(ctx actor.Context) {
	if r, ok := messages.UndeliveredReply(ctx.Message(), ctx.Self(), u.why); ok {
		ctx.Respond(r)
	}
	if _, ok := ctx.Message().(*messages.WaitObjects); ok {
		ctx.Respond(&messages.WaitObjectsReply{Error: messages.UndeliveredError(ctx.Self(), u.why)})
	}
}

// A client whose node is gone moves to the node its failover names. A
// Put is sent again there; a Reduce only if it never reached the gone
// node (else it fails UNAVAILABLE: it may be running), and the next call
// goes to the new node either way. Without a failover, or with one that
// finds nothing, the error stays.
func TestFailoverSendsAgainWhatIsSafe(t *testing.T) {
	system := actor.NewActorSystem()
	defer system.Shutdown()
	f := &answeringNode{puts: make(chan string, 4), reduces: make(chan string, 4)}
	live := system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return f }))
	notRunning := system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return &undeliveredNode{"is not running"} }))
	died := system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return &undeliveredNode{"failed before it answered"} }))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	reduce := func(c *Client) (*messages.ReduceReply, error) {
		return c.Reduce(ctx, "t", []string{"a", "b"}, 2, messages.ReduceOp_SUM, messages.DType_INT32)
	}

	if err := NewClient(system.Root, died, time.Minute).Put(ctx, "x", []byte("x")); !errors.Is(err, messages.ErrUnavailable) {
		t.Fatalf("Put to a gone node, no failover: %v, want UNAVAILABLE", err)
	}
	var asked []*actor.PID
	failover := func(_ context.Context, failed *actor.PID) (*actor.PID, error) {
		asked = append(asked, failed)
		return live, nil
	}
	c := NewFailoverClient(system.Root, died, time.Minute, failover)
	if err := c.Put(ctx, "x", []byte("x")); err != nil || <-f.puts != "x" {
		t.Fatalf("Put with a failover: %v", err)
	}
	if !c.PID().Equal(live) || len(asked) != 1 || !asked[0].Equal(died) {
		t.Fatalf("after the Put the client talks to %v (failover asked about %v); want %v", c.PID(), asked, live)
	}
	// A Wait answered "not served" by its node moves too (not retried
	// there as a race).
	c = NewFailoverClient(system.Root, died, time.Minute, failover)
	if ready, _, err := c.Wait(ctx, []string{"a", "b"}, 1); err != nil || !slices.Equal(ready, []string{"a"}) || !c.PID().Equal(live) {
		t.Fatalf("Wait with a failover: ready %v, %v, at %v", ready, err, c.PID())
	}

	c = NewFailoverClient(system.Root, notRunning, time.Minute, failover)
	if r, err := reduce(c); err != nil || !slices.Equal(r.GetReducedIds(), []string{"a", "b"}) || <-f.reduces != "t" {
		t.Fatalf("Reduce that never reached its node, with a failover: %v, %v", r, err)
	}

	c = NewFailoverClient(system.Root, died, time.Minute, failover)
	if _, err := reduce(c); !errors.Is(err, messages.ErrUnavailable) || len(f.reduces) != 0 {
		t.Fatalf("Reduce whose node died with it: %v (sent again: %v), want UNAVAILABLE, not sent again", err, len(f.reduces) != 0)
	}
	if !c.PID().Equal(live) {
		t.Fatalf("after the failed Reduce the client talks to %v, want %v", c.PID(), live)
	}

	stuck := NewFailoverClient(system.Root, notRunning, time.Minute, func(context.Context, *actor.PID) (*actor.PID, error) {
		return nil, messages.Errorf(messages.ErrorCode_UNAVAILABLE, "no member answered")
	})
	if _, err := reduce(stuck); !errors.Is(err, messages.ErrUnavailable) {
		t.Fatalf("Reduce when no node is left: %v, want UNAVAILABLE", err)
	}
}
