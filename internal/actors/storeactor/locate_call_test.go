package storeactor

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/messages"
)

// A fetch's Locate goes one way: the node's Locator, called with the
// shard and a deadline of the Locate's timeout plus the margin; its end,
// the answer or the error, comes to the node as one fetchLocated of the
// run and attempt; cancel hangs the call up.
func TestCallLocateEnds(t *testing.T) {
	system := actor.NewActorSystem()
	defer system.Shutdown()
	ends := make(chan *fetchLocated, 8)
	self := system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if m, ok := ctx.Message().(*fetchLocated); ok {
			ends <- m
		}
	}))
	shard := actor.NewPID("shard-member:1", "shard/3")
	run := &fetchRun{id: "x"}
	asked := func(locate Locator, attempt uint64) *fetchLocated {
		t.Helper()
		cancel := callLocate(system, self, locate, shard, &messages.Locate{ObjectId: "x", Attempt: attempt, TimeoutMs: 2000}, run)
		defer cancel()
		select {
		case m := <-ends:
			return m
		case <-time.After(10 * time.Second):
			t.Fatal("the Locate's end never came")
		}
		return nil
	}

	m := asked(func(ctx context.Context, pid *actor.PID, l *messages.Locate) (*messages.LocateReply, error) {
		if !pid.Equal(shard) || l.GetAttempt() != 7 {
			t.Errorf("asked %v at %v; want attempt 7 at %v", l, pid, shard)
		}
		if dl, ok := ctx.Deadline(); !ok || time.Until(dl) < time.Second || time.Until(dl) > 2*time.Second+locateCallMargin {
			t.Errorf("call deadline in %v; want the Locate's 2s and the margin", time.Until(dl))
		}
		return &messages.LocateReply{ObjectId: "x", Attempt: 7, HasInline: true, InlineData: []byte("abc")}, nil
	}, 7)
	if m.run != run || m.attempt != 7 || m.err != nil || string(m.reply.GetInlineData()) != "abc" {
		t.Fatalf("answered: %+v", m)
	}
	gone := messages.Errorf(messages.ErrorCode_UNAVAILABLE, "gone")
	m = asked(func(context.Context, *actor.PID, *messages.Locate) (*messages.LocateReply, error) { return nil, gone }, 8)
	if !errors.Is(m.err, messages.ErrUnavailable) || m.attempt != 8 || m.reply != nil {
		t.Fatalf("failed: %+v", m)
	}

	// Hanging up ends the call.
	hung := make(chan struct{})
	cancel := callLocate(system, self, func(ctx context.Context, _ *actor.PID, _ *messages.Locate) (*messages.LocateReply, error) {
		<-ctx.Done()
		close(hung)
		return nil, messages.AsError(ctx.Err())
	}, shard, &messages.Locate{ObjectId: "x", Attempt: 9, TimeoutMs: 60_000}, run)
	cancel()
	select {
	case <-hung:
	case <-time.After(10 * time.Second):
		t.Fatal("cancel did not hang up")
	}
	if m := <-ends; !errors.Is(m.err, messages.ErrCanceled) || m.attempt != 9 {
		t.Fatalf("hung up: %+v", m)
	}
}
