package storenode

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/hoplite-go/hoplite/messages"
)

// scriptedCaller answers a Locate call as answer says, after checking
// what was asked.
type scriptedCaller struct {
	t      *testing.T
	answer func(ctx context.Context, l *messages.Locate) ([]byte, error)
}

func (c scriptedCaller) Call(ctx context.Context, addr string, kind byte, req []byte) ([]byte, error) {
	if addr != "shard-member:1" || kind != messages.ControlLocate {
		c.t.Errorf("call to %q kind %d", addr, kind)
	}
	l := &messages.Locate{}
	if err := proto.Unmarshal(req, l); err != nil {
		c.t.Errorf("request: %v", err)
	}
	return c.answer(ctx, l)
}

// endAs is a locateEnder from a func.
type endAs func(locateEnd) any

func (f endAs) locateEnded(r locateEnd) any { return f(r) }

// One Locate call for both fetch shells: it carries reply_to, is bounded
// by the Locate's timeout plus the margin, and ends as the answer says
// (decoded, forwarded, failed, malformed), or hangs up when canceled;
// the end comes to the actor as the message end makes of it, and nothing
// comes when end returns nil.
func TestCallLocateEnds(t *testing.T) {
	system := actor.NewActorSystem()
	defer system.Shutdown()
	ends := make(chan any, 8)
	self := system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if m, ok := ctx.Message().(locateEnd); ok {
			ends <- m
		}
	}))
	replyTo := &messages.NodeRef{NodeId: "me", ActorId: "me/store"}
	asked := func(answer func(ctx context.Context, l *messages.Locate) ([]byte, error)) (locateEnd, context.CancelFunc) {
		t.Helper()
		caller := scriptedCaller{t: t, answer: answer}
		l := &messages.Locate{ObjectId: "x", Attempt: 7, TimeoutMs: 2000}
		cancel := callLocate(system, self, caller, "shard-member:1", replyTo, l, endAs(func(r locateEnd) any { return r }))
		if cancel == nil {
			t.Fatal("no cancel for a Locate that was sent")
		}
		select {
		case m := <-ends:
			return m.(locateEnd), cancel
		case <-time.After(10 * time.Second):
			t.Fatal("the Locate's end never came")
		}
		return locateEnd{}, nil
	}

	reply, _ := proto.Marshal(&messages.LocateReply{ObjectId: "x", Attempt: 7, HasInline: true, InlineData: []byte("abc")})
	r, _ := asked(func(ctx context.Context, l *messages.Locate) ([]byte, error) {
		if l.GetReplyTo().GetActorId() != "me/store" || l.GetAttempt() != 7 {
			t.Errorf("asked %v; want reply_to me/store, attempt 7", l)
		}
		if dl, ok := ctx.Deadline(); !ok || time.Until(dl) < 2*time.Second || time.Until(dl) > 2*time.Second+locateCallMargin {
			t.Errorf("call deadline in %v; want the Locate's 2s and the margin", time.Until(dl))
		}
		return reply, nil
	})
	if r.attempt != 7 || r.err != nil || r.forwarded || string(r.reply.GetInlineData()) != "abc" {
		t.Fatalf("answered: %+v", r)
	}
	if r, _ = asked(func(context.Context, *messages.Locate) ([]byte, error) { return nil, nil }); !r.forwarded || r.reply != nil || r.err != nil {
		t.Fatalf("forwarded: %+v", r)
	}
	gone := messages.Errorf(messages.ErrorCode_UNAVAILABLE, "gone")
	if r, _ = asked(func(context.Context, *messages.Locate) ([]byte, error) { return nil, gone }); !errors.Is(r.err, messages.ErrUnavailable) || r.attempt != 7 {
		t.Fatalf("failed: %+v", r)
	}
	if r, _ = asked(func(context.Context, *messages.Locate) ([]byte, error) { return []byte{0xff, 0xff}, nil }); !errors.Is(r.err, messages.ErrUnavailable) {
		t.Fatalf("malformed: %+v", r)
	}

	// Hanging up ends the call.
	hung := make(chan struct{})
	caller := scriptedCaller{t: t, answer: func(ctx context.Context, _ *messages.Locate) ([]byte, error) {
		<-ctx.Done()
		close(hung)
		return nil, ctx.Err()
	}}
	cancel := callLocate(system, self, caller, "shard-member:1", replyTo, &messages.Locate{ObjectId: "x", Attempt: 8, TimeoutMs: 60_000},
		endAs(func(locateEnd) any { return nil }))
	cancel()
	select {
	case <-hung:
	case <-time.After(10 * time.Second):
		t.Fatal("cancel did not hang up")
	}
	select {
	case m := <-ends:
		t.Fatalf("an end that end() turned into nothing came: %+v", m)
	default:
	}
}
