package actorutil

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/messages"
)

type echo struct{ v string }

// stopOnAsk stops instead of answering.
type stopOnAsk struct{}

func (stopOnAsk) Receive(ctx actor.Context) {
	if _, ok := ctx.Message().(echo); ok {
		ctx.Stop(ctx.Self())
	}
}

func TestRequestOutcomes(t *testing.T) {
	system := actor.NewActorSystem()
	root := system.Root
	answering := root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if m, ok := ctx.Message().(echo); ok {
			ctx.Respond(echo{m.v + "!"})
		}
	}))
	silent := root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
	ctxFor := func(d time.Duration) context.Context {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		t.Cleanup(cancel)
		return ctx
	}

	for range 100 { // every request leaves nothing behind (see below)
		v, err := Request(ctxFor(5*time.Second), root, answering, echo{"hi"})
		if err != nil || v != (echo{"hi!"}) {
			t.Fatalf("reply %v, %v", v, err)
		}
	}

	// A target that stops before it answers fails the request with
	// UNAVAILABLE: its Terminated resolves the watch, where an unwatched
	// future would end in TIMEOUT at the deadline.
	_, err := Request(ctxFor(time.Minute), root, root.Spawn(actor.PropsFromProducer(func() actor.Actor { return stopOnAsk{} })), echo{"x"})
	if !errors.Is(err, messages.ErrUnavailable) {
		t.Errorf("stopped target: %v, want UNAVAILABLE", err)
	}

	// A target that is not running.
	gone := root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
	if err := root.StopFuture(gone).Wait(); err != nil {
		t.Fatal(err)
	}
	if _, err := Request(ctxFor(time.Minute), root, gone, echo{"x"}); !errors.Is(err, messages.ErrUnavailable) {
		t.Errorf("stopped before the request: %v, want UNAVAILABLE", err)
	}

	// No reply: TIMEOUT at the deadline; canceled: the context's error.
	if _, err := Request(ctxFor(50*time.Millisecond), root, silent, echo{"x"}); !errors.Is(err, messages.ErrTimeout) {
		t.Errorf("silent target: %v, want TIMEOUT", err)
	}
	cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	time.AfterFunc(20*time.Millisecond, cancel)
	if _, err := Request(cctx, root, silent, echo{"x"}); !errors.Is(err, messages.ErrCanceled) {
		t.Errorf("canceled: %v, want CANCELED", err)
	}
	if _, err := Request(context.Background(), root, answering, echo{"x"}); err == nil {
		t.Error("a request without a deadline was sent")
	}

	// The futures of finished requests are gone from the registry: the
	// only processes left are the test's own actors.
	deadline := time.Now().Add(5 * time.Second)
	for {
		futures := 0
		for _, bucket := range system.ProcessRegistry.LocalPIDs.LocalPIDs {
			for _, id := range bucket.Keys() {
				if strings.HasPrefix(id, "future") {
					futures++
				}
			}
		}
		if futures == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d futures left registered", futures)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
